//! Tables in object stores: the header read by range at open, rows read by range when gathered.

use std::path::Path;

use bytes::Bytes;
use stokehold_core::ops::gather::{check_table, int_values};
use stokehold_core::{DType, Error, Result, Tensor};

use super::npy::{self, NpyHeader};
use crate::storage::Object;

/// Bytes read to find the header: `.npy` headers are a few hundred bytes; the format allows up
/// to 4 GiB (version 2), but numpy itself writes them under 1 MiB.
const HEADER_READ: u64 = 1 << 20;

/// A remote table's object, its shape and where its data starts.
#[derive(Clone, Debug)]
pub(super) struct RemoteRows {
    object: Object,
    data_offset: u64,
    pub(super) shape: Vec<usize>,
}

/// Opens the remote table at `path`: its empty `[0, row shape]` stand-in rows, its header, and
/// the rows' reader.
pub(super) fn open(path: &Path) -> Result<(Tensor, NpyHeader, RemoteRows)> {
    let object = crate::storage::open_object(path)?;
    let size = object.size();
    let head = object.read_range(0..size.min(HEADER_READ))?;
    let header = npy::parse_header(&head, path)?;
    let need = header
        .data_len()
        .and_then(|n| n.checked_add(header.data_offset as u64))
        .ok_or_else(|| Error::corrupt(path, 0, "shape overflows the address space"))?;
    if size < need {
        return Err(Error::corrupt(
            path,
            size,
            format!(
                "truncated: {} of shape {:?} needs {need} bytes, the object has {size}",
                header.dtype, header.shape
            ),
        ));
    }
    let mut empty = header.shape.clone();
    empty[0] = 0;
    let rows = Tensor::new(header.dtype, empty, Bytes::new())?;
    check_table(&rows, &path.display().to_string())?;
    let remote = RemoteRows {
        object,
        data_offset: header.data_offset as u64,
        shape: header.shape.clone(),
    };
    Ok((rows, header, remote))
}

impl RemoteRows {
    /// Rows `indices` in one round of range requests (one range per row; the storage seam
    /// merges neighbouring rows into multi-MiB requests and runs them concurrently).
    pub(super) fn take(
        &self,
        name: &str,
        dtype: DType,
        indices: &Tensor,
        feature: &str,
        op: &str,
    ) -> Result<Tensor> {
        let n = self.shape[0] as u64;
        let row_shape = &self.shape[1..];
        let rb = (dtype.size().unwrap_or(0) * row_shape.iter().product::<usize>()) as u64;
        let mut ranges = Vec::new();
        for i in int_values(indices, feature, op)? {
            let index = u64::try_from(i).map_err(|_| {
                Error::invalid(format!(
                    "{op}: negative index {i} in feature {feature:?} into {name} of length {n}"
                ))
            })?;
            if index >= n {
                return Err(Error::OutOfRange {
                    index,
                    len: n,
                    what: name.to_string(),
                });
            }
            let at = self.data_offset + index * rb;
            ranges.push(at..at + rb);
        }
        let parts = self.object.read_ranges(&ranges)?;
        let mut buf = Vec::with_capacity(ranges.len() * rb as usize);
        for p in &parts {
            buf.extend_from_slice(p);
        }
        let mut shape = indices.shape().to_vec();
        shape.extend_from_slice(row_shape);
        Tensor::new(dtype, shape, Bytes::from(buf))
    }
}

//! Tables from a fixed-shape feature of a shard folder.
//!
//! Shards store whole records one after another, so the values of one feature are not contiguous
//! on disk: a table cannot be a view of the shard files. [`table_from_shards`] copies the feature
//! into a `.npy` table once; that table is then mapped and shared like any other.

use std::path::Path;

use stokehold_core::{Error, MapDataset, Result};

use super::{Table, TableWriter};
use crate::shard::{Kind, ShardDataset};

/// Writes feature `feature` (dense, every dimension fixed in the manifest's schema) of every
/// record of the shard folder `dir` as the rows of a new table at `output`, in record order.
/// `progress(records_done, records_total)` is called as rows are copied.
pub fn table_from_shards(
    dir: impl AsRef<Path>,
    feature: &str,
    output: impl AsRef<Path>,
    mut progress: impl FnMut(u64, u64),
) -> Result<Table> {
    let dir = dir.as_ref();
    let ds = ShardDataset::open(dir)?;
    let schema = &ds.manifest().schema;
    let spec = schema.iter().find(|f| f.name == feature).ok_or_else(|| {
        let names: Vec<_> = schema.iter().map(|f| f.name.as_str()).collect();
        Error::invalid(format!(
            "{}: no feature {feature:?}; {}",
            dir.display(),
            stokehold_core::suggest::names_present(feature, &names)
        ))
    })?;
    let fixed: Option<Vec<usize>> = match (&spec.kind, &spec.shape) {
        (Kind::Tensor, Some(dims)) => dims.iter().map(|d| d.map(|d| d as usize)).collect(),
        _ => None,
    };
    let row_shape = fixed.ok_or_else(|| {
        Error::invalid(format!(
            "{}: feature {feature:?} ({:?}, shape {:?}) has no fixed shape; a table needs one \
             row shape for every record",
            dir.display(),
            spec.kind,
            spec.shape
        ))
    })?;
    let n = ds.len();
    let mut w = TableWriter::create(output, spec.dtype, &row_shape)?;
    for i in 0..n {
        let e = ds.get(i)?;
        let t = e.tensor(&format!("table_from_shards({})", dir.display()), feature)?;
        if t.shape() != row_shape.as_slice() || t.dtype() != spec.dtype {
            return Err(Error::corrupt(
                dir,
                i,
                format!(
                    "record {i}: feature {feature:?} is {}{:?}, the schema says {}{row_shape:?}",
                    t.dtype(),
                    t.shape(),
                    spec.dtype
                ),
            ));
        }
        w.append_bytes(t.data(), 1)?;
        if i % 4096 == 0 {
            progress(i, n);
        }
    }
    progress(n, n);
    w.finish()
}

//! Feature tables: an `N x (row shape)` array of any fixed-size dtype and any size, memory-mapped
//! read-only from a `.npy` file and looked up by row inside pipelines.
//!
//! Opening validates the header (magic, version 1/2/3, dtype and byte order, Fortran order,
//! shape) and the file size, then maps the file: nothing is read until rows are touched, and the
//! pages live in the OS page cache, shared by every process that maps the same file. Rows are
//! zero-copy views; [`Table::take`] and the `gather` op copy each row once into a batch buffer.
//! See `docs/TABLES.md`.
//!
//! ```
//! # fn main() -> stokehold_core::Result<()> {
//! use std::sync::Arc;
//! use stokehold_core::{Dataset, Example, Tensor};
//! use stokehold_io::table::{Table, TableWriter};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("feats.npy");
//! let mut w = TableWriter::create(&path, stokehold_core::DType::F32, &[2])?;
//! w.append(&Tensor::from_vec(vec![3, 2], vec![0f32, 1., 10., 11., 20., 21.])?)?;
//! w.finish()?;
//! let table = Arc::new(Table::open(&path)?);
//! assert_eq!(table.row(2)?.to_vec::<f32>()?, vec![20., 21.]);
//! let captions = Example::new().with("image_id", Tensor::from_vec(vec![4], vec![2i64, 0, 1, 2])?);
//! let ds = Dataset::from_columns(captions)?.shuffle(7).batch(2, false)?.gather(table, "image_id", "feats");
//! assert_eq!(ds.get(0)?.tensor("t", "feats")?.shape(), &[2, 2]);
//! # Ok(()) }
//! ```

pub mod npy;
mod remote;
mod shard;
mod writer;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use stokehold_core::ops::gather::{check_table, gather_rows, GatherTable};
use stokehold_core::{DType, Error, Result, Tensor};

pub use npy::NpyHeader;
pub use shard::table_from_shards;
pub use writer::{concat_npy, TableWriter};

/// A read-only table: a dense `[N, ...]` tensor whose bytes are a memory map of a file.
#[derive(Clone, Debug)]
pub struct Table {
    path: PathBuf,
    /// All rows (a memory map); for a remote table an empty `[0, row shape]` stand-in.
    rows: Tensor,
    header: Option<NpyHeader>,
    /// A table in an object store: rows are read by range when gathered.
    remote: Option<remote::RemoteRows>,
}

impl Table {
    /// Maps the `.npy` file at `path` read-only after validating its header and size.
    ///
    /// The file must not be truncated while mapped (as for any memory map, the OS would then
    /// signal the reading process); stokehold's writers never modify a file in place, they
    /// write a new one and rename it over the old.
    ///
    /// A URL (`s3://bucket/feats.npy`) opens the table remotely: the header is read by range
    /// and each gather reads its rows by range, neighbouring rows coalesced into one request.
    pub fn open(path: impl AsRef<Path>) -> Result<Table> {
        let path = path.as_ref();
        if crate::storage::is_remote(path) {
            let (rows, header, remote) = remote::open(path)?;
            return Ok(Table {
                path: path.to_path_buf(),
                rows,
                header: Some(header),
                remote: Some(remote),
            });
        }
        let (file, size) = crate::storage::open_regular(path)?;
        // SAFETY: read-only map of a file we do not modify; see the note on truncation above.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        huge_pages(&map);
        let header = npy::parse_header(&map[..map.len().min(1 << 20)], path)?;
        let need = header
            .data_len()
            .and_then(|n| n.checked_add(header.data_offset as u64));
        let need =
            need.ok_or_else(|| Error::corrupt(path, 0, "shape overflows the address space"))?;
        if size < need {
            return Err(Error::corrupt(
                path,
                size,
                format!(
                    "truncated: {} of shape {:?} needs {need} bytes ({} header + {} data), \
                     the file has {size}",
                    header.dtype,
                    header.shape,
                    header.data_offset,
                    need - header.data_offset as u64
                ),
            ));
        }
        let data = Bytes::from_owner(map).slice(header.data_offset..need as usize);
        let rows = Tensor::new(header.dtype, header.shape.clone(), data)?;
        Ok(Table {
            path: path.to_path_buf(),
            rows,
            header: Some(header),
            remote: None,
        })
    }

    /// A table over a tensor already in memory (or mapped by another format's reader, e.g. a
    /// fixed-shape feature of a shard); `name` stands in for the path in errors.
    pub fn from_tensor(name: impl Into<PathBuf>, rows: Tensor) -> Result<Table> {
        let path = name.into();
        check_table(&rows, &path.display().to_string())?;
        Ok(Table {
            path,
            rows,
            header: None,
            remote: None,
        })
    }

    /// The file (or name) of the table.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `.npy` header, when opened from a `.npy` file.
    pub fn header(&self) -> Option<&NpyHeader> {
        self.header.as_ref()
    }

    /// Number of rows.
    pub fn len(&self) -> u64 {
        self.shape()[0] as u64
    }

    /// True when the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The full shape `[N, ...]`.
    pub fn shape(&self) -> &[usize] {
        match &self.remote {
            Some(r) => &r.shape,
            None => self.rows.shape(),
        }
    }

    /// The shape of one row.
    pub fn row_shape(&self) -> &[usize] {
        &self.shape()[1..]
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.rows.dtype()
    }

    /// Bytes in one row.
    pub fn row_bytes(&self) -> usize {
        self.rows.row_bytes()
    }

    /// All rows as one tensor (zero-copy). A remote table's rows are not in memory: this is
    /// an empty `[0, row shape]` tensor there; read rows with [`Table::take`].
    pub fn tensor(&self) -> &Tensor {
        &self.rows
    }

    /// Row `i` as a zero-copy view; an out-of-range error names `i` and the length.
    pub fn row(&self, i: u64) -> Result<Tensor> {
        let idx = Tensor::scalar(i);
        gather_rows(self, &idx, "index", &format!("{}.row", self.name()))
    }

    /// Rows `indices` copied once into one buffer of shape `[indices.len(), ...]`.
    pub fn take(&self, indices: &[u64]) -> Result<Tensor> {
        let idx = Tensor::from_vec(vec![indices.len()], indices.to_vec())?;
        gather_rows(self, &idx, "indices", &format!("{}.take", self.name()))
    }

    /// Like [`Table::take`] with the indices as any integer tensor; the result has shape
    /// `indices.shape() ++ row_shape`.
    pub fn take_tensor(&self, indices: &Tensor) -> Result<Tensor> {
        gather_rows(self, indices, "indices", &format!("{}.take", self.name()))
    }
}

/// Asks for the map to be backed by 2 MiB pages where the page cache holds the file in 2 MiB
/// folios (as for shard files, `docs/FORMAT.md`, "Random reads"): a gather's random rows then
/// cost a TLB entry per 2 MiB instead of per 4 KiB. A hint only: nothing changes where the
/// kernel or the file system cannot do it.
fn huge_pages(map: &memmap2::Mmap) {
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    #[cfg(not(target_os = "linux"))]
    let _ = map;
}

impl GatherTable for Table {
    fn name(&self) -> String {
        format!("table {}", self.path.display())
    }

    fn rows(&self) -> &Tensor {
        &self.rows
    }

    fn take(&self, indices: &Tensor, feature: &str, op: &str) -> Option<Result<Tensor>> {
        let r = self.remote.as_ref()?;
        Some(r.take(&self.name(), self.dtype(), indices, feature, op))
    }
}

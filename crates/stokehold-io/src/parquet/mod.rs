//! Parquet and Arrow IPC files (Hugging Face `datasets`' Arrow files too) read at random.
//!
//! * [`convert`]: Arrow arrays as elements, one rule for both formats (types, struct flattening,
//!   dictionaries, nulls).
//! * [`dataset::ColumnarDataset`]: `len`, `get(i)` through blocks of rows decoded once and kept
//!   in a bounded cache; global shuffle, sharding and checkpoints through the core ops.
//! * [`file::ParquetFile`]: a Parquet file's blocks are the pages of its offset index (read
//!   alone through a row selection), or whole row groups in a file written without a page
//!   index: there a random row costs decoding its row group's projected columns, once per cache
//!   residency.
//! * [`ipc::IpcFile`]: an Arrow IPC file or stream, its record batches mapped without a copy.
//!
//! ```
//! use stokehold_core::MapDataset;
//! use stokehold_io::parquet::{open_parquet, ColumnarOptions};
//! let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
//!     .join("../../testdata/parquet/paged.parquet");
//! let ds = open_parquet(&[&path], &ColumnarOptions::default()).unwrap();
//! assert_eq!(ds.len(), 1000);
//! let e = ds.get(7).unwrap();
//! assert_eq!(e.tensor("t", "id").unwrap().to_vec::<i64>().unwrap(), vec![7]);
//! ```

pub mod convert;
pub mod dataset;
pub mod file;
pub mod ipc;

use std::path::Path;

pub use dataset::{Blocks, ColumnarDataset, ColumnarOptions};
use stokehold_core::Result;

/// Parquet files (paths or URLs), their rows in order, as one random-access dataset.
pub fn open_parquet<P: AsRef<Path>>(
    files: &[P],
    opts: &ColumnarOptions,
) -> Result<ColumnarDataset> {
    let mut out: Vec<Box<dyn Blocks>> = Vec::with_capacity(files.len());
    for f in files {
        out.push(Box::new(file::ParquetFile::open(
            f.as_ref(),
            opts.columns.as_deref(),
        )?));
    }
    ColumnarDataset::new("read_parquet", out, opts)
}

/// Arrow IPC files or streams (paths or URLs), their rows in order, as one random-access
/// dataset.
pub fn open_arrow<P: AsRef<Path>>(files: &[P], opts: &ColumnarOptions) -> Result<ColumnarDataset> {
    let mut out: Vec<Box<dyn Blocks>> = Vec::with_capacity(files.len());
    for f in files {
        out.push(Box::new(ipc::IpcFile::open(
            f.as_ref(),
            opts.columns.as_deref(),
        )?));
    }
    ColumnarDataset::new("read_arrow", out, opts)
}

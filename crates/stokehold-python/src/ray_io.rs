//! The native half of `stokehold.ray`'s sink: `assemble_shards` joins the part folders its write
//! tasks made into the final shard folder (`stokehold_io::shard::assemble_shards`), run once on
//! the driver after every task finished.

use std::path::PathBuf;

use pyo3::prelude::*;
use stokehold_io::shard::{self as shards, Compression, WriteOptions};

use crate::errors::{guard, ok};

/// Joins `parts` (complete shard folders, in record order) into `path`; returns the manifest as
/// JSON. `source` is stored as the manifest's `metadata.source`.
#[pyfunction]
fn assemble_shards(
    py: Python<'_>,
    parts: Vec<PathBuf>,
    path: PathBuf,
    shard_bytes: u64,
    compression: &str,
    overwrite: bool,
    source: String,
) -> PyResult<String> {
    guard(|| {
        let mut opts = WriteOptions {
            shard_bytes,
            compression: ok(py, Compression::parse(compression))?,
            overwrite,
            ..WriteOptions::default()
        };
        opts.metadata.insert("source".into(), source.into());
        let m = ok(
            py,
            py.detach(|| shards::assemble_shards(&parts, &path, opts)),
        )?;
        Ok(serde_json::to_string(&m).expect("manifest serialises"))
    })
}

/// Adds `assemble_shards` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(assemble_shards, m)?)
}

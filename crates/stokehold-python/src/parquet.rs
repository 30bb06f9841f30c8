//! Parquet and Arrow IPC files from Python (`python/stokehold/parquet.py` holds the API and its
//! documentation). The GIL is released while the files are opened and read.

use std::path::PathBuf;

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use stokehold_core::{Dataset, Error};
use stokehold_io::parquet::{open_arrow, open_parquet, ColumnarOptions};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

fn options(
    op: &str,
    columns: Option<Vec<String>>,
    defaults: Vec<(String, String)>,
    cache_bytes: Option<usize>,
) -> stokehold_core::Result<ColumnarOptions> {
    let defaults = defaults
        .into_iter()
        .map(|(name, text)| match serde_json::from_str(&text) {
            Ok(v) => Ok((name, v)),
            Err(e) => Err(Error::invalid(format!(
                "{op}: default of column {name:?} is not JSON: {e}"
            ))),
        })
        .collect::<stokehold_core::Result<Vec<_>>>()?;
    Ok(ColumnarOptions {
        columns,
        defaults,
        cache_bytes,
    })
}

#[pymethods]
impl PyDataset {
    /// The rows of Parquet `files` (paths or URLs) as elements of `columns` (None: all).
    #[staticmethod]
    fn read_parquet(
        py: Python<'_>,
        files: Vec<PathBuf>,
        columns: Option<Vec<String>>,
        defaults: Vec<(String, String)>,
        cache_bytes: Option<usize>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let opts = ok(py, options("read_parquet", columns, defaults, cache_bytes))?;
            let ds = ok(py, py.detach(|| open_parquet(&files, &opts)))?;
            Ok(PyDataset::from_dataset(Dataset::from_map(ds)))
        })
    }

    /// The rows of Arrow IPC `files` (file or stream format) as elements, in the order of
    /// `indices` (rows of the files) when given.
    #[staticmethod]
    fn read_arrow(
        py: Python<'_>,
        files: Vec<PathBuf>,
        columns: Option<Vec<String>>,
        defaults: Vec<(String, String)>,
        cache_bytes: Option<usize>,
        indices: Option<PyReadonlyArray1<'_, u64>>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let opts = ok(py, options("read_arrow", columns, defaults, cache_bytes))?;
            let indices: Option<Vec<u64>> = indices.map(|a| a.as_array().to_vec());
            let ds = ok(
                py,
                py.detach(|| {
                    let ds = open_arrow(&files, &opts)?;
                    match indices {
                        Some(ix) => ds.with_indices(ix),
                        None => Ok(ds),
                    }
                }),
            )?;
            Ok(PyDataset::from_dataset(Dataset::from_map(ds)))
        })
    }
}

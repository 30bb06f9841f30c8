//! WebDataset tar shards from Python (`python/stokehold/webdataset.py` holds the API and its
//! documentation). The GIL is released while the shards' headers are read.

use std::path::PathBuf;

use pyo3::prelude::*;
use stokehold_core::Dataset;
use stokehold_io::webdataset::WebDataset;

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

#[pymethods]
impl PyDataset {
    /// The samples of the tar shards `files`: `__key__`, `__url__` and one bytes feature per
    /// member, named by extension; random access.
    #[staticmethod]
    fn read_webdataset(py: Python<'_>, files: Vec<PathBuf>) -> PyResult<PyDataset> {
        guard(|| {
            let ds = ok(py, py.detach(|| WebDataset::open(&files)))?;
            Ok(PyDataset::from_dataset(Dataset::from_map(ds)))
        })
    }
}

//! Bindings of the file loaders: `list_files`, `read_file` and `load_npy` (one `#[pymethods]`
//! block of the native `Dataset`; `stokehold_io::files` does the work). A loader's
//! `on_error="skip"` goes through the shared skip path (`skips::map_on_error`).

use pyo3::prelude::*;
use stokehold_core::Dataset;
use stokehold_io::files;

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

fn wrap(ds: Dataset) -> PyDataset {
    PyDataset::from_dataset(ds)
}

#[pymethods]
impl PyDataset {
    /// Files matching `patterns`, sorted, then permuted per epoch by `seed` when given.
    #[staticmethod]
    #[pyo3(signature = (patterns, seed=None))]
    fn list_files(py: Python<'_>, patterns: Vec<String>, seed: Option<u64>) -> PyResult<PyDataset> {
        guard(|| ok(py, py.detach(|| files::list_files(&patterns, seed))).map(wrap))
    }

    /// Reads the file named by feature `path_feature` into bytes feature `out`; `on_error`
    /// "raise" or "skip" (a file that fails is left out and logged).
    #[pyo3(signature = (path_feature, out, on_error="raise"))]
    fn read_file(
        &self,
        py: Python<'_>,
        path_feature: &str,
        out: &str,
        on_error: &str,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let f = files::read_file_fn(path_feature, out);
            let label = format!("read_file:{out}");
            crate::skips::map_on_error(py, self, "read_file", &label, f, on_error)
        })
    }

    /// Loads the `.npy` file named by feature `path_feature` into feature `out`; `on_error` as
    /// for `read_file`.
    #[pyo3(signature = (path_feature, out, on_error="raise"))]
    fn load_npy(
        &self,
        py: Python<'_>,
        path_feature: &str,
        out: &str,
        on_error: &str,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let f = files::load_npy_fn(path_feature, out);
            let label = format!("load_npy:{out}");
            crate::skips::map_on_error(py, self, "load_npy", &label, f, on_error)
        })
    }
}

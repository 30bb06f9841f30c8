//! Feature tables from Python: `stokehold.open_table`, `stokehold.write_table`, and the gather op
//! (`Dataset.gather`, a `#[pymethods]` block of the native `Dataset`). See `docs/TABLES.md`.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use stokehold_core::ops::gather::{gather_rows, Gather, KeyMap};
use stokehold_core::Tensor;
use stokehold_io::table::{Table, TableWriter};

use crate::convert::{py_to_tensor, tensor_to_py};
use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

/// A memory-mapped, read-only table (rows along axis 0).
#[pyclass(frozen, name = "Table", module = "stokehold._native")]
pub struct PyTable {
    table: Arc<Table>,
}

#[pymethods]
impl PyTable {
    /// Maps the `.npy` file at `path` after validating its header and size.
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        guard(|| {
            let t = py.detach(|| Table::open(&path));
            ok(py, t).map(|t| PyTable { table: Arc::new(t) })
        })
    }

    fn __len__(&self) -> usize {
        self.table.len() as usize
    }

    /// The full shape `(N, ...)`.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.table.shape().to_vec()
    }

    /// The numpy name of the dtype.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.table.dtype().name()
    }

    /// The file.
    #[getter]
    fn path(&self) -> PathBuf {
        self.table.path().to_path_buf()
    }

    /// Row `i` (non-negative) as a read-only numpy view of the mapped file.
    fn row<'py>(&self, py: Python<'py>, i: u64) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let t = ok(py, self.table.row(i))?;
            tensor_to_py(py, t)
        })
    }

    /// Rows `indices` (any integer array) copied once into a new array of shape
    /// `indices.shape + row_shape`.
    fn take<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let idx = py_to_tensor(py, "indices", indices)?;
            let table = self.table.clone();
            let name = format!("table {}.take", table.path().display());
            let t = py.detach(move || gather_rows(&*table, &idx, "indices", &name));
            tensor_to_py(py, ok(py, t)?)
        })
    }
}

#[pymethods]
impl PyDataset {
    /// Adds feature `output` = rows of `table` at the indices (or, with `keys`, the keys) in
    /// feature `index_feature`.
    #[pyo3(signature = (table, index_feature, output, keys=None))]
    fn gather(
        &self,
        py: Python<'_>,
        table: &PyTable,
        index_feature: &str,
        output: &str,
        keys: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let keys = match keys {
                Some(k) => {
                    let k = py_to_tensor(py, "keys", k)?;
                    Some(Arc::new(ok(
                        py,
                        py.detach(move || KeyMap::from_tensor(&k)),
                    )?))
                }
                None => None,
            };
            let g = Gather {
                table: table.table.clone(),
                index: index_feature.into(),
                output: output.into(),
                keys,
            };
            Ok(PyDataset::from_dataset(self.dataset().gather_with(g)))
        })
    }
}

/// Writes `arrays` (each `[k, ...]`, one dtype and row shape) as the rows of a new table at
/// `path` (temporary name, renamed when complete) and opens it.
#[pyfunction]
fn write_table(py: Python<'_>, path: PathBuf, arrays: Vec<Bound<'_, PyAny>>) -> PyResult<PyTable> {
    guard(|| {
        let blocks = arrays
            .iter()
            .map(|a| py_to_tensor(py, "arrays", a))
            .collect::<PyResult<Vec<Tensor>>>()?;
        let t = py.detach(move || {
            let first = blocks
                .first()
                .ok_or_else(|| stokehold_core::Error::invalid("write_table: no arrays given"))?;
            let row_shape = first.shape().get(1..).unwrap_or(&[]).to_vec();
            let mut w = TableWriter::create(&path, first.dtype(), &row_shape)?;
            for b in &blocks {
                w.append(b)?;
            }
            w.finish()
        });
        ok(py, t).map(|t| PyTable { table: Arc::new(t) })
    })
}

/// Adds the table class and functions to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTable>()?;
    m.add_function(wrap_pyfunction!(write_table, m)?)?;
    Ok(())
}

//! Object-store options (`stokehold.set_storage_options`); the readers themselves take URLs
//! wherever they take paths (`stokehold_io::storage`, docs/STORAGE.md).

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{guard, ok};

/// Sets options for the object stores built from now on: for `store` (`"s3://bucket"`), or for
/// every store when `store` is `""`; they override the environment. The retry options
/// (`retry_timeout`, `max_retries`) and every endpoint are checked here: a bad one is an
/// `InvalidArgumentError` naming the option and the value.
#[pyfunction]
#[pyo3(signature = (options, store = String::new()))]
fn set_storage_options(
    py: Python<'_>,
    options: Vec<(String, String)>,
    store: String,
) -> PyResult<()> {
    guard(|| ok(py, stokehold_io::storage::set_options(&store, options)))
}

/// This process's object-store reads so far: `requests` (GETs, hedges and resumed downloads
/// included), `hedges` sent, `hedge_wins` (hedges that answered first), body `bytes` received,
/// `keys_left_out` of listings (a `..`, `.` or empty segment).
#[pyfunction]
fn storage_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let s = stokehold_io::storage::remote::stats();
    let d = PyDict::new(py);
    d.set_item("requests", s.requests)?;
    d.set_item("hedges", s.hedges)?;
    d.set_item("hedge_wins", s.hedge_wins)?;
    d.set_item("bytes", s.bytes)?;
    d.set_item("keys_left_out", s.keys_left_out)?;
    Ok(d)
}

/// Adds the storage functions to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_storage_options, m)?)?;
    m.add_function(wrap_pyfunction!(storage_stats, m)?)?;
    Ok(())
}

//! Object-store options (`stokehold.set_storage_options`); the readers themselves take URLs
//! wherever they take paths (`stokehold_io::storage`, docs/STORAGE.md).

use pyo3::prelude::*;

use crate::errors::guard;

/// Sets options for the object stores built from now on: for `store` (`"s3://bucket"`), or for
/// every store when `store` is `""`; they override the environment.
#[pyfunction]
#[pyo3(signature = (options, store = String::new()))]
fn set_storage_options(options: Vec<(String, String)>, store: String) -> PyResult<()> {
    guard(|| {
        stokehold_io::storage::set_options(&store, options);
        Ok(())
    })
}

/// Adds the storage functions to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_storage_options, m)?)?;
    Ok(())
}

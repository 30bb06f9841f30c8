//! Bindings of the skip policies: `ignore_errors()` and the log of every element a pipeline left
//! out (`ignore_errors`, a loader's `on_error="skip"`), which `python/stokehold/errors.py` turns
//! into a `SkipLog`. One `#[pymethods]` block of the native `Dataset`.

use std::sync::Arc;

use pyo3::prelude::*;
use stokehold_core::ops::ignore_errors::error_logs;
use stokehold_core::ops::on_error::{ErrorLog, OnError};
use stokehold_core::{MapFn, Parallelism};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

/// `f` under `on_error` ("raise" or "skip", checked here naming `op`): the loader ops' one way
/// to apply their function (decoders bound elsewhere use it too).
pub(crate) fn map_on_error(
    py: Python<'_>,
    ds: &PyDataset,
    op: &str,
    label: &str,
    f: MapFn,
    on_error: &str,
) -> PyResult<PyDataset> {
    let policy = ok(py, OnError::parse(op, on_error))?;
    let log = Arc::new(ErrorLog::default());
    let par: Option<(Parallelism, bool)> = None;
    Ok(PyDataset::from_dataset(
        ds.dataset().map_with_policy(label, f, policy, log, par),
    ))
}

#[pymethods]
impl PyDataset {
    /// tf.data's `ignore_errors`: leaves out elements whose computation failed, logged.
    #[pyo3(signature = (log_warning=false))]
    fn ignore_errors(&self, log_warning: bool) -> PyResult<PyDataset> {
        guard(|| Ok(PyDataset::from_dataset(self.dataset().ignore_errors(log_warning))))
    }

    /// Elements this pipeline's skipping ops left out so far: `(count, [(index, message), ...])`,
    /// the first few of each op, outermost op first.
    fn skipped(&self) -> PyResult<(u64, Vec<(u64, String)>)> {
        guard(|| {
            let logs = error_logs(self.dataset());
            let count = logs.iter().map(|l| l.count()).sum();
            let first = logs
                .iter()
                .flat_map(|l| l.first())
                .map(|s| (s.index, s.error))
                .collect();
            Ok((count, first))
        })
    }
}

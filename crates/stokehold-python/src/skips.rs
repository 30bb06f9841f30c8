//! Bindings of the skip policies: `ignore_errors()` and the log of every element a pipeline left
//! out (`ignore_errors`, a loader's `on_error="skip"`), which `python/stokehold/errors.py` turns
//! into a `SkipLog`. One `#[pymethods]` block of the native `Dataset`.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use stokehold_core::choice::Choice;
use stokehold_core::ops::ignore_errors::error_logs;
use stokehold_core::ops::on_error::{ErrorLog, OnError};
use stokehold_core::{Dataset, MapFn, Parallelism};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

/// `f` under `on_error` ("raise" or "skip", checked here naming `op`): the loader ops' one way
/// to apply their function (decoders bound elsewhere use [`map_on_error_par`]).
pub(crate) fn map_on_error(
    py: Python<'_>,
    ds: &PyDataset,
    op: &str,
    label: &str,
    f: MapFn,
    on_error: &str,
) -> PyResult<PyDataset> {
    map_on_error_par(py, ds.dataset(), op, label, f, on_error, None, true)
}

/// [`map_on_error`] on worker threads: `par` is Python's `num_parallel_calls` (`None`: no
/// threads of its own; a count; -1: AUTOTUNE). What a skip leaves out is logged in the
/// pipeline, where `ds.skipped()` finds it. Core plans the threads (`Dataset::map_with_policy`
/// through `Dataset::map_parallel`): over a random-access input a raising map stays random
/// access under a `parallelize` stage, as `map(num_parallel_calls=...)` does.
#[allow(clippy::too_many_arguments)]
pub(crate) fn map_on_error_par(
    py: Python<'_>,
    ds: &Dataset,
    op: &str,
    label: &str,
    f: MapFn,
    on_error: &str,
    par: Option<i64>,
    deterministic: bool,
) -> PyResult<PyDataset> {
    let policy = ok(py, OnError::parse(op, on_error))?;
    let par = ok(
        py,
        par.map(|p| Parallelism::from_arg(op, "num_parallel_calls", p))
            .transpose(),
    )?;
    let log = Arc::new(ErrorLog::default());
    Ok(PyDataset::from_dataset(ds.map_with_policy(
        label,
        f,
        policy,
        log,
        par.map(|p| (p, deterministic)),
    )))
}

/// One skipped element as Python gets it: (index, message, (file, offset, reason) of a record).
type Skipped = (u64, String, Option<(PathBuf, u64, String)>);

#[pymethods]
impl PyDataset {
    /// tf.data's `ignore_errors`: leaves out elements whose computation failed, logged.
    #[pyo3(signature = (log_warning=false))]
    fn ignore_errors(&self, log_warning: bool) -> PyResult<PyDataset> {
        guard(|| {
            Ok(PyDataset::from_dataset(
                self.dataset().ignore_errors(log_warning),
            ))
        })
    }

    /// Elements this pipeline's skipping ops left out so far (corrupt records a reader skipped
    /// too): `(count, [(index, message, at), ...])`, the first few of each op, outermost op
    /// first; `at` is `(file, offset, reason)` for a skipped record, else None.
    fn skipped(&self) -> PyResult<(u64, Vec<Skipped>)> {
        guard(|| {
            let logs = error_logs(self.dataset());
            let count = logs.iter().map(|l| l.count()).sum();
            let first = logs
                .iter()
                .flat_map(|l| l.first())
                .map(|s| {
                    let at = s.at.clone().map(|(p, o)| (p, o, s.reason().to_string()));
                    (s.index, s.error, at)
                })
                .collect();
            Ok((count, first))
        })
    }
}

//! Bindings of execution: `with_options` (a pipeline's own executor: memory budget, cores,
//! trace window) and what an executor saw, as stats (JSON or a table) and a Chrome trace (one
//! `#[pymethods]` block of the native `Dataset`).

use pyo3::prelude::*;
use stokehold_core::exec::{executor_of, ExecOptions, Executor};

use crate::dataset::PyDataset;
use crate::errors::guard;

#[pymethods]
impl PyDataset {
    /// Runs the pipeline on its own executor (memory budget, cores, trace window, warm start).
    #[pyo3(signature = (memory_budget=None, cores=None, trace_events=0, warm_start=true))]
    fn with_options(
        &self,
        memory_budget: Option<usize>,
        cores: Option<usize>,
        trace_events: usize,
        warm_start: bool,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let d = ExecOptions::default();
            let opts = ExecOptions {
                memory_budget: memory_budget.unwrap_or(d.memory_budget),
                cores: cores.unwrap_or(d.cores).max(1),
                trace_events,
                warm_start,
            };
            Ok(PyDataset::from_dataset(self.dataset().with_options(opts)))
        })
    }

    /// Stats as a JSON string (`None` when no parallel stage has run).
    fn stats_json(&self) -> Option<String> {
        executor(self).map(|e| serde_json::to_string(&e.stats()).expect("serialisable"))
    }

    /// Stats as a printable table.
    fn stats_table(&self) -> Option<String> {
        executor(self).map(|e| e.stats().table())
    }

    /// Stats as a self-contained HTML page (`None` when no parallel stage has run).
    fn stats_html(&self) -> Option<String> {
        executor(self).map(|e| e.stats_html())
    }

    /// Stats as OpenMetrics text (`labels` on every sample; `None` when no parallel stage has
    /// run).
    fn stats_openmetrics(&self, labels: Vec<(String, String)>) -> Option<String> {
        let labels: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        executor(self).map(|e| e.stats().openmetrics(&labels))
    }

    /// The recorded activity as Chrome trace JSON (`with_options(trace_events=N)` turns it on).
    fn trace_json(&self) -> Option<String> {
        executor(self).map(|e| e.trace_json())
    }
}

/// The executor found through the dataset's plan: its `with_options`, or the default executor
/// its outermost parallel op last ran on (see `stokehold_core::exec::executor_of`).
fn executor(ds: &PyDataset) -> Option<Executor> {
    executor_of(ds.dataset())
}

/// Whether the parallel stage the calling thread works for has been stopped (its iterator
/// dropped): `stokehold.processes` asks it while waiting for a worker process, so a worker stuck
/// in the user's function is ended (see `stokehold_core::exec::stage_stopping`).
#[pyfunction]
fn stage_stopping() -> bool {
    stokehold_core::exec::stage_stopping()
}

/// Adds the module functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(stage_stopping, m)?)
}

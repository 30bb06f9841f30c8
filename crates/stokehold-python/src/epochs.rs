//! The native epoch loader: `Dataset.epochs(start, count=None, buffer_size=None)` returns an
//! `Epochs` wrapping core's [`Epochs`] (see `stokehold_core::ops::plan`): epochs `start ..
//! start + count` through one prefetching iterator, each exactly `per_epoch()` elements, with a
//! checkpointable state. The flat API (no sub-iterator objects) is what `python/stokehold`'s
//! `EpochLoader` / `Epoch` drive. A stream (no random-access base) has no such loader:
//! `epochs_by_index` says so, and the Python package runs its epochs as fresh passes.
//!
//! Every call runs under [`guard`] with the GIL released around the Rust work and Python's
//! signal handlers run while it waits, through [`run_detached`], as for the native `Iterator`.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use stokehold_core::ops::plan::Epochs;

use crate::convert::example_to_dict;
use crate::dataset::{parse_state, run_detached, to_list, PyDataset};
use crate::errors::{guard, ok};

/// Epochs from one iterator, with a checkpointable position.
#[pyclass(frozen, name = "Epochs", module = "stokehold._native")]
pub struct PyEpochs {
    inner: Mutex<Epochs>,
    describe: String,
}

impl PyEpochs {
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Epochs) -> stokehold_core::Result<T> + Send,
    ) -> PyResult<T> {
        run_detached(py, &self.inner, &self.describe, f)
    }
}

#[pymethods]
impl PyDataset {
    /// The epoch loader over epochs `start .. start + count` (forever for None) of this finite
    /// random-access pipeline (trailing parallelize / prefetch stages are looked through and
    /// kept); `buffer_size`: the prefetch depth (default: the trailing prefetch's, else 2).
    #[pyo3(signature = (start, count=None, buffer_size=None))]
    fn epochs(
        &self,
        py: Python<'_>,
        start: u64,
        count: Option<u64>,
        buffer_size: Option<usize>,
    ) -> PyResult<PyEpochs> {
        guard(|| {
            let loader = ok(py, self.dataset().epochs(start, count, buffer_size))?;
            Ok(PyEpochs {
                describe: loader.pipeline().describe(),
                inner: Mutex::new(loader),
            })
        })
    }

    /// Whether `epochs` can cut one iterator into epochs: the pipeline is random access under
    /// its trailing parallelize / prefetch stages. A stream's epochs are fresh passes instead
    /// (`python/stokehold/_stream_epochs.py`).
    fn epochs_by_index(&self) -> bool {
        self.dataset().peel_stages().is_some()
    }
}

#[pymethods]
impl PyEpochs {
    /// Starts the next epoch, skipping what is left of the current one; its number, or None
    /// after the last.
    fn next_epoch(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        guard(|| self.run(py, |l| l.next_epoch()))
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next element of the current epoch (StopIteration at its end).
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.next_element(py)
    }

    /// The next element of the current epoch, or None at its end.
    fn next_element<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        guard(|| match self.run(py, |l| l.next())? {
            Some(e) => example_to_dict(py, e).map(Some),
            None => Ok(None),
        })
    }

    /// Up to `n` more elements of the current epoch as a list (one GIL release for all).
    fn next_many<'py>(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyList>> {
        guard(|| {
            let items = self.run(py, |l| l.next_many(n))?;
            to_list(py, items)
        })
    }

    /// Elements the current epoch yields in all (0 before the first `next_epoch`).
    fn epoch_len(&self, py: Python<'_>) -> PyResult<u64> {
        guard(|| self.run(py, |l| Ok(l.epoch_len())))
    }

    /// Elements of the current epoch still to come.
    fn remaining(&self, py: Python<'_>) -> PyResult<u64> {
        guard(|| self.run(py, |l| Ok(l.remaining_in_epoch())))
    }

    /// The current epoch's number (None before the first `next_epoch` and after the last).
    fn current_epoch(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        guard(|| self.run(py, |l| Ok(l.current_epoch())))
    }

    /// Epochs still to start; None for an endless loader.
    fn epochs_left(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        guard(|| self.run(py, |l| Ok(l.epochs_left())))
    }

    /// Elements per epoch.
    fn per_epoch(&self, py: Python<'_>) -> PyResult<u64> {
        guard(|| self.run(py, |l| Ok(l.per_epoch())))
    }

    /// The position as JSON text (`{"format": "stokehold-epochs", "version": 1, ...}`).
    fn get_state(&self, py: Python<'_>) -> PyResult<String> {
        guard(|| self.run(py, |l| Ok(l.state().to_string())))
    }

    /// Moves a loader that has not started to a position from `get_state` (JSON text).
    fn set_state(&self, py: Python<'_>, state: &str) -> PyResult<()> {
        guard(|| {
            let json = parse_state(py, state)?;
            self.run(py, move |l| l.set_state(&json))
        })
    }

    /// The loader's pipeline as text (the epoch range under the stages).
    fn describe(&self) -> String {
        self.describe.clone()
    }
}

/// Adds the class to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEpochs>()
}

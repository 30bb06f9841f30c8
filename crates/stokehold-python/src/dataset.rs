//! The native `Dataset` and `Iterator` classes. The Python package (`stokehold/dataset.py`)
//! wraps them with defaults, seeds and documentation; these stay thin. The epoch loader
//! (`Dataset.epochs`, class `Epochs`) is in [`crate::epochs`].
//!
//! Every method releases the GIL around Rust work (`py.detach`) and runs under
//! [`guard`](crate::errors::guard), so a panic becomes `WorkerPanicError`.

use std::collections::HashMap;
use std::sync::{Mutex, TryLockError};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use stokehold_core::exec::interrupt;
use stokehold_core::ops::element;
use stokehold_core::{
    BatchOptions, DType, Dataset, Error, Example, Parallelism, PipelineIter, INFINITE,
};

use crate::callbacks::{
    py_filter_fn, py_generator, py_key_fn, py_map_fn, py_scope, py_window_size_fn,
};
use crate::convert::{example_to_dict, pad_value, pad_values, py_to_column};
use crate::errors::{guard, ok, to_pyerr};

/// A pipeline: a core [`Dataset`] seen from Python.
///
/// Other bindings expose their Rust datasets by returning `PyDataset::from_dataset(ds)`; the
/// Python side wraps it with `stokehold.Dataset._wrap(native)`.
#[pyclass(frozen, name = "Dataset", module = "stokehold._native")]
pub struct PyDataset {
    ds: Dataset,
}

impl PyDataset {
    /// Wraps a core dataset.
    pub fn from_dataset(ds: Dataset) -> Self {
        PyDataset { ds }
    }

    /// The core dataset.
    pub fn dataset(&self) -> &Dataset {
        &self.ds
    }
}

fn wrap(ds: Dataset) -> PyDataset {
    PyDataset { ds }
}

#[pymethods]
impl PyDataset {
    /// An in-memory dataset from a dict of feature -> column (see `stokehold.from_arrays`).
    #[staticmethod]
    fn from_columns(py: Python<'_>, columns: &Bound<'_, PyDict>) -> PyResult<Self> {
        guard(|| {
            let mut ex = Example::new();
            for (k, v) in columns.iter() {
                let name: String = k.extract()?;
                ex.insert(&name, py_to_column(py, &name, &v)?);
            }
            ok(py, Dataset::from_columns(ex)).map(wrap)
        })
    }

    /// `range(n)`: int64 feature "x".
    #[staticmethod]
    fn range(n: u64) -> Self {
        wrap(Dataset::range(n))
    }

    /// `map` in the consumer's thread. A function that `holds_gil` (any Python function but one
    /// that waits on worker processes) runs in a scope holding the GIL across a run of its calls,
    /// and AUTOTUNE starts a parallel stage over it inline.
    #[pyo3(signature = (f, label, holds_gil=true))]
    fn map(&self, f: Py<PyAny>, label: &str, holds_gil: bool) -> PyResult<Self> {
        let f = py_map_fn(f);
        guard(|| {
            Ok(wrap(if holds_gil {
                self.ds.map_scoped(label, f, py_scope(label))
            } else {
                self.ds.map(label, f)
            }))
        })
    }

    /// `map` on worker threads: `par` > 0 threads, or -1 for AUTOTUNE; `holds_gil` as in `map`.
    /// Core plans it (`Dataset::map_parallel`): over random access (or execution stages over
    /// it) `map(f).parallelize(par)`, which keeps random access; over a stream, a stream.
    #[pyo3(signature = (f, label, par, deterministic, holds_gil=true))]
    fn map_parallel(
        &self,
        py: Python<'_>,
        f: Py<PyAny>,
        label: &str,
        par: i64,
        deterministic: bool,
        holds_gil: bool,
    ) -> PyResult<Self> {
        guard(|| {
            let p = ok(py, Parallelism::from_arg("map", "num_parallel_calls", par))?;
            let f = py_map_fn(f);
            Ok(wrap(if holds_gil {
                self.ds
                    .map_parallel_scoped(label, f, py_scope(label), p, deterministic)
            } else {
                self.ds.map_parallel(label, f, p, deterministic)
            }))
        })
    }

    /// Runs the pipeline on worker threads (`par` as in `map_parallel`); a stream.
    fn parallelize(&self, py: Python<'_>, par: i64, deterministic: bool) -> PyResult<Self> {
        guard(|| {
            let p = ok(
                py,
                Parallelism::from_arg("parallelize", "num_parallel_calls", par),
            )?;
            Ok(wrap(self.ds.parallelize(p, deterministic)))
        })
    }

    fn filter(&self, f: Py<PyAny>, label: &str) -> PyResult<Self> {
        guard(|| Ok(wrap(self.ds.filter(label, py_filter_fn(f)))))
    }

    /// A global permutation; `reshuffle_each_iteration=False`: the same one every epoch.
    #[pyo3(signature = (seed, reshuffle_each_iteration=true))]
    fn shuffle(&self, py: Python<'_>, seed: u64, reshuffle_each_iteration: bool) -> PyResult<Self> {
        guard(|| ok(py, self.ds.shuffle_with(seed, reshuffle_each_iteration)).map(wrap))
    }

    /// A shuffle buffer; `reshuffle_each_iteration=False`: the same draws every epoch.
    #[pyo3(signature = (size, seed, reshuffle_each_iteration=true))]
    fn shuffle_buffer(
        &self,
        py: Python<'_>,
        size: usize,
        seed: u64,
        reshuffle_each_iteration: bool,
    ) -> PyResult<Self> {
        guard(|| {
            ok(
                py,
                self.ds
                    .shuffle_buffer_with(size, seed, reshuffle_each_iteration),
            )
            .map(wrap)
        })
    }

    #[pyo3(signature = (count=None))]
    fn repeat(&self, count: Option<u64>) -> PyResult<Self> {
        guard(|| Ok(wrap(self.ds.repeat(count))))
    }

    fn take(&self, n: u64) -> PyResult<Self> {
        guard(|| Ok(wrap(self.ds.take(n))))
    }

    fn skip(&self, n: u64) -> PyResult<Self> {
        guard(|| Ok(wrap(self.ds.skip(n))))
    }

    fn enumerate(&self, name: &str) -> PyResult<Self> {
        guard(|| Ok(wrap(self.ds.enumerate(name))))
    }

    fn batch(&self, py: Python<'_>, size: usize, drop_remainder: bool) -> PyResult<Self> {
        guard(|| ok(py, self.ds.batch(size, drop_remainder)).map(wrap))
    }

    /// `shapes[f]`: per-axis target (None = longest in the batch); `values[f]`: padding value.
    #[pyo3(signature = (size, drop_remainder, shapes, values, default_value))]
    fn padded_batch(
        &self,
        py: Python<'_>,
        size: usize,
        drop_remainder: bool,
        shapes: HashMap<String, Vec<Option<usize>>>,
        values: HashMap<String, Bound<'_, PyAny>>,
        default_value: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        guard(|| {
            let (values, default_value) = pad_values("padded_batch", values, default_value)?;
            let opts = BatchOptions::padded(size, drop_remainder, shapes, values, default_value);
            ok(py, self.ds.batch_with(opts)).map(wrap)
        })
    }

    /// `depth` > 0, or -1 for AUTOTUNE.
    fn prefetch(&self, py: Python<'_>, depth: i64) -> PyResult<Self> {
        guard(|| {
            let d = ok(
                py,
                Parallelism::depth_from_arg("prefetch", "buffer_size", depth),
            )?;
            ok(py, self.ds.prefetch_with(d)).map(wrap)
        })
    }

    /// Splits each element along axis 0 into its rows.
    fn unbatch(&self) -> PyResult<Self> {
        guard(|| Ok(wrap(self.ds.unbatch())))
    }

    /// `unbatch` then `batch(size, drop_remainder)`.
    fn rebatch(&self, py: Python<'_>, size: usize, drop_remainder: bool) -> PyResult<Self> {
        guard(|| ok(py, self.ds.rebatch(size, drop_remainder)).map(wrap))
    }

    /// Sliding windows, each stacked into one element.
    fn window(
        &self,
        py: Python<'_>,
        size: u64,
        shift: u64,
        stride: u64,
        drop_remainder: bool,
    ) -> PyResult<Self> {
        guard(|| {
            ok(
                py,
                self.ds.window(size, Some(shift), stride, drop_remainder),
            )
            .map(wrap)
        })
    }

    /// Windows of `window_size` elements (or `window_size_fn(key)`, tf.data's `window_size_func`)
    /// with the same `key_fn(element)`, each stacked; the key as int64 feature `key_feature`
    /// when given.
    #[pyo3(signature = (key_fn, window_size, label, key_feature=None, window_size_fn=None))]
    fn group_by_window(
        &self,
        py: Python<'_>,
        key_fn: Py<PyAny>,
        window_size: usize,
        label: &str,
        key_feature: Option<&str>,
        window_size_fn: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        guard(|| {
            let r = match window_size_fn {
                None => self
                    .ds
                    .group_by_window(label, py_key_fn(key_fn), window_size, key_feature),
                Some(f) => {
                    let name = f.bind(py).getattr("__qualname__")?.extract::<String>()?;
                    self.ds.group_by_window_sized(
                        label,
                        py_key_fn(key_fn),
                        py_window_size_fn(f, label),
                        &format!("window_size_func={name}"),
                        key_feature,
                    )
                }
            };
            ok(py, r).map(wrap)
        })
    }

    /// The dicts of the iterator `factory()` returns, called once per epoch; `factory(epoch)`
    /// when `with_epoch` (a stream over another dataset's same epoch).
    #[staticmethod]
    #[pyo3(signature = (factory, label, with_epoch = false))]
    fn from_generator(factory: Py<PyAny>, label: &str, with_epoch: bool) -> Self {
        wrap(Dataset::from_generator(
            label,
            py_generator(factory, label, with_epoch),
        ))
    }

    fn random_crop(
        &self,
        feature: &str,
        size: usize,
        axis: isize,
        seed: u64,
        pad: bool,
    ) -> PyResult<Self> {
        guard(|| Ok(wrap(self.ds.random_crop(feature, axis, size, seed, pad))))
    }

    fn pad_to(
        &self,
        feature: &str,
        length: usize,
        axis: isize,
        value: Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        guard(|| {
            let value = pad_value("pad_to", &value)?;
            let label = format!("pad_to:{feature}:{length}:axis={axis}:value={value}");
            Ok(wrap(self.ds.map(
                &label,
                element::pad_or_trim(feature, axis, length, value),
            )))
        })
    }

    fn cast(&self, py: Python<'_>, feature: &str, dtype: &str) -> PyResult<Self> {
        guard(|| {
            let d: DType = ok(py, dtype.parse())?;
            if d == DType::Bytes {
                return Err(to_pyerr(
                    py,
                    Error::invalid("cast to bytes is not supported"),
                    None,
                ));
            }
            Ok(wrap(self.ds.map(
                &format!("cast:{feature}:{d}"),
                element::cast_feature(feature, d),
            )))
        })
    }

    /// Elements per epoch: None when unknown, `INFINITE` (2**64 - 1) when endless.
    fn cardinality(&self) -> Option<u64> {
        self.ds.len()
    }

    #[getter]
    fn is_random_access(&self) -> bool {
        self.ds.is_random_access()
    }

    /// Element `index` (an index past `len` reaches into later epochs).
    fn get<'py>(&self, py: Python<'py>, index: u64) -> PyResult<Bound<'py, PyDict>> {
        guard(|| {
            let ds = self.ds.clone();
            let r = py.detach(move || ds.get(index));
            let e = r.map_err(|e| to_pyerr(py, e, Some(&self.ds.describe())))?;
            example_to_dict(py, e)
        })
    }

    /// Elements `indices`, stacked as one batch.
    fn get_batch<'py>(&self, py: Python<'py>, indices: Vec<u64>) -> PyResult<Bound<'py, PyDict>> {
        guard(|| {
            let ds = self.ds.clone();
            let r = py.detach(move || ds.get_batch(&indices));
            let e = r.map_err(|e| to_pyerr(py, e, Some(&self.ds.describe())))?;
            example_to_dict(py, e)
        })
    }

    /// Element `index` of epoch `epoch` (what `iter(epoch)` yields there).
    fn get_in_epoch<'py>(
        &self,
        py: Python<'py>,
        epoch: u64,
        index: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        guard(|| {
            let ds = self.ds.clone();
            let r = py.detach(move || ds.get_in_epoch(epoch, index));
            let e = r.map_err(|e| to_pyerr(py, e, Some(&self.ds.describe())))?;
            example_to_dict(py, e)
        })
    }

    fn describe(&self) -> String {
        self.ds.describe()
    }

    fn fingerprint(&self) -> String {
        format!("{:016x}", self.ds.fingerprint())
    }

    /// The seed of random op `op` built on this dataset under dataset seed `seed`
    /// (`stokehold_core::rng::derive_seed`: by the op's kind and the data fingerprint of its
    /// input).
    fn derived_seed(&self, seed: u64, op: &str) -> u64 {
        stokehold_core::rng::derive_seed(seed, op, self.ds.fingerprint())
    }

    /// An iterator over epoch `epoch`.
    fn iter(&self, py: Python<'_>, epoch: u64) -> PyResult<PyIterator> {
        PyIterator::over(py, &self.ds, epoch)
    }
}

/// An iterator over one epoch of a pipeline, with a checkpointable state. `stokehold.Iterator`
/// subclasses it (adding dict states), so that `next()` is this class's own slot: no Python
/// frame between the loop and the native call.
#[pyclass(frozen, subclass, name = "Iterator", module = "stokehold._native")]
pub struct PyIterator {
    inner: Mutex<PipelineIter>,
    describe: String,
}

impl PyIterator {
    fn over(py: Python<'_>, ds: &Dataset, epoch: u64) -> PyResult<Self> {
        guard(|| {
            let d = ds.clone();
            let it = ok(py, py.detach(move || PipelineIter::new(d, epoch)))?;
            Ok(PyIterator {
                inner: Mutex::new(it),
                describe: ds.describe(),
            })
        })
    }

    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut PipelineIter) -> stokehold_core::Result<T> + Send,
    ) -> PyResult<T> {
        run_detached(py, &self.inner, &self.describe, f)
    }
}

/// Runs `f` on the iterator (or loader) behind `lock` with the GIL released, under an interrupt
/// check that runs Python's signal handlers (Ctrl-C raises `KeyboardInterrupt` while a pipeline
/// thread is awaited), and maps an error with `describe` as the pipeline. Every native object
/// that drives a pipeline (`Iterator`, `Epochs`) goes through here.
pub(crate) fn run_detached<S: Send, T: Send>(
    py: Python<'_>,
    lock: &Mutex<S>,
    describe: &str,
    f: impl FnOnce(&mut S) -> stokehold_core::Result<T> + Send,
) -> PyResult<T> {
    let (r, turn) = py.detach(|| {
        let r = interrupt::with_check(crate::errors::check_signals, || run_locked(lock, f));
        (r, crate::callbacks::ConsumerTurn::take())
    });
    drop(turn); // the GIL is ours again
    r.map_err(|e| to_pyerr(py, e, Some(describe)))
}

fn run_locked<S, T>(
    lock: &Mutex<S>,
    f: impl FnOnce(&mut S) -> stokehold_core::Result<T>,
) -> stokehold_core::Result<T> {
    // try_lock, not lock: a second call while one runs (from another thread, or from a map
    // function of this very pipeline) is an error, as for a running generator, instead of a
    // wait that could never end.
    let mut g = lock.try_lock().map_err(|e| match e {
        TryLockError::WouldBlock => Error::invalid(
            "this iterator is already running (used from two threads at once, or from \
             inside its own map function); make one iterator per thread",
        ),
        TryLockError::Poisoned(_) => {
            Error::Cancelled("this iterator is unusable after an earlier panic".into())
        }
    })?;
    f(&mut g)
}

#[pymethods]
impl PyIterator {
    /// An iterator over epoch `epoch` of `ds`.
    #[new]
    fn new(py: Python<'_>, ds: PyRef<'_, PyDataset>, epoch: u64) -> PyResult<Self> {
        PyIterator::over(py, &ds.ds, epoch)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        guard(|| match self.run(py, |it| it.next())? {
            Some(e) => example_to_dict(py, e).map(Some),
            None => Ok(None),
        })
    }

    /// Up to `n` elements as a list (one GIL release for all of them).
    fn next_many<'py>(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyList>> {
        guard(|| {
            let items = self.run(py, |it| it.next_many(n))?;
            to_list(py, items)
        })
    }

    /// The epoch this iterator runs.
    #[getter]
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        guard(|| self.run(py, |it| Ok(it.epoch())))
    }

    /// The state as a JSON string.
    fn state_json(&self, py: Python<'_>) -> PyResult<String> {
        guard(|| self.run(py, |it| Ok(it.state().to_string())))
    }

    /// Restores a state from `state_json` (a JSON string).
    fn set_state_json(&self, py: Python<'_>, state: &str) -> PyResult<()> {
        guard(|| {
            let json = parse_state(py, state)?;
            self.run(py, move |it| it.set_state(&json))
        })
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }
}

/// Elements as a Python list of dicts.
pub(crate) fn to_list(py: Python<'_>, items: Vec<Example>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for e in items {
        list.append(example_to_dict(py, e)?)?;
    }
    Ok(list)
}

/// A state from `get_state` (JSON text), or a `StateError` saying it is not JSON.
pub(crate) fn parse_state(py: Python<'_>, state: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(state).map_err(|e| {
        to_pyerr(
            py,
            Error::State(format!("state is not valid JSON: {e}")),
            None,
        )
    })
}

/// Adds the classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDataset>()?;
    m.add_class::<PyIterator>()?;
    m.add("INFINITE", INFINITE)?;
    Ok(())
}

//! Bindings of the parallel engine: interleave, flat_map, zip, concatenate,
//! sample_from_datasets, files (list_files, read_file, .npy), execution options, stats and trace.
//!
//! Module-level functions taking the native dataset first; `python/stokehold/parallel.py` turns
//! them into `Dataset` methods. Python callables run on worker threads holding the GIL only while
//! Python runs (the callers release it around all Rust work).

use pyo3::prelude::*;
use stokehold_core::exec::{executor_of, ExecOptions, Executor, Parallelism};
use stokehold_core::{interleave_fn, Ctx, Dataset, Error, Example};
use stokehold_io::files;

use crate::convert::example_to_dict;
use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

/// `num_parallel_calls`: `None` or a count (> 0), or -1 for AUTOTUNE.
fn parallelism(n: i64) -> PyResult<Parallelism> {
    match n {
        -1 => Ok(Parallelism::Autotune),
        n if n > 0 => Ok(Parallelism::Fixed(n as usize)),
        n => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "num_parallel_calls must be > 0 or AUTOTUNE (-1), got {n}"
        ))),
    }
}

fn wrap(ds: Dataset) -> PyDataset {
    PyDataset::from_dataset(ds)
}

/// The Python opener: element dict -> a native Dataset (or anything with a `_native` one).
fn py_opener(f: Py<PyAny>) -> stokehold_core::InterleaveFn {
    interleave_fn(move |e: Example, ctx: &Ctx| {
        crate::callbacks::with_python(|py| {
            open(py, &f, e).map_err(|err| Error::Callback {
                op: ctx.op.to_string(),
                index: ctx.index,
                source: Box::new(err),
            })
        })
    })
}

/// Calls the opener and unwraps the native dataset it returns.
fn open(py: Python<'_>, f: &Py<PyAny>, e: Example) -> PyResult<Dataset> {
    let out = f.bind(py).call1((example_to_dict(py, e)?,))?;
    let native = if out.hasattr("_native")? {
        out.getattr("_native")?
    } else {
        out
    };
    let d: PyRef<'_, PyDataset> = native.extract().map_err(|_| {
        let name = native
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        pyo3::exceptions::PyTypeError::new_err(format!(
            "the interleave function must return a stokehold.Dataset, got {name}"
        ))
    })?;
    Ok(d.dataset().clone())
}

#[pyfunction]
#[pyo3(signature = (ds, f, label, cycle_length, block_length, num_parallel_calls=None, deterministic=true))]
#[allow(clippy::too_many_arguments)]
fn interleave(
    py: Python<'_>,
    ds: &PyDataset,
    f: Py<PyAny>,
    label: &str,
    cycle_length: usize,
    block_length: usize,
    num_parallel_calls: Option<i64>,
    deterministic: bool,
) -> PyResult<PyDataset> {
    guard(|| {
        let p = num_parallel_calls.map(parallelism).transpose()?;
        let r = ds.dataset().interleave(
            label,
            py_opener(f),
            cycle_length,
            block_length,
            p,
            deterministic,
        );
        ok(py, r).map(wrap)
    })
}

#[pyfunction]
fn flat_map(ds: &PyDataset, f: Py<PyAny>, label: &str) -> PyResult<PyDataset> {
    guard(|| Ok(wrap(ds.dataset().flat_map(label, py_opener(f)))))
}

#[pyfunction]
fn zip(datasets: Vec<PyRef<'_, PyDataset>>, prefixes: Vec<String>) -> PyResult<PyDataset> {
    guard(|| {
        let inputs = prefixes
            .into_iter()
            .zip(datasets.iter().map(|d| d.dataset().clone()))
            .collect();
        Ok(wrap(Dataset::zip_prefixed(inputs)))
    })
}

#[pyfunction]
fn concatenate(a: &PyDataset, b: &PyDataset) -> PyResult<PyDataset> {
    guard(|| Ok(wrap(a.dataset().concatenate(b.dataset()))))
}

#[pyfunction]
fn sample_from_datasets(
    py: Python<'_>,
    datasets: Vec<PyRef<'_, PyDataset>>,
    weights: Vec<f64>,
    seed: u64,
    stop_on_empty: bool,
) -> PyResult<PyDataset> {
    guard(|| {
        let inputs = datasets.iter().map(|d| d.dataset().clone()).collect();
        ok(
            py,
            stokehold_core::sample_from_datasets(inputs, weights, seed, stop_on_empty),
        )
        .map(wrap)
    })
}

#[pyfunction]
#[pyo3(signature = (patterns, seed=None))]
fn list_files(py: Python<'_>, patterns: Vec<String>, seed: Option<u64>) -> PyResult<PyDataset> {
    guard(|| ok(py, py.detach(|| files::list_files(&patterns, seed))).map(wrap))
}

#[pyfunction]
fn read_file(ds: &PyDataset, path_feature: &str, out: &str) -> PyResult<PyDataset> {
    guard(|| {
        Ok(wrap(ds.dataset().map(
            &format!("read_file:{out}"),
            files::read_file_fn(path_feature, out),
        )))
    })
}

#[pyfunction]
fn load_npy(ds: &PyDataset, path_feature: &str, out: &str) -> PyResult<PyDataset> {
    guard(|| {
        Ok(wrap(ds.dataset().map(
            &format!("load_npy:{out}"),
            files::load_npy_fn(path_feature, out),
        )))
    })
}

#[pyfunction]
#[pyo3(signature = (ds, memory_budget=None, cores=None, trace_events=0))]
fn with_options(
    ds: &PyDataset,
    memory_budget: Option<usize>,
    cores: Option<usize>,
    trace_events: usize,
) -> PyResult<PyDataset> {
    guard(|| {
        let d = ExecOptions::default();
        let opts = ExecOptions {
            memory_budget: memory_budget.unwrap_or(d.memory_budget),
            cores: cores.unwrap_or(d.cores).max(1),
            trace_events,
        };
        Ok(wrap(ds.dataset().with_options(opts)))
    })
}

/// The executor found through the dataset's plan: its `with_options`, or the default executor
/// its outermost parallel op last ran on (see `stokehold_core::exec::executor_of`).
fn executor(ds: &PyDataset) -> Option<Executor> {
    executor_of(ds.dataset())
}

/// Stats as a JSON string (`None` when no parallel stage has run).
#[pyfunction]
fn stats_json(ds: &PyDataset) -> Option<String> {
    executor(ds).map(|e| serde_json::to_string(&e.stats()).expect("serialisable"))
}

/// Stats as a printable table.
#[pyfunction]
fn stats_table(ds: &PyDataset) -> Option<String> {
    executor(ds).map(|e| e.stats().table())
}

/// The recorded activity as Chrome trace JSON (`with_options(trace_events=N)` turns it on).
#[pyfunction]
fn trace_json(ds: &PyDataset) -> Option<String> {
    executor(ds).map(|e| e.trace_json())
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(interleave, m)?,
        wrap_pyfunction!(flat_map, m)?,
        wrap_pyfunction!(zip, m)?,
        wrap_pyfunction!(concatenate, m)?,
        wrap_pyfunction!(sample_from_datasets, m)?,
        wrap_pyfunction!(list_files, m)?,
        wrap_pyfunction!(read_file, m)?,
        wrap_pyfunction!(load_npy, m)?,
        wrap_pyfunction!(with_options, m)?,
        wrap_pyfunction!(stats_json, m)?,
        wrap_pyfunction!(stats_table, m)?,
        wrap_pyfunction!(trace_json, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}

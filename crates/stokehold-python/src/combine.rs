//! Bindings of the ops that combine datasets: interleave, flat_map, concatenate, zip and
//! sample_from_datasets (one `#[pymethods]` block of the native `Dataset`; pyo3's
//! `multiple-pymethods`: each topic file adds its own). Python callables that open a dataset
//! run on worker threads holding the GIL only while Python runs (the callers release it around
//! all Rust work).

use pyo3::prelude::*;
use stokehold_core::exec::Parallelism;
use stokehold_core::{interleave_fn, Ctx, Dataset, Error, Example};

use crate::convert::map_input;
use crate::dataset::PyDataset;
use crate::errors::{guard, ok};
use crate::options::Wrap;

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
    let out = f.bind(py).call1((map_input(py, e)?,))?;
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

#[pymethods]
impl PyDataset {
    /// tf.data's interleave; `cycle_length` and `num_parallel_calls` take -1 for AUTOTUNE.
    #[pyo3(signature = (f, label, cycle_length, block_length, num_parallel_calls=None, deterministic=true))]
    fn interleave(
        &self,
        py: Python<'_>,
        f: Py<PyAny>,
        label: &str,
        cycle_length: i64,
        block_length: usize,
        num_parallel_calls: Option<i64>,
        deterministic: bool,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let cycle = ok(
                py,
                Parallelism::from_arg("interleave", "cycle_length", cycle_length),
            )?;
            let p = num_parallel_calls
                .map(|n| {
                    ok(
                        py,
                        Parallelism::from_arg("interleave", "num_parallel_calls", n),
                    )
                })
                .transpose()?;
            let r = self.dataset().interleave_with(
                label,
                py_opener(f),
                cycle,
                block_length,
                p,
                deterministic,
            );
            ok(py, r).map(wrap)
        })
    }

    /// The datasets `f` opens for each element, one after the other.
    fn flat_map(&self, f: Py<PyAny>, label: &str) -> PyResult<PyDataset> {
        guard(|| Ok(wrap(self.dataset().flat_map(label, py_opener(f)))))
    }

    /// This dataset's elements, then `other`'s.
    fn concatenate(&self, other: &PyDataset) -> PyResult<PyDataset> {
        guard(|| Ok(wrap(self.dataset().concatenate(other.dataset()))))
    }

    /// Elements side by side; `prefixes[i]` is put before input `i`'s feature names.
    #[staticmethod]
    fn zip(datasets: Vec<PyRef<'_, PyDataset>>, prefixes: Vec<String>) -> PyResult<PyDataset> {
        guard(|| {
            let inputs = prefixes
                .into_iter()
                .zip(datasets.iter().map(|d| d.dataset().clone()))
                .collect();
            Ok(wrap(Dataset::zip_prefixed(inputs)))
        })
    }

    /// The mixes by tokens in this pipeline, outermost first, as JSON (`stokehold_core::
    /// mix_reports`): each one's weights, tokens taken per input and realised shares.
    fn mix_stats_json(&self) -> String {
        let reports = stokehold_core::mix_reports(self.dataset());
        serde_json::to_string(&reports).expect("serialisable")
    }

    /// A weighted random mix keyed by (seed, epoch, step), of elements or of tokens.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    fn sample_from_datasets(
        py: Python<'_>,
        datasets: Vec<PyRef<'_, PyDataset>>,
        weights: Vec<f64>,
        seed: u64,
        stop_on_empty: bool,
        by: Wrap<stokehold_core::MixUnit>,
        token_feature: String,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let inputs = datasets.iter().map(|d| d.dataset().clone()).collect();
            let unit = ok(py, by.get("sample_from_datasets"))?;
            let by = stokehold_core::MixBy::new(unit, &token_feature);
            ok(
                py,
                stokehold_core::sample_from_datasets_by(inputs, weights, seed, stop_on_empty, by),
            )
            .map(wrap)
        })
    }
}

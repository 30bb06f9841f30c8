//! Variable-length data and keyed Python maps: `bucket_by_sequence_length`, `pack`, and the
//! map whose function also receives the element's position and epoch (what `random_map` and
//! `map_with_index` in `python/stokehold/dataset.py` are built on), plus [`element_key`], the one
//! derivation of a per-element random key.

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::prelude::*;
use stokehold_core::ops::bucket::{BucketOptions, ElementLength};
use stokehold_core::ops::pack::{PackMode, PackOptions};
use stokehold_core::rng::{Rng, Stream};
use stokehold_core::{Ctx, Dataset, Example, MapFn, Parallelism, INFINITE};

use crate::callbacks::{callback_error, py_key_fn, py_scope, with_python};
use crate::convert::{dict_to_example, map_input, pad_values};
use crate::dataset::PyDataset;
use crate::errors::{guard, ok};
use crate::options::Wrap;

/// The 128-bit key of element `index` of epoch `epoch` under `seed`: the two first draws `hi`,
/// `lo` of `stokehold_core::rng::Rng::for_element(seed, Stream::RandomMap, epoch, index)`, as `hi << 64 | lo`. Python's
/// `stokehold.keyed.element_rng` feeds it to `numpy.random.Philox(key=...)`. Pinned by a golden
/// test (`python/tests/test_sequence.py`): changing it changes every `random_map` output.
pub fn element_key(seed: u64, epoch: u64, index: u64) -> u128 {
    let mut rng = Rng::for_element(seed, Stream::RandomMap, epoch, index);
    let hi = rng.next_u64();
    let lo = rng.next_u64();
    (u128::from(hi) << 64) | u128::from(lo)
}

/// [`element_key`] for Python (`stokehold._native.element_key`).
#[pyfunction]
#[pyo3(name = "element_key")]
fn py_element_key(seed: u64, epoch: u64, index: u64) -> u128 {
    element_key(seed, epoch, index)
}

/// A Python callable `(dict, position, epoch) -> dict` as a map function. `position` is the
/// element's position within its epoch: `index % len` over a random-access input of length
/// `len` (whose indices count on across epochs), the stream position over a stream.
fn py_map_ctx_fn(f: Py<PyAny>, len: Option<u64>) -> MapFn {
    Arc::new(move |e: Example, ctx: &Ctx| {
        let position = match len {
            Some(n) => ctx.index % n,
            None => ctx.index,
        };
        with_python(|py| {
            let run = || -> PyResult<Example> {
                let out = f.bind(py).call1((map_input(py, e)?, position, ctx.epoch))?;
                dict_to_example(py, &out)
            };
            run().map_err(|err| callback_error(ctx, err))
        })
    })
}

/// The length of an epoch of `ds` when its map indices count on across epochs: a map over it
/// is built over its random-access base, under the execution stages (`Dataset::try_on_base`).
fn epoch_len(ds: &Dataset) -> Option<u64> {
    match ds.peel_stages()?.0 {
        Dataset::Map(m) if m.len() != INFINITE && !m.is_empty() => Some(m.len()),
        _ => None,
    }
}

#[pymethods]
impl PyDataset {
    /// `map` whose function is called as `f(element, position, epoch)`; `holds_gil` as in `map`.
    #[pyo3(signature = (f, label, holds_gil=true))]
    fn map_with_context(&self, f: Py<PyAny>, label: &str, holds_gil: bool) -> PyResult<PyDataset> {
        guard(|| {
            let ds = self.dataset();
            let g = py_map_ctx_fn(f, epoch_len(ds));
            Ok(PyDataset::from_dataset(if holds_gil {
                ds.map_scoped(label, g, py_scope(label))
            } else {
                ds.map(label, g)
            }))
        })
    }

    /// `map_with_context` on worker threads (`par` > 0, or -1 for AUTOTUNE); `holds_gil` as in
    /// `map`. Core plans it as `map_parallel` (`Dataset::map_parallel`).
    #[pyo3(signature = (f, label, par, deterministic, holds_gil=true))]
    fn map_parallel_with_context(
        &self,
        py: Python<'_>,
        f: Py<PyAny>,
        label: &str,
        par: i64,
        deterministic: bool,
        holds_gil: bool,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let p = ok(py, Parallelism::from_arg("map", "num_parallel_calls", par))?;
            let ds = self.dataset();
            let g = py_map_ctx_fn(f, epoch_len(ds));
            Ok(PyDataset::from_dataset(if holds_gil {
                ds.map_parallel_scoped(label, g, py_scope(label), p, deterministic)
            } else {
                ds.map_parallel(label, g, p, deterministic)
            }))
        })
    }

    /// tf.data's `bucket_by_sequence_length`; the length from `feature` along `axis`, or from
    /// `length_fn(element)` when given.
    #[pyo3(signature = (feature, axis, length_fn, label, boundaries, batch_sizes, padded_shapes,
                        padding_values, default_value, pad_to_bucket_boundary, no_padding,
                        drop_remainder))]
    #[allow(clippy::too_many_arguments)]
    fn bucket_by_sequence_length(
        &self,
        py: Python<'_>,
        feature: Option<String>,
        axis: usize,
        length_fn: Option<Py<PyAny>>,
        label: &str,
        boundaries: Vec<i64>,
        batch_sizes: Vec<usize>,
        padded_shapes: HashMap<String, Vec<Option<usize>>>,
        padding_values: HashMap<String, Bound<'_, PyAny>>,
        default_value: Option<Bound<'_, PyAny>>,
        pad_to_bucket_boundary: bool,
        no_padding: bool,
        drop_remainder: bool,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let length = match (length_fn, feature) {
                (Some(f), _) => ElementLength::Func {
                    f: py_key_fn(f),
                    label: label.to_string(),
                },
                (None, Some(name)) => ElementLength::Feature { name, axis },
                (None, None) => {
                    return Err(pyo3::exceptions::PyValueError::new_err(
                        "bucket_by_sequence_length: needs a length feature or function",
                    ))
                }
            };
            let (padding_values, default_value) =
                pad_values("bucket_by_sequence_length", padding_values, default_value)?;
            let opts = BucketOptions {
                boundaries,
                batch_sizes,
                padded_shapes,
                padding_values,
                default_value,
                pad_to_bucket_boundary,
                no_padding,
                drop_remainder,
            };
            let r = self.dataset().bucket_by_sequence_length(length, opts);
            ok(py, r).map(PyDataset::from_dataset)
        })
    }

    /// Grain's first-fit (`mode="first_fit"`), best-fit (`"best_fit"`) or concat-then-split
    /// (`"concat_then_split"`) packing.
    #[pyo3(signature = (lengths, num_packing_bins, mode, meta_features, shuffle_bins, seed,
        cu_seqlens))]
    #[allow(clippy::too_many_arguments)]
    fn pack(
        &self,
        py: Python<'_>,
        lengths: Vec<(String, usize)>,
        num_packing_bins: usize,
        mode: Wrap<PackMode>,
        meta_features: Vec<String>,
        shuffle_bins: bool,
        seed: u64,
        cu_seqlens: bool,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let mode = ok(py, mode.get("pack"))?;
            let opts = PackOptions {
                lengths,
                num_packing_bins,
                mode,
                meta_features,
                shuffle_bins,
                seed,
                cu_seqlens,
            };
            ok(py, self.dataset().pack(opts)).map(PyDataset::from_dataset)
        })
    }
}

/// Adds [`element_key`] to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(py_element_key, m)?)
}

//! `batch` and `padded_batch`.
//!
//! `batch(size)` stacks each feature: a dense `[b, ...]` tensor when shapes agree, a ragged column
//! (values + row splits) when only axis 0 varies, no padding. `padded_batch` pads every feature to
//! the longest in the batch, or to a fixed shape, with a per-feature value, and adds
//! `<name>_lengths` (int64, `[b]` for rank-1 features, `[b, rank]` otherwise) holding the
//! unpadded shapes. Over a random-access input, batch `j` of epoch `e` is elements
//! `j*size .. (j+1)*size` of the input's epoch `e`, so batching keeps random access.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::{json, Value as Json};

use crate::cast::{fill_value, PadValue};
use crate::dataset::{state_field, Dataset, DatasetIter, IterDataset, MapDataset, INFINITE};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::example::{example_to_json, examples_from_state, stack_examples, Example, Value};
use crate::tensor::Tensor;

/// How one feature is padded.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PadSpec {
    /// The feature's own padding value, converted to its dtype exactly (`None`: the batch's
    /// default value where it is of the feature's kind, else zero, `b""` for bytes).
    pub value: Option<PadValue>,
    /// A fixed shape to pad to; `None` entries (or no shape) pad to the longest in the batch.
    pub shape: Option<Vec<Option<usize>>>,
}

/// Options of `batch` / `padded_batch`.
#[derive(Clone, Debug, Default)]
pub struct BatchOptions {
    /// Elements per batch (> 0).
    pub size: usize,
    /// Drop a last, smaller batch (default: keep it).
    pub drop_remainder: bool,
    /// `Some` for padded_batch: a spec per feature (features not named use `default`).
    pub padding: Option<HashMap<String, PadSpec>>,
    /// The spec for features not in `padding` (value 0, pad to longest).
    pub default_pad: PadSpec,
}

impl BatchOptions {
    /// Plain batching of `size`.
    pub fn new(size: usize, drop_remainder: bool) -> Self {
        BatchOptions {
            size,
            drop_remainder,
            ..Default::default()
        }
    }

    /// `padded_batch` of `size`: `shapes[f]` a fixed shape for feature `f` (a `None` axis pads to
    /// the longest in the batch), `values[f]` its padding value, `default_value` the padding
    /// value of every feature not in `values`; features in neither map pad with `default_value`
    /// to the longest in the batch.
    pub fn padded(
        size: usize,
        drop_remainder: bool,
        shapes: HashMap<String, Vec<Option<usize>>>,
        values: HashMap<String, PadValue>,
        default_value: Option<PadValue>,
    ) -> Self {
        let mut specs: HashMap<String, PadSpec> = HashMap::new();
        for (name, shape) in shapes {
            specs.entry(name).or_default().shape = Some(shape);
        }
        for (name, value) in values {
            specs.entry(name).or_default().value = Some(value);
        }
        BatchOptions {
            size,
            drop_remainder,
            padding: Some(specs),
            default_pad: PadSpec {
                value: default_value,
                shape: None,
            },
        }
    }

    fn validate(&self) -> Result<()> {
        if self.size == 0 {
            return Err(Error::invalid("batch size must be > 0"));
        }
        Ok(())
    }

    fn label(&self) -> String {
        let kind = if self.padding.is_some() {
            "padded_batch"
        } else {
            "batch"
        };
        format!(
            "{kind}({}, drop_remainder={})",
            self.size, self.drop_remainder
        )
    }

    /// Builds one batch from its elements.
    pub fn make(&self, elements: &[Example]) -> Result<Example> {
        match &self.padding {
            None => stack_examples(&self.label(), elements),
            Some(specs) => pad_examples(&self.label(), elements, specs, &self.default_pad),
        }
    }
}

/// Batch over a random-access dataset.
pub struct MapBatch {
    parent: Arc<dyn MapDataset>,
    opts: BatchOptions,
}

impl MapBatch {
    /// Batches `parent`.
    pub fn new(parent: Arc<dyn MapDataset>, opts: BatchOptions) -> Result<Self> {
        opts.validate()?;
        Ok(MapBatch { parent, opts })
    }
}

impl MapDataset for MapBatch {
    fn len(&self) -> u64 {
        let (n, b) = (self.parent.len(), self.opts.size as u64);
        match n {
            INFINITE => INFINITE,
            _ if self.opts.drop_remainder => n / b,
            _ => n.div_ceil(b),
        }
    }

    fn get(&self, index: u64) -> Result<Example> {
        let start = Instant::now();
        let r = self.build(index);
        record(|| self.name(), &r, start);
        r
    }

    fn rows_per_element(&self) -> Option<u64> {
        // Every batch is full when remainders are dropped or the length divides evenly (an endless
        // input has no last batch); padding only pads the inner axes.
        let (n, b) = (self.parent.len(), self.opts.size as u64);
        (self.opts.drop_remainder || n == INFINITE || n % b == 0).then_some(b)
    }

    fn name(&self) -> String {
        self.opts.label()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![Dataset::Map(self.parent.clone())]
    }

    /// The input starts over every `p` elements: batches of `b` line up with that every
    /// `lcm(p, b) / b = p / gcd(p, b)` batches.
    fn pass_len(&self) -> Option<u64> {
        let p = self.parent.pass_len()?;
        let (mut x, mut y) = (p, self.opts.size as u64);
        while y != 0 {
            (x, y) = (y, x % y);
        }
        Some(p / x)
    }
}

impl MapBatch {
    /// Batch `index`: through the input's batch path when it has one, else element by element.
    fn build(&self, index: u64) -> Result<Example> {
        let (len, n, b) = (self.len(), self.parent.len(), self.opts.size as u64);
        if len == 0 {
            return Err(Error::OutOfRange {
                index,
                len: 0,
                what: self.name(),
            });
        }
        let (base, start) = if n == INFINITE {
            (0, index * b)
        } else {
            ((index / len) * n, (index % len) * b)
        };
        let end = (start + b).min(n);
        let indices: Vec<u64> = (start..end).map(|i| base + i).collect();
        if self.opts.padding.is_none() || self.parent.batch_pads() {
            if let Some(batch) = self.parent.get_batch(&indices)? {
                return match &self.opts.padding {
                    None => Ok(batch),
                    Some(specs) => pad_batch(&self.name(), &batch, specs, &self.opts.default_pad),
                };
            }
        }
        if self.parent.prefetch_useful() {
            crate::dataset::hint_batch(&*self.parent, &indices);
        }
        let elements = self
            .parent
            .get_many(&indices)
            .into_iter()
            .collect::<Result<Vec<_>>>()?;
        self.opts.make(&elements)
    }
}

/// A batch built under a pipeline's executor counts in its stats (a row named by the op, so
/// `stats()` shows the batch stage beside the parallel and prefetch ones).
fn record(name: impl FnOnce() -> String, r: &Result<Example>, start: Instant) {
    if let (Ok(batch), Some(exec)) = (r, crate::exec::Executor::current()) {
        let s = exec.op_stats(&name());
        s.produced(batch.nbytes(), 0);
        s.add_busy(start);
    }
}

/// Batch over a stream.
pub struct IterBatch {
    parent: Dataset,
    opts: Arc<BatchOptions>,
}

impl IterBatch {
    /// Batches the stream `parent`.
    pub fn new(parent: Dataset, opts: BatchOptions) -> Result<Self> {
        opts.validate()?;
        Ok(IterBatch {
            parent,
            opts: Arc::new(opts),
        })
    }
}

impl IterDataset for IterBatch {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(BatchIter {
            inner: self.parent.iter(epoch)?,
            opts: self.opts.clone(),
            name: self.name(),
            pending: Vec::new(),
        }))
    }

    fn name(&self) -> String {
        self.opts.label()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn len(&self) -> Option<u64> {
        let n = self.parent.len()?;
        let b = self.opts.size as u64;
        Some(match n {
            INFINITE => INFINITE,
            _ if self.opts.drop_remainder => n / b,
            _ => n.div_ceil(b),
        })
    }
}

struct BatchIter {
    inner: Box<dyn DatasetIter>,
    opts: Arc<BatchOptions>,
    /// The op's name: its stats row.
    name: String,
    /// The elements of a batch whose filling was interrupted (Ctrl-C while the input waited):
    /// the next call goes on from them, and a state taken meanwhile carries them (the input has
    /// moved past them; asking it for its state before every batch, in case, cost a
    /// `shuffle(1000)` input 4.6 us a batch, as much as 30 of its elements).
    pending: Vec<Example>,
}

impl DatasetIter for BatchIter {
    fn next(&mut self) -> Result<Option<Example>> {
        let mut items = std::mem::take(&mut self.pending);
        if items.is_empty() {
            items.reserve(self.opts.size.min(super::PREALLOC_MAX));
        }
        let want = self.opts.size - items.len();
        if let Err(e) = self.inner.next_into(want, &mut items) {
            if matches!(e, Error::Interrupted(_)) && !items.is_empty() {
                self.pending = items;
            }
            return Err(e);
        }
        if items.is_empty() || (self.opts.drop_remainder && items.len() < self.opts.size) {
            return Ok(None);
        }
        let start = Instant::now();
        let r = self.opts.make(&items);
        record(|| self.name.clone(), &r, start);
        r.map(Some)
    }

    fn state(&self) -> Json {
        // Batches are built whole inside next(), so the input's position is the whole state,
        // with the elements of an interrupted batch if one waits.
        let mut state = json!({ "inner": self.inner.state() });
        if !self.pending.is_empty() {
            state["pending"] = self.pending.iter().map(example_to_json).collect();
        }
        state
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let pending: Vec<Example> = examples_from_state(state, "pending")?;
        if pending.len() >= self.opts.size {
            return Err(Error::State(format!(
                "{}: the state holds {} elements of a batch of {}",
                self.name,
                pending.len(),
                self.opts.size
            )));
        }
        self.inner.set_state(state_field(state, "inner")?)?;
        self.pending = pending;
        Ok(())
    }
}

fn pad_examples(
    op: &str,
    elements: &[Example],
    specs: &HashMap<String, PadSpec>,
    default: &PadSpec,
) -> Result<Example> {
    let first = elements
        .first()
        .ok_or_else(|| Error::invalid(format!("{op}: empty batch")))?;
    check_specs(op, first, specs)?;
    let mut out = Example::new();
    for (name, _) in first.iter() {
        let items = elements
            .iter()
            .map(|e| e.tensor(op, name))
            .collect::<Result<Vec<_>>>()?;
        let padded = pad_stack(op, name, &items, specs.get(name), default)?;
        insert_padded(&mut out, first, name, padded)?;
    }
    Ok(out)
}

/// A batch made by the input's batch path (`get_batch`: its elements stacked, dense or ragged),
/// padded exactly as [`pad_examples`] pads the elements: no example is built per element. A
/// feature whose rows all have the target shape already (a dense column, unless
/// `padded_shapes` asks for more) keeps its column as it is; the others are padded from
/// zero-copy views of their rows. `padded_batch(64)` of 128 int32 per element from memory
/// built an example per element: 0.126 us an element against `batch(64)`'s 0.027.
fn pad_batch(
    op: &str,
    batch: &Example,
    specs: &HashMap<String, PadSpec>,
    default: &PadSpec,
) -> Result<Example> {
    check_specs(op, batch, specs)?;
    let mut out = Example::new();
    for (name, value) in batch.iter() {
        let spec = specs.get(name).unwrap_or(default);
        let padded = match value {
            // A scalar per element is stacked as is, as `pad_stack` stacks it.
            Value::Tensor(t) if t.shape().len() == 1 => (value.clone(), None),
            Value::Tensor(t) if has_shape(spec, &t.shape()[1..]) => {
                let (rows, inner) = (t.shape()[0], &t.shape()[1..]);
                let lengths: Vec<i64> = inner.iter().map(|&d| d as i64).collect();
                let lshape = if inner.len() == 1 {
                    vec![rows]
                } else {
                    vec![rows, inner.len()]
                };
                let lengths = Tensor::from_vec(lshape, lengths.repeat(rows))?;
                (value.clone(), Some(lengths))
            }
            _ => {
                let rows = (0..value.rows()?)
                    .map(|k| value.row(k))
                    .collect::<Result<Vec<_>>>()?;
                let items: Vec<&Tensor> = rows.iter().collect();
                pad_stack(op, name, &items, specs.get(name), default)?
            }
        };
        insert_padded(&mut out, batch, name, padded)?;
    }
    Ok(out)
}

/// Whether rows of shape `inner` are already padded to what `spec` asks for (no fixed size, or
/// exactly theirs, on every axis).
fn has_shape(spec: &PadSpec, inner: &[usize]) -> bool {
    spec.shape.as_ref().is_none_or(|fixed| {
        fixed.len() == inner.len()
            && fixed
                .iter()
                .zip(inner)
                .all(|(want, &have)| want.is_none_or(|w| w == have))
    })
}

/// A `padded_shapes` / `padding_values` entry naming a feature that `example` lacks is an error.
fn check_specs(op: &str, example: &Example, specs: &HashMap<String, PadSpec>) -> Result<()> {
    match specs.keys().find(|k| example.get(k).is_none()) {
        Some(unknown) => Err(Error::schema(
            op,
            format!(
                "padding given for feature {unknown:?}, but elements have {:?}",
                example.names()
            ),
        )),
        None => Ok(()),
    }
}

/// Puts feature `name`, padded, and its lengths (`{name}_lengths`) into `out`; `source` is an
/// element (or the batch) the feature came from, whose own features the lengths must not replace.
fn insert_padded(
    out: &mut Example,
    source: &Example,
    name: &str,
    (padded, lengths): (Value, Option<Tensor>),
) -> Result<()> {
    out.insert(name, padded);
    if let Some(l) = lengths {
        let lname = format!("{name}_lengths");
        if source.get(&lname).is_some() {
            // Inserting would replace the element's own feature (or it would replace ours):
            // either way real data would be lost without a word.
            return Err(Error::invalid(format!(
                "padded_batch: feature {lname:?} already exists; the lengths of padded \
                 feature {name:?} would overwrite it: rename it first"
            )));
        }
        out.insert(&lname, l);
    }
    Ok(())
}

/// Pads tensors of one feature to a common shape and stacks them; returns the batch and, for
/// non-scalar features, their original shapes. `spec` is the feature's own (`padded_shapes` /
/// `padding_values` named it), `default` the one for every feature. The padding value is the
/// feature's own (converted exactly) or else the default's where it is of the feature's kind: a
/// number pads numbers, a byte string pads bytes, and a feature of the other kind pads with its
/// zero (`b""`).
pub fn pad_stack(
    op: &str,
    name: &str,
    items: &[&Tensor],
    own: Option<&PadSpec>,
    default: &PadSpec,
) -> Result<(Value, Option<Tensor>)> {
    let spec = own.unwrap_or(default);
    let rank = items[0].shape().len();
    let dtype = items[0].dtype();
    if let Some(t) = items
        .iter()
        .find(|t| t.shape().len() != rank || t.dtype() != dtype)
    {
        return Err(Error::schema(
            op,
            format!(
                "feature {name:?}: cannot pad {}{:?} with {}{:?}",
                dtype,
                items[0].shape(),
                t.dtype(),
                t.shape()
            ),
        ));
    }
    if rank == 0 {
        return Ok((crate::example::stack(op, name, items)?, None));
    }
    let target = target_shape(op, name, items, spec, rank)?;
    let lengths: Vec<i64> = items
        .iter()
        .flat_map(|t| t.shape().iter().map(|&d| d as i64))
        .collect();
    let lshape = if rank == 1 {
        vec![items.len()]
    } else {
        vec![items.len(), rank]
    };
    let lengths = Tensor::from_vec(lshape, lengths)?;
    let mut shape = vec![items.len()];
    shape.extend_from_slice(&target);
    let same_kind = |v: &&PadValue| matches!(v, PadValue::Bytes(_)) == (dtype == DType::Bytes);
    let value = own
        .and_then(|s| s.value.as_ref())
        .or(default.value.as_ref().filter(same_kind));
    let fill = fill_value(op, format_args!("feature {name:?}"), dtype, value)?;
    let padded = if dtype == DType::Bytes {
        pad_strings(op, name, items, &target, shape, &fill)?
    } else {
        pad_dense(op, name, items, &target, shape, &fill)?
    };
    Ok((Value::Tensor(padded), Some(lengths)))
}

fn target_shape(
    op: &str,
    name: &str,
    items: &[&Tensor],
    spec: &PadSpec,
    rank: usize,
) -> Result<Vec<usize>> {
    let mut target: Vec<usize> = (0..rank)
        .map(|d| items.iter().map(|t| t.shape()[d]).max().unwrap_or(0))
        .collect();
    if let Some(fixed) = &spec.shape {
        if fixed.len() != rank {
            return Err(Error::schema(
                op,
                format!(
                    "feature {name:?} has rank {rank}, padded_shape {fixed:?} has {}",
                    fixed.len()
                ),
            ));
        }
        for (d, want) in fixed.iter().enumerate() {
            if let Some(w) = *want {
                if target[d] > w {
                    let (i, t) = items
                        .iter()
                        .enumerate()
                        .find(|(_, t)| t.shape()[d] > w)
                        .unwrap();
                    return Err(Error::schema(
                        op,
                        format!(
                            "feature {name:?}: element {i} of the batch has shape {:?}, larger \
                             than padded_shape {fixed:?} on axis {d}",
                            t.shape()
                        ),
                    ));
                }
                target[d] = w;
            }
        }
    }
    Ok(target)
}

/// `count` copies of the element `fill`: zeroed memory straight from the allocator for a zero
/// fill, doubling memcpys otherwise (an element-wise fill cost 2/3 of the workers' time on
/// `padded_batch(64)` of 2k-20k float32 files). Sized by an argument or the data: checked, and
/// an error instead of an abort (`alloc::checked_bytes`).
pub(crate) fn filled(
    op: &str,
    what: impl std::fmt::Display,
    fill: &[u8],
    count: usize,
) -> Result<Vec<u8>> {
    let bytes = crate::alloc::checked_bytes(op, &what, count, fill.len())?;
    if bytes == 0 || fill.iter().all(|&b| b == 0) {
        return crate::alloc::try_zeroed_vec(op, what, bytes);
    }
    let mut v = crate::alloc::try_large_vec(op, what, bytes)?;
    v.extend_from_slice(fill);
    while v.len() < bytes {
        let n = v.len().min(bytes - v.len());
        v.extend_from_within(..n);
    }
    Ok(v)
}

/// Copies each item into the top-left corner of its slot in a buffer pre-filled with `fill`.
fn pad_dense(
    op: &str,
    name: &str,
    items: &[&Tensor],
    target: &[usize],
    shape: Vec<usize>,
    fill: &[u8],
) -> Result<Tensor> {
    let isz = fill.len();
    let what = format_args!("feature {name:?} padded to {shape:?}");
    let per_item = target
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .unwrap_or(usize::MAX);
    let slot = crate::alloc::checked_bytes(op, what, per_item, isz)?;
    let mut buf = filled(op, what, fill, per_item.saturating_mul(items.len()))?;
    for (k, t) in items.iter().enumerate() {
        let src = t.data();
        let s = t.shape();
        // Copy contiguous innermost runs: one memcpy per run of the last axis.
        let inner = *s.last().unwrap() * isz;
        let runs: usize = s[..s.len() - 1].iter().product();
        for r in 0..runs {
            let mut rem = r;
            let mut dst_off = 0;
            let mut stride = target[target.len() - 1] * isz;
            for d in (0..s.len() - 1).rev() {
                dst_off += (rem % s[d]) * stride;
                rem /= s[d];
                stride *= target[d];
            }
            let dst = k * slot + dst_off;
            buf[dst..dst + inner].copy_from_slice(&src[r * inner..(r + 1) * inner]);
        }
    }
    Tensor::new(items[0].dtype(), shape, Bytes::from(buf))
}

/// Bytes rows padded to `target` (any rank) with `fill`: each row's strings land in the
/// top-left corner of its slot, as numbers do in [`pad_dense`].
fn pad_strings(
    op: &str,
    name: &str,
    items: &[&Tensor],
    target: &[usize],
    shape: Vec<usize>,
    fill: &[u8],
) -> Result<Tensor> {
    let what = format_args!("feature {name:?} padded to {shape:?}");
    let slot = target
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .unwrap_or(usize::MAX);
    let count = slot.saturating_mul(items.len());
    // The padding strings' own bytes too: a long padding value times many slots.
    crate::alloc::checked_bytes(op, what, count, fill.len())?;
    let mut strings = crate::alloc::try_filled(op, what, fill, count)?;
    for (k, t) in items.iter().enumerate() {
        let s = t.shape();
        for i in 0..t.len() {
            // Row-major position of element `i` of `t` inside a slot of shape `target`.
            let (mut rem, mut at, mut stride) = (i, 0, 1);
            for d in (0..s.len()).rev() {
                at += (rem % s[d]) * stride;
                rem /= s[d];
                stride *= target[d];
            }
            strings[k * slot + at] = t.string(i).unwrap_or(b"");
        }
    }
    Tensor::strings(&strings).reshape(shape)
}

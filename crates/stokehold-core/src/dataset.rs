//! The dataset model: random-access datasets and streams, one vocabulary for both.
//!
//! A [`MapDataset`] answers `len()` and `get(index)`. Indices past `len()` continue into later
//! epochs: `get(e * len + i)` is element `i` of epoch `e`, so `repeat` is free, and every op that
//! draws randomness keys it by the global index, i.e. by (seed, epoch, index). An [`IterDataset`]
//! is a stream: it makes iterators that yield elements in order and save / restore their position
//! as a small JSON state. [`Dataset`] holds either and offers every op; an op keeps random access
//! when it can (map, take, skip, repeat, shuffle, batch over a random-access input) and otherwise
//! returns a stream.
//!
//! ```
//! use stokehold_core::{Dataset, Example, Tensor};
//! let ds = Dataset::range(10).shuffle(7).batch(4, false).unwrap();
//! assert_eq!(ds.len(), Some(3));
//! let batches: Vec<Example> = ds.iter(0).unwrap().collect_all().unwrap();
//! assert_eq!(batches.len(), 3);
//! ```

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::error::{Error, Result};
use crate::example::Example;
use crate::exec::{DefaultExecutor, Executor, Parallelism};

pub use crate::alloc::{prefetch_memory, prefetch_write};
pub use crate::checked::INFINITE;

/// A random-access dataset.
pub trait MapDataset: Send + Sync + 'static {
    /// Elements per epoch ([`INFINITE`] for an endless dataset).
    fn len(&self) -> u64;

    /// Element `index % len` of epoch `index / len`.
    fn get(&self, index: u64) -> Result<Example>;

    /// Short description of this op and its arguments, e.g. `"shuffle(seed=3)"`.
    fn name(&self) -> String;

    /// The inputs of this op (for describing and fingerprinting a pipeline).
    fn parents(&self) -> Vec<Dataset> {
        Vec::new()
    }

    /// True when the dataset has no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements at `indices` already stacked into one batch, exactly as
    /// [`stack_examples`](crate::stack_examples) would stack them, when this dataset can do that
    /// faster than element by element (an in-memory arena copies rows straight into the batch
    /// buffers). `Ok(None)` means "no fast path": `batch` then gets elements one by one. Index
    /// arithmetic ops (shuffle, take/skip, repeat) forward it to their input.
    fn get_batch(&self, indices: &[u64]) -> Result<Option<Example>> {
        let _ = indices;
        Ok(None)
    }

    /// Elements `indices`, each with its own result, as [`MapDataset::get`] gives them. `batch`
    /// (element by element) and a parallel stage's workers (a run of elements) read through it,
    /// so an op that does a run cheaper than element by element says so here: a map whose
    /// function wants a scope held across its calls ([`ScopeFn`](crate::ops::map::ScopeFn),
    /// a Python function's GIL). Default: one `get` per index.
    fn get_many(&self, indices: &[u64]) -> Vec<Result<Example>> {
        indices.iter().map(|&i| self.get(i)).collect()
    }

    /// True when this op's function runs inside a scope its calls share
    /// ([`ScopeFn`](crate::ops::map::ScopeFn): a Python function's GIL). AUTOTUNE starts a
    /// parallel stage over a pipeline that holds such an op inline (see
    /// [`Dataset::calls_in_scope`]). Default: false.
    fn scoped(&self) -> bool {
        false
    }

    /// The leading size (length of axis 0) that every feature of every element has, when it is
    /// known without reading the elements: `batch(n)` with no smaller last batch answers `n`.
    /// `unbatch` uses it to keep random access (row `i` is row `i % n` of element `i / n`).
    /// Index-arithmetic ops (shuffle, take/skip, repeat) forward it; ops that may change shapes
    /// (map) must not. Default: unknown.
    fn rows_per_element(&self) -> Option<u64> {
        None
    }

    /// For an endless dataset that repeats a finite one: the period `p` at which it starts over,
    /// index `k * p` being the first element of a new epoch of what it repeats (`repeat()` of
    /// `n` elements: `n`). `take(k)` over an endless dataset starts each of its epochs at such a
    /// boundary (tf.data restarts the inner iterator on each pass), a fresh epoch of the
    /// repeated input each time, so a shuffle under the repeat draws a new order. Element-wise
    /// ops forward it; `batch(b)` scales it. Default: unknown, and `take` restarts each epoch at
    /// index 0.
    fn pass_len(&self) -> Option<u64> {
        None
    }

    /// True when [`MapDataset::get_batch`] only gathers what is stored and answers `None` where
    /// the elements do not stack (shapes that differ beyond axis 0), so that `padded_batch` may
    /// take it and pad the stacked batch. A batch path that runs a function (map's) stacks its
    /// results and fails where they differ, which padding the elements one by one would pad.
    /// Index-arithmetic ops forward their input's answer. Default: false.
    fn batch_pads(&self) -> bool {
        false
    }

    /// True when [`MapDataset::prefetch`] hints help this dataset (it reads memory-mapped files).
    /// Index-arithmetic ops forward their input's answer; iterators only send hints when true.
    fn prefetch_useful(&self) -> bool {
        false
    }

    /// A hint that element `index` will be read soon, so that a dataset over memory-mapped files
    /// can start the cache and TLB misses of a random read early and overlap them with work on
    /// earlier elements. Must be cheap and must not fail. Default: nothing.
    fn prefetch(&self, index: u64, hint: Hint) {
        let _ = (index, hint);
    }

    /// The log of what this op left out, as [`IterDataset::error_log`] (a random-access reader
    /// whose index leaves corrupt records out). Default: `None`.
    fn error_log(&self) -> Option<Arc<crate::skip::ErrorLog>> {
        None
    }
}

/// How far ahead a [`MapDataset::prefetch`] hint is. Iterators send `Locate` further ahead than
/// `Read`, so that `Read` finds the element's metadata (say an index entry) already cached and can
/// prefetch the data it points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hint {
    /// Fetch what locates the element (index entries).
    Locate,
    /// Fetch the start of the element's bytes (the CPU streams the rest as it reads them).
    Read,
    /// Fetch the element's bytes, the first few KiB of them: sent for every element of a batch
    /// at once (after their `Locate`s), when nothing else runs before they are read.
    Whole,
}

/// Elements ahead of the reader that get a `Locate` / `Read` hint: far enough for the misses to
/// land before the element is read, near enough that the lines are still cached then.
const LOCATE_AHEAD: u64 = 16;
const READ_AHEAD: u64 = 8;

/// Sends the hints for a reader at `pos` that will read up to (excluding) `end`.
pub fn hint_ahead(ds: &dyn MapDataset, pos: u64, end: u64) {
    if pos + LOCATE_AHEAD < end {
        ds.prefetch(pos + LOCATE_AHEAD, Hint::Locate);
    }
    if pos + READ_AHEAD < end {
        ds.prefetch(pos + READ_AHEAD, Hint::Read);
    }
}

/// Sends the hints for a batch about to be read element by element: `Locate` for every index,
/// then `Whole` for every index, so that all its elements' misses are in flight together.
pub fn hint_batch(ds: &dyn MapDataset, indices: &[u64]) {
    for hint in [Hint::Locate, Hint::Whole] {
        for &i in indices {
            ds.prefetch(i, hint);
        }
    }
}

/// An execution stage as its op reports it: its input, and how to apply it again.
#[derive(Clone)]
pub struct Stage {
    /// The stage's input.
    pub parent: Dataset,
    /// The stage itself.
    pub kind: StageKind,
}

/// What an execution stage does, enough to apply it to another input.
#[derive(Clone)]
pub enum StageKind {
    /// `prefetch(depth)`.
    Prefetch {
        /// Elements run ahead (> 0); `None` for `prefetch(AUTOTUNE)`.
        depth: Option<usize>,
    },
    /// `with_options(...)`: the input run on this executor.
    Options {
        /// The executor (shared with the copy: one budget, one set of stats).
        exec: Executor,
    },
    /// `parallelize(par, deterministic=true)`.
    Parallelize {
        /// Worker threads.
        par: Parallelism,
        /// The op's default-executor slot, shared with the copy (stats stay findable from the
        /// original dataset).
        slot: DefaultExecutor,
    },
}

/// A stream of elements.
#[allow(clippy::len_without_is_empty)] // a stream's length is often unknown
pub trait IterDataset: Send + Sync + 'static {
    /// A new iterator over epoch `epoch` (ops that shuffle reseed per epoch).
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>>;

    /// Short description of this op and its arguments.
    fn name(&self) -> String;

    /// The inputs of this op.
    fn parents(&self) -> Vec<Dataset> {
        Vec::new()
    }

    /// The number of elements, when known without iterating.
    fn len(&self) -> Option<u64> {
        None
    }

    /// `Some` when this op is an *execution stage*: it changes how its input is computed, not
    /// what it yields (a prefetch; a deterministic `parallelize` without a map function). Over a
    /// random-access input, `repeat` and `epochs` peel such stages off, work on the input, and
    /// re-apply them (see [`crate::ops::plan`]). Default: `None`.
    fn stage(&self) -> Option<Stage> {
        None
    }

    /// What this op adds to the pipeline's data fingerprint ([`Dataset::fingerprint`]): its
    /// name, or `None` for an execution stage, which changes how its input runs, not what it
    /// yields. An op whose name spells out how it runs (a deterministic parallel map) answers
    /// the name of the op that yields the same elements (`map[f]`), so a checkpoint taken with
    /// one parallelism restores under any other, or none. Default: `None` for an op that
    /// reports a [`IterDataset::stage`], else its name.
    fn data_name(&self) -> Option<String> {
        match self.stage() {
            Some(_) => None,
            None => Some(self.name()),
        }
    }

    /// The executor this op runs its input on, when it has one: `with_options`' own, or the
    /// default one a thread-owning op last made (see [`crate::exec::executor_of`]). Default:
    /// `None`.
    fn executor(&self) -> Option<crate::exec::Executor> {
        None
    }

    /// The log of the elements this op left out, when it skips failing elements
    /// (`ignore_errors`, a loader's `on_error="skip"`); found with
    /// [`error_logs`](crate::ops::ignore_errors::error_logs). Default: `None`.
    fn error_log(&self) -> Option<Arc<crate::skip::ErrorLog>> {
        None
    }

    /// What a mix by tokens has realised (`sample_from_datasets(by="tokens")`: the token count
    /// and share of each input), found with [`mix_reports`](crate::ops::mix::mix_reports) for
    /// a pipeline's stats. Default: `None`.
    fn mix_report(&self) -> Option<Json> {
        None
    }
}

/// An iterator over a dataset, with a checkpointable position.
pub trait DatasetIter: Send {
    /// The next element, `Ok(None)` at the end.
    fn next(&mut self) -> Result<Option<Example>>;

    /// The position as a small JSON value: enough for [`DatasetIter::set_state`] to continue
    /// exactly where this iterator is.
    fn state(&self) -> Json;

    /// Moves to a position saved by [`DatasetIter::state`] on an iterator of the same pipeline.
    fn set_state(&mut self, state: &Json) -> Result<()>;

    /// Appends the next `n` elements to `out` (fewer only at the end) and returns how many it
    /// appended. An error ends the call, the elements taken before it left in `out`. An op that
    /// takes elements in groups (a batch) asks its input so; an input that can hand over
    /// several at once cheaper than one by one (a parallel stage: one lock for what is ready)
    /// overrides it.
    fn next_into(&mut self, n: usize, out: &mut Vec<Example>) -> Result<usize> {
        let mut k = 0;
        while k < n {
            match self.next()? {
                Some(e) => out.push(e),
                None => break,
            }
            k += 1;
        }
        Ok(k)
    }

    /// Drains the iterator into a vector.
    fn collect_all(&mut self) -> Result<Vec<Example>> {
        let mut out = Vec::new();
        while let Some(e) = self.next()? {
            out.push(e);
        }
        Ok(out)
    }
}

impl DatasetIter for Box<dyn DatasetIter> {
    fn next(&mut self) -> Result<Option<Example>> {
        (**self).next()
    }
    fn next_into(&mut self, n: usize, out: &mut Vec<Example>) -> Result<usize> {
        (**self).next_into(n, out)
    }
    fn state(&self) -> Json {
        (**self).state()
    }
    fn set_state(&mut self, state: &Json) -> Result<()> {
        (**self).set_state(state)
    }
}

/// A dataset: random access or a stream.
#[derive(Clone)]
pub enum Dataset {
    /// Random access (`len`, `get`).
    Map(Arc<dyn MapDataset>),
    /// A stream.
    Iter(Arc<dyn IterDataset>),
}

impl Dataset {
    /// Wraps a random-access dataset.
    pub fn from_map(ds: impl MapDataset) -> Self {
        Dataset::Map(Arc::new(ds))
    }

    /// Wraps a stream.
    #[allow(clippy::should_implement_trait)] // not an Iterator: builds a Dataset from a stream op
    pub fn from_iter(ds: impl IterDataset) -> Self {
        Dataset::Iter(Arc::new(ds))
    }

    /// The random-access view, if this dataset has one.
    pub fn as_map(&self) -> Option<&Arc<dyn MapDataset>> {
        match self {
            Dataset::Map(m) => Some(m),
            Dataset::Iter(_) => None,
        }
    }

    /// True when `len` and `get` are available.
    pub fn is_random_access(&self) -> bool {
        self.as_map().is_some()
    }

    /// Elements per epoch when known ([`INFINITE`] for endless random-access datasets).
    pub fn len(&self) -> Option<u64> {
        match self {
            Dataset::Map(m) => Some(m.len()),
            Dataset::Iter(i) => i.len(),
        }
    }

    /// True when the dataset is known to be empty.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// The random-access dataset, with each of `indices` checked against its length; an error
    /// for a stream or an index out of range.
    fn checked(&self, indices: &[u64]) -> Result<&Arc<dyn MapDataset>> {
        let m = self.as_map().ok_or_else(|| {
            Error::invalid(format!(
                "{} is a stream (no random access); index it before stream-only ops",
                self.name()
            ))
        })?;
        let len = m.len();
        match indices.iter().find(|&&i| i >= len) {
            Some(&index) => Err(Error::OutOfRange {
                index,
                len,
                what: m.name(),
            }),
            None => Ok(m),
        }
    }

    /// Element `index` of a random-access dataset; an error for streams and out-of-range indices.
    pub fn get(&self, index: u64) -> Result<Example> {
        self.checked(&[index])?.get(index)
    }

    /// Elements `indices` (each < len), stacked as `batch` stacks elements: through the
    /// dataset's batch path where it has one (the shard reader overlaps the records' misses), else
    /// element by element.
    pub fn get_batch(&self, indices: &[u64]) -> Result<Example> {
        let m = self.checked(indices)?;
        if let Some(batch) = m.get_batch(indices)? {
            return Ok(batch);
        }
        let elements = indices
            .iter()
            .map(|&i| m.get(i))
            .collect::<Result<Vec<_>>>()?;
        crate::example::stack_examples("get_batch", &elements)
    }

    /// Element `index` (< len) of epoch `epoch` of a finite random-access dataset: what
    /// `iter(epoch)` yields at that position (a shuffle's order of that epoch, say).
    pub fn get_in_epoch(&self, epoch: u64, index: u64) -> Result<Example> {
        let m = self.checked(&[index])?;
        let n = m.len();
        if n == INFINITE {
            return Err(Error::invalid(format!(
                "{} is endless: it has no epochs to index",
                m.name()
            )));
        }
        let at = epoch
            .checked_mul(n)
            .and_then(|base| base.checked_add(index))
            .ok_or_else(|| Error::invalid(format!("epoch {epoch} is past the index range")))?;
        m.get(at)
    }

    /// This op's description.
    pub fn name(&self) -> String {
        match self {
            Dataset::Map(m) => m.name(),
            Dataset::Iter(i) => i.name(),
        }
    }

    /// True when computing an element of this random-access op by index calls a function inside
    /// a scope its calls share ([`MapDataset::scoped`]: a Python map), in this op or an input
    /// up the chain of random-access ops. A stream input stops the search: its elements are
    /// computed where it runs (its own stage's threads), not by index.
    pub fn calls_in_scope(&self) -> bool {
        self.as_map()
            .is_some_and(|m| m.scoped() || m.parents().iter().any(Dataset::calls_in_scope))
    }

    /// This op's inputs.
    pub fn parents(&self) -> Vec<Dataset> {
        match self {
            Dataset::Map(m) => m.parents(),
            Dataset::Iter(i) => i.parents(),
        }
    }

    /// The pipeline as text, inputs first: `"range(10) -> shuffle(seed=1) -> batch(4)"`.
    pub fn describe(&self) -> String {
        self.describe_by(&|ds| Some(ds.name()))
    }

    /// The data the pipeline yields, as text: [`Dataset::describe`] without the execution
    /// stages (prefetch, parallelize, `with_options`: see [`IterDataset::data_name`]), so
    /// `range(10).prefetch(2).batch(4)` and `range(10).batch(4)` read the same.
    pub fn describe_data(&self) -> String {
        self.describe_by(&|ds| match ds {
            Dataset::Map(m) => Some(m.name()),
            Dataset::Iter(i) => i.data_name(),
        })
    }

    /// The pipeline as text, inputs first, each op named by `name`; an op it names `None` (with
    /// one input) is left out.
    fn describe_by(&self, name: &dyn Fn(&Dataset) -> Option<String>) -> String {
        let parents = self.parents();
        let me = match (name(self), &parents[..]) {
            (Some(me), _) => me,
            (None, [parent]) => return parent.describe_by(name),
            (None, _) => self.name(),
        };
        match parents.len() {
            0 => me,
            1 => format!("{} -> {me}", parents[0].describe_by(name)),
            _ => {
                let inner: Vec<_> = parents.iter().map(|p| p.describe_by(name)).collect();
                format!("[{}] -> {me}", inner.join(" | "))
            }
        }
    }

    /// A stable hash of [`Dataset::describe_data`], stored in checkpoints so that a state is
    /// never applied to another pipeline, and is applied to the same pipeline run another way
    /// (other prefetch depths, parallelism, cores, memory budget).
    pub fn fingerprint(&self) -> u64 {
        crate::rng::key(
            0x0005_707e_401d,
            &self
                .describe_data()
                .bytes()
                .map(u64::from)
                .collect::<Vec<_>>(),
        )
    }

    /// An iterator over epoch `epoch` (for a random-access dataset: indices
    /// `epoch * len .. (epoch + 1) * len`).
    pub fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        match self {
            Dataset::Map(m) => Ok(Box::new(MapIter::new(m.clone(), epoch)?)),
            Dataset::Iter(i) => i.iter(epoch),
        }
    }
}

/// Iterates a random-access dataset in index order. State: `{"pos": n}`.
pub struct MapIter {
    ds: Arc<dyn MapDataset>,
    start: u64,
    pos: u64,
    end: u64,
    hints: bool,
}

impl MapIter {
    /// Iterates epoch `epoch` of `ds`; an error naming the dataset when the epoch lies past
    /// the 64-bit index range (it would otherwise be silently empty).
    pub fn new(ds: Arc<dyn MapDataset>, epoch: u64) -> Result<Self> {
        let len = ds.len();
        let start = crate::checked::epoch_start(&ds.name(), epoch, len)?;
        let end = start.saturating_add(len);
        Ok(MapIter {
            hints: ds.prefetch_useful(),
            ds,
            start,
            pos: start,
            end,
        })
    }
}

impl DatasetIter for MapIter {
    fn next(&mut self) -> Result<Option<Example>> {
        if self.pos >= self.end {
            return Ok(None);
        }
        if self.hints {
            hint_ahead(&*self.ds, self.pos, self.end);
        }
        // Past the element before reading it: after a failed element the iterator continues
        // with the next one (what `ignore_errors` over a stream relies on), never re-raising it.
        let at = self.pos;
        self.pos += 1;
        Ok(Some(self.ds.get(at)?))
    }

    fn state(&self) -> Json {
        json!({ "pos": self.pos - self.start })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let pos = state_u64(state, "pos")?;
        if pos > self.end - self.start {
            return Err(Error::State(format!(
                "position {pos} past the end ({}) of {}",
                self.end - self.start,
                self.ds.name()
            )));
        }
        self.pos = self.start + pos;
        Ok(())
    }
}

/// Reads an unsigned integer field of a state object, or a clear state error.
pub fn state_u64(state: &Json, field: &str) -> Result<u64> {
    state
        .get(field)
        .and_then(Json::as_u64)
        .ok_or_else(|| Error::State(format!("missing integer field {field:?} in {state}")))
}

/// Reads a sub-state field of a state object, or a clear state error.
pub fn state_field<'a>(state: &'a Json, field: &str) -> Result<&'a Json> {
    state
        .get(field)
        .ok_or_else(|| Error::State(format!("missing field {field:?} in {state}")))
}

//! `map`: a function applied to every element. Keeps random access.

use std::sync::Arc;

use serde_json::Value as Json;

use crate::dataset::{Dataset, DatasetIter, IterDataset, MapDataset, INFINITE};
use crate::error::Result;
use crate::example::{restack, stack_examples, Example};

/// Where a function is being applied: the op and the element's index.
#[derive(Clone, Copy, Debug)]
pub struct Ctx<'a> {
    /// Op path of the function (`"map[decode]"`).
    pub op: &'a str,
    /// Global index of the element (continues across epochs for random-access inputs; the stream
    /// position for streams).
    pub index: u64,
    /// Epoch of the element (`index / len` for random-access inputs, the iterator's epoch for
    /// streams).
    pub epoch: u64,
}

/// A function from element to element.
pub type MapFn = Arc<dyn Fn(Example, &Ctx) -> Result<Example> + Send + Sync>;

/// A map function's batch form: given its input's elements stacked into one batch (`ctx` names
/// the batch's first element), the batch the elements mapped one by one would stack into, made
/// in one pass (a native op writing its output straight into the batch buffer, where the
/// element path allocates each element's output and the batch copies it again). `Ok(None)`:
/// not this batch (a ragged feature, an unexpected dtype): it is then mapped row by row, and
/// any error is the element path's, naming the element.
pub type BatchMapFn = Arc<dyn Fn(&Example, &Ctx) -> Result<Option<Example>> + Send + Sync>;

/// A scope a map function wants held across a run of its calls: called with the number of calls
/// and a body that makes them, it runs the body once, inside the scope. A Python function's scope
/// holds the GIL (and, where that is faster, has a stage's workers take turns, see the Python
/// bindings' `turns::Turns`),
/// so a run of elements takes and releases it once instead of once per element (each a
/// hand-off to any thread waiting for it). Only the function's calls run inside: the inputs
/// are read before, so nothing that may wait for another thread (a read, an upstream stage)
/// runs while the scope is held.
pub type ScopeFn = Arc<dyn Fn(usize, &mut dyn FnMut()) + Send + Sync>;

/// `map` over a random-access dataset.
pub struct MapMap {
    parent: Arc<dyn MapDataset>,
    f: MapFn,
    batch_f: Option<BatchMapFn>,
    scope: Option<ScopeFn>,
    label: String,
}

impl MapMap {
    /// Applies `f` (described as `label`) to `parent`.
    pub fn new(parent: Arc<dyn MapDataset>, f: MapFn, label: &str) -> Self {
        MapMap {
            parent,
            f,
            batch_f: None,
            scope: None,
            label: format!("map[{label}]"),
        }
    }

    /// The same map with a batch form of `f` (see [`BatchMapFn`]).
    pub fn with_batch_fn(mut self, batch_f: BatchMapFn) -> Self {
        self.batch_f = Some(batch_f);
        self
    }

    /// The same map, its runs of calls made inside `scope` (see [`ScopeFn`]).
    pub fn with_scope(mut self, scope: ScopeFn) -> Self {
        self.scope = Some(scope);
        self
    }
}

impl MapDataset for MapMap {
    fn len(&self) -> u64 {
        self.parent.len()
    }

    fn pass_len(&self) -> Option<u64> {
        self.parent.pass_len()
    }

    fn scoped(&self) -> bool {
        self.scope.is_some()
    }

    fn get(&self, index: u64) -> Result<Example> {
        let e = self.parent.get(index)?;
        self.in_scope(1, || self.apply(e, index))
    }

    /// The inputs first, then the function's calls, inside its scope when it has one.
    fn get_many(&self, indices: &[u64]) -> Vec<Result<Example>> {
        let inputs = self.parent.get_many(indices);
        self.in_scope(indices.len(), || {
            inputs
                .into_iter()
                .zip(indices)
                .map(|(e, &i)| e.and_then(|e| self.apply(e, i)))
                .collect()
        })
    }

    /// Over an input on storage (one whose reads prefetch hints help, as the shard reader's):
    /// the input's batch (its overlapped reads), cut into zero-copy row views, mapped, and
    /// stacked again; a feature the function leaves alone keeps the input's column
    /// ([`restack`]). So `map(f).batch(n)` builds no per-record example from the source and
    /// copies untouched features once, not twice.
    ///
    /// Over an in-memory input, `None`: the batch op then maps the input's elements, which are
    /// zero-copy views of its memory, and stacks the results once. Its batch path would copy
    /// every row first, a ragged clip in full, only for the function to replace it with a 3 s
    /// crop (that made shuffle -> random_crop -> batch over 400 cached clips 28x slower).
    ///
    /// A function with a batch form ([`BatchMapFn`]) maps the stacked input in one pass, over
    /// any input.
    fn get_batch(&self, indices: &[u64]) -> Result<Option<Example>> {
        if let (Some(batch_f), Some(&first)) = (&self.batch_f, indices.first()) {
            return self.map_batch(batch_f, indices, first).map(Some);
        }
        if !self.parent.prefetch_useful() {
            return Ok(None);
        }
        let Some(batch) = self.parent.get_batch(indices)? else {
            return Ok(None);
        };
        self.map_rows(&batch, indices).map(Some)
    }

    fn prefetch_useful(&self) -> bool {
        self.parent.prefetch_useful()
    }

    fn prefetch(&self, index: u64, hint: crate::dataset::Hint) {
        self.parent.prefetch(index, hint)
    }

    fn name(&self) -> String {
        self.label.clone()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![Dataset::Map(self.parent.clone())]
    }
}

impl MapMap {
    /// The context of element `index` of the input.
    fn ctx(&self, index: u64) -> Ctx<'_> {
        let len = self.parent.len();
        let epoch = if len == 0 || len == INFINITE {
            0
        } else {
            index / len
        };
        Ctx {
            op: &self.label,
            index,
            epoch,
        }
    }

    /// `f` applied to `e`, element `index` of the input.
    fn apply(&self, e: Example, index: u64) -> Result<Example> {
        (self.f)(e, &self.ctx(index))
    }

    /// `calls` (a run of `n` of the function's calls) inside the function's scope, if it has one.
    fn in_scope<T>(&self, n: usize, calls: impl FnOnce() -> T) -> T {
        let Some(scope) = &self.scope else {
            return calls();
        };
        let mut calls = Some(calls);
        let mut out = None;
        scope(n, &mut || out = calls.take().map(|c| c()));
        // A scope that did not run its body (it must) still gets the calls made.
        out.unwrap_or_else(|| calls.take().expect("the calls ran or are still here")())
    }

    /// Elements `indices` (the first is `first`) through `batch_f`: the input's batch (its own
    /// batch path, or its elements stacked), mapped in one pass; row by row where `batch_f`
    /// declines, and element by element where the input's elements do not stack.
    fn map_batch(&self, batch_f: &BatchMapFn, indices: &[u64], first: u64) -> Result<Example> {
        let input = match self.parent.get_batch(indices)? {
            Some(batch) => batch,
            None => {
                let elements = indices
                    .iter()
                    .map(|&i| self.parent.get(i))
                    .collect::<Result<Vec<_>>>()?;
                match stack_examples(&self.label, &elements) {
                    Ok(batch) => batch,
                    Err(_) => {
                        let rows = self.in_scope(elements.len(), || {
                            elements
                                .into_iter()
                                .zip(indices)
                                .map(|(e, &i)| self.apply(e, i))
                                .collect::<Result<Vec<_>>>()
                        })?;
                        return stack_examples("batch", &rows);
                    }
                }
            }
        };
        match batch_f(&input, &self.ctx(first))? {
            Some(out) => Ok(out),
            None => self.map_rows(&input, indices),
        }
    }

    /// `batch` (the input's elements `indices`, stacked) mapped row by row (zero-copy row
    /// views) and stacked again, reusing the columns the function leaves alone ([`restack`]).
    fn map_rows(&self, batch: &Example, indices: &[u64]) -> Result<Example> {
        let rows = self.in_scope(indices.len(), || {
            indices
                .iter()
                .enumerate()
                .map(|(k, &index)| self.apply(batch.row(k)?, index))
                .collect::<Result<Vec<_>>>()
        })?;
        // A failure to stack is the batch's, as on the element path ("batch: feature ...").
        restack("batch", batch, &rows)
    }
}

/// `map` over a stream.
pub struct IterMap {
    parent: Dataset,
    f: MapFn,
    label: String,
}

impl IterMap {
    /// Applies `f` to every element of the stream `parent`.
    pub fn new(parent: Dataset, f: MapFn, label: &str) -> Self {
        IterMap {
            parent,
            f,
            label: format!("map[{label}]"),
        }
    }
}

impl IterDataset for IterMap {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(IterMapIter {
            inner: self.parent.iter(epoch)?,
            f: self.f.clone(),
            label: self.label.clone(),
            epoch,
            count: 0,
        }))
    }

    fn name(&self) -> String {
        self.label.clone()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn len(&self) -> Option<u64> {
        self.parent.len()
    }
}

struct IterMapIter {
    inner: Box<dyn DatasetIter>,
    f: MapFn,
    label: String,
    epoch: u64,
    count: u64,
}

impl DatasetIter for IterMapIter {
    fn next(&mut self) -> Result<Option<Example>> {
        let Some(e) = self.inner.next()? else {
            return Ok(None);
        };
        let ctx = Ctx {
            op: &self.label,
            index: self.count,
            epoch: self.epoch,
        };
        self.count += 1;
        (self.f)(e, &ctx).map(Some)
    }

    fn state(&self) -> Json {
        serde_json::json!({ "count": self.count, "inner": self.inner.state() })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        self.count = crate::dataset::state_u64(state, "count")?;
        self.inner
            .set_state(crate::dataset::state_field(state, "inner")?)
    }
}

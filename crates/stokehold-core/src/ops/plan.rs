//! Plan semantics: execution stages, hoisting them over `repeat`, and the epoch loader.
//!
//! An *execution stage* is an op that changes how its input is computed, not what it yields: a
//! `prefetch(n)`, or a deterministic `parallelize(par)` without a map function. Each reports
//! itself through [`IterDataset::stage`](crate::IterDataset::stage). A pipeline that is a
//! random-access *base* followed only by stages can therefore be taken apart
//! ([`Dataset::peel_stages`]) and rebuilt over something derived from the base:
//! * `ds.prefetch(n).repeat(k)` is built as `ds.repeat(k).prefetch(n)` (the same elements), so
//!   one prefetch thread (or one parallel stage) flows through every repetition instead of
//!   restarting at each one;
//! * [`Dataset::epochs`] runs epochs `start..start + count` of the base back to back as one
//!   random-access range ([`EpochRange`]) under the same stages, through one iterator, and cuts it
//!   into epochs again ([`Epochs`]): the first element of epoch k+1 is ready when the last of
//!   epoch k is consumed.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{Dataset, MapDataset, INFINITE};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::exec::options::WithOptions;
use crate::exec::prefetch::Prefetch;
use crate::ops::parallel_map::ParallelMap;
use crate::state::PipelineIter;

pub use crate::dataset::{Stage, StageKind};

impl StageKind {
    /// This stage over `input`.
    pub fn apply(&self, input: &Dataset) -> Dataset {
        match self {
            StageKind::Prefetch { depth } => {
                Dataset::from_iter(Prefetch::with_depth(input.clone(), *depth))
            }
            StageKind::Parallelize { par, slot } => Dataset::from_iter(
                ParallelMap::new(input.clone(), None, "input", *par, true).sharing(slot.clone()),
            ),
            StageKind::Options { exec } => WithOptions::on(input, exec.clone()),
        }
    }

    /// This stage over an [`EpochRange`] of the epochs loader: as [`StageKind::apply`], but a
    /// prefetch does not run on past the range's end (no iterator of a later "epoch" of the
    /// range ever comes: see the warm next epoch in [`crate::exec::prefetch`]).
    fn apply_to_range(&self, input: &Dataset) -> Dataset {
        match self {
            StageKind::Prefetch { depth } => {
                Dataset::from_iter(Prefetch::with_depth(input.clone(), *depth).cold())
            }
            StageKind::Parallelize { .. } | StageKind::Options { .. } => self.apply(input),
        }
    }

    fn is_prefetch(&self) -> bool {
        matches!(self, StageKind::Prefetch { .. })
    }
}

/// Applies `stages` (innermost first) to `input`.
pub fn apply_stages(input: &Dataset, stages: &[StageKind]) -> Dataset {
    stages.iter().fold(input.clone(), |ds, st| st.apply(&ds))
}

/// Applies `stages` to the epochs loader's range (see [`StageKind::apply_to_range`]).
fn apply_range_stages(input: &Dataset, stages: &[StageKind]) -> Dataset {
    stages
        .iter()
        .fold(input.clone(), |ds, st| st.apply_to_range(&ds))
}

impl Dataset {
    /// This pipeline as a random-access base and the execution stages on top of it (innermost
    /// first): `(self, [])` for a random-access dataset, `None` for a stream that is not only
    /// stages over a random-access base (a filter, a buffer shuffle, a parallel map with a
    /// function...).
    pub fn peel_stages(&self) -> Option<(Dataset, Vec<StageKind>)> {
        let mut stages = Vec::new();
        let mut cur = self.clone();
        loop {
            match &cur {
                Dataset::Map(_) => {
                    stages.reverse();
                    return Some((cur, stages));
                }
                Dataset::Iter(i) => {
                    let st = i.stage()?;
                    stages.push(st.kind);
                    cur = st.parent;
                }
            }
        }
    }

    /// `op` built over this pipeline's random-access base, with the execution stages on top of
    /// it re-applied over the result, when this pipeline is such stages over a base and `op`
    /// keeps random access: `ds.map(f).parallelize(4).batch(8)` is built as
    /// `ds.map(f).batch(8).parallelize(4)` (the same elements; the workers build whole batches),
    /// `ds.prefetch(2).map(g)` as `ds.map(g).prefetch(2)`. So execution stages never turn a
    /// random-access pipeline into a stream, and a checkpoint reads the same with or without
    /// them. Every op that keeps random access builds itself through this; otherwise `op(self)`.
    pub(crate) fn try_on_base(&self, op: impl Fn(&Dataset) -> Result<Dataset>) -> Result<Dataset> {
        if let Dataset::Iter(_) = self {
            if let Some((base, stages)) = self.peel_stages() {
                let out = op(&base)?;
                if out.is_random_access() {
                    return Ok(apply_stages(&out, &stages));
                }
            }
        }
        op(self)
    }

    /// [`Dataset::try_on_base`] for an op that cannot fail.
    pub(crate) fn on_base(&self, op: impl Fn(&Dataset) -> Dataset) -> Dataset {
        match self.try_on_base(|ds| Ok(op(ds))) {
            Ok(ds) => ds,
            Err(_) => unreachable!("op cannot fail"),
        }
    }

    /// Epochs `start .. start + count` (endless for `None`) of this finite random-access
    /// pipeline through one iterator, cut into epochs by [`Epochs`]. Trailing execution stages
    /// are peeled off, the epochs run over the random-access base ([`EpochRange`]) and the stages
    /// are re-applied on top. `buffer_size` replaces the prefetch stages by one prefetch of that
    /// depth at the end; without it a pipeline with no prefetch stage gets a prefetch of depth
    /// 2, so the next epoch's first element is computed while the last one's is consumed.
    pub fn epochs(
        &self,
        start: u64,
        count: Option<u64>,
        buffer_size: Option<usize>,
    ) -> Result<Epochs> {
        let (base, mut stages) = self.peel_stages().ok_or_else(|| {
            Error::invalid(format!(
                "epochs() needs a random-access pipeline, and {} is a stream",
                self.describe()
            ))
        })?;
        let m = base
            .as_map()
            .expect("peel_stages returns a random-access base");
        let per_epoch = m.len();
        if per_epoch == INFINITE {
            return Err(Error::invalid(format!(
                "epochs() needs a finite dataset (no repeat()), and {} is endless",
                self.describe()
            )));
        }
        match buffer_size {
            Some(0) => return Err(Error::invalid("epochs(): buffer_size must be > 0")),
            Some(depth) => {
                stages.retain(|s| !s.is_prefetch());
                stages.push(StageKind::Prefetch { depth: Some(depth) });
            }
            None if !stages.iter().any(StageKind::is_prefetch) => {
                stages.push(StageKind::Prefetch { depth: Some(2) });
            }
            None => {}
        }
        let range = Dataset::from_map(EpochRange::new(m.clone(), start, count)?);
        Ok(Epochs {
            pipeline: apply_range_stages(&range, &stages),
            base: m.clone(),
            stages,
            it: None,
            start,
            count,
            end: count.map(|c| start.saturating_add(c)),
            per_epoch,
            next: start,
            current: None,
            resume_taken: 0,
            deferred: None,
        })
    }
}

/// Whole epochs of a finite random-access dataset back to back: element `i` is the parent's
/// global index `start * len + i` (element `i % len` of epoch `start + i / len`), for `count`
/// epochs or forever.
pub struct EpochRange {
    parent: Arc<dyn MapDataset>,
    start: u64,
    len: u64,
}

impl EpochRange {
    /// Epochs `start .. start + count` of `parent` (endless for `None`); an error for an endless
    /// parent.
    pub fn new(parent: Arc<dyn MapDataset>, start: u64, count: Option<u64>) -> Result<Self> {
        let n = parent.len();
        if n == INFINITE {
            return Err(Error::invalid(format!(
                "epochs() needs a finite dataset (no repeat()), and {} is endless",
                parent.name()
            )));
        }
        let op = "epochs()";
        let len = match count {
            None => INFINITE,
            Some(c) => crate::checked::mul(op, "the epochs' total length", n, c)?,
        };
        let start = crate::checked::mul(op, format_args!("the start of epoch {start}"), start, n)?;
        if len != INFINITE {
            crate::checked::add(op, "the last epoch's end", start, len)?;
        }
        Ok(EpochRange { start, len, parent })
    }
}

impl EpochRange {
    /// The parent's global index of element `index`, checked (an endless range may run past
    /// the 64-bit index range).
    fn at(&self, index: u64) -> Result<u64> {
        crate::checked::add("epochs()", "the global index", self.start, index)
    }
}

impl MapDataset for EpochRange {
    fn len(&self) -> u64 {
        self.len
    }

    fn get(&self, index: u64) -> Result<Example> {
        self.parent.get(self.at(index)?)
    }

    fn get_batch(&self, indices: &[u64]) -> Result<Option<Example>> {
        let moved = indices
            .iter()
            .map(|&i| self.at(i))
            .collect::<Result<Vec<u64>>>()?;
        self.parent.get_batch(&moved)
    }

    fn prefetch_useful(&self) -> bool {
        self.parent.prefetch_useful()
    }

    fn batch_pads(&self) -> bool {
        self.parent.batch_pads()
    }

    fn prefetch(&self, index: u64, hint: crate::dataset::Hint) {
        self.parent.prefetch(self.start.saturating_add(index), hint)
    }

    fn name(&self) -> String {
        format!("epochs(start_index={}, len={})", self.start, self.len)
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![Dataset::Map(self.parent.clone())]
    }
}

/// The epoch in progress.
struct Current {
    epoch: u64,
    /// Elements this epoch yields (all of them, or the rest for the epoch a loader resumes in).
    len: u64,
    /// Elements still to come.
    left: u64,
}

/// `format` of an [`Epochs::state`].
pub const EPOCHS_STATE_FORMAT: &str = "stokehold-epochs";

/// Epochs from one iterator (see [`Dataset::epochs`]), single pass, with a flat API that binds
/// easily: [`Epochs::next_epoch`] starts the next epoch (skipping what is left of the current
/// one), [`Epochs::next`] yields its elements, exactly [`Epochs::per_epoch`] of them each.
///
/// [`Epochs::state`] / [`Epochs::set_state`] checkpoint it: the state names the epoch in
/// progress, the elements of it already yielded, and the iterator's exact position. A new loader
/// of the same pipeline and arguments, given that state before it starts, yields first the rest
/// of that epoch, then the following epochs: exactly what the interrupted run had still to yield,
/// unless it abandoned an epoch part-way (which a restored loader does not know, and finishes).
///
/// **Errors** follow the iterator rule (see [`crate::state`]): the error is raised once and the
/// epoch it was raised in ends there ([`Epochs::next`] returns `None`, so that epoch yields fewer
/// than [`Epochs::per_epoch`] elements). The next [`Epochs::next_epoch`] starts the following
/// epoch whole, on a new iterator built at its first element, so one bad element never empties
/// the later epochs. Elements to be left out instead need `ignore_errors()` or `on_error="skip"`.
pub struct Epochs {
    pipeline: Dataset,
    /// The random-access base and the stages over it, to start again at a later epoch after an
    /// error ended the iterator.
    base: Arc<dyn MapDataset>,
    stages: Vec<StageKind>,
    it: Option<PipelineIter>,
    start: u64,
    count: Option<u64>,
    end: Option<u64>,
    per_epoch: u64,
    /// The epoch `next_epoch` starts next.
    next: u64,
    current: Option<Current>,
    /// Elements of epoch `next` yielded before a saved state (0 unless restored).
    resume_taken: u64,
    /// An error [`Epochs::next_many`] met after elements it returned: raised by the next call.
    deferred: Option<Error>,
}

impl Epochs {
    /// The pipeline the loader iterates (the epoch range under the stages).
    pub fn pipeline(&self) -> &Dataset {
        &self.pipeline
    }

    /// Elements in each epoch (the base's length).
    pub fn per_epoch(&self) -> u64 {
        self.per_epoch
    }

    /// Epochs still to start, `None` for an endless loader.
    pub fn epochs_left(&self) -> Option<u64> {
        self.end.map(|e| e.saturating_sub(self.next))
    }

    /// Elements the current epoch yields in all (0 before the first `next_epoch`): `per_epoch`,
    /// or the rest of it for the epoch a restored loader resumes in.
    pub fn epoch_len(&self) -> u64 {
        self.current.as_ref().map_or(0, |c| c.len)
    }

    /// Elements of the current epoch still to come (0 before the first `next_epoch`).
    pub fn remaining_in_epoch(&self) -> u64 {
        self.current.as_ref().map_or(0, |c| c.left)
    }

    /// The current epoch's number, `None` before the first `next_epoch` and after the last.
    pub fn current_epoch(&self) -> Option<u64> {
        self.current.as_ref().map(|c| c.epoch)
    }

    fn iter(&mut self) -> Result<&mut PipelineIter> {
        if self.it.is_none() {
            let it = if self.next == self.start {
                PipelineIter::new(self.pipeline.clone(), 0)?
            } else {
                // After an error (or restored from a state saved then): the epochs from `next`.
                let count = self.end.map(|end| end - self.next);
                let range = EpochRange::new(self.base.clone(), self.next, count)?;
                let ds = apply_range_stages(&Dataset::from_map(range), &self.stages);
                PipelineIter::new(ds, 0)?
            };
            self.it = Some(it);
        }
        Ok(self.it.as_mut().expect("just made"))
    }

    /// Ends the current epoch after `e`, dropping the iterator it ended (see the type's docs).
    /// An error from the iterator: an element's error the iterator went past (see
    /// [`crate::state`]) takes that element's place in the epoch, which goes on; any other error
    /// ends the epoch (the next one starts whole, on a new iterator).
    fn fail(&mut self, e: Error) -> Error {
        let went_on = self.it.as_ref().is_some_and(|it| !it.failed());
        if went_on && crate::skip::skippable(&e) {
            if let Some(cur) = &mut self.current {
                cur.left = cur.left.saturating_sub(1);
            }
            return e;
        }
        if !matches!(e, Error::Interrupted(_)) {
            if let Some(cur) = &mut self.current {
                cur.left = 0;
            }
            self.it = None;
            self.resume_taken = 0;
        }
        e
    }

    /// Starts the next epoch and returns its number, after skipping what is left of the current
    /// one; `None` when all `count` epochs have been started.
    pub fn next_epoch(&mut self) -> Result<Option<u64>> {
        if let Some(cur) = &mut self.current {
            if let Some(it) = &mut self.it {
                while cur.left > 0 {
                    match it.next() {
                        Ok(Some(_)) => cur.left -= 1,
                        Ok(None) => break,
                        Err(e) => return Err(self.fail(e)),
                    }
                }
            }
            self.current = None;
        }
        if self.end.is_some_and(|end| self.next >= end) {
            return Ok(None);
        }
        self.iter()?;
        let len = self.per_epoch - self.resume_taken;
        let epoch = self.next;
        self.current = Some(Current {
            epoch,
            len,
            left: len,
        });
        self.resume_taken = 0;
        self.next += 1;
        Ok(Some(epoch))
    }

    /// The next element of the current epoch; `None` at its end (or before the first
    /// `next_epoch`).
    #[allow(clippy::should_implement_trait)] // fallible; mirrors DatasetIter::next
    pub fn next(&mut self) -> Result<Option<Example>> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        let (Some(cur), Some(it)) = (&mut self.current, &mut self.it) else {
            return Ok(None);
        };
        if cur.left == 0 {
            return Ok(None);
        }
        match it.next() {
            Ok(item) => {
                if item.is_some() {
                    cur.left -= 1;
                }
                Ok(item)
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Up to `n` more elements of the current epoch; an error after some elements is raised by
    /// the next call (as [`PipelineIter::next_many`] does).
    pub fn next_many(&mut self, n: usize) -> Result<Vec<Example>> {
        // An interrupt after some elements goes back to here (see `PipelineIter::next_many`).
        let before = self.it.as_ref().map(PipelineIter::position);
        let left = self.current.as_ref().map(|c| c.left);
        let mut deferred = None;
        let r = crate::state::take_deferring(n, &mut deferred, || self.next());
        self.deferred = deferred;
        match r {
            Err(t) if t.taken > 0 => {
                if let (Some(it), Some(before)) = (&mut self.it, &before) {
                    it.rewind(before)?;
                }
                if let (Some(cur), Some(left)) = (&mut self.current, left) {
                    cur.left = left;
                }
                Err(t.error)
            }
            r => r.map_err(|t| t.error),
        }
    }

    /// The position: `{"format": "stokehold-epochs", "version": 1, "start", "count",
    /// "per_epoch", "epoch", "taken", "iter"}`, `iter` being the iterator's
    /// [`PipelineIter::state`] (`null` before it started).
    pub fn state(&self) -> Json {
        let (epoch, taken) = match &self.current {
            Some(c) if c.left > 0 => (c.epoch, self.per_epoch - c.left),
            _ => (self.next, self.resume_taken),
        };
        json!({
            "format": EPOCHS_STATE_FORMAT,
            "version": 1,
            "start": self.start,
            "count": self.count,
            "per_epoch": self.per_epoch,
            "epoch": epoch,
            "taken": taken,
            "iter": self.it.as_ref().map(|it| it.state()),
        })
    }

    /// Moves a loader that has not started to a position from [`Epochs::state`] of a loader of
    /// the same pipeline and arguments; [`Error::State`] otherwise.
    pub fn set_state(&mut self, state: &Json) -> Result<()> {
        if state.get("format").and_then(Json::as_str) != Some(EPOCHS_STATE_FORMAT)
            || state.get("version").and_then(Json::as_u64) != Some(1)
        {
            return Err(Error::State(
                "not an epochs() loader state (format stokehold-epochs, version 1)".into(),
            ));
        }
        if self.it.is_some() || self.current.is_some() {
            return Err(Error::State(
                "set_state() on a loader that has started; make a new one".into(),
            ));
        }
        let mine = [json!(self.start), json!(self.count), json!(self.per_epoch)];
        let theirs =
            ["start", "count", "per_epoch"].map(|k| state.get(k).cloned().unwrap_or(Json::Null));
        if mine != theirs {
            return Err(Error::State(format!(
                "this state is of epochs(start, count, len) = {}, this loader {}",
                py_tuple(&theirs),
                py_tuple(&mine)
            )));
        }
        let int = |k: &str| -> Result<i128> {
            let v = state.get(k);
            v.and_then(Json::as_u64)
                .map(i128::from)
                .or_else(|| v.and_then(Json::as_i64).map(i128::from))
                .ok_or_else(|| Error::State(format!("missing integer field {k:?} in {state}")))
        };
        let (epoch, taken) = (int("epoch")?, int("taken")?);
        let inside = i128::from(self.start) <= epoch
            && !matches!(self.end, Some(end) if epoch > i128::from(end))
            && (0..=i128::from(self.per_epoch)).contains(&taken);
        if !inside {
            return Err(Error::State(format!(
                "epoch {epoch} / taken {taken} lies outside this loader"
            )));
        }
        match state.get("iter") {
            None | Some(Json::Null) => {}
            Some(it) => {
                let mut fresh = PipelineIter::new(self.pipeline.clone(), 0)?;
                fresh.set_state(it)?;
                self.it = Some(fresh);
            }
        }
        // In range: epoch >= start >= 0 and taken <= per_epoch.
        (self.next, self.resume_taken) = (epoch as u64, taken as u64);
        Ok(())
    }
}

/// A tuple of JSON values as Python prints it (the loader's errors read as they did when the
/// loader was written in Python).
fn py_tuple(items: &[Json]) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|v| match v {
            Json::Null => "None".into(),
            Json::Bool(true) => "True".into(),
            Json::Bool(false) => "False".into(),
            Json::String(s) => format!("'{s}'"),
            other => other.to_string(),
        })
        .collect();
    format!("({})", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Parallelism;

    #[test]
    fn tuples_print_as_python_prints_them() {
        let items = [json!(0), Json::Null, json!(10), json!("a"), json!(true)];
        assert_eq!(py_tuple(&items), "(0, None, 10, 'a', True)");
    }

    #[test]
    fn peel_stops_at_the_first_op_that_is_not_a_stage() {
        let base = Dataset::range(5).shuffle(1);
        let ds = base
            .parallelize(Parallelism::Fixed(2), true)
            .prefetch(4)
            .unwrap();
        let (b, stages) = ds.peel_stages().unwrap();
        assert_eq!(b.describe(), base.describe());
        assert!(matches!(
            stages.as_slice(),
            [
                StageKind::Parallelize { .. },
                StageKind::Prefetch { depth: Some(4) }
            ]
        ));
        assert_eq!(apply_stages(&b, &stages).describe(), ds.describe());
        assert!(ds.shuffle_buffer(2, 0).unwrap().peel_stages().is_none());
        let (b, stages) = base.peel_stages().unwrap();
        assert!(stages.is_empty() && b.is_random_access());
    }

    #[test]
    fn random_access_ops_are_built_under_the_stages() {
        let base = Dataset::range(10).shuffle(1);
        let staged = base
            .parallelize(Parallelism::Fixed(2), true)
            .prefetch(3)
            .unwrap()
            .with_options(crate::ExecOptions::default());
        let ds = staged.batch(4, false).unwrap().take(2).skip(1);
        let (b, stages) = ds.peel_stages().unwrap();
        assert_eq!(
            b.describe(),
            base.batch(4, false).unwrap().take(2).skip(1).describe()
        );
        assert!(matches!(
            stages.as_slice(),
            [
                StageKind::Parallelize { .. },
                StageKind::Prefetch { depth: Some(3) },
                StageKind::Options { .. }
            ]
        ));
        // The data fingerprint leaves the stages out.
        assert_eq!(ds.describe_data(), b.describe());
        assert_eq!(ds.fingerprint(), b.fingerprint());
        // An op that makes a stream goes on top of the stages.
        let f = ds.filter("all", crate::ops::filter_fn(|_, _| Ok(true)));
        assert!(f.peel_stages().is_none());
        assert_eq!(
            f.describe_data(),
            "range(10) -> shuffle(seed=1) -> batch(4, drop_remainder=false) -> take(2) -> skip(1) \
             -> filter[all]"
        );
    }
}

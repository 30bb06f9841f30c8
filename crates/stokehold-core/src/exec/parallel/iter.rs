//! The consumer side of a parallel stage ([`ParallelIter`]): starts the workers, takes elements
//! from the reorder buffer in order (or as completed), computes them itself when the stage is
//! inline, lets AUTOTUNE retune the worker count, and saves and restores the checkpoint.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use serde_json::{json, Value as Json};

use super::reorder::{Item, Ready};
use super::shared::{end_handoff, Shared, Source, St, StreamInput};
use super::worker::{claim, has_room, limit, run, worker};
use crate::dataset::{state_field, state_u64, Dataset, DatasetIter, MapDataset, INFINITE};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::exec::autotune::Tuner;
use crate::exec::executor::{Executor, Reservation};
use crate::exec::parallelism::{Parallelism, INLINE};
use crate::exec::stats::OpStats;
use crate::ops::map::MapFn;

/// The stats row of a stage: a parallel map is named by its function (its label); a
/// `parallelize` by the last ops it runs on its workers (`parallelize[map[load] -> batch(64)]`),
/// so the table says whose work the row measures.
fn stats_row(spec: &StageSpec, parent: &Dataset, maps: bool) -> String {
    if maps {
        return spec.label.clone();
    }
    let chain = parent.describe();
    let ops: Vec<&str> = chain.rsplit(" -> ").take(2).collect();
    let ops: Vec<&str> = ops.into_iter().rev().collect();
    format!("parallelize[{}]", ops.join(" -> "))
}

/// Settings of one parallel stage.
#[derive(Clone)]
pub(crate) struct StageSpec {
    pub label: String,
    pub par: Parallelism,
    pub ordered: bool,
    /// The stage's input calls a function in a shared scope (a Python map): AUTOTUNE starts
    /// inline ([`Tuner::scoped`]).
    pub scoped: bool,
}

/// The consumer side of a parallel stage.
pub(crate) struct ParallelIter {
    pub(super) spec: StageSpec,
    pub(super) parent: Dataset,
    pub(super) f: Option<MapFn>,
    pub(super) epoch: u64,
    pub(super) exec: Executor,
    pub(super) stats: Arc<OpStats>,
    pub(super) shared: Arc<Shared>,
    pub(super) tuner: Option<Tuner>,
    pub(super) pid: u32,
    /// Whether the first element taken marked the op's row ([`OpStats::taken`]): once per
    /// iterator, not a read of the shared row per element.
    pub(super) marked: bool,
}

pub(super) fn window_for(p: usize) -> usize {
    2 * p + 2
}

impl ParallelIter {
    /// A stage over `parent` (mapped by `f` when given) for epoch `epoch`.
    pub(crate) fn new(
        spec: StageSpec,
        parent: Dataset,
        f: Option<MapFn>,
        epoch: u64,
    ) -> Result<Self> {
        let exec = Executor::current_or_default();
        let stats = exec.op_stats(&stats_row(&spec, &parent, f.is_some()));
        let mut tuner = match spec.par {
            Parallelism::Autotune => Some(Tuner::new(&exec, &stats).scoped(spec.scoped)),
            Parallelism::Fixed(_) => None,
        };
        let shared = build(
            &spec,
            &parent,
            &f,
            epoch,
            &exec,
            &stats,
            0,
            BTreeSet::new(),
            None,
        )?;
        // AUTOTUNE starts where an earlier iterator of this op settled, or on its unjudged trial.
        // The shape goes into the stats once, where the stage starts: the op's stats outlive
        // its iterators, and a report read meanwhile (the last epoch's, while a warm epoch
        // starts) showed AUTOTUNE's provisional one worker.
        {
            let mut st = shared.lock();
            if let Some(t) = tuner.as_mut() {
                st.target = t.start(&exec, &stats);
                st.window = window_for(st.target);
            }
            stats.set_shape(st.target, limit(&st));
        }
        Ok(ParallelIter {
            spec,
            parent,
            f,
            epoch,
            exec,
            stats,
            shared,
            tuner,
            pid: crate::exec::pid(),
            marked: false,
        })
    }

    pub(super) fn start(&self, st: &mut St) -> Result<()> {
        while st.spawned < st.target {
            let sh = self.shared.clone();
            let id = st.spawned;
            st.spawned += 1;
            st.live += 1;
            if let Err(e) = self.exec.spawn(move || worker(sh, id)) {
                st.live -= 1;
                return Err(e);
            }
        }
        Ok(())
    }

    fn take(&self, st: &mut St) -> Option<(u64, Item)> {
        let (seq, item) = if self.shared.ordered {
            let low = st.low;
            (low, st.ready.remove(low)?)
        } else {
            st.ready.pop_first()?
        };
        st.took = true;
        end_handoff(st);
        if seq == st.low {
            st.low += 1;
            loop {
                let l = st.low;
                if !st.ahead.remove(&l) {
                    break;
                }
                st.low += 1;
            }
            let low = st.low;
            st.ready.advance(low);
            if !st.states.is_empty() {
                st.states = st.states.split_off(&low);
            }
        } else {
            st.ahead.insert(seq);
        }
        Some((seq, item))
    }

    /// Marks the op's row as the consumer's when this iterator's consumer is the pipeline's
    /// (see [`OpStats::taken`]); once.
    fn mark_taken(&mut self) {
        if !self.marked {
            self.marked = true;
            self.stats.taken();
        }
    }

    /// Lets AUTOTUNE look at the stage, now at parallelism `p`, after an element.
    fn retune(&mut self, p: usize) -> Result<()> {
        let Some(tuner) = self.tuner.as_mut() else {
            return Ok(());
        };
        if let Some(np) = tuner.tick(&self.exec, &self.stats, p) {
            let mut st = self.shared.lock();
            st.target = np;
            st.window = window_for(np);
            self.stats.set_shape(np, limit(&st));
            self.shared.cv_in.notify_all();
            self.start(&mut st)?;
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn build(
    spec: &StageSpec,
    parent: &Dataset,
    f: &Option<MapFn>,
    epoch: u64,
    exec: &Executor,
    stats: &Arc<OpStats>,
    low: u64,
    ahead: BTreeSet<u64>,
    inner_state: Option<&Json>,
) -> Result<Arc<Shared>> {
    let mut states = BTreeMap::new();
    let (source, end) = match parent {
        Dataset::Map(m) => {
            let len = m.len();
            let start = crate::checked::epoch_start(&spec.label, epoch, len)?;
            let end = (len != INFINITE).then_some(len);
            let ds: Arc<dyn MapDataset> = match f {
                Some(f) => Arc::new(crate::ops::map::MapMap::new(
                    m.clone(),
                    f.clone(),
                    &spec.label,
                )),
                None => m.clone(),
            };
            (Source::Index { ds, start }, end)
        }
        Dataset::Iter(_) => {
            let mut it = exec.enter(|| parent.iter(epoch))?;
            if let Some(s) = inner_state {
                exec.enter(|| it.set_state(s))?;
            }
            states.insert(low, it.state());
            let input = Mutex::new(StreamInput {
                it,
                next_seq: low,
                done: false,
            });
            (
                Source::Stream {
                    input,
                    f: f.clone(),
                    epoch,
                },
                None,
            )
        }
    };
    let p = match spec.par {
        Parallelism::Fixed(n) => n.max(1),
        Parallelism::Autotune => 1,
    };
    // An earlier iterator of the op (the previous epoch) measured its elements: start from
    // that, so that a new epoch does not compute its first element alone (with three batches
    // to an epoch and two workers, that first one ran alone every epoch).
    let (est_bytes, est_ns) = stats.means().unwrap_or((0, 0));
    let st = St {
        next_claim: low,
        skip: ahead.clone(),
        ready: Ready::starting_at(low),
        in_flight: 0,
        end,
        low,
        ahead,
        states,
        target: p,
        spawned: 0,
        live: 0,
        window: window_for(p),
        est_bytes,
        est_ns,
        idle: 0,
        claimed: false,
        first: None,
        waiting: false,
        took: false,
        handoff: false,
        stop: false,
    };
    Ok(Arc::new(Shared {
        label: spec.label.clone(),
        source,
        st: Mutex::new(st),
        cv_out: Condvar::new(),
        cv_in: Condvar::new(),
        stats: stats.clone(),
        exec: exec.clone(),
        held: Reservation::new(Some(exec.clone())),
        ordered: spec.ordered,
        scoped: spec.scoped,
    }))
}

impl Drop for ParallelIter {
    fn drop(&mut self) {
        stop(&self.shared);
        if let Some(t) = self.tuner.as_mut() {
            t.finish(&self.exec, &self.stats);
        }
    }
}

fn stop(sh: &Shared) {
    let mut st = sh.lock();
    st.stop = true;
    end_handoff(&mut st);
    let held = st.ready.clear();
    sh.held.release(held);
    sh.cv_in.notify_all();
    sh.cv_out.notify_all();
}

impl DatasetIter for ParallelIter {
    fn next(&mut self) -> Result<Option<Example>> {
        if self.pid != crate::exec::pid() {
            return Err(Error::Cancelled(format!(
                "{}: this iterator was started in process {} and its workers did not survive \
                 fork(); create a new iterator in this process",
                self.spec.label, self.pid
            )));
        }
        let sh = self.shared.clone();
        let mut st = sh.lock();
        if st.spawned == 0 {
            self.start(&mut st)?;
        }
        // The clock is read only once the consumer finds nothing ready (a read per element was
        // 2.6 % of an inline Python map's samples, whose consumer finds 63 of 64 ready).
        let mut waited: Option<Instant> = None;
        let mut wake_in = false;
        let out = loop {
            if let Some((_, item)) = self.take(&mut st) {
                sh.held.release(item.bytes);
                self.stats.produced(item.bytes, st.ready.len());
                wake_in = st.idle > 0 && has_room(&st);
                break Some(item.res);
            }
            if st.end.is_some_and(|e| st.low >= e) {
                break None;
            }
            waited.get_or_insert_with(Instant::now);
            if st.target == INLINE && st.in_flight == 0 {
                // Inline: the consumer computes the next element itself (no worker, no hand-off).
                let Some(claimed) = claim(&sh, st) else {
                    st = sh.lock();
                    if st.end.is_some_and(|e| st.low >= e) {
                        continue;
                    }
                    return Err(Error::Panic {
                        op: self.spec.label.clone(),
                        message: "inline: no element left to compute before the end".into(),
                    });
                };
                run(&sh, claimed, false);
                st = sh.lock();
                continue;
            }
            if st.live == 0 {
                return Err(Error::Panic {
                    op: self.spec.label.clone(),
                    message: "every worker ended before the input did".into(),
                });
            }
            st.waiting = true;
            let woken = crate::exec::interrupt::wait(&sh.cv_out, st, || sh.lock());
            st = woken.inspect_err(|_| {
                // Interrupted: the consumer may not come back for its element.
                let mut st = sh.lock();
                st.waiting = false;
                end_handoff(&mut st);
            })?;
            st.waiting = false;
        };
        let target = st.target;
        drop(st);
        if wake_in {
            // After the lock is let go, as a worker wakes the consumer (see `run`).
            sh.cv_in.notify_all();
        }
        self.mark_taken();
        if let Some(t0) = waited {
            self.stats.add_consumer_wait(t0);
            self.exec.trace().span("wait", &self.stats.name, t0);
        }
        match out {
            None => Ok(None),
            Some(r) => {
                self.retune(target)?;
                r.map(Some)
            }
        }
    }

    /// What is ready, in order, under one lock; [`next`](Self::next) (which waits, or computes
    /// inline) when nothing is. A batch of 64 cheap elements from an inline Python map took 64
    /// locks, budget updates and looks at AUTOTUNE one by one (`ParallelIter::next` was 4 % of
    /// the samples of `bench/pymap`'s constant map at AUTOTUNE).
    fn next_into(&mut self, n: usize, out: &mut Vec<Example>) -> Result<usize> {
        let mut k = 0;
        while k < n {
            if self.pid == crate::exec::pid() {
                let sh = self.shared.clone();
                let mut st = sh.lock();
                let (mut taken, mut bytes, mut buffered) = (0, 0, 0);
                let mut failed = None;
                while k + taken < n {
                    let Some((_, item)) = self.take(&mut st) else {
                        break;
                    };
                    taken += 1;
                    bytes += item.bytes;
                    buffered += st.ready.len();
                    match item.res {
                        Ok(e) => out.push(e),
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                if taken > 0 {
                    sh.held.release(bytes);
                    self.stats.produced_many(taken, bytes, buffered);
                    let wake_in = st.idle > 0 && has_room(&st);
                    let target = st.target;
                    drop(st);
                    if wake_in {
                        sh.cv_in.notify_all();
                    }
                    self.mark_taken();
                    self.retune(target)?;
                    if let Some(e) = failed {
                        return Err(e);
                    }
                    k += taken;
                    continue;
                }
            }
            match self.next()? {
                Some(e) => out.push(e),
                None => break,
            }
            k += 1;
        }
        Ok(k)
    }

    /// In input order the state is the one of the sequential pipeline that yields the same
    /// elements, so a checkpoint restores with any parallelism or none: over a random-access
    /// input `{"pos": n}` (a [`crate::dataset::MapIter`]'s), over a stream the input's state
    /// (`parallelize`) or `{"count": n, "inner": ...}` (a sequential map over a stream). As
    /// completed, the numbers already handed out past `low` come too:
    /// `{"low", "ahead", "inner"?}`.
    fn state(&self) -> Json {
        let st = self.shared.lock();
        let inner = || st.states.get(&st.low).cloned().unwrap_or(Json::Null);
        if self.spec.ordered {
            return match (&self.shared.source, &self.f) {
                (Source::Index { .. }, _) => json!({ "pos": st.low }),
                (Source::Stream { .. }, None) => inner(),
                (Source::Stream { .. }, Some(_)) => json!({ "count": st.low, "inner": inner() }),
            };
        }
        let ahead: Vec<u64> = st.ahead.iter().copied().collect();
        match &self.shared.source {
            Source::Index { .. } => json!({ "low": st.low, "ahead": ahead }),
            Source::Stream { .. } => json!({ "low": st.low, "ahead": ahead, "inner": inner() }),
        }
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let (low, ahead, inner_state) = if self.spec.ordered {
            match (&self.parent, &self.f) {
                (Dataset::Map(_), _) => (state_u64(state, "pos")?, BTreeSet::new(), None),
                (Dataset::Iter(_), None) => (0, BTreeSet::new(), Some(state)),
                (Dataset::Iter(_), Some(_)) => (
                    state_u64(state, "count")?,
                    BTreeSet::new(),
                    Some(state_field(state, "inner")?),
                ),
            }
        } else {
            let ahead: BTreeSet<u64> = serde_json::from_value(state_field(state, "ahead")?.clone())
                .map_err(|e| Error::State(format!("{}: bad ahead field: {e}", self.spec.label)))?;
            let inner = match &self.parent {
                Dataset::Map(_) => None,
                Dataset::Iter(_) => Some(state_field(state, "inner")?),
            };
            (state_u64(state, "low")?, ahead, inner)
        };
        if let Dataset::Map(m) = &self.parent {
            if m.len() != INFINITE && low > m.len() {
                return Err(Error::State(format!(
                    "{}: position {low} past the end ({})",
                    self.spec.label,
                    m.len()
                )));
            }
        }
        let target = self.shared.lock().target;
        stop(&self.shared);
        let shared = build(
            &self.spec,
            &self.parent,
            &self.f,
            self.epoch,
            &self.exec,
            &self.stats,
            low,
            ahead,
            inner_state,
        )?;
        {
            let mut st = shared.lock();
            st.target = target;
            st.window = window_for(target);
            self.stats.set_shape(target, limit(&st));
        }
        self.shared = shared;
        Ok(())
    }
}

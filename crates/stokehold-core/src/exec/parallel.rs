//! The parallel map engine: worker loops on the executor's pool feeding an ordered (or
//! as-completed) output buffer.
//!
//! * Random-access input: a worker claims the next run of sequence numbers and computes them
//!   itself (`get_many` of `start + s` for each) — fetch, map, and any batching upstream all run
//!   on the worker. Inline (parallelism 0), the consumer claims and computes the runs.
//! * Stream input: a worker takes the input lock, pulls the next element (its sequence number is
//!   its stream position) and records the input's state after it, then maps outside the lock.
//!
//! Results wait in a buffer keyed by sequence number. In order mode the consumer takes `low`, the
//! next number; as-completed mode takes any ready one. The buffer is bounded twice: by a window of
//! claimed-but-not-taken elements, and by the pipeline's memory budget (an empty buffer may always
//! take one element). The checkpoint is `low` plus the numbers already handed out past it
//! (as-completed mode only) and, for a stream, the input's state before `low`: restoring
//! recomputes whatever was in flight, so save -> restore -> continue equals an uninterrupted run.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};

use super::autotune::Tuner;
use super::executor::{Executor, Reservation};
use super::stats::OpStats;
use crate::dataset::{state_field, state_u64, Dataset, DatasetIter, MapDataset, INFINITE};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::ops::map::{Ctx, MapFn};

use super::parallelism::INLINE;
pub use super::parallelism::{Parallelism, AUTOTUNE, MAX_THREADS};

/// Where workers get their input.
pub(crate) enum Source {
    /// Element `start + s` of a random-access dataset.
    Index { ds: Arc<dyn MapDataset>, start: u64 },
    /// The next element of a stream, mapped by `f`.
    Stream {
        input: Mutex<StreamInput>,
        f: Option<MapFn>,
        epoch: u64,
    },
}

pub(crate) struct StreamInput {
    it: Box<dyn DatasetIter>,
    next_seq: u64,
    done: bool,
}

struct Item {
    res: Result<Example>,
    bytes: usize,
}

/// Computed elements not yet taken, by sequence number: a ring of slots from `base`, which
/// follows the consumer's `low` (every number inserted is at or above it). Each number in the
/// window is filled once and taken once; a `BTreeMap`'s insert and remove were 2.5 % of an inline
/// Python map's samples.
#[derive(Default)]
struct Ready {
    base: u64,
    slots: VecDeque<Option<Item>>,
    len: usize,
}

impl Ready {
    fn starting_at(base: u64) -> Self {
        Ready {
            base,
            ..Ready::default()
        }
    }

    fn insert(&mut self, seq: u64, item: Item) {
        while seq < self.base {
            // Not reached (numbers below `low` are never computed); kept correct all the same.
            self.base -= 1;
            self.slots.push_front(None);
        }
        let i = (seq - self.base) as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        if self.slots[i].replace(item).is_none() {
            self.len += 1;
        }
    }

    fn remove(&mut self, seq: u64) -> Option<Item> {
        let i = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        let item = self.slots.get_mut(i)?.take();
        self.len -= usize::from(item.is_some());
        item
    }

    /// The lowest-numbered element (as-completed mode).
    fn pop_first(&mut self) -> Option<(u64, Item)> {
        if self.len == 0 {
            return None;
        }
        let i = self.slots.iter().position(Option::is_some)?;
        self.len -= 1;
        Some((self.base + i as u64, self.slots[i].take()?))
    }

    fn contains(&self, seq: u64) -> bool {
        seq.checked_sub(self.base)
            .and_then(|i| self.slots.get(usize::try_from(i).ok()?))
            .is_some_and(Option::is_some)
    }

    /// Drops the (empty) slots below `low`, the consumer's next number.
    fn advance(&mut self, low: u64) {
        while self.base < low {
            if self.slots.pop_front().is_none() {
                self.base = low;
                break;
            }
            self.base += 1;
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Empties the ring; the bytes its elements held.
    fn clear(&mut self) -> usize {
        let held = self.slots.iter().flatten().map(|i| i.bytes).sum();
        self.slots.clear();
        self.len = 0;
        held
    }
}

struct St {
    next_claim: u64,
    /// Sequence numbers handed out before a restore (as-completed mode): not recomputed.
    skip: BTreeSet<u64>,
    ready: Ready,
    in_flight: usize,
    end: Option<u64>,
    low: u64,
    ahead: BTreeSet<u64>,
    /// Stream input only: the input's state before each sequence number from `low` on.
    states: BTreeMap<u64, Json>,
    target: usize,
    spawned: usize,
    live: usize,
    window: usize,
    est_bytes: usize,
    /// Mean compute time of one element (ns, moving average): sizes a worker's claim.
    est_ns: u64,
    /// Workers waiting in `admit` for room: the consumer wakes them as it takes an element
    /// only when there are any (a notify is a system call, waiter or not: inline, with no
    /// worker, one per element was 7 % of the consumer's time, `perf record`).
    idle: usize,
    /// Whether this iterator has claimed a run yet (its first is one element, see `claim_run`).
    claimed: bool,
    /// The iterator's first element, from its claim until it is in the buffer: in a scoped stage
    /// the other workers wait for it before they start (see [`FIRST_ALONE`]).
    first: Option<u64>,
    /// The consumer is waiting for an element (in `next`).
    waiting: bool,
    /// The consumer has taken an element.
    took: bool,
    /// A worker woke the waiting consumer with its first element and counted it in
    /// [`HANDOFFS`]; the consumer takes it out when it takes the element.
    handoff: bool,
    stop: bool,
}

/// Consumers woken with their iterator's first element that have not taken it yet, in every
/// stage of the process. A binding whose pipeline threads share a lock with the consumer
/// (Python's GIL) has a worker that is about to take that lock wait while this is not zero, so
/// that the consumer gets its first element without queueing behind the worker's next run (a
/// new one-worker map of a 0.15 ms Python function gave its first element 1.0 ms after `iter()`,
/// 0.4 ms so). Only the first: at every element, the worker's waits cost more than they saved
/// (numpy's `sin` of 2000 values at one worker, 216k elements/s -> 192-197k).
static HANDOFFS: AtomicUsize = AtomicUsize::new(0);

/// Consumers woken with their first element that have not taken it yet (see [`HANDOFFS`]).
pub fn handoffs_pending() -> usize {
    HANDOFFS.load(Ordering::SeqCst)
}

/// Takes the stage's handoff (if any) out of [`HANDOFFS`].
fn end_handoff(st: &mut St) {
    if std::mem::take(&mut st.handoff) {
        HANDOFFS.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Shared {
    label: String,
    source: Source,
    st: Mutex<St>,
    cv_out: Condvar,
    cv_in: Condvar,
    stats: Arc<OpStats>,
    exec: Executor,
    /// The reorder buffer's bytes in the executor's budget.
    held: Reservation,
    ordered: bool,
    /// The stage's functions share a scope (Python's GIL, [`StageSpec::scoped`]).
    scoped: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, St> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

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
    spec: StageSpec,
    parent: Dataset,
    f: Option<MapFn>,
    epoch: u64,
    exec: Executor,
    stats: Arc<OpStats>,
    shared: Arc<Shared>,
    tuner: Option<Tuner>,
    pid: u32,
    /// Whether the first element taken marked the op's row ([`OpStats::taken`]): once per
    /// iterator, not a read of the shared row per element.
    marked: bool,
}

fn window_for(p: usize) -> usize {
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
            pid: super::pid(),
            marked: false,
        })
    }

    fn start(&self, st: &mut St) -> Result<()> {
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
        if self.pid != super::pid() {
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
            let woken = super::interrupt::wait(&sh.cv_out, st, || sh.lock());
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
            self.exec.trace().span("wait", &self.spec.label, t0);
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
            if self.pid == super::pid() {
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

/// Decrements the live count when a worker ends, however it ends.
struct LiveGuard(Arc<Shared>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.live -= 1;
        self.0.cv_out.notify_all();
    }
}

/// Waits until worker `id` may claim an element; `None` when it should exit.
fn admit(sh: &Shared, id: usize) -> Option<MutexGuard<'_, St>> {
    let mut st = sh.lock();
    loop {
        if st.stop || st.end.is_some_and(|e| st.next_claim >= e) {
            return None;
        }
        let room = has_room(&st);
        let empty = st.in_flight == 0 && st.ready.is_empty();
        // Until one element has been measured its size is unknown: one at a time.
        let known = st.est_bytes > 0 || st.ready.len() + st.in_flight == 0;
        let mem = empty || (known && sh.exec.budget().fits(st.est_bytes * (st.in_flight + 1)));
        if id < st.target && room && mem {
            return Some(st);
        }
        // Timed: the budget is shared with other ops, whose releases do not notify us.
        st.idle += 1;
        st = sh
            .cv_in
            .wait_timeout(st, Duration::from_millis(20))
            .unwrap_or_else(|e| e.into_inner())
            .0;
        st.idle -= 1;
    }
}

/// The longest a worker of a scoped stage waits for the iterator's first element before it starts
/// its own run: CPython's switch interval (5 ms), the longest a consumer would otherwise wait for
/// the GIL with its first element ready.
/// (Long in this module's tests, whose stage checks the order and not the bound.)
const FIRST_ALONE: Duration = if cfg!(test) {
    Duration::from_secs(5)
} else {
    Duration::from_millis(5)
};

/// Waits (at most [`FIRST_ALONE`]) until the iterator's first element, which another worker
/// computes, is in the buffer. In a scoped stage (a Python map) a second worker that starts its
/// run meanwhile queues for the GIL, takes it as the first element's worker lets go, and holds it
/// for its own call while the consumer waits with its element ready. A two-worker map of a 1 ms
/// pure-Python function handed 48 of 420 first elements over later than 1.8 ms so, 7 of 420
/// with this wait (`bench/micro/first_element.py`). A function that lets go of the GIL for long
/// loses at most this wait, once an epoch.
fn first_alone<'a>(sh: &'a Shared, st: MutexGuard<'a, St>) -> MutexGuard<'a, St> {
    sh.cv_in
        .wait_timeout_while(st, FIRST_ALONE, |st| st.first.is_some() && !st.stop)
        .unwrap_or_else(|e| e.into_inner())
        .0
}

fn worker(sh: Arc<Shared>, id: usize) {
    let _live = LiveGuard(sh.clone());
    let mut alone = sh.scoped;
    loop {
        let Some(st) = admit(&sh, id) else { return };
        if std::mem::take(&mut alone) && st.first.is_some() {
            // Admitted again afterwards: the room and the budget may have changed meanwhile.
            drop(first_alone(&sh, st));
            continue;
        }
        super::set_stage_threads(st.target);
        let Some(claimed) = claim(&sh, st) else {
            return;
        };
        if !run(&sh, claimed, true) {
            return;
        }
    }
}

/// Claims work with the state locked (`st`, let go before a stream's input is pulled): the next
/// run of sequence numbers of a random-access input, or the next element of a stream. `None`
/// when there is nothing left to claim.
fn claim(sh: &Shared, mut st: MutexGuard<'_, St>) -> Option<Vec<(u64, Option<Result<Example>>)>> {
    match &sh.source {
        Source::Index { .. } => {
            let seqs = claim_run(sh, &mut st);
            (!seqs.is_empty()).then(|| seqs.into_iter().map(|s| (s, None)).collect())
        }
        Source::Stream { .. } => {
            st.in_flight += 1;
            drop(st);
            pull(sh).map(|c| vec![c])
        }
    }
}

/// Computes the claimed elements and hands them to the buffer (on a worker, or on the consumer
/// when the stage runs inline); false when the stage is stopping. A worker's run also records
/// its thread's CPU time and its wait for a core (four system calls, which an inline run of
/// cheap Python calls would feel), for AUTOTUNE's look at workers that wait.
fn run(sh: &Shared, claimed: Vec<(u64, Option<Result<Example>>)>, worker: bool) -> bool {
    let n = claimed.len();
    let t = Instant::now();
    let at = if worker { super::thread_times() } else { None };
    let one_by_one = |claimed: Vec<(u64, Option<Result<Example>>)>| {
        claimed
            .into_iter()
            .map(|(seq, element)| (seq, compute(sh, seq, element)))
            .collect::<Vec<_>>()
    };
    let done = match &sh.source {
        // A run of a random-access input in one call (a map's calls in one scope, see
        // `MapDataset::get_many`).
        Source::Index { ds, start } => {
            let indices: Vec<u64> = claimed.iter().map(|(seq, _)| start + seq).collect();
            match catch_unwind(AssertUnwindSafe(|| ds.get_many(&indices))) {
                Ok(rs) if rs.len() == n => claimed
                    .into_iter()
                    .zip(rs)
                    .map(|((seq, _), r)| (seq, Some(r)))
                    .collect(),
                // A panic: each element again on its own, so the error names the one.
                _ => one_by_one(claimed),
            }
        }
        _ => one_by_one(claimed),
    };
    sh.stats.add_busy_run(t, at);
    sh.exec.trace().span("element", &sh.label, t);
    let per = (t.elapsed().as_nanos() as u64 / n as u64).max(1);
    let mut st = sh.lock();
    st.in_flight -= n;
    st.est_ns = if st.est_ns == 0 {
        per
    } else {
        (st.est_ns * 7 + per) / 8
    };
    // The stage's bound moves with its runs' length: its buffer's fill is read against it.
    sh.stats.set_capacity(limit(&st));
    if st.stop {
        return false;
    }
    // The run's bytes enter the budget in one add (under the lock, before anyone can take them).
    let mut held = 0;
    let mut added = false;
    for (seq, res) in done {
        if st.first == Some(seq) {
            st.first = None;
            if sh.scoped {
                sh.cv_in.notify_all();
            }
        }
        let Some(res) = res else { continue };
        let bytes = res.as_ref().map_or(0, Example::nbytes);
        let b = bytes.max(1); // an element of no bytes still marks the size as known
        st.est_bytes = if st.est_bytes == 0 {
            b
        } else {
            (st.est_bytes * 7 + b) / 8
        };
        held += bytes;
        st.ready.insert(seq, Item { res, bytes });
        added = true;
    }
    sh.held.hold(held);
    // In order, the consumer can take only the lowest element: a run finished ahead of it
    // does not wake the consumer (on two cores, each wake-up took a core from a worker). An
    // inline run is the consumer's own, and no worker claims at the inline setting: nobody to
    // wake (a notify is a system call, waiter or not).
    let (mut wake_out, mut wake_in) = (false, false);
    if worker {
        if added && (!sh.ordered || st.ready.contains(st.low)) {
            if st.waiting && !st.took && !st.handoff {
                st.handoff = true;
                HANDOFFS.fetch_add(1, Ordering::SeqCst);
            }
            wake_out = st.waiting;
        } else if !added {
            wake_in = true;
        }
    }
    // Only a consumer that waits is woken, and only once the lock is let go: woken while the
    // worker still held it, the consumer went back to sleep on the lock and was woken again.
    // The consumer of a two-worker batch epoch (`shard_read_bench`, 3906 batches) slept 310
    // times an epoch so, 207 now, about one per run; the workers were preempted 1850 times in
    // six epochs, 1258 now (`perf record -e sched:sched_switch`).
    drop(st);
    if wake_out {
        sh.cv_out.notify_all();
    }
    if wake_in {
        sh.cv_in.notify_all();
    }
    true
}

/// Most elements one claim takes: a run of cheap elements (a Python function of a few to tens of
/// microseconds) is computed back to back and handed over with one lock and one wake-up, where
/// one claim per element paid a consumer wake-up (a scheduler round trip, hundreds of
/// microseconds on a loaded machine) per element. 64, not 16: a Python map returning a constant
/// (3 us an element) ran at 110k elements/s with one worker and runs of 16, the consumer woken
/// and the worker blocked on the GIL about once every 9 elements; 220-290k with runs of 64.
/// 256, not 64: the same map at under a microsecond an element (`bench/pymap`'s constant map,
/// 50000 elements into padded_batch(64), two alternating runs each) took 1.33-1.37 us an
/// element with one worker and 1.19 with two at runs of 64, 0.98-1.05 and 0.79-0.80 at runs of
/// 256; numpy's sin of 2000 values (4-5 us) on one worker went from 187-213k to 208-223k
/// elements/s. Only elements under 4 us (1 ms / 256) are held to fewer than `RUN_NS` of work.
const MAX_RUN: usize = 256;
/// A claim covers about this much compute: long enough to amortise a hand-off, short enough
/// that the consumer never waits for a long run (an element this slow is claimed alone).
const RUN_NS: u64 = 1_000_000;

/// How many elements one claim wants: one until an element has been timed, then as many as
/// take about [`RUN_NS`] (at most [`MAX_RUN`]).
fn run_len(st: &St) -> usize {
    match st.est_ns {
        0 => 1,
        ns => ((RUN_NS / ns) as usize).clamp(1, MAX_RUN),
    }
}

/// Claimed-but-not-taken elements allowed: the window, widened so that every worker (or the
/// consumer, inline) can hold two whole runs, one being taken while the next is computed
/// (unchanged for elements slow enough to be claimed one at a time).
fn limit(st: &St) -> usize {
    st.window + st.target.max(1) * 2 * (run_len(st) - 1)
}

/// Whether a worker may claim: a whole run fits under [`limit`]. With room for only part of one,
/// a worker woken by every element the consumer took claimed runs of one or two elements, each
/// with its own wake-up and its own turn at the GIL for a Python map (one wake-up per element
/// while the consumer emptied a batch's worth).
fn has_room(st: &St) -> bool {
    st.in_flight + st.ready.len() + run_len(st) <= limit(st)
}

/// Claims the next run of free sequence numbers (random-access input), within the widened
/// window and the memory budget, and counts them in flight.
fn claim_run(sh: &Shared, st: &mut St) -> Vec<u64> {
    let room = limit(st)
        .saturating_sub(st.in_flight + st.ready.len())
        .max(1);
    // The first claim is one element: the consumer is waiting for it, and a whole run (up to
    // RUN_NS of work) would be its wait for the epoch's first element. A Python function of
    // 0.23 ms, known from the last epoch, was claimed in runs of four: the first element came
    // after all four.
    let mut want = if st.claimed { run_len(st).min(room) } else { 1 };
    let first = !st.claimed;
    st.claimed = true;
    while want > 1 && !sh.exec.budget().fits(st.est_bytes * (st.in_flight + want)) {
        want -= 1;
    }
    let mut seqs = Vec::with_capacity(want);
    while seqs.len() < want {
        loop {
            let c = st.next_claim;
            if !st.skip.remove(&c) {
                break;
            }
            st.next_claim += 1;
        }
        if st.end.is_some_and(|e| st.next_claim >= e) {
            break;
        }
        seqs.push(st.next_claim);
        st.next_claim += 1;
    }
    st.in_flight += seqs.len();
    if first {
        st.first = seqs.first().copied();
    }
    seqs
}

/// Pulls the next stream element; `None` at the end of the input (or when stopping).
fn pull(sh: &Shared) -> Option<(u64, Option<Result<Example>>)> {
    let Source::Stream { input, .. } = &sh.source else {
        unreachable!("stream source")
    };
    let t = Instant::now();
    let mut inp = input.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if inp.done || sh.lock().stop {
            let mut st = sh.lock();
            st.in_flight -= 1;
            return None;
        }
        let seq = inp.next_seq;
        let r = catch_unwind(AssertUnwindSafe(|| inp.it.next()))
            .unwrap_or_else(|p| Err(Error::from_panic(&sh.label, p)));
        let got = match r {
            Ok(None) => {
                inp.done = true;
                let mut st = sh.lock();
                st.end = Some(seq);
                st.in_flight -= 1;
                sh.cv_out.notify_all();
                sh.cv_in.notify_all();
                return None;
            }
            Ok(Some(e)) => Ok(e),
            Err(e) => Err(e),
        };
        inp.next_seq += 1;
        let after = inp.it.state();
        let mut st = sh.lock();
        st.states.insert(seq + 1, after);
        if st.skip.remove(&seq) {
            continue;
        }
        drop(st);
        sh.stats.add_input_wait(t);
        return Some((seq, Some(got)));
    }
}

/// Computes element `seq`: `None` when there is nothing to hand out.
fn compute(sh: &Shared, seq: u64, element: Option<Result<Example>>) -> Option<Result<Example>> {
    let r = catch_unwind(AssertUnwindSafe(|| match (&sh.source, element) {
        (Source::Index { ds, start }, _) => ds.get(start + seq),
        (Source::Stream { .. }, Some(Err(e))) => Err(e),
        (Source::Stream { f: None, .. }, Some(Ok(e))) => Ok(e),
        (
            Source::Stream {
                f: Some(f), epoch, ..
            },
            Some(Ok(e)),
        ) => f(
            e,
            &Ctx {
                op: &sh.label,
                index: seq,
                epoch: *epoch,
            },
        ),
        (Source::Stream { .. }, None) => unreachable!("stream elements are pulled"),
    }));
    Some(r.unwrap_or_else(|p| Err(Error::from_panic(&sh.label, p))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;
    use crate::{filter_fn, map_fn};

    fn x(e: &Example) -> i64 {
        e.tensor("test", "x").unwrap().to_vec::<i64>().unwrap()[0]
    }

    fn square() -> MapFn {
        map_fn(|e: Example, _| Ok(Example::new().with("x", Tensor::scalar(x(&e) * x(&e)))))
    }

    #[test]
    fn the_ready_ring_takes_each_number_once_in_any_order() {
        let item = |v: i64, bytes| Item {
            res: Ok(Example::new().with("x", Tensor::scalar(v))),
            bytes,
        };
        let mut r = Ready::starting_at(10);
        for seq in [13, 10, 12] {
            r.insert(seq, item(seq as i64, 1));
        }
        assert_eq!(r.len(), 3);
        assert!(r.contains(12) && !r.contains(11) && !r.contains(9) && !r.contains(99));
        assert!(r.remove(11).is_none() && r.remove(3).is_none());
        let first = r.pop_first().unwrap();
        assert_eq!((first.0, x(&first.1.res.unwrap())), (10, 10));
        r.advance(11);
        assert_eq!(x(&r.remove(13).unwrap().res.unwrap()), 13);
        r.advance(12); // 10 taken; 13 taken ahead of 12, the next
        assert!(r.contains(12) && !r.contains(10));
        r.insert(20, item(20, 5));
        assert_eq!((r.len(), r.clear(), r.len()), (2, 6, 0));
        r.insert(7, item(7, 1)); // below the base: extends the ring downwards
        assert!(r.contains(7) && r.pop_first().is_some_and(|(s, _)| s == 7));
    }

    fn inputs() -> Vec<Dataset> {
        let odd = filter_fn(|e, _| Ok(x(e) % 2 == 1));
        vec![
            Dataset::range(40).shuffle(3),
            Dataset::range(80).filter("odd", odd),
        ]
    }

    fn stage(parent: &Dataset, ordered: bool) -> ParallelIter {
        let spec = StageSpec {
            label: "map[sq](parallel)".into(),
            par: Parallelism::Fixed(1),
            ordered,
            scoped: false,
        };
        ParallelIter::new(spec, parent.clone(), Some(square()), 0).unwrap()
    }

    fn set_target(it: &mut ParallelIter, p: usize) {
        let mut st = it.shared.lock();
        st.target = p;
        st.window = window_for(p);
        it.shared.cv_in.notify_all();
        it.start(&mut st).unwrap();
    }

    /// A map that fails at element 3 ("bad element 3") and passes the others through.
    fn fails_at_3() -> MapFn {
        map_fn(|e: Example, ctx| {
            if ctx.index == 3 {
                return Err(Error::invalid(format!("bad element {}", ctx.index)));
            }
            Ok(e)
        })
    }

    /// An ordered stage of `f` over `range(n)` at `par` workers.
    fn map_stage(f: MapFn, n: u64, par: usize) -> ParallelIter {
        let spec = StageSpec {
            label: "map[f](parallel)".into(),
            par: Parallelism::Fixed(par),
            ordered: true,
            scoped: false,
        };
        ParallelIter::new(spec, Dataset::range(n), Some(f), 0).unwrap()
    }

    fn take(it: &mut ParallelIter, n: usize) -> Vec<i64> {
        (0..n)
            .map_while(|_| it.next().unwrap())
            .map(|e| x(&e))
            .collect()
    }

    /// In a scoped stage (a Python map), no other worker starts an element while the iterator's
    /// first is computed; in any other, the second worker starts at once.
    #[test]
    fn a_scoped_stage_starts_its_other_workers_once_the_first_element_is_in() {
        use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
        for scoped in [true, false] {
            let first_done = Arc::new(AtomicBool::new(false));
            let early = Arc::new(AtomicUsize::new(0));
            let (done, e) = (first_done.clone(), early.clone());
            let f = map_fn(move |ex: Example, _| {
                if x(&ex) == 0 {
                    std::thread::sleep(Duration::from_millis(50));
                    done.store(true, SeqCst);
                } else if !done.load(SeqCst) {
                    e.fetch_add(1, SeqCst);
                }
                Ok(ex)
            });
            let spec = StageSpec {
                label: format!("map[first alone, scoped {scoped}](parallel)"),
                par: Parallelism::Fixed(2),
                ordered: true,
                scoped,
            };
            let mut it = ParallelIter::new(spec, Dataset::range(40), Some(f), 0).unwrap();
            // Measured, as by an earlier epoch: an unmeasured stage claims one element at a time
            // until its first is in, whatever the scope.
            it.shared.lock().est_bytes = 8;
            assert_eq!(take(&mut it, usize::MAX), (0..40).collect::<Vec<_>>());
            let early = early.load(SeqCst);
            if scoped {
                assert_eq!(early, 0, "elements started before the first was in");
            } else {
                assert!(early > 0, "the second worker waited for the first element");
            }
        }
    }

    #[test]
    fn inline_computes_on_the_consumer_with_the_same_output_and_state() {
        for parent in inputs() {
            let mut all = stage(&parent, true);
            let want = take(&mut all, usize::MAX);
            // Inline from the start: no worker thread is ever started.
            let mut it = stage(&parent, true);
            set_target(&mut it, INLINE);
            let mut got = take(&mut it, 7);
            assert_eq!(it.shared.lock().spawned, 0, "a worker ran");
            let saved = it.state();
            // To one worker and back to inline mid-epoch, as AUTOTUNE switches.
            set_target(&mut it, 1);
            got.extend(take(&mut it, 9));
            set_target(&mut it, INLINE);
            got.extend(take(&mut it, usize::MAX));
            assert_eq!(got, want, "{}", parent.describe());
            // A checkpoint taken inline restores (inline or not) to the same continuation.
            for p in [INLINE, 2] {
                let mut again = stage(&parent, true);
                set_target(&mut again, p);
                again.set_state(&saved).unwrap();
                assert_eq!(take(&mut again, usize::MAX), want[7..], "restored at {p}");
            }
        }
    }

    #[test]
    fn a_restored_autotuned_stage_reports_the_parallelism_it_runs_at() {
        // Restoring rebuilt the stage, which left its stats at AUTOTUNE's provisional one
        // worker while it ran on at three.
        let spec = StageSpec {
            label: "map[sq](parallel)".into(),
            par: Parallelism::Autotune,
            ordered: true,
            scoped: false,
        };
        let mut it = ParallelIter::new(spec, Dataset::range(40), Some(square()), 0).unwrap();
        take(&mut it, 5);
        let saved = it.state();
        set_target(&mut it, 3);
        it.stats.set_shape(3, window_for(3)); // as AUTOTUNE's step does
        it.set_state(&saved).unwrap();
        assert_eq!(it.stats.report().parallelism, 3);
        assert_eq!(
            take(&mut it, usize::MAX),
            (5..40).map(|v| v * v).collect::<Vec<_>>()
        );
    }

    #[test]
    fn inline_as_completed_yields_every_element_once() {
        for parent in inputs() {
            let mut want = take(&mut stage(&parent, true), usize::MAX);
            let mut it = stage(&parent, false);
            let mut got = take(&mut it, 5);
            set_target(&mut it, INLINE);
            got.extend(take(&mut it, usize::MAX));
            got.sort();
            want.sort();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn an_error_inline_names_its_element_and_the_stage_goes_on() {
        let f = fails_at_3();
        let mut it = map_stage(f, 6, 1);
        set_target(&mut it, INLINE);
        let got: Vec<_> = (0..6)
            .map(|_| it.next().map(|e| e.map(|e| x(&e))))
            .collect();
        assert!(matches!(&got[3], Err(e) if e.to_string().contains("bad element 3")));
        let ok: Vec<i64> = got.into_iter().filter_map(|r| r.ok().flatten()).collect();
        assert_eq!(ok, [0, 1, 2, 4, 5]);
        assert!(it.next().unwrap().is_none());
    }

    #[test]
    fn a_first_element_handed_to_a_waiting_consumer_is_counted_until_taken() {
        // Element 0 is slow, so the consumer waits for it; the worker that finishes it counts
        // the hand-off (bindings defer to it), and taking the element ends the count.
        let slow_first = map_fn(|e: Example, ctx| {
            if ctx.index == 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(e)
        });
        let mut it = map_stage(slow_first, 4, 1);
        assert_eq!(x(&it.next().unwrap().unwrap()), 0);
        {
            let st = it.shared.lock();
            assert!(st.took && !st.handoff && !st.waiting);
        }
        assert_eq!(take(&mut it, usize::MAX), [1, 2, 3]);
        // A hand-off still counted when the iterator is dropped is taken out (checked by the
        // stage's flag: other tests' stages may count their own in the global meanwhile).
        let shared = it.shared.clone();
        shared.lock().handoff = true;
        HANDOFFS.fetch_add(1, Ordering::SeqCst);
        drop(it);
        assert!(!shared.lock().handoff);
    }

    /// Groups of `n` through `next_into` until the end, as values.
    fn take_groups(it: &mut ParallelIter, n: usize) -> Vec<i64> {
        let mut out = Vec::new();
        loop {
            let before = out.len();
            let k = it.next_into(n, &mut out).unwrap();
            assert_eq!(out.len() - before, k);
            if k < n {
                return out.iter().map(x).collect();
            }
        }
    }

    #[test]
    fn next_into_hands_over_what_next_does_inline_and_on_workers() {
        for parent in inputs() {
            let want = take(&mut stage(&parent, true), usize::MAX);
            for p in [INLINE, 1, 2] {
                for n in [1, 5, 64] {
                    let mut it = stage(&parent, true);
                    set_target(&mut it, p);
                    let got = take_groups(&mut it, n);
                    assert_eq!(got, want, "{} at {p}, groups of {n}", parent.describe());
                    assert_eq!(it.stats.elements(), want.len() as u64);
                    // As completed: the same elements, once each.
                    let mut it = stage(&parent, false);
                    set_target(&mut it, p);
                    let mut got = take_groups(&mut it, n);
                    got.sort();
                    let mut sorted = want.clone();
                    sorted.sort();
                    assert_eq!(got, sorted, "as completed at {p}, groups of {n}");
                }
            }
        }
    }

    #[test]
    fn next_into_stops_at_an_error_with_the_elements_before_it() {
        let f = fails_at_3();
        for p in [INLINE, 2] {
            let mut it = map_stage(f.clone(), 8, 2);
            set_target(&mut it, p);
            let mut out = Vec::new();
            let err = it.next_into(6, &mut out).unwrap_err();
            assert!(err.to_string().contains("bad element 3"), "{err}");
            assert_eq!(out.iter().map(x).collect::<Vec<_>>(), [0, 1, 2], "at {p}");
            // The stage goes on after the element that failed.
            assert_eq!(take_groups(&mut it, 3), [4, 5, 6, 7], "at {p}");
        }
    }
}

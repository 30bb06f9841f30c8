//! `prefetch(n)`: a background thread runs the input ahead of the consumer, up to `n` elements.
//!
//! The thread is started on the first `next()` and lives as long as the iterator: with `repeat`
//! upstream it flows from one epoch into the next with nothing rebuilt, so the epoch boundary
//! costs nothing. Each element travels with the input's state *after* it, so the consumer's
//! checkpoint is exact however far ahead the thread runs. Dropping the iterator disconnects the
//! channel and raises a stop flag; the thread exits after the element it is working on (it is
//! never joined from `drop`, which might hold the GIL a Python callback is waiting for). A panic in
//! the input becomes an error at the consumer. An iterator used in a forked child (whose threads
//! did not survive the fork) returns an error instead of waiting forever.
//!
//! The buffer's elements always count in a memory budget: the pipeline's executor when one is
//! installed (`with_options`, or an enclosing parallel stage), or else a default executor the op
//! makes for its iterator and remembers (so `executor_of(ds)` and `ds.stats()` find the bytes).
//! Under a parallel op that made its own default executor, the prefetch uses that one: one
//! budget for every buffer of the pipeline. After an element fails the thread goes on with
//! the next one (the outer iterator goes on after an element's error, see [`crate::state`], and
//! an `ignore_errors()` above relies on the input moving on too); a panic ends it.
//!
//! **The warm next epoch** (`for epoch in range(n): for batch in ds:`, or Keras `fit`: a new
//! iterator per epoch). Over a finite input that keeps random access under its stages (what
//! [`Dataset::peel_stages`] accepts), the thread does not stop at the end of epoch `e`: it opens
//! epoch `e + 1` of its input and goes on filling the same buffer (at most `depth` elements, in
//! the same memory budget). The consumer that reaches the end parks the running thread in the op
//! (`Warm`); the next `iter(e + 1)` of the same op adopts it, so its first element is already
//! computed. The adopted iterator is the iterator a fresh `iter(e + 1)` makes (the thread sends
//! the new input's initial state first), so states and results are exactly a fresh one's.
//! **The cost when no iterator comes**: the thread computes up to `depth` elements (an
//! autotuned prefetch of small elements: about [`AUTOTUNE_BYTES`] of them) of an epoch nobody
//! takes and holds them (and their budget bytes) until the op is dropped, another
//! epoch is asked for, or the parked thread is replaced: the user's map runs for those elements
//! (an autotuned prefetch of small elements: up to 64 elements, and the one being made).
//! `ExecOptions::warm_start = false` (Python: `with_options(warm_start=False)`) turns it off for
//! every prefetch that runs on that executor: each epoch then stops at its end.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError};
use serde_json::Value as Json;

use crate::dataset::{Dataset, DatasetIter, IterDataset};
use crate::dataset::{Stage, StageKind};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::exec::interrupt;
use crate::exec::OpStats;
use crate::exec::{DefaultExecutor, Reservation};

/// The fewest elements an autotuned prefetch buffers: double buffering, so the consumer takes one
/// while the thread makes the next.
pub const AUTOTUNE_MIN_DEPTH: usize = 2;
/// An autotuned prefetch of small elements buffers as many as fit in this many bytes (by the
/// mean size of the elements so far), at most [`AUTOTUNE_MAX_DEPTH`], where more than its
/// starting depth fit: a buffer of two elements that cost well under the wake-up handing them
/// over paid a wake-up per element (`bench/micro/stream_state.py` on the 2-core machine:
/// `range(n).prefetch(2)` 27 us an element, `prefetch(AUTOTUNE)` 0.95, the range alone 0.34).
pub const AUTOTUNE_BYTES: usize = 4 << 20;
/// The deepest an autotuned prefetch goes (see [`AUTOTUNE_BYTES`]).
pub const AUTOTUNE_MAX_DEPTH: usize = 64;

/// The depth of an autotuned prefetch that started at `start`, its elements `mean_bytes` each.
fn autotuned_depth(start: usize, mean_bytes: usize) -> usize {
    (AUTOTUNE_BYTES / mean_bytes.max(1)).clamp(start, AUTOTUNE_MAX_DEPTH.max(start))
}

/// Runs its input on a background thread, `depth` elements ahead.
pub struct Prefetch {
    parent: Dataset,
    /// `None`: autotuned, resolved when an iterator starts (see [`Prefetch::autotune`]).
    depth: Option<usize>,
    /// The executor made for the last iterator when none was installed (see the module docs).
    default_exec: DefaultExecutor,
    /// The thread of an iterator that reached the end of its epoch, already on the next one.
    warm: Warm,
    /// False for the epochs loader's own prefetch, whose range has no next epoch to run into.
    may_run_on: bool,
}

/// A parked prefetch thread (see the module docs), shared by the op and its iterators.
type Warm = Arc<Mutex<Option<Parked>>>;

/// A running prefetch thread whose consumer reached the end of epoch `epoch - 1`.
struct Parked {
    epoch: u64,
    running: Running,
    exec: super::Executor,
    depth: usize,
}

impl Prefetch {
    /// Prefetches `depth` (> 0) elements of `parent`.
    pub fn new(parent: Dataset, depth: usize) -> Result<Self> {
        if depth == 0 {
            return Err(Error::invalid("prefetch buffer size must be > 0"));
        }
        Ok(Prefetch::with_depth(parent, Some(depth)))
    }

    /// tf.data's `prefetch(AUTOTUNE)`. The depth starts at the executor's core count, at least
    /// [`AUTOTUNE_MIN_DEPTH`], and goes deeper for small elements ([`AUTOTUNE_BYTES`]). A parallel
    /// stage upstream finishes up to one element per core at once, and a buffer that size takes
    /// such a burst without stalling its workers, while a consumer step that runs long still finds
    /// the next element ready. The depth never changes results or states (a prefetch's state is the
    /// consumer's position), so the name says `prefetch(autotune)` on every machine and a
    /// checkpoint restores anywhere.
    pub fn autotune(parent: Dataset) -> Self {
        Prefetch::with_depth(parent, None)
    }

    /// A prefetch whose depth is known to be > 0 or autotuned (re-applying an existing stage).
    pub(crate) fn with_depth(parent: Dataset, depth: Option<usize>) -> Self {
        debug_assert!(depth != Some(0));
        Prefetch {
            parent,
            depth,
            default_exec: DefaultExecutor::default(),
            warm: Warm::default(),
            may_run_on: true,
        }
    }

    /// This prefetch without the warm next epoch.
    pub(crate) fn cold(mut self) -> Self {
        self.may_run_on = false;
        self
    }

    /// Whether the thread may run on into the next epoch: the input ends (finite) and is
    /// random access under its stages, so opening another epoch of it has no side effect (a
    /// stream's next epoch might re-run a generator the user owns).
    fn may_warm(&self) -> bool {
        self.may_run_on
            && super::Executor::current()
                .or_else(|| super::executor_of(&self.parent))
                .is_none_or(|e| e.options().warm_start)
            && self.parent.peel_stages().is_some()
            && self
                .parent
                .len()
                .is_some_and(|n| n != crate::dataset::INFINITE)
    }

    /// The parked thread, when it runs epoch `epoch` in this process; waits for the state the
    /// thread sends when it opens the epoch (it comes before any element). `None`: start fresh.
    fn adopt(&self, epoch: u64) -> Result<Option<PrefetchIter>> {
        let parked = self.warm.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(p) = parked else { return Ok(None) };
        if p.epoch != epoch || p.running.pid != super::pid() {
            return Ok(None); // dropping it stops the thread
        }
        let state = loop {
            match p.running.rx.recv_timeout(interrupt::TICK) {
                Ok(Msg::Epoch(state)) => break state,
                Ok(Msg::Item(..)) | Err(RecvTimeoutError::Disconnected) => return Ok(None),
                Err(RecvTimeoutError::Timeout) => interrupt::check()?,
            }
        };
        Ok(Some(PrefetchIter {
            exec: p.exec,
            parent: self.parent.clone(),
            epoch,
            depth: p.depth,
            autotuned: self.depth.is_none(),
            pending: None,
            running: Some(p.running),
            state,
            done: false,
            warm: Some(self.warm.clone()),
        }))
    }
}

impl IterDataset for Prefetch {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        let warm = self.may_warm();
        if warm {
            if let Some(it) = self.adopt(epoch)? {
                return Ok(Box::new(it));
            }
        }
        let inner = self.parent.iter(epoch)?;
        // The installed executor; else the one a thread-owning op below just made for its
        // iterator (found through the dataset), so both buffers share one budget; else our own.
        let exec = super::Executor::current()
            .or_else(|| super::executor_of(&self.parent))
            .unwrap_or_else(|| self.default_exec.current_or_new());
        let state = inner.state();
        let depth = self
            .depth
            .unwrap_or_else(|| exec.options().cores.max(AUTOTUNE_MIN_DEPTH));
        Ok(Box::new(PrefetchIter {
            exec,
            parent: self.parent.clone(),
            epoch,
            depth,
            autotuned: self.depth.is_none(),
            pending: Some(inner),
            running: None,
            state,
            done: false,
            warm: warm.then(|| self.warm.clone()),
        }))
    }

    fn name(&self) -> String {
        match self.depth {
            Some(d) => format!("prefetch({d})"),
            None => "prefetch(autotune)".into(),
        }
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn len(&self) -> Option<u64> {
        self.parent.len()
    }

    fn executor(&self) -> Option<super::Executor> {
        self.default_exec.get()
    }

    fn stage(&self) -> Option<Stage> {
        Some(Stage {
            parent: self.parent.clone(),
            kind: StageKind::Prefetch { depth: self.depth },
        })
    }
}

/// What the thread sends.
enum Msg {
    /// An element on its way to the consumer, the input's state after it, and its bytes' place
    /// in the pipeline's memory budget (released when the consumer takes it, or when the message
    /// is dropped with an abandoned iterator).
    Item(Result<Option<Example>>, Json, Held),
    /// The thread opened the next epoch of its input (a warm thread): that input's initial state.
    Epoch(Json),
}

/// The elements a prefetch buffer holds: their count, so that an empty buffer may always take one
/// element (as every buffer of the pipeline may), and a condvar the thread waits on for room.
///
/// The consumer wakes a thread waiting on a full buffer only once the buffer has drained to `low`
/// (half its depth, which an autotuned buffer changes), not at every element it takes: each wake-up
/// is a futex call on the consumer's thread and a context switch that, on a machine with few cores,
/// the producer wins against the consumer it was meant to serve. Woken at half, the thread refills
/// the buffer in one run. A thread held back by the memory budget (a buffer not full by count) is
/// woken at every element taken, since any release may make room.
struct Buffered {
    count: Mutex<usize>,
    room: Condvar,
    low: AtomicUsize,
    budget_blocked: AtomicBool,
}

impl Buffered {
    fn new(depth: usize) -> Self {
        Buffered {
            count: Mutex::new(0),
            room: Condvar::new(),
            low: AtomicUsize::new(depth / 2),
            budget_blocked: AtomicBool::new(false),
        }
    }
}

/// One buffered element: its place among the `depth` the buffer may hold, and its bytes,
/// accounted in the executor's budget (when the pipeline has one) while it waits.
struct Held {
    res: Reservation,
    buffered: Arc<Buffered>,
}

impl Held {
    /// Waits (checking `stop` every tick) until the buffer has room: fewer than `depth`
    /// elements, and `bytes` fit the budget unless the buffer is empty; then takes the place.
    /// `None` when stopped first. The channel itself is unbounded, so a large depth allocates
    /// nothing up front: the buffer grows with use.
    fn reserve(
        exec: Option<&super::Executor>,
        buffered: &Arc<Buffered>,
        depth: usize,
        bytes: usize,
        stop: &AtomicBool,
    ) -> Option<Held> {
        let full = |count: usize| {
            count >= depth || (count > 0 && exec.is_some_and(|e| !e.budget().fits(bytes)))
        };
        let mut count = buffered.count.lock().unwrap_or_else(|e| e.into_inner());
        while full(*count) {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            buffered
                .budget_blocked
                .store(*count < depth, Ordering::Relaxed);
            count = buffered
                .room
                .wait_timeout(count, interrupt::TICK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        buffered.budget_blocked.store(false, Ordering::Relaxed);
        *count += 1;
        let res = Reservation::new(exec.cloned());
        res.hold(bytes);
        Some(Held {
            res,
            buffered: buffered.clone(),
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Back in the budget before a waiting thread is told there is room.
        self.res.release_all();
        let mut count = self
            .buffered
            .count
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *count -= 1;
        let b = &self.buffered;
        if *count <= b.low.load(Ordering::Relaxed) || b.budget_blocked.load(Ordering::Relaxed) {
            b.room.notify_one();
        }
    }
}

struct Running {
    rx: Receiver<Msg>,
    stop: Arc<AtomicBool>,
    pid: u32,
    /// The op's row, where the consumer's waits for the buffer go.
    stats: Option<Arc<OpStats>>,
    /// Whether the first element taken marked the row ([`OpStats::taken`]).
    marked: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

struct PrefetchIter {
    /// The executor whose budget and stats the buffer uses.
    exec: super::Executor,
    parent: Dataset,
    epoch: u64,
    /// The depth the buffer starts at.
    depth: usize,
    /// `prefetch(AUTOTUNE)`: deeper than `depth` for small elements (see [`AUTOTUNE_BYTES`]).
    autotuned: bool,
    /// The input iterator before the thread takes it.
    pending: Option<Box<dyn DatasetIter>>,
    running: Option<Running>,
    /// The input's state after the last element handed to the consumer.
    state: Json,
    done: bool,
    /// The op's slot for a warm thread, when the thread runs on into the next epoch.
    warm: Option<Warm>,
}

impl PrefetchIter {
    /// The op's name in stats and errors.
    fn label(&self) -> String {
        if self.autotuned {
            "prefetch(autotune)".into()
        } else {
            format!("prefetch({})", self.depth)
        }
    }

    fn start(&mut self) -> Result<()> {
        let mut inner = self.pending.take().expect("pending iterator");
        // Unbounded: `Held::reserve` bounds the buffer to `depth` elements (and the budget), so a
        // large depth costs nothing until elements fill it.
        let (tx, rx) = unbounded::<Msg>();
        let (mut depth, autotuned) = (self.depth, self.autotuned);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let op = self.parent.name();
        // Ops whose iterators the thread creates later (repeat's next epoch) join this pipeline,
        // and the buffer's elements count against its memory budget.
        let exec = Some(self.exec.clone());
        let stats = exec.as_ref().map(|e| e.op_stats(&self.label()));
        if let Some(s) = &stats {
            s.set_shape(1, depth);
        }
        let row = stats.clone();
        let buffered = Arc::new(Buffered::new(depth));
        let exec2 = exec.clone();
        let next_epoch = self
            .warm
            .is_some()
            .then(|| (self.parent.clone(), self.epoch));
        std::thread::Builder::new()
            .name("stokehold-prefetch".into())
            .spawn(move || {
                super::mark_stage_thread();
                let mut next_epoch = next_epoch;
                let start = depth;
                let mut mean_bytes = 0;
                let body = move || {
                    while !stop2.load(Ordering::Relaxed) {
                        let r = catch_unwind(AssertUnwindSafe(|| inner.next()))
                            .unwrap_or_else(|p| Err(Error::from_panic(&op, p)));
                        let last = matches!(r, Ok(None) | Err(Error::Panic { .. }));
                        let state = inner.state();
                        let bytes = match &r {
                            Ok(Some(e)) => e.nbytes(),
                            _ => 0,
                        };
                        if autotuned && bytes > 0 {
                            mean_bytes = if mean_bytes == 0 {
                                bytes
                            } else {
                                (mean_bytes * 7 + bytes) / 8
                            };
                            let d = autotuned_depth(start, mean_bytes);
                            if d != depth {
                                depth = d;
                                buffered.low.store(d / 2, Ordering::Relaxed);
                                if let Some(s) = &stats {
                                    s.set_shape(1, d);
                                }
                            }
                        }
                        let Some(held) =
                            Held::reserve(exec2.as_ref(), &buffered, depth, bytes, &stop2)
                        else {
                            break;
                        };
                        if let Some(s) = &stats {
                            let n = *buffered.count.lock().unwrap_or_else(|e| e.into_inner());
                            s.produced(bytes, n);
                        }
                        let end = matches!(r, Ok(None));
                        if tx.send(Msg::Item(r, state, held)).is_err() {
                            break;
                        }
                        if end && !stop2.load(Ordering::Relaxed) {
                            // A warm thread opens the next epoch (a failure to open it is
                            // met again, and reported, by the fresh iterator asking for it).
                            let Some((parent, epoch)) = &mut next_epoch else {
                                break;
                            };
                            let Some(e) = epoch.checked_add(1) else { break };
                            // The finished epoch's iterator goes first, so what it holds (a
                            // parallel op's workers and core slots, an unjudged AUTOTUNE trial)
                            // is free for the next epoch's when it starts.
                            drop(inner);
                            let Ok(it) = parent.iter(e) else { break };
                            (inner, *epoch) = (it, e);
                            if tx.send(Msg::Epoch(inner.state())).is_err() {
                                break;
                            }
                            continue;
                        }
                        if last {
                            break;
                        }
                    }
                };
                match exec {
                    Some(e) => e.enter(body),
                    None => body(),
                }
            })
            .map_err(|e| Error::thread(self.label(), e))?;
        self.running = Some(Running {
            rx,
            stop,
            pid: super::pid(),
            stats: row,
            marked: false,
        });
        Ok(())
    }
}

impl DatasetIter for PrefetchIter {
    fn next(&mut self) -> Result<Option<Example>> {
        if self.done {
            return Ok(None);
        }
        if self.running.is_none() {
            self.start()?;
        }
        let running = self.running.as_mut().expect("started");
        if running.pid != super::pid() {
            return Err(Error::Cancelled(format!(
                "this iterator was started in process {} and its prefetch thread did not survive \
                 fork(); create a new iterator in this process",
                running.pid
            )));
        }
        // The clock is read only when the buffer is empty: the consumer's wait, in the stats.
        let mut waited: Option<Instant> = None;
        let (r, state) = loop {
            let got = match running.rx.try_recv() {
                Ok(m) => Ok(m),
                Err(_) => {
                    waited.get_or_insert_with(Instant::now);
                    running.rx.recv_timeout(interrupt::TICK)
                }
            };
            match got {
                // The element leaves the buffer: its bytes are the consumer's now.
                Ok(Msg::Item(r, state, _held)) => break (r, state),
                Ok(Msg::Epoch(_)) => {
                    return Err(Error::Panic {
                        op: self.parent.name(),
                        message: "prefetch thread opened an epoch in the middle of one".into(),
                    })
                }
                Err(RecvTimeoutError::Timeout) => interrupt::check()?,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::Panic {
                        op: self.parent.name(),
                        message: "prefetch thread ended without a result".into(),
                    })
                }
            }
        };
        if let Some(s) = &running.stats {
            if let Some(t) = waited {
                s.add_consumer_wait(t);
            }
            if !running.marked {
                running.marked = true;
                s.taken();
            }
        }
        if matches!(r, Ok(None) | Err(Error::Panic { .. })) {
            self.done = true;
            let running = self.running.take();
            if let (Ok(None), Some(warm), Some(running)) = (&r, &self.warm, running) {
                // The thread is on the next epoch already: park it for the next `iter()`.
                let parked = Parked {
                    epoch: self.epoch.saturating_add(1),
                    running,
                    exec: self.exec.clone(),
                    depth: self.depth,
                };
                *warm.lock().unwrap_or_else(|e| e.into_inner()) = Some(parked);
            }
        }
        self.state = state;
        r
    }

    /// The input's state after the last element taken: a prefetch is an execution stage, and a
    /// state saved with it restores without it, and the other way round.
    fn state(&self) -> Json {
        self.state.clone()
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        self.running = None;
        let mut inner = self.parent.iter(self.epoch)?;
        self.exec.enter(|| inner.set_state(state))?;
        self.state = inner.state();
        self.pending = Some(inner);
        self.done = false;
        Ok(())
    }
}

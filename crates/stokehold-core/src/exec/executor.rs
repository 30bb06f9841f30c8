//! The [`Executor`]: what a running pipeline shares across its parallel ops and epochs — the
//! thread pool, the memory budget, the CPU slots AUTOTUNE may take, the stats and the trace.
//!
//! Parallel ops find their executor when their iterator is created: the executor installed on
//! the current thread (by [`Executor::iter`], or by a parallel op creating its input's iterators),
//! or else a new default one that the op's iterator owns. Worker threads install their
//! executor too, so ops created inside workers (interleave's inner datasets, repeat) join the same
//! pipeline.
//!
//! ```
//! use stokehold_core::exec::{ExecOptions, Executor, Parallelism};
//! use stokehold_core::{map_fn, Dataset, DatasetIter};
//! let ds = Dataset::range(100).map_parallel("double", map_fn(|e, _| Ok(e)), Parallelism::Autotune, true);
//! let exec = Executor::new(ExecOptions::default());
//! let mut it = exec.iter(&ds, 0).unwrap();
//! assert_eq!(it.collect_all().unwrap().len(), 100);
//! println!("{}", exec.stats().table());
//! ```

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::budget::Budget;
use super::pool::Pool;
use super::stats::{OpStats, StatsReport};
use super::steps::StepStats;
use super::trace::Trace;
use crate::error::Result;

/// Default memory budget: 1 GiB, a figure that fits a training host's input pipeline next to the
/// model; users with large elements raise it, users on small machines lower it.
pub const DEFAULT_MEMORY_BUDGET: usize = 1 << 30;

/// Settings of a pipeline's execution.
#[derive(Clone, Debug)]
pub struct ExecOptions {
    /// Bytes all buffers together may hold (default [`DEFAULT_MEMORY_BUDGET`]).
    pub memory_budget: usize,
    /// Cores AUTOTUNE may occupy (default: the machine's available parallelism).
    pub cores: usize,
    /// Trace events to keep for [`Executor::trace_json`] (default 0: tracing off).
    pub trace_events: usize,
    /// Whether a prefetch whose consumer reached the end of an epoch runs on into the next one
    /// (default true: the warm next epoch of [`crate::exec::prefetch`]). False: it stops at the
    /// end of each epoch, so no user function runs for an epoch nobody asked for.
    pub warm_start: bool,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            memory_budget: DEFAULT_MEMORY_BUDGET,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            trace_events: 0,
            warm_start: true,
        }
    }
}

pub(crate) struct Inner {
    pub(crate) opts: ExecOptions,
    pub(crate) pool: Pool,
    pub(crate) budget: Budget,
    /// CPU slots not held by autotuned ops (each autotuned worker beyond the first holds one).
    pub(crate) free_slots: AtomicUsize,
    pub(crate) trace: Trace,
    ops: Mutex<Vec<Arc<OpStats>>>,
    /// The pipeline's consumer's calls (see [`super::steps`]).
    steps: StepStats,
}

/// A pipeline's shared execution state (see the module docs). Cloning shares it.
#[derive(Clone)]
pub struct Executor {
    pub(crate) inner: Arc<Inner>,
}

thread_local! {
    static CURRENT: RefCell<Option<Executor>> = const { RefCell::new(None) };
}

impl Executor {
    /// A new executor with `opts`.
    pub fn new(opts: ExecOptions) -> Self {
        let cores = opts.cores.max(1);
        Executor {
            inner: Arc::new(Inner {
                budget: Budget::new(opts.memory_budget),
                free_slots: AtomicUsize::new(cores.saturating_sub(1)),
                trace: Trace::new(opts.trace_events),
                pool: Pool::new(),
                ops: Mutex::new(Vec::new()),
                steps: StepStats::default(),
                opts: ExecOptions { cores, ..opts },
            }),
        }
    }

    /// The executor installed on this thread, if any.
    pub fn current() -> Option<Executor> {
        CURRENT.with(|c| c.borrow().clone())
    }

    /// The executor installed on this thread, or a new default one. Thread-owning ops use
    /// [`DefaultExecutor::current_or_new`](DefaultExecutor::current_or_new)
    /// instead, so that the default one can be found from their dataset.
    pub fn current_or_default() -> Executor {
        Executor::current().unwrap_or_else(|| Executor::new(ExecOptions::default()))
    }

    /// Runs `f` with this executor installed on the current thread.
    pub fn enter<T>(&self, f: impl FnOnce() -> T) -> T {
        let prev = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        struct Restore(Option<Executor>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let prev = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = prev);
            }
        }
        let _restore = Restore(prev);
        // A budget of its own also bounds any one buffer sized by data or an argument.
        let budget = self.inner.opts.memory_budget;
        let ceiling = (budget != DEFAULT_MEMORY_BUDGET).then_some(budget);
        crate::alloc::with_budget_ceiling(ceiling, f)
    }

    /// The options.
    pub fn options(&self) -> &ExecOptions {
        &self.inner.opts
    }

    /// The memory budget.
    pub fn budget(&self) -> &Budget {
        &self.inner.budget
    }

    /// Runs `job` on the pool with this executor installed on the worker thread.
    pub fn spawn(&self, job: impl FnOnce() + Send + 'static) -> Result<()> {
        let me = Arc::downgrade(&self.inner);
        self.inner.pool.spawn(move || {
            // A weak reference: a worker must not keep the pool (and so itself) alive.
            match me.upgrade() {
                Some(inner) => {
                    let exec = Executor { inner };
                    exec.enter(job)
                }
                None => job(),
            }
        })
    }

    /// The counters of the op `label`, shared by every iterator of that op on this executor, so
    /// the stats cover the pipeline across epochs (two ops with the same label share a row).
    pub fn op_stats(&self, label: &str) -> Arc<OpStats> {
        let mut ops = self.inner.ops.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = ops.iter().find(|s| s.name == label) {
            return s.clone();
        }
        let s = Arc::new(OpStats::new(label.to_string()));
        ops.push(s.clone());
        s
    }

    /// Takes up to `want` CPU slots for an autotuned op; returns how many it got.
    pub fn take_slots(&self, want: usize) -> usize {
        let mut got = 0;
        let _ = self
            .inner
            .free_slots
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |free| {
                got = free.min(want);
                Some(free - got)
            });
        got
    }

    /// Returns CPU slots.
    pub fn give_slots(&self, n: usize) {
        self.inner.free_slots.fetch_add(n, Ordering::AcqRel);
    }

    /// CPU slots free now.
    pub fn free_slots(&self) -> usize {
        self.inner.free_slots.load(Ordering::Acquire)
    }

    /// The trace recorder.
    pub fn trace(&self) -> &Trace {
        &self.inner.trace
    }

    /// Stats of the parallel ops that ran on this executor, in the order they started.
    pub fn stats(&self) -> StatsReport {
        let ops = self.inner.ops.lock().unwrap_or_else(|e| e.into_inner());
        let reports = ops.iter().map(|s| s.report()).collect();
        StatsReport::new(reports, &self.inner.budget, self.inner.opts.cores)
            .with_steps(self.inner.steps.report())
    }

    /// The stats as a picture: a self-contained HTML page ([`super::picture`]), with the
    /// recorded window's timelines when a trace is on.
    pub fn stats_html(&self) -> String {
        self.stats().html(self.inner.trace.timeline().as_ref())
    }

    /// The pipeline's consumer's calls of `next()`, recorded by its iterator.
    pub fn steps(&self) -> &StepStats {
        &self.inner.steps
    }

    /// The recorded window of activity as Chrome trace JSON.
    pub fn trace_json(&self) -> String {
        self.inner.trace.to_chrome_json()
    }
}

/// The default executor of a thread-owning op: made by its first iterator and used by every later
/// one (each epoch's `iter()`), so that the op's threads, its statistics and what AUTOTUNE learnt
/// carry from one epoch to the next. Without it every epoch of a plain `for batch in ds` started
/// on a fresh executor: new threads, AUTOTUNE starting over from one worker every epoch, and
/// `ds.stats()` showing the last epoch alone. Cloning shares the slot: a stage re-applied by
/// `repeat` / `epochs` (see [`crate::ops::plan`]) reports into the slot of the op it copies, so
/// `ds.stats()` covers `ds.epochs()` too. A forked child makes its own (the parent's threads and
/// the memory its buffers held are not the child's).
///
/// A strong reference: stats stay readable after the loop. The executor's idle threads still exit
/// on their own (see [`super::pool`]), so it holds memory, not threads.
#[derive(Clone, Default)]
pub struct DefaultExecutor(Arc<Mutex<Option<(Executor, u32)>>>);

impl DefaultExecutor {
    /// The executor installed on this thread, or else this op's default one (made on first use).
    pub fn current_or_new(&self) -> Executor {
        Executor::current().unwrap_or_else(|| {
            let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let pid = super::pid();
            match &*slot {
                Some((exec, p)) if *p == pid => exec.clone(),
                _ => {
                    let exec = Executor::new(ExecOptions::default());
                    *slot = Some((exec.clone(), pid));
                    exec
                }
            }
        })
    }

    /// The default executor of this op, if one was made.
    pub fn get(&self) -> Option<Executor> {
        let slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slot.as_ref().map(|(exec, _)| exec.clone())
    }
}

/// Bytes one buffer of elements holds, accounted in an executor's memory budget for as long as
/// they are held: the one way a buffer counts in the budget (a prefetch queue, a parallel stage's
/// reorder buffer, a background reader's queue, a shuffle buffer, `group_by_window`'s windows,
/// `pack`'s open rows). Dropped, it gives back what it still holds, however the buffer ends.
/// Without an executor it only counts.
#[derive(Default)]
pub struct Reservation {
    exec: Option<Executor>,
    held: AtomicUsize,
}

impl Reservation {
    /// A reservation in `exec`'s budget (none: counted, not accounted).
    pub fn new(exec: Option<Executor>) -> Self {
        Reservation {
            exec,
            held: AtomicUsize::new(0),
        }
    }

    /// Accounts `bytes` more (admitted by the caller: see [`Budget::fits`]).
    pub fn hold(&self, bytes: usize) {
        self.held.fetch_add(bytes, Ordering::Relaxed);
        if let Some(e) = &self.exec {
            e.budget().add(bytes);
        }
    }

    /// Gives back `bytes` of what is held (at most what is held).
    pub fn release(&self, bytes: usize) {
        let mut gone = 0;
        let _ = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
                gone = bytes.min(h);
                Some(h - gone)
            });
        if let Some(e) = &self.exec {
            e.budget().sub(gone);
        }
    }

    /// Gives back everything held.
    pub fn release_all(&self) {
        let gone = self.held.swap(0, Ordering::Relaxed);
        if let Some(e) = &self.exec {
            e.budget().sub(gone);
        }
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// The budget it accounts in, if any.
    pub fn budget(&self) -> Option<&Budget> {
        self.exec.as_ref().map(Executor::budget)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.release_all();
    }
}

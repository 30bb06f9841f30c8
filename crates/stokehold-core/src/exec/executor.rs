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

use serde_json::Value as Json;

use super::budget::Budget;
use super::pool::Pool;
use super::stats::{OpStats, StatsReport};
use super::trace::Trace;
use crate::dataset::{Dataset, DatasetIter};
use crate::error::Result;
use crate::example::Example;

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
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            memory_budget: DEFAULT_MEMORY_BUDGET,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            trace_events: 0,
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
                opts: ExecOptions { cores, ..opts },
            }),
        }
    }

    /// The executor installed on this thread, if any.
    pub fn current() -> Option<Executor> {
        CURRENT.with(|c| c.borrow().clone())
    }

    /// The executor installed on this thread, or a new default one. Thread-owning ops use
    /// [`DefaultExecutor::current_or_new`](super::options::DefaultExecutor::current_or_new)
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
        f()
    }

    /// An iterator over epoch `epoch` of `ds` whose parallel ops run on this executor.
    pub fn iter(&self, ds: &Dataset, epoch: u64) -> Result<ExecIter> {
        let inner = self.enter(|| ds.iter(epoch))?;
        Ok(ExecIter {
            exec: self.clone(),
            inner,
        })
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
    }

    /// The recorded window of activity as Chrome trace JSON.
    pub fn trace_json(&self) -> String {
        self.inner.trace.to_chrome_json()
    }
}

/// An iterator that keeps its [`Executor`] (and so the pipeline's threads) alive, and exposes
/// its stats and trace.
pub struct ExecIter {
    exec: Executor,
    inner: Box<dyn DatasetIter>,
}

impl ExecIter {
    /// The executor (stats, trace, budget).
    pub fn executor(&self) -> &Executor {
        &self.exec
    }

    /// Shorthand for `executor().stats()`.
    pub fn stats(&self) -> StatsReport {
        self.exec.stats()
    }
}

impl DatasetIter for ExecIter {
    fn next(&mut self) -> Result<Option<Example>> {
        let inner = &mut self.inner;
        self.exec.enter(|| inner.next())
    }

    fn state(&self) -> Json {
        self.inner.state()
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let inner = &mut self.inner;
        self.exec.enter(|| inner.set_state(state))
    }
}

//! A stream read ahead on a pool thread: the building block of parallel interleave.
//!
//! The reader runs its iterator up to `depth` elements ahead of the consumer. Each element travels
//! with the iterator's state after it, so the consumer can checkpoint exactly. Queued bytes count
//! against the pipeline's memory budget (an empty queue may always take one element). An optional
//! [`Permits`] limits how many readers of one op call `next()` at the same time
//! (`num_parallel_calls`). Dropping the reader stops its thread after the element in progress.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::executor::Executor;
use super::stats::OpStats;
use crate::dataset::DatasetIter;
use crate::error::{Error, Result};
use crate::example::Example;

/// A counting semaphore shared by the readers of one op.
pub struct Permits {
    free: Mutex<usize>,
    cv: Condvar,
    /// How many there are: the readers that run at once.
    n: usize,
}

impl Permits {
    /// `n` permits.
    pub fn new(n: usize) -> Arc<Self> {
        Arc::new(Permits {
            free: Mutex::new(n.max(1)),
            cv: Condvar::new(),
            n: n.max(1),
        })
    }

    /// Takes a permit, giving up (false) when `stop` becomes true.
    fn acquire(&self, stop: &dyn Fn() -> bool) -> bool {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if stop() {
                return false;
            }
            if *free > 0 {
                *free -= 1;
                return true;
            }
            free = self
                .cv
                .wait_timeout(free, Duration::from_millis(20))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn release(&self) {
        *self.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.cv.notify_one();
    }
}

type Item = (Result<Option<Example>>, Json, usize);

struct St {
    items: VecDeque<Item>,
    stop: bool,
    live: bool,
    /// The consumer waits for an element; the reader waits for room. Each side wakes the
    /// other only when it waits (a notify is a system call, waiter or not), and after letting go
    /// of the lock, so that the woken thread does not sleep again on it.
    consumer_waits: bool,
    reader_waits: bool,
}

struct Shared {
    st: Mutex<St>,
    cv_out: Condvar,
    cv_in: Condvar,
    depth: usize,
    exec: Executor,
    stats: Arc<OpStats>,
    label: String,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, St> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An iterator running ahead on a pool thread.
pub struct Background {
    shared: Arc<Shared>,
}

impl Background {
    /// Starts reading `it` ahead, `depth` elements at most, on `exec`'s pool.
    pub fn start(
        mut it: Box<dyn DatasetIter>,
        depth: usize,
        permits: Option<Arc<Permits>>,
        exec: &Executor,
        stats: Arc<OpStats>,
        label: String,
    ) -> Result<Self> {
        let shared = Arc::new(Shared {
            st: Mutex::new(St {
                items: VecDeque::new(),
                stop: false,
                live: true,
                consumer_waits: false,
                reader_waits: false,
            }),
            cv_out: Condvar::new(),
            cv_in: Condvar::new(),
            depth: depth.max(1),
            exec: exec.clone(),
            stats,
            label,
        });
        let sh = shared.clone();
        exec.spawn(move || {
            read_ahead(&sh, &mut *it, permits.as_deref());
            let mut st = sh.lock();
            st.live = false;
            sh.cv_out.notify_all();
        })?;
        Ok(Background { shared })
    }

    /// True when an element (or the end) is ready to take without waiting.
    pub fn ready(&self) -> bool {
        !self.shared.lock().items.is_empty()
    }

    /// The next element and the iterator's state after it.
    pub fn take_next(&mut self) -> Result<(Option<Example>, Json)> {
        let sh = &self.shared;
        let mut st = sh.lock();
        let t0 = Instant::now();
        loop {
            if let Some((r, state, bytes)) = st.items.pop_front() {
                sh.exec.budget().sub(bytes);
                if bytes > 0 {
                    sh.stats.produced(bytes, st.items.len());
                }
                let wake = st.reader_waits;
                drop(st);
                if wake {
                    sh.cv_in.notify_all();
                }
                sh.stats.add_consumer_wait(t0);
                return r.map(|e| (e, state));
            }
            if !st.live {
                return Err(Error::Panic {
                    op: sh.label.clone(),
                    message: "reader thread ended without a result".into(),
                });
            }
            st.consumer_waits = true;
            st = super::interrupt::wait(&sh.cv_out, st, || sh.lock())
                .inspect_err(|_| sh.lock().consumer_waits = false)?;
            st.consumer_waits = false;
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.stop = true;
        let held: usize = st.items.iter().map(|i| i.2).sum();
        st.items.clear();
        self.shared.exec.budget().sub(held);
        self.shared.cv_in.notify_all();
    }
}

fn read_ahead(sh: &Shared, it: &mut dyn DatasetIter, permits: Option<&Permits>) {
    // The ops this reader runs are run by as many readers as there are permits at once.
    super::set_stage_threads(permits.map_or(1, |p| p.n));
    let mut est = 0usize;
    loop {
        {
            let mut st = sh.lock();
            loop {
                if st.stop {
                    return;
                }
                let n = st.items.len();
                if n == 0 || (n < sh.depth && sh.exec.budget().fits(est)) {
                    break;
                }
                st.reader_waits = true;
                st = sh
                    .cv_in
                    .wait_timeout(st, Duration::from_millis(20))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                st.reader_waits = false;
            }
        }
        let stopped = || sh.lock().stop;
        if let Some(p) = permits {
            if !p.acquire(&stopped) {
                return;
            }
        }
        let t = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| it.next()))
            .unwrap_or_else(|p| Err(Error::from_panic(&sh.label, p)));
        if let Some(p) = permits {
            p.release();
        }
        sh.stats.add_busy(t);
        sh.exec.trace().span("element", &sh.label, t);
        let last = !matches!(r, Ok(Some(_)));
        let bytes = r
            .as_ref()
            .ok()
            .and_then(|e| e.as_ref())
            .map_or(0, Example::nbytes);
        est = bytes.max(est / 2);
        let state = it.state();
        let mut st = sh.lock();
        if st.stop {
            return;
        }
        sh.exec.budget().add(bytes);
        st.items.push_back((r, state, bytes));
        let wake = st.consumer_waits;
        drop(st);
        if wake {
            sh.cv_out.notify_all();
        }
        if last {
            return;
        }
    }
}

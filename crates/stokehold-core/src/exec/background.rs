//! A stream read ahead on a pool thread: the building block of parallel interleave.
//!
//! The reader runs its iterator up to `depth` elements ahead of the consumer, more for small, quick
//! elements (about a millisecond of reading, see [`ahead`]). Each element travels
//! with the iterator's state after it, so the consumer can checkpoint exactly. Queued bytes count
//! against the pipeline's memory budget (an empty queue may always take one element). An optional
//! [`Permits`] limits how many readers of one op call `next()` at the same time
//! (`num_parallel_calls`). Dropping the reader stops its thread after the element in progress.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::executor::{Executor, Reservation};
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
    /// The queue length the reader fills to ([`ahead`]). The consumer takes the whole queue at
    /// once, so a reader that waits for room refills it in a burst.
    ahead: usize,
}

struct Shared {
    st: Mutex<St>,
    cv_out: Condvar,
    cv_in: Condvar,
    depth: usize,
    exec: Executor,
    /// The queue's bytes in the executor's budget.
    held: Reservation,
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
    /// Elements taken off the queue together under one lock, handed out one by one (each with
    /// its own state, so a checkpoint between them is exact).
    taken: VecDeque<Item>,
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
                ahead: depth.max(1),
            }),
            cv_out: Condvar::new(),
            cv_in: Condvar::new(),
            depth: depth.max(1),
            exec: exec.clone(),
            held: Reservation::new(Some(exec.clone())),
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
        Ok(Background {
            shared,
            taken: VecDeque::new(),
        })
    }

    /// True when an element (or the end) is ready to take without waiting.
    pub fn ready(&self) -> bool {
        !self.taken.is_empty() || !self.shared.lock().items.is_empty()
    }

    /// An element taken off the queue, its bytes out of the budget as it leaves our hands.
    fn hand_out(&self, (r, state, bytes): Item) -> Result<(Option<Example>, Json)> {
        self.shared.held.release(bytes);
        r.map(|e| (e, state))
    }

    /// The next element and the iterator's state after it.
    pub fn take_next(&mut self) -> Result<(Option<Example>, Json)> {
        if let Some(item) = self.taken.pop_front() {
            return self.hand_out(item);
        }
        let sh = &self.shared;
        let mut st = sh.lock();
        // The clock is read only when the queue is empty, as in the parallel map's `next`.
        let mut waited: Option<Instant> = None;
        loop {
            if !st.items.is_empty() {
                // Everything queued, in one lock: taking one element at a time, the consumer
                // and the reader met on this lock for every element.
                std::mem::swap(&mut self.taken, &mut st.items);
                let (mut n, mut bytes, mut buffered) = (0, 0, 0);
                for (k, item) in self.taken.iter().enumerate() {
                    if item.2 > 0 {
                        n += 1;
                        bytes += item.2;
                        buffered += self.taken.len() - k - 1;
                    }
                }
                sh.stats.produced_many(n, bytes, buffered);
                let wake = st.reader_waits;
                drop(st);
                if wake {
                    sh.cv_in.notify_all();
                }
                if let Some(t0) = waited {
                    sh.stats.add_consumer_wait(t0);
                }
                let item = self.taken.pop_front().expect("taken a non-empty queue");
                return self.hand_out(item);
            }
            waited.get_or_insert_with(Instant::now);
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
        st.items.clear();
        self.shared.held.release_all();
        self.shared.cv_in.notify_all();
    }
}

/// How far a reader runs ahead of its consumer: its queue holds about this much of its own
/// reading time (at least the `depth` it was started with), ...
const AHEAD_NS: u64 = 1_000_000;
/// ... at most this many bytes (a queue of larger elements stays at `depth`) ...
const AHEAD_BYTES: usize = 1 << 20;
/// ... and at most this many elements.
const AHEAD_MAX: usize = 256;

/// The queue length a reader fills to: `depth`, raised to about [`AHEAD_NS`] of reading for
/// elements that take `ns` each (within [`AHEAD_BYTES`] and [`AHEAD_MAX`]). With the fixed
/// `depth` of 2, a parallel interleave of small elements woke its reader and its consumer for
/// every element: 0.14M elements/s, about one context switch per element, against 9M read in
/// order (four inputs of 200k integers, two readers at once, `batch(1024)`).
fn ahead(depth: usize, ns: u64, bytes: usize) -> usize {
    let by_time = usize::try_from(AHEAD_NS / ns.max(1)).unwrap_or(usize::MAX);
    let by_bytes = AHEAD_BYTES / bytes.max(1);
    by_time.min(by_bytes).min(AHEAD_MAX).max(depth)
}

fn read_ahead(sh: &Shared, it: &mut dyn DatasetIter, permits: Option<&Permits>) {
    // The ops this reader runs are run by as many readers as there are permits at once.
    super::set_stage_threads(permits.map_or(1, |p| p.n));
    let (mut est, mut est_ns) = (0usize, 0u64);
    loop {
        {
            let mut st = sh.lock();
            loop {
                if st.stop {
                    return;
                }
                let n = st.items.len();
                if n == 0 || (n < st.ahead && sh.exec.budget().fits(est)) {
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
        // A burst: the permit is held until the queue is full or about AHEAD_NS has passed,
        // not taken and given back (waking another reader) for every element.
        // One clock read per element: each is timed from the end of the one before.
        let burst = Instant::now();
        let mut mark = burst;
        let done = loop {
            let r = catch_unwind(AssertUnwindSafe(|| it.next()))
                .unwrap_or_else(|p| Err(Error::from_panic(&sh.label, p)));
            let now = Instant::now();
            let ns = now.duration_since(mark).as_nanos() as u64;
            mark = now;
            sh.stats.element_time(ns);
            est_ns = if est_ns == 0 {
                ns
            } else {
                (est_ns * 7 + ns) / 8
            };
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
                break true;
            }
            sh.held.hold(bytes);
            st.items.push_back((r, state, bytes));
            st.ahead = ahead(sh.depth, est_ns, est);
            let full = st.items.len() >= st.ahead || !sh.exec.budget().fits(est);
            let wake = st.consumer_waits;
            drop(st);
            if wake {
                sh.cv_out.notify_all();
            }
            if last {
                break true;
            }
            if full || now.duration_since(burst).as_nanos() as u64 >= AHEAD_NS {
                break false;
            }
        };
        sh.stats.add_busy_time(burst);
        sh.exec.trace().span("element", &sh.stats.name, burst);
        if let Some(p) = permits {
            p.release();
        }
        if done {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dataset;

    #[test]
    fn a_queue_holds_about_a_millisecond_of_reading_within_its_bounds() {
        // Quick small elements: up to AHEAD_MAX; large ones: AHEAD_BYTES; slow ones: `depth`.
        assert_eq!(ahead(2, 100, 8), AHEAD_MAX);
        assert_eq!(ahead(2, 100, 256 << 10), 4);
        assert_eq!(ahead(2, 100, 4 << 20), 2);
        assert_eq!(ahead(2, 100_000, 8), 10);
        assert_eq!(ahead(2, 5_000_000, 8), 2);
        assert_eq!(ahead(16, 5_000_000, 8), 16);
    }

    #[test]
    fn a_reader_of_small_quick_elements_runs_ahead_past_its_depth_and_hands_out_all_in_order() {
        let exec = Executor::current_or_default();
        let stats = exec.op_stats("background test");
        let it = Dataset::range(1000).iter(0).unwrap();
        let mut bg =
            Background::start(it, 2, Some(Permits::new(1)), &exec, stats, "t".into()).unwrap();
        // The consumer takes whole queues: some hold more than 2 (the old fixed depth). It
        // pauses now and then so that the reader can fill one; a reader whose estimate was
        // thrown by one slow element (a preemption) still refills, and re-measures, as it goes.
        let (mut got, mut most) = (Vec::new(), 0);
        loop {
            if got.len() % 100 == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
            let (e, state) = bg.take_next().unwrap();
            most = most.max(bg.taken.len() + 1);
            let Some(e) = e else { break };
            let x = e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0];
            assert_eq!(
                state["pos"],
                x + 1,
                "each element travels with the state after it"
            );
            got.push(x);
        }
        assert_eq!(got, (0..1000).collect::<Vec<i64>>());
        assert!(
            most > 2,
            "the reader stayed at its depth: at most {most} taken at once"
        );
    }
}

//! The pipeline's thread pool: threads are started on demand, reused by every parallel op of the
//! pipeline and across epochs, and end when the pool is dropped or after a short idle time.
//!
//! Jobs are long-running worker loops (a parallel map's worker runs until its input ends or its
//! iterator is dropped), so the pool never queues a job behind a busy thread: if no thread is idle
//! it starts one. That rules out the deadlock of nested parallel ops waiting on each other in a
//! fixed-size pool; how many workers run at once is each op's parallelism, which AUTOTUNE keeps
//! within the core count.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::error::{Error, Result};

/// An idle thread waits this long for a new job before it exits. Short, so that threads are gone
/// soon after an iterator is dropped (the issue asks for < 100 ms), long enough to carry a thread
/// over an epoch boundary or from one op's worker to the next.
const IDLE_EXIT: Duration = Duration::from_millis(40);

type Job = Box<dyn FnOnce() + Send + 'static>;

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// Threads waiting for a job, minus jobs queued for them.
    idle: usize,
    shutdown: bool,
    /// The process the threads belong to: after fork() the child has none of them.
    pid: u32,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

/// A pool of reusable threads (see the module docs).
pub struct Pool {
    shared: Arc<Shared>,
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new()
    }
}

impl Pool {
    /// An empty pool.
    pub fn new() -> Self {
        Pool {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    pid: super::pid(),
                    ..State::default()
                }),
                cv: Condvar::new(),
            }),
        }
    }

    /// Runs `job` on an idle thread, or on a new one. A panic in `job` is caught (jobs report
    /// their own errors; the thread survives).
    pub fn spawn(&self, job: impl FnOnce() + Send + 'static) -> Result<()> {
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.pid != super::pid() {
            // A forked child: the idle threads counted here stayed in the parent.
            st.idle = 0;
            st.queue.clear();
            st.pid = super::pid();
        }
        if st.idle > 0 {
            st.idle -= 1;
            st.queue.push_back(Box::new(job));
            self.shared.cv.notify_one();
            return Ok(());
        }
        drop(st);
        let shared = self.shared.clone();
        let first: Job = Box::new(job);
        std::thread::Builder::new()
            .name("stokehold-worker".into())
            .spawn(move || worker(shared, first))
            .map(|_| ())
            .map_err(|e| Error::thread("a worker of the pipeline's pool", e))
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.shutdown = true;
        self.shared.cv.notify_all();
    }
}

fn worker(shared: Arc<Shared>, first: Job) {
    super::mark_stage_thread();
    // What this thread freed and its allocator keeps for it (a decoder's buffers) goes back to
    // the system as the thread ends, not after the allocator's own delay, which nothing on a
    // finished thread would act on (`alloc::release_freed`).
    struct Release;
    impl Drop for Release {
        fn drop(&mut self) {
            crate::alloc::release_freed();
        }
    }
    let _release = Release;
    let mut job = Some(first);
    loop {
        if let Some(j) = job.take() {
            // A job starts alone; a parallel stage's worker (per run) or an interleave's reader
            // says how many run its stage's work.
            super::set_stage_threads(1);
            let _ = catch_unwind(AssertUnwindSafe(j));
        }
        let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.shutdown && st.queue.is_empty() {
            return;
        }
        st.idle += 1;
        loop {
            if let Some(j) = st.queue.pop_front() {
                // The spawner already took this thread off the idle count.
                job = Some(j);
                break;
            }
            if st.shutdown {
                st.idle -= 1;
                return;
            }
            let (next, timeout) = shared
                .cv
                .wait_timeout(st, IDLE_EXIT)
                .unwrap_or_else(|e| e.into_inner());
            st = next;
            if timeout.timed_out() && st.queue.is_empty() {
                st.idle -= 1;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn runs_jobs_and_survives_panics() {
        let pool = Pool::new();
        let n = Arc::new(AtomicUsize::new(0));
        pool.spawn(|| panic!("boom")).unwrap();
        for _ in 0..20 {
            let n = n.clone();
            pool.spawn(move || {
                n.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
        for _ in 0..500 {
            if n.load(Ordering::SeqCst) == 20 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(n.load(Ordering::SeqCst), 20);
    }
}

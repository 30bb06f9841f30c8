//! Execution: threads, channels, budgets, autotuning, stats, and the ops that own threads.

pub mod autotune;
pub mod background;
pub mod budget;
pub mod copy;
pub mod executor;
pub mod interrupt;
pub mod options;
pub mod parallel;
pub mod pool;
pub mod prefetch;
pub mod stats;
pub mod trace;

pub use budget::Budget;
pub use executor::{ExecIter, ExecOptions, Executor, DEFAULT_MEMORY_BUDGET};
pub use options::{executor_of, DefaultExecutor};
pub use parallel::{Parallelism, AUTOTUNE};
pub use stats::{OpReport, OpStats, StatsReport};

use std::sync::atomic::{AtomicU32, Ordering};

/// This process's id, as `std::process::id()`, without a system call each time: threads do not
/// survive `fork()`, so iterators check the process they run in at every element (a `getpid`
/// each was 5 % of an inline Python map's consumer, `perf record`). Cached, and forgotten by a
/// `pthread_atfork` child hook, which runs in the child before `fork()` returns there.
pub(crate) fn pid() -> u32 {
    static PID: AtomicU32 = AtomicU32::new(0);
    static HOOK: std::sync::Once = std::sync::Once::new();
    extern "C" fn forget() {
        PID.store(0, Ordering::Relaxed);
    }
    let known = PID.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    // SAFETY: registers a handler that only stores to an atomic (async-signal-safe, as a
    // handler run in a forked child must be); registered once, never unregistered.
    HOOK.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(forget));
    });
    let now = std::process::id();
    PID.store(now, Ordering::Relaxed);
    now
}

/// CPU time of the calling thread so far, in ns (`None` where the platform has no such clock).
pub(crate) fn thread_cpu_ns() -> Option<u64> {
    cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process so far, in ns (`None` where the platform has no such clock).
pub(crate) fn process_cpu_ns() -> Option<u64> {
    cpu_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn cpu_clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

//! Execution: threads, channels, budgets, autotuning, stats, and the ops that own threads.

pub mod autotune;
pub mod background;
pub mod budget;
pub mod copy;
pub mod executor;
pub mod histogram;
pub mod interrupt;
mod openmetrics;
pub mod options;
pub mod parallel;
pub mod parallelism;
mod period;
pub mod picture;
pub mod pool;
pub mod prefetch;
pub mod sampler;
pub mod stats;
pub mod steps;
pub mod trace;

pub use budget::Budget;
pub use executor::DefaultExecutor;
pub use executor::{ExecOptions, Executor, Reservation, DEFAULT_MEMORY_BUDGET};
pub use options::{buffer_reservation, executor_of, ExecIter};
pub use parallel::handoffs_pending;
pub use parallelism::{Parallelism, AUTOTUNE};
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

thread_local! {
    /// Set on the threads stokehold starts (pool workers, prefetch threads): elements taken on
    /// one feed another stage, not the pipeline's consumer.
    static STAGE_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// How many threads run the stage the calling thread works for: a parallel stage's workers
    /// set its parallelism before each run, an interleave's readers their `num_parallel_calls`;
    /// every other thread runs its work alone.
    static STAGE_THREADS: std::cell::Cell<usize> = const { std::cell::Cell::new(1) };
    /// On a parallel stage's worker: whether its stage has been stopped (its iterator dropped).
    static STOP_PROBE: std::cell::RefCell<Option<StopProbe>> = const { std::cell::RefCell::new(None) };
}

/// Whether the calling thread's stage has been stopped: see [`stage_stopping`].
pub(crate) type StopProbe = Box<dyn Fn() -> bool>;

/// Gives the calling thread (a parallel stage's worker) the probe [`stage_stopping`] asks, until
/// the returned guard drops: a pool thread that goes on to other work must not answer for a
/// stage it no longer works for.
pub(crate) fn set_stop_probe(probe: StopProbe) -> StopProbeGuard {
    STOP_PROBE.with(|p| *p.borrow_mut() = Some(probe));
    StopProbeGuard(())
}

/// Clears the calling thread's stop probe when dropped (see [`set_stop_probe`]).
pub(crate) struct StopProbeGuard(());

impl Drop for StopProbeGuard {
    fn drop(&mut self) {
        STOP_PROBE.with(|p| *p.borrow_mut() = None);
    }
}

/// Whether the parallel stage the calling thread works for has been stopped (its iterator
/// dropped), so a function that waits for something else (a process-map worker stuck in the
/// user's function) can stop waiting. False on any other thread.
pub fn stage_stopping() -> bool {
    STOP_PROBE.with(|p| p.borrow().as_ref().is_some_and(|f| f()))
}

/// Says that the calling thread is one of `n` that run its stage's work (see [`stage_threads`]).
pub(crate) fn set_stage_threads(n: usize) {
    STAGE_THREADS.with(|s| s.set(n.max(1)));
}

/// How many threads run the work of the calling thread's stage: the busy time of an op built
/// on a stage's workers (a batch inside `parallelize`) is theirs summed, and is shown per thread
/// by this count.
pub(crate) fn stage_threads() -> usize {
    STAGE_THREADS.with(|s| s.get())
}

/// Marks the calling thread as one of stokehold's own (see [`on_stage_thread`]).
pub(crate) fn mark_stage_thread() {
    STAGE_THREAD.with(|s| s.set(true));
}

/// Whether the calling thread is one stokehold started: a stage taking an element here hands it
/// to another stage; elsewhere, to the pipeline's consumer.
pub(crate) fn on_stage_thread() -> bool {
    STAGE_THREAD.with(|s| s.get())
}

/// CPU time of the calling thread so far, in ns (`None` where the platform has no such clock).
pub(crate) fn thread_cpu_ns() -> Option<u64> {
    cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// What a worker's run is timed by: its thread's CPU time and the time it spent runnable but
/// waiting for a core, so far (ns). Busy time that is neither was spent blocked (a read, a page
/// fault, a lock).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct ThreadTimes {
    pub cpu: u64,
    /// `None` where the kernel does not say (no `/proc/thread-self/schedstat`).
    pub queued: Option<u64>,
}

/// The calling thread's [`ThreadTimes`] (`None` where the platform has no thread CPU clock).
pub(crate) fn thread_times() -> Option<ThreadTimes> {
    Some(ThreadTimes {
        cpu: thread_cpu_ns()?,
        queued: thread_queued_ns(),
    })
}

/// Time the calling thread has spent runnable but waiting for a core so far, in ns: the second
/// field of `/proc/thread-self/schedstat` (the scheduler's run delay, kept wherever
/// `CONFIG_SCHED_INFO` is, as on the distributions' kernels). A thread that waits there is short
/// of a core, not of work. The file is opened once per thread (it names the thread that opens
/// it) and read with one `pread`.
#[cfg(target_os = "linux")]
pub(crate) fn thread_queued_ns() -> Option<u64> {
    use std::os::unix::fs::FileExt;
    thread_local! {
        static SCHEDSTAT: Option<std::fs::File> =
            std::fs::File::open("/proc/thread-self/schedstat").ok();
    }
    SCHEDSTAT.with(|f| {
        let mut buf = [0u8; 96];
        let n = f.as_ref()?.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        text.split_ascii_whitespace().nth(1)?.parse().ok()
    })
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn thread_queued_ns() -> Option<u64> {
    None
}

/// CPU time every process on the machine has spent so far, in ns: the user, nice, system, irq
/// and softirq ticks of the first line of `/proc/stat` (guests count in user; idle, iowait and
/// steal, time no process of this machine ran, do not). Less [`process_cpu_ns`] over a period, it
/// is what other processes took of the cores (to the tick: 10 ms a core on most kernels).
#[cfg(target_os = "linux")]
pub(crate) fn machine_cpu_ns() -> Option<u64> {
    use std::io::Read;
    // SAFETY: sysconf reads a constant of the system and has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
    let mut buf = [0u8; 512];
    let n = std::fs::File::open("/proc/stat")
        .ok()?
        .read(&mut buf)
        .ok()?;
    let line = std::str::from_utf8(&buf[..n]).ok()?.lines().next()?;
    let mut fields = line.split_ascii_whitespace();
    (fields.next()? == "cpu").then_some(())?;
    let mut ticks = [0u64; 7];
    for t in &mut ticks {
        *t = fields.next()?.parse().ok()?;
    }
    let [user, nice, system, _idle, _iowait, irq, softirq] = ticks;
    Some((user + nice + system + irq + softirq) * (1_000_000_000 / hz))
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn machine_cpu_ns() -> Option<u64> {
    None
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// CPU time of process `pid` so far (user and system, `/proc/<pid>/stat`), in ns.
    fn cpu_of(pid: u32) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        // Fields after the command (which may hold spaces) in parentheses: utime is the 14th.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        // SAFETY: sysconf reads a constant of the system and has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        ticks * (1_000_000_000 / hz)
    }

    /// A spinning child process takes CPU time that the machine counts and this process does
    /// not: however busy the machine (which only adds to what other processes took), at least
    /// the child's own CPU time.
    #[test]
    fn another_process_spinning_shows_in_the_machine_cpu_time_and_not_in_ours() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("sh");
        let (m0, p0, c0) = (
            machine_cpu_ns().expect("/proc/stat"),
            process_cpu_ns().unwrap(),
            cpu_of(child.id()),
        );
        std::thread::sleep(std::time::Duration::from_millis(400));
        let (m1, p1, c1) = (
            machine_cpu_ns().unwrap(),
            process_cpu_ns().unwrap(),
            cpu_of(child.id()),
        );
        child.kill().unwrap();
        child.wait().unwrap();
        let others = (m1 - m0).saturating_sub(p1 - p0);
        let spun = c1 - c0;
        // Both count in ticks (10 ms on most kernels): a few of them either way.
        assert!(spun > 0, "the child never ran");
        assert!(
            others + 50_000_000 >= spun,
            "others took {others} ns, the child alone {spun} ns"
        );
    }

    /// More spinning threads than cores: each one waits for a core part of the time, and its
    /// schedstat says so; a thread that sleeps does not.
    #[test]
    fn a_thread_short_of_a_core_counts_its_wait_and_a_sleeping_one_does_not() {
        let spinners = std::thread::available_parallelism().map_or(2, |n| n.get()) * 2 + 1;
        let queued: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..spinners)
                .map(|_| {
                    s.spawn(|| {
                        let a = thread_queued_ns().expect("schedstat");
                        let t = std::time::Instant::now();
                        let mut x = 0u64;
                        while t.elapsed() < std::time::Duration::from_millis(300) {
                            x = std::hint::black_box(x.wrapping_add(1));
                        }
                        thread_queued_ns().expect("schedstat") - a
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(queued.iter().any(|&q| q > 0), "{queued:?}");
        let t = std::time::Instant::now();
        let a = thread_times().expect("thread clock");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let b = thread_times().expect("thread clock");
        let awake = t
            .elapsed()
            .saturating_sub(std::time::Duration::from_millis(50));
        // Asleep, a thread neither runs nor waits for a core: its CPU time stands, and its wait
        // is at most the time it was awake (the wait for a core after it woke, however long a
        // loaded machine made that), never the 50 ms it slept.
        let waited = b.queued.unwrap() - a.queued.unwrap();
        assert!(b.cpu - a.cpu < 10_000_000, "{} ns", b.cpu - a.cpu);
        assert!(
            waited <= awake.as_nanos() as u64 + 1_000_000,
            "waited {waited} ns, awake {awake:?}"
        );
    }
}

//! Turns at Python: the workers of one stage that runs a Python function take turns at running it
//! when that is faster than letting them all ask for the GIL at once.
//!
//! Why: a Python function that lets go of the GIL for short stretches (every numpy call on more
//! than a few hundred values does) hands the GIL to another worker waiting for it at each such
//! stretch, and the two trade it back and forth: a system call to wake the waiter per release,
//! and a context switch about every third element. Numpy's `sin` over 2000 values at two workers
//! ran at 118-124k elements/s against 188-191k at one (0.31-0.36 voluntary context switches per
//! element, 0.25-0.29 of a core in the kernel; `getrusage` around three epochs), and a map of
//! `np.load` at two workers at 0.6-0.66x of one in every full bench run before this
//! (bench/results/2026-12-04.md, 2026-12-05.md, and 2026-12-06.md as of commit cc48059). Workers that take turns wait on the turn
//! instead: the GIL's holder lets go of it with nobody waiting, which costs nothing.
//!
//! But a function that lets go of the GIL for long (a decoder, a read from disk, a sleep) is what
//! several workers are for, and taking turns would run it on one. So a stage measures both: its
//! calls per second of activity (wall time with at least one of its workers running or waiting to
//! run the function) for [`PROBE`] letting everyone in, then for [`PROBE`] taking turns, keeps the
//! faster for a while (at most [`HOLD`]), and measures again. One worker, or the consumer running
//! the stage inline, never waits for a turn, whichever way it is decided.
//!
//! The turn is not handed over in order: a worker that ends its run and starts the next takes it
//! again if a woken waiter has not yet (handing it to the first waiter left the GIL idle while
//! that one woke: `bench/pymap`'s `np.load` map at two workers taking turns gave 13.2-14.2k
//! files/s so, 16.8-18.8k as it is, against 17.5-20.7k at one worker). In order, the stage's
//! window bounds what one worker runs ahead, so a waiter gets its turn within a few runs; as
//! completed, nothing does but [`WAIT_MAX`].
//!
//! `STOKEHOLD_PYTHON_TURNS=on|off` (read when the map is made) fixes the choice instead; on a
//! free-threaded CPython, which has no GIL to trade, turns are off. A worker never waits longer
//! than [`WAIT_MAX`] for a turn (a function that iterates a pipeline over its own map would
//! otherwise wait for itself), and a thread that holds a turn (of this stage or any other) runs
//! a nested run at once: a function reading another Python map while its own stage's workers
//! wait for it would otherwise make them wait for that map's turn too (with turns fixed on, a
//! two-worker map whose function read a busy two-worker map by index took 0.87 s for 2000
//! elements against 0.14 s without turns, `/tmp/cpu/nested.py` in a scratch run). `stokehold._native._python_turns()` lists each live stage's choice and the rates it
//! measured.
//!
//! The choice reads its time through a [`Clock`]: the monotonic clock for every stage, a script
//! in `stokehold._native._python_turns_scripted`, which runs the same rule ([`St::advance`]) on
//! rates a test gives, so that what the tests check of the choice does not depend on how busy
//! the machine that runs them is.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// How long (of activity) each way is measured.
pub const PROBE: Duration = Duration::from_millis(50);
/// Calls a measurement needs at least (a slow function's probe lasts until it has made them).
pub const PROBE_CALLS: u64 = 32;
/// How long (of activity) a verdict holds before both ways are measured again.
pub const HOLD: Duration = Duration::from_secs(2);
/// A verdict this clear (the faster way's rate over the slower's) holds for [`HOLD`] at once.
pub const CLEAR: f64 = 1.25;
/// The longest a worker waits for its turn before it runs anyway.
pub const WAIT_MAX: Duration = Duration::from_millis(100);

/// Whether this interpreter has a GIL (set once at import; a free-threaded build has none).
static GIL: AtomicBool = AtomicBool::new(true);

thread_local! {
    /// Turns this thread holds (nested runs of stages that take turns).
    static HOLDING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Live stages, for `_python_turns()`.
static LIVE: Mutex<Vec<Weak<Turns>>> = Mutex::new(Vec::new());

/// What a stage measures its activity with: [`Monotonic`] for every stage, a [`Script`] in
/// `_python_turns_scripted`.
pub trait Clock: Send + Sync {
    /// Time since an origin of the clock's own, never going back.
    fn now(&self) -> Duration;
}

/// The monotonic clock of a real machine.
pub struct Monotonic;

impl Clock for Monotonic {
    fn now(&self) -> Duration {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed()
    }
}

/// A clock that stands still until its script moves it.
#[derive(Default)]
struct Script(Mutex<Duration>);

impl Script {
    fn pass(&self, dt: Duration) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) += dt;
    }
}

impl Clock for Script {
    fn now(&self) -> Duration {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How a stage chooses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Policy {
    Measure,
    Always,
    Never,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// Before the first measurement: everyone let in (as before turns existed), nothing
    /// measured (a stage's first [`PROBE`], its workers starting, measures unlike the rest: two
    /// workers of numpy's `sin` let in together made 170-190k calls/s there, 108-126k after).
    Warm,
    /// Measuring with everyone let in.
    Free,
    /// Measuring with turns taken.
    Turns,
    /// Keeping the faster way: for [`HOLD`] when it was faster by [`CLEAR`] or more; else for
    /// twice [`PROBE`] after the first verdict and twice as long after each next one, at most
    /// [`HOLD`] (a close verdict may be noise, or made while the workers started).
    Hold,
}

/// The turn of one stage (one Python map), shared by its workers and iterators.
pub struct Turns {
    label: String,
    policy: Policy,
    clock: Arc<dyn Clock>,
    st: Mutex<St>,
    cv: Condvar,
}

struct St {
    /// The process this state belongs to (a forked child starts again).
    pid: u32,
    /// Whether runs take turns now.
    taking: bool,
    /// The thread whose turn it is.
    holder: Option<ThreadId>,
    /// Threads in a run or waiting for one.
    inside: usize,
    /// When `inside` last went from none to one (on the stage's [`Clock`]).
    since: Option<Duration>,
    /// Activity before `since`.
    active: Duration,
    /// Calls made.
    calls: u64,
    phase: Phase,
    /// Activity and calls when the phase began.
    phase_active: Duration,
    phase_calls: u64,
    /// The last measurements (calls per second of activity), and how many verdicts were made.
    free_rate: f64,
    turns_rate: f64,
    verdicts: u64,
}

impl St {
    fn new(policy: Policy) -> Self {
        St {
            pid: std::process::id(),
            taking: policy == Policy::Always,
            holder: None,
            inside: 0,
            since: None,
            active: Duration::ZERO,
            calls: 0,
            phase: Phase::Warm,
            phase_active: Duration::ZERO,
            phase_calls: 0,
            free_rate: 0.0,
            turns_rate: 0.0,
            verdicts: 0,
        }
    }

    /// Activity until `now`.
    fn activity(&self, now: Duration) -> Duration {
        self.active + self.since.map_or(Duration::ZERO, |s| now.saturating_sub(s))
    }

    /// How long the last verdict holds (see [`Phase::Hold`]).
    fn hold(&self) -> Duration {
        let (hi, lo) = if self.turns_rate >= self.free_rate {
            (self.turns_rate, self.free_rate)
        } else {
            (self.free_rate, self.turns_rate)
        };
        if hi >= CLEAR * lo {
            HOLD
        } else {
            HOLD.min(PROBE * (1 << self.verdicts.min(8)))
        }
    }

    /// Ends the phase when it has measured enough by `now`; true when `taking` changed. The one
    /// place of the rule: both ways measured in turn, the faster kept (turns on a tie).
    fn advance(&mut self, now: Duration) -> bool {
        let active = self.activity(now);
        let (a, c) = (active - self.phase_active, self.calls - self.phase_calls);
        let measured = a >= PROBE && c >= PROBE_CALLS;
        let rate = c as f64 / a.as_secs_f64().max(1e-9);
        let was = self.taking;
        match self.phase {
            Phase::Warm if measured => {
                self.phase = Phase::Free;
                self.taking = false;
            }
            Phase::Free if measured => {
                self.free_rate = rate;
                self.phase = Phase::Turns;
                self.taking = true;
            }
            Phase::Turns if measured => {
                self.turns_rate = rate;
                self.phase = Phase::Hold;
                self.taking = self.turns_rate >= self.free_rate;
                self.verdicts += 1;
            }
            Phase::Hold if a >= self.hold() => {
                self.phase = Phase::Free;
                self.taking = false;
            }
            _ => return false,
        }
        self.phase_active = active;
        self.phase_calls = self.calls;
        was != self.taking
    }
}

impl Turns {
    /// A stage's turn, its policy from `STOKEHOLD_PYTHON_TURNS` (off without a GIL).
    pub fn new(label: &str) -> Arc<Self> {
        let policy = match std::env::var("STOKEHOLD_PYTHON_TURNS").as_deref() {
            _ if !GIL.load(Relaxed) => Policy::Never,
            Ok("on") => Policy::Always,
            Ok("off") => Policy::Never,
            _ => Policy::Measure,
        };
        let t = Arc::new(Turns::with_clock(label, policy, Arc::new(Monotonic)));
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&t));
        t
    }

    /// A stage's turn that reads `clock` (not listed by `_python_turns`).
    fn with_clock(label: &str, policy: Policy, clock: Arc<dyn Clock>) -> Self {
        Turns {
            label: label.to_string(),
            policy,
            clock,
            st: Mutex::new(St::new(policy)),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, St> {
        let mut st = self.st.lock().unwrap_or_else(|e| e.into_inner());
        if st.pid != std::process::id() {
            *st = St::new(self.policy);
        }
        st
    }

    /// Runs `body` (a run of `n` calls of the function), in its turn when the stage takes turns.
    pub fn run(&self, n: usize, body: impl FnOnce()) {
        if self.policy == Policy::Never {
            return body();
        }
        if HOLDING.with(|h| h.get()) > 0 {
            return body();
        }
        let me = std::thread::current().id();
        let mut st = self.lock();
        if st.inside == 0 {
            st.since = Some(self.clock.now());
        }
        st.inside += 1;
        let mut held = false;
        if st.taking {
            let start = Instant::now();
            while st.holder.is_some() && st.taking {
                let Some(left) = WAIT_MAX.checked_sub(start.elapsed()) else {
                    break;
                };
                st = self
                    .cv
                    .wait_timeout(st, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            if st.holder.is_none() && st.taking {
                st.holder = Some(me);
                held = true;
                HOLDING.with(|h| h.set(h.get() + 1));
            }
        }
        drop(st);
        // Give the turn back even if the body unwinds (a panic is caught further up).
        struct Leave<'a>(&'a Turns, bool, usize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                let mut st = self.0.lock();
                let now = self.0.clock.now();
                if self.1 {
                    st.holder = None;
                    HOLDING.with(|h| h.set(h.get() - 1));
                }
                st.calls += self.2 as u64;
                // Saturating: a function that forked and returned in the child finds a fresh state.
                st.inside = st.inside.saturating_sub(1);
                if st.inside == 0 {
                    let ran = st
                        .since
                        .take()
                        .map_or(Duration::ZERO, |s| now.saturating_sub(s));
                    st.active += ran;
                }
                let changed = self.0.policy == Policy::Measure && st.advance(now);
                if changed {
                    self.0.cv.notify_all();
                } else if self.1 && st.inside > 0 {
                    self.0.cv.notify_one();
                }
            }
        }
        let _leave = Leave(self, held, n);
        body();
    }
}

/// Records whether the interpreter has a GIL (`sys._is_gil_enabled`, 3.13+; older ones do).
pub fn init(py: Python<'_>) -> PyResult<()> {
    let sys = py.import("sys")?;
    let gil = match sys.getattr("_is_gil_enabled") {
        Ok(f) => f.call0()?.is_truthy()?,
        Err(_) => true,
    };
    GIL.store(gil, Relaxed);
    Ok(())
}

/// A stage's choice as `_python_turns` and `_python_turns_scripted` report it.
fn report<'py>(py: Python<'py>, t: &Turns) -> PyResult<Bound<'py, PyDict>> {
    let st = t.lock();
    let d = PyDict::new(py);
    d.set_item("label", &t.label)?;
    d.set_item("policy", format!("{:?}", t.policy).to_lowercase())?;
    d.set_item("phase", format!("{:?}", st.phase).to_lowercase())?;
    d.set_item("taking_turns", st.taking)?;
    d.set_item("free_rate", st.free_rate)?;
    d.set_item("turns_rate", st.turns_rate)?;
    d.set_item("verdicts", st.verdicts)?;
    Ok(d)
}

/// Each live stage's choice: its label, policy, phase (`warm`, `free`, `turns`: measuring that
/// way; `hold`: keeping the faster), whether it takes turns now, the last rates measured each
/// way (calls per second of activity) and how many verdicts it has made.
#[pyfunction]
#[pyo3(name = "_python_turns")]
pub fn python_turns(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let live: Vec<Arc<Turns>> = LIVE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    live.iter().map(|t| report(py, t)).collect()
}

/// The choice of a measuring stage on a described machine: one run of `calls_per_run` calls
/// per entry of `runs`, `(free_rate, turns_rate)`, made at `free_rate` calls per second (of
/// activity) with everyone let in and at `turns_rate` taking turns, whichever the stage does at
/// that run, on a [`Script`] clock that only those runs move; the stage's report (as
/// `_python_turns`) after each run. The rule is the stages' own ([`St::advance`]); only the
/// clock and the rates are the caller's, so a test of the choice holds on any machine.
#[pyfunction]
#[pyo3(name = "_python_turns_scripted", signature = (runs, calls_per_run = 1))]
pub fn python_turns_scripted(
    py: Python<'_>,
    runs: Vec<(f64, f64)>,
    calls_per_run: u32,
) -> PyResult<Vec<Bound<'_, PyDict>>> {
    if calls_per_run == 0 {
        return Err(PyValueError::new_err(
            "_python_turns_scripted(calls_per_run=0): must be > 0",
        ));
    }
    let clock = Arc::new(Script::default());
    let t = Turns::with_clock("scripted", Policy::Measure, clock.clone());
    let mut reports = Vec::with_capacity(runs.len());
    for (free_rate, turns_rate) in runs {
        if ![free_rate, turns_rate]
            .iter()
            .all(|r| r.is_finite() && *r > 0.0)
        {
            return Err(PyValueError::new_err(format!(
                "_python_turns_scripted: rates must be finite and > 0, got \
                 ({free_rate}, {turns_rate})"
            )));
        }
        let rate = if t.lock().taking {
            turns_rate
        } else {
            free_rate
        };
        // At least 1 ns: a run that took no time measures no activity.
        let dt = Duration::try_from_secs_f64(f64::from(calls_per_run) / rate)
            .map_err(|e| PyValueError::new_err(format!("_python_turns_scripted: {rate}: {e}")))?
            .max(Duration::from_nanos(1));
        t.run(calls_per_run as usize, || clock.pass(dt));
        reports.push(report(py, &t)?);
    }
    Ok(reports)
}

//! Python callables as map and filter functions.
//!
//! The function runs with the GIL taken only for its own duration (`Python::attach`); callers of
//! the pipeline release the GIL around all Rust work, so a prefetch thread can run Python while
//! the consumer waits. The function's exception travels as a boxed `PyErr` inside
//! [`Error::Callback`] and is re-raised as itself at the boundary (see `errors::to_pyerr`).
//!
//! Interpreter exit: a background thread that is inside Python while the interpreter finalizes
//! aborts the process (CPython ends the thread under Rust frames that still hold the thread
//! state). So the module registers an `atexit` hook, [`shutdown`], that refuses new calls into
//! Python and waits (at most [`SHUTDOWN_WAIT`]) for the calls in flight to leave; pipelines
//! still running then end with `CancelledError`.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyIterator};
use stokehold_core::exec::handoffs_pending;
use stokehold_core::{
    generator_fn, key_fn, Ctx, Error, Example, ExampleIter, FilterFn, GeneratorFactory, KeyFn,
    MapFn, ScopeFn, WindowSizeFn,
};

use crate::convert::{dict_to_example, map_input};
use crate::turns::{self, Turns};

/// Set by [`shutdown`]: no new calls into Python.
static SHUTDOWN: AtomicBool = AtomicBool::new(false);
/// Threads inside (or about to enter) a Python callback.
static IN_PYTHON: AtomicUsize = AtomicUsize::new(0);
/// How long interpreter exit waits for callbacks in flight (a callback that runs longer than this
/// at exit may still abort the process).
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Consumers about to take the GIL back with an element (see [`ConsumerTurn`]).
static CONSUMERS: AtomicUsize = AtomicUsize::new(0);
/// The longest a pipeline thread defers to consumers before it asks for the GIL anyway.
const DEFER_MAX: Duration = Duration::from_millis(2);

/// Held by a consumer (a thread that drove a pipeline with the GIL released) from when its
/// element is ready until it holds the GIL again: pipeline threads about to ask for the GIL wait
/// for it meanwhile (at most [`DEFER_MAX`]), so the consumer takes the GIL first. Otherwise a
/// worker that starts its next call of a Python function as it hands over an element usually
/// wins the GIL, and the consumer waits for CPython's switch interval (5 ms) with its element
/// ready: a thread map of a 1.2 ms pure-Python function gave its first element after 6.3-7.1 ms
/// (computed at 1.6-1.8 ms) whenever another pipeline's thread was also taking the GIL.
pub(crate) struct ConsumerTurn(());

impl ConsumerTurn {
    pub(crate) fn take() -> Self {
        CONSUMERS.fetch_add(1, SeqCst);
        ConsumerTurn(())
    }
}

impl Drop for ConsumerTurn {
    fn drop(&mut self) {
        CONSUMERS.fetch_sub(1, SeqCst);
    }
}

thread_local!(static ATTACHED: Cell<u32> = const { Cell::new(0) });

/// Waits (at most [`DEFER_MAX`]) while a consumer is about to take the GIL, unless this thread
/// holds it already (a call inside a run's scope, see [`py_scope`]). A consumer is about to from
/// when a worker wakes it with its element ([`handoffs_pending`]) until it holds the GIL
/// ([`ConsumerTurn`]).
fn defer_to_consumers() {
    let waiting = || CONSUMERS.load(SeqCst) + handoffs_pending();
    if waiting() == 0 || ATTACHED.with(Cell::get) > 0 {
        return;
    }
    let t = Instant::now();
    while waiting() > 0 && t.elapsed() < DEFER_MAX {
        std::thread::sleep(Duration::from_micros(20));
    }
}

/// Runs `f` with the GIL, unless the interpreter is exiting. Every Rust-to-Python call made from
/// a pipeline thread goes through here, so the exit and fork guards see it; a consumer about to
/// take the GIL back goes first ([`ConsumerTurn`]).
pub(crate) fn with_python<T>(
    f: impl for<'py> FnOnce(Python<'py>) -> stokehold_core::Result<T>,
) -> stokehold_core::Result<T> {
    defer_to_consumers();
    // SAFETY: reads this thread's slot of the GIL-state key; needs no GIL.
    let foreign = unsafe { pyo3::ffi::PyGILState_GetThisThreadState().is_null() };
    attach(|py| {
        if foreign {
            // `try_with`: a call made while this thread's locals are being destroyed (at its
            // exit) keeps nothing.
            let _ = KEPT.try_with(KeptState::keep);
        }
        f(py)
    })
}

/// [`with_python`] without keeping the thread state (what [`KeptState`]'s drop uses).
fn attach<T>(
    f: impl for<'py> FnOnce(Python<'py>) -> stokehold_core::Result<T>,
) -> stokehold_core::Result<T> {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            IN_PYTHON.fetch_sub(1, SeqCst);
        }
    }
    // Count ourselves in before checking the flag: `shutdown` sets the flag before it reads the
    // count, so either it waits for us or we see the flag.
    IN_PYTHON.fetch_add(1, SeqCst);
    let _leave = Leave;
    let exiting = || Error::Cancelled("the Python interpreter is exiting".into());
    if SHUTDOWN.load(SeqCst) {
        return Err(exiting());
    }
    Python::try_attach(|py| {
        ATTACHED.with(|a| a.set(a.get() + 1));
        struct Detach;
        impl Drop for Detach {
            fn drop(&mut self) {
                ATTACHED.with(|a| a.set(a.get() - 1));
            }
        }
        let _detach = Detach;
        f(py)
    })
    .unwrap_or_else(|| Err(exiting()))
}

thread_local!(static KEPT: KeptState = const { KeptState(Cell::new(false)) });

/// A pipeline thread's Python thread state, kept from its first call into Python to its exit.
///
/// On a thread Python did not start (a pipeline worker), taking the GIL creates a thread state
/// and letting go of it destroys it again: about 12 us per call, more than a small map function
/// costs, paid for every element, and `threading.local` data made by one call was gone by the
/// next. One extra `PyGILState_Ensure` keeps the state alive, so later calls only take and drop
/// the GIL; the thread gives it back when it exits (unless the interpreter is exiting, which
/// frees every state itself). Threads Python started keep their own state and are left alone.
struct KeptState(Cell<bool>);

impl KeptState {
    /// Called with the GIL held, on a foreign thread.
    fn keep(&self) {
        if !self.0.replace(true) {
            // SAFETY: the GIL is held (inside `Python::try_attach`); this raises the thread
            // state's use count by one, lowered again in `drop`.
            unsafe {
                pyo3::ffi::PyGILState_Ensure();
            }
        }
    }
}

impl Drop for KeptState {
    fn drop(&mut self) {
        if self.0.get() {
            // Inside `attach` the count is 2 and the GIL held: lowering it to 1 here (as the
            // holder of the GIL, LOCKED) lets attach's own release take it to 0, which clears
            // and deletes the thread state.
            let _ = attach(|_| {
                // SAFETY: the GIL is held and this thread's count is above one (see above).
                unsafe {
                    pyo3::ffi::PyGILState_Release(pyo3::ffi::PyGILState_STATE::PyGILState_LOCKED)
                };
                Ok(())
            });
        }
    }
}

/// The `atexit` hook: refuses new Python callbacks and waits for those in flight. Returns true
/// when none is left (false when [`SHUTDOWN_WAIT`] ran out).
#[pyfunction]
#[pyo3(name = "_shutdown")]
pub fn shutdown(py: Python<'_>) -> bool {
    SHUTDOWN.store(true, SeqCst);
    py.detach(|| {
        let start = Instant::now();
        while IN_PYTHON.load(SeqCst) > 0 {
            if start.elapsed() >= SHUTDOWN_WAIT {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    })
}

/// Registered with `os.register_at_fork(after_in_child=...)`: the threads counted in
/// [`IN_PYTHON`] did not survive the fork, so the child starts from zero (else its exit would wait
/// [`SHUTDOWN_WAIT`] for them).
#[pyfunction]
#[pyo3(name = "_after_fork_in_child")]
pub fn after_fork_in_child() {
    IN_PYTHON.store(0, SeqCst);
}

pub(crate) fn callback_error(ctx: &Ctx, err: PyErr) -> Error {
    Error::Callback {
        op: ctx.op.to_string(),
        index: ctx.index,
        source: Box::new(err),
    }
}

/// A Python callable `dict -> dict` as a map function.
pub fn py_map_fn(f: Py<PyAny>) -> MapFn {
    Arc::new(move |e: Example, ctx: &Ctx| {
        with_python(|py| {
            let run = || -> PyResult<Example> {
                let out = f.bind(py).call1((map_input(py, e)?,))?;
                dict_to_example(py, &out)
            };
            run().map_err(|err| callback_error(ctx, err))
        })
    })
}

/// The scope of a Python map function's runs of calls: the GIL, taken once for the run (each
/// call's own `with_python` then finds it held), instead of taken and released per element,
/// which handed the GIL to any thread waiting for it (the consumer, another worker) once per
/// element; and the stage's turn, where its workers take turns ([`Turns`], one per map,
/// `label` naming it). When the interpreter is exiting the calls run outside it (and each
/// fails as cancelled).
pub fn py_scope(label: &str) -> ScopeFn {
    let turns = Turns::new(label);
    Arc::new(move |n, calls: &mut dyn FnMut()| {
        turns.run(n, || {
            let mut ran = false;
            let _ = with_python(|_| {
                calls();
                ran = true;
                Ok(())
            });
            if !ran {
                calls();
            }
        })
    })
}

/// A Python callable `dict -> bool` as a filter predicate.
pub fn py_filter_fn(f: Py<PyAny>) -> FilterFn {
    Arc::new(move |e: &Example, ctx: &Ctx| {
        with_python(|py| {
            let run = || -> PyResult<bool> {
                f.bind(py).call1((map_input(py, e.clone())?,))?.is_truthy()
            };
            run().map_err(|err| callback_error(ctx, err))
        })
    })
}

/// A Python callable `dict -> int` as a group key (`group_by_window`).
pub fn py_key_fn(f: Py<PyAny>) -> KeyFn {
    key_fn(move |e: &Example, ctx: &Ctx| {
        with_python(|py| {
            let run = || -> PyResult<i64> {
                let key = f.bind(py).call1((map_input(py, e.clone())?,))?;
                // numpy integers (what `e["x"] % 2` gives) index as ints.
                key.call_method0("__index__")?.extract()
            };
            run().map_err(|err| callback_error(ctx, err))
        })
    })
}

/// A Python callable `key -> int` as a group's window size (tf.data's `window_size_func`); a
/// size below 1 is an error naming the key.
pub fn py_window_size_fn(f: Py<PyAny>, label: &str) -> WindowSizeFn {
    let op: Arc<str> = format!("group_by_window[{label}]").into();
    Arc::new(move |key: i64| {
        with_python(|py| {
            let size: i64 = f
                .bind(py)
                .call1((key,))
                .and_then(|v| v.call_method0("__index__")?.extract())
                .map_err(|err| Error::Callback {
                    op: op.to_string(),
                    index: 0,
                    source: Box::new(err),
                })?;
            usize::try_from(size)
                .ok()
                .filter(|&s| s > 0)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "{op}: window_size_func({key}) = {size}; must be > 0"
                    ))
                })
        })
    })
}

/// A Python callable returning an iterator of dicts as a generator source: called once per
/// epoch (and again on `set_state`), with the epoch as its one argument when `with_epoch`;
/// each `__next__` takes the GIL for its own duration.
pub fn py_generator(factory: Py<PyAny>, label: &str, with_epoch: bool) -> GeneratorFactory {
    let op: Arc<str> = format!("from_generator[{label}]").into();
    generator_fn(move |epoch| {
        let it: Py<PyIterator> = with_python(|py| {
            let f = factory.bind(py);
            if with_epoch {
                f.call1((epoch,))
            } else {
                f.call0()
            }
            .and_then(|it| it.try_iter())
            .map(Bound::unbind)
            .map_err(|err| generator_error(&op, 0, err))
        })?;
        let op = op.clone();
        let mut index = 0u64;
        let next = std::iter::from_fn(move || {
            let got = with_python(|py| match it.bind(py).clone().next() {
                None => Ok(None),
                Some(Err(err)) => Err(generator_error(&op, index, err)),
                Some(Ok(obj)) => dict_to_example(py, &obj)
                    .map(Some)
                    .map_err(|err| generator_error(&op, index, err)),
            });
            index += 1;
            got.transpose()
        });
        Ok(Box::new(next) as ExampleIter)
    })
}

fn generator_error(op: &str, index: u64, err: PyErr) -> Error {
    Error::Callback {
        op: op.to_string(),
        index,
        source: Box::new(err),
    }
}

/// Adds the exit and fork hooks: [`shutdown`] with `atexit`, [`after_fork_in_child`] with
/// `os.register_at_fork`; and `_python_turns`, `_python_turns_scripted` (see [`turns`]).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    turns::init(py)?;
    m.add_function(wrap_pyfunction!(turns::python_turns, m)?)?;
    m.add_function(wrap_pyfunction!(turns::python_turns_scripted, m)?)?;
    let shutdown = wrap_pyfunction!(shutdown, m)?;
    py.import("atexit")?
        .call_method1("register", (&shutdown,))?;
    m.add_function(shutdown)?;
    let after_fork = wrap_pyfunction!(after_fork_in_child, m)?;
    let os = py.import("os")?;
    if os.hasattr("register_at_fork")? {
        let kw = PyDict::new(py);
        kw.set_item("after_in_child", &after_fork)?;
        os.call_method("register_at_fork", (), Some(&kw))?;
    }
    m.add_function(after_fork)
}

/// A writer's `progress(done, total)` callable, called from the writer's thread (the GIL taken
/// for each call) at most every 200 ms and once at the end; its first exception is kept, ends
/// the calls, and is raised by [`Progress::finish`].
pub(crate) struct Progress {
    f: Option<Py<PyAny>>,
    last: Instant,
    err: Option<PyErr>,
}

impl Progress {
    pub(crate) fn new(f: Option<Py<PyAny>>) -> Self {
        Progress {
            f,
            last: Instant::now(),
            err: None,
        }
    }

    /// `done` of `total` written.
    pub(crate) fn report(&mut self, done: u64, total: Option<u64>) {
        let Some(f) = &self.f else {
            return;
        };
        let end = total == Some(done);
        if self.err.is_some() || (!end && self.last.elapsed() < Duration::from_millis(200)) {
            return;
        }
        self.last = Instant::now();
        Python::attach(|py| {
            if let Err(e) = f.call1(py, (done, total)) {
                self.err = Some(e);
            }
        });
    }

    /// The callable's exception, if it raised one.
    pub(crate) fn finish(self) -> PyResult<()> {
        self.err.map_or(Ok(()), Err)
    }
}

//! The one place where core errors become Python exceptions, and the panic guard of every entry
//! point.
//!
//! The exception classes are made at import with `type(name, bases, ns)` so that each can mix in
//! the built-in it behaves like (`ValueError`, `IndexError`, `OSError`, ...): `create_exception!`
//! takes a single base. A user function's own exception travels through the pipeline inside
//! [`Error::Callback`] as a boxed `PyErr` and is handed back here unchanged, with a note.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyException, PyFileNotFoundError, PyIndexError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use stokehold_core::Error;

/// The exception classes, made once per interpreter.
pub struct Tree {
    base: Py<PyType>,
    invalid: Py<PyType>,
    schema: Py<PyType>,
    out_of_range: Py<PyType>,
    corrupt: Py<PyType>,
    io: Py<PyType>,
    not_found: Py<PyType>,
    state: Py<PyType>,
    cancelled: Py<PyType>,
    panic: Py<PyType>,
}

static TREE: PyOnceLock<Tree> = PyOnceLock::new();

fn make(
    py: Python<'_>,
    name: &str,
    bases: &[&Bound<'_, PyType>],
    doc: &str,
) -> PyResult<Py<PyType>> {
    let ns = PyDict::new(py);
    ns.set_item("__module__", "stokehold")?;
    ns.set_item("__doc__", doc)?;
    let bases = PyTuple::new(py, bases)?;
    let t = py.get_type::<PyType>().call1((name, bases, ns))?;
    Ok(t.cast_into::<PyType>()?.unbind())
}

fn build(py: Python<'_>) -> PyResult<Tree> {
    let base = make(
        py,
        "StokeholdError",
        &[&py.get_type::<PyException>()],
        "Base of every stokehold error.",
    )?;
    let b = base.bind(py);
    let value = py.get_type::<PyValueError>();
    let io = make(
        py,
        "StokeholdIOError",
        &[b, &py.get_type::<PyOSError>()],
        "An I/O error on a named file (an OSError; `filename` is set).",
    )?;
    Ok(Tree {
        invalid: make(
            py,
            "InvalidArgumentError",
            &[b, &value],
            "An argument out of its domain.",
        )?,
        schema: make(
            py,
            "SchemaError",
            &[b, &value],
            "An element lacks the features, dtypes or shapes an op needs.",
        )?,
        out_of_range: make(
            py,
            "OutOfRangeError",
            &[b, &py.get_type::<PyIndexError>()],
            "An index past the end of a random-access dataset.",
        )?,
        corrupt: make(
            py,
            "DataCorruptionError",
            &[b],
            "Bytes on disk that do not decode.",
        )?,
        not_found: make(
            py,
            "StokeholdFileNotFoundError",
            &[io.bind(py), &py.get_type::<PyFileNotFoundError>()],
            "A file that does not exist (a FileNotFoundError).",
        )?,
        io,
        state: make(
            py,
            "StateError",
            &[b, &value],
            "An iterator state that does not fit this pipeline or this build.",
        )?,
        cancelled: make(
            py,
            "CancelledError",
            &[b],
            "The pipeline was stopped, or an iterator was used across a fork.",
        )?,
        panic: make(
            py,
            "WorkerPanicError",
            &[b],
            "A bug: Rust code panicked (please report it).",
        )?,
        base,
    })
}

/// The exception classes (made on first use).
pub fn tree(py: Python<'_>) -> PyResult<&Tree> {
    TREE.get_or_try_init(py, || build(py))
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let t = tree(m.py())?;
    for c in [
        &t.base,
        &t.invalid,
        &t.schema,
        &t.out_of_range,
        &t.corrupt,
        &t.io,
        &t.not_found,
        &t.state,
        &t.cancelled,
        &t.panic,
    ] {
        let c = c.bind(m.py());
        m.add(c.name()?, c)?;
    }
    m.add_function(wrap_pyfunction!(raise_for_test, m)?)
}

fn raise(cls: &Py<PyType>, py: Python<'_>, msg: String) -> PyErr {
    match cls.bind(py).call1((msg,)) {
        Ok(v) => PyErr::from_value(v),
        Err(e) => e,
    }
}

/// Adds a note to an exception (Python 3.11+; older versions keep the exception as it is).
pub fn add_note(py: Python<'_>, err: &PyErr, note: &str) {
    let v = err.value(py);
    if v.hasattr("add_note").unwrap_or(false) {
        let _ = v.call_method1("add_note", (note,));
    }
}

/// Maps a core error to a Python exception. `pipeline` (the description of the pipeline that
/// failed) goes into the note of a user function's exception.
pub fn to_pyerr(py: Python<'_>, e: Error, pipeline: Option<&str>) -> PyErr {
    let t = match tree(py) {
        Ok(t) => t,
        Err(err) => return err,
    };
    let msg = e.to_string();
    match e {
        Error::Callback { op, index, source } => {
            let note = match pipeline {
                Some(p) => format!("stokehold: raised by {op} on element {index} of pipeline {p}"),
                None => format!("stokehold: raised by {op} on element {index}"),
            };
            let err = match source.downcast::<PyErr>() {
                Ok(err) => *err,
                Err(source) => match source.downcast::<Error>() {
                    Ok(inner) => to_pyerr(py, *inner, None),
                    Err(_) => raise(&t.base, py, msg),
                },
            };
            add_note(py, &err, &note);
            err
        }
        Error::Interrupted(source) => match source.downcast::<PyErr>() {
            Ok(err) => *err,
            Err(_) => raise(&t.cancelled, py, msg),
        },
        Error::InvalidArgument(_) => raise(&t.invalid, py, msg),
        Error::Schema { .. } => raise(&t.schema, py, msg),
        Error::OutOfRange { .. } => raise(&t.out_of_range, py, msg),
        Error::Corrupt { .. } => raise(&t.corrupt, py, msg),
        Error::Io { path, source } => {
            let not_found = source.kind() == std::io::ErrorKind::NotFound;
            let cls = if not_found { &t.not_found } else { &t.io };
            // OSError(errno, strerror, filename) sets .errno, .strerror and .filename.
            let errno = source.raw_os_error().or(not_found.then_some(2));
            let path = path.to_string_lossy().into_owned();
            let made = match errno {
                Some(n) => cls.bind(py).call1((n, source.to_string(), path)),
                None => cls.bind(py).call1((msg,)),
            };
            made.map_or_else(|e| e, PyErr::from_value)
        }
        // An OSError with its errno and no file name: the OS refused a thread, not a file.
        Error::Resource { source, .. } => {
            let made = match source.raw_os_error() {
                Some(n) => t.io.bind(py).call1((n, msg)),
                None => t.io.bind(py).call1((msg,)),
            };
            made.map_or_else(|e| e, PyErr::from_value)
        }
        Error::State(_) => raise(&t.state, py, msg),
        Error::Cancelled(_) => raise(&t.cancelled, py, msg),
        Error::Panic { .. } => raise(&t.panic, py, msg),
        _ => raise(&t.base, py, msg),
    }
}

/// The interrupt check installed while an iterator waits without the GIL
/// ([`stokehold_core::exec::interrupt`]): runs Python's signal handlers, so Ctrl-C raises
/// `KeyboardInterrupt` (or whatever the handler raises) within a tick.
pub fn check_signals() -> stokehold_core::Result<()> {
    Python::attach(|py| py.check_signals()).map_err(|e| Error::Interrupted(Box::new(e)))
}

/// A core result as a Python result.
pub fn ok<T>(py: Python<'_>, r: stokehold_core::Result<T>) -> PyResult<T> {
    r.map_err(|e| to_pyerr(py, e, None))
}

/// Runs an entry point so that a Rust panic becomes `WorkerPanicError` instead of crossing into
/// Python as pyo3's `PanicException` (a `BaseException` that `except Exception` misses).
pub fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Python::attach(|py| {
            Err(to_pyerr(
                py,
                Error::from_panic("stokehold entry point", payload),
                None,
            ))
        }),
    }
}

/// A test hook: raises the exception that core error `kind` maps to, or panics for `"panic"`.
#[pyfunction]
#[pyo3(name = "_raise_for_test")]
pub fn raise_for_test(py: Python<'_>, kind: &str) -> PyResult<()> {
    guard(|| {
        let io = |k| Error::io("/no/such/file.tfrecord", std::io::Error::from(k));
        let e = match kind {
            "invalid" => Error::invalid("bad"),
            "schema" => Error::schema("batch", "bad"),
            "out_of_range" => Error::OutOfRange {
                index: 5,
                len: 3,
                what: "x".into(),
            },
            "corrupt" => Error::corrupt("/tmp/f", 12, "bad crc"),
            "not_found" => io(std::io::ErrorKind::NotFound),
            "io" => io(std::io::ErrorKind::PermissionDenied),
            "state" => Error::State("bad".into()),
            "cancelled" => Error::Cancelled("stop".into()),
            "worker_panic" => Error::Panic {
                op: "prefetch".into(),
                message: "boom".into(),
            },
            "panic" => panic!("deliberate panic for a test"),
            other => Error::invalid(format!("unknown kind {other:?}")),
        };
        Err(to_pyerr(py, e, None))
    })
}

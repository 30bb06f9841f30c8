//! `stokehold.demo()`: the audio-cache demo ([`stokehold_demo::demo::run`]), run from Python.
//!
//! Options and the report cross as JSON (both are serde types of the CLI crate), so this file
//! does not repeat their fields. The table goes to Python's `sys.stdout` (so notebooks and
//! pytest's capture see it); the GIL is released while the demo runs.

use std::io::Write;

use pyo3::prelude::*;
use stokehold_core::Error;
use stokehold_demo::demo::{run, DemoOptions};

use crate::errors::{guard, to_pyerr};

/// Writes to Python's `sys.stdout`, taking the GIL for each write.
struct PyStdout;

impl Write for PyStdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Python::attach(|py| {
            let out = py.import("sys")?.getattr("stdout")?;
            out.call_method1("write", (String::from_utf8_lossy(buf),))?;
            Ok::<_, PyErr>(())
        })
        .map_err(std::io::Error::other)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Python::attach(|py| {
            py.import("sys")?.getattr("stdout")?.call_method0("flush")?;
            Ok::<_, PyErr>(())
        })
        .map_err(std::io::Error::other)
    }
}

/// The demo's default options as JSON.
#[pyfunction]
#[pyo3(name = "_demo_defaults")]
fn demo_defaults() -> PyResult<String> {
    guard(|| Ok(serde_json::to_string(&DemoOptions::default()).expect("plain struct")))
}

/// Runs the demo with options given as JSON; returns the report as JSON.
#[pyfunction]
#[pyo3(name = "_demo")]
fn demo(py: Python<'_>, options: &str) -> PyResult<String> {
    guard(|| {
        let opts: DemoOptions = serde_json::from_str(options)
            .map_err(|e| to_pyerr(py, Error::invalid(format!("demo options: {e}")), None))?;
        let report = py.detach(|| run(&opts, &mut PyStdout));
        let report = report.map_err(|e| to_pyerr(py, e, None))?;
        Ok(serde_json::to_string(&report).expect("plain struct"))
    })
}

/// Adds the demo functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(demo_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(demo, m)?)?;
    Ok(())
}

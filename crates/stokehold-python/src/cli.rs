//! `stokehold._native.cli_main`: the `stokehold` command ([`stokehold_cli::run`]) inside the
//! extension, so that the wheel's `stokehold` script (`python/stokehold/_cli.py`) and
//! `python -m stokehold` run the same verbs with the same messages and exit codes as the Rust
//! binary, with no second binary in the wheel.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;

/// The exit code of a Rust program that panicked (what the `stokehold` binary returns then).
const EXIT_PANIC: i32 = 101;

/// Runs the command line `argv` (`argv[0]` is the program's name) with the GIL released and
/// returns its exit code. The command prints to the process's stdout and stderr (file
/// descriptors 1 and 2, not `sys.stdout`); a panic (its message printed by Rust's hook) returns
/// 101, as the binary exits. Ctrl-C: the command does not look at Python's signal flag, so the
/// script entry point restores SIGINT's default action first (`_cli.py`), as the binary has it.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| catch_unwind(AssertUnwindSafe(|| stokehold_cli::run(argv))).unwrap_or(EXIT_PANIC))
}

/// Adds `cli_main` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cli_main, m)?)
}

//! The `stokehold` command: [`stokehold_cli::run`] with mimalloc as the allocator (the library
//! and the Python extension that also runs it set no allocator of their own for the process).

use std::process::ExitCode;

/// The allocator of stokehold's binaries (docs/ARCHITECTURE.md, "Memory").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let code = stokehold_cli::run(std::env::args_os());
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

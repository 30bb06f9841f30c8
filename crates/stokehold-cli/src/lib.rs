//! # stokehold-cli
//!
//! The library half of the `stokehold` command: everything the subcommands do that other callers
//! (the Python package, benchmarks) may want too. The binary (`src/main.rs`) only parses
//! arguments and calls in here.
//!
//! * [`demo`]: the audio-cache demo (`stokehold demo`, also callable from Python).
//! * [`mem`]: resident memory of this process.
//! * [`timing`]: batch timings, steady-state figures and epoch-boundary stalls.
//! * [`checksum`]: a stable checksum of an example, to compare runs.
//! * [`progress`]: progress bars that stay silent off a terminal.
#![deny(missing_docs)]

pub mod checksum;
pub mod demo;
pub mod mem;
pub mod progress;
pub mod timing;

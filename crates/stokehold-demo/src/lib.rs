//! # stokehold-demo
//!
//! The audio-cache demo as a library: `stokehold demo` (the CLI) and `stokehold.demo()` (the
//! Python package) both call [`demo::run`], so the bindings depend on this small crate and not on
//! the CLI. With it, the helpers the demo's report needs, which the CLI shares:
//!
//! * [`demo`]: the demo itself (synthetic clips, the pipeline, the report table).
//! * [`mem`]: resident memory of this process.
//! * [`timing`]: batch timings, steady-state figures and epoch-boundary stalls.
//! * [`checksum`]: a stable checksum of an example, to compare runs.
//! * [`progress`]: progress bars that stay silent off a terminal (the CLI's too).
#![deny(missing_docs)]

pub mod checksum;
pub mod demo;
pub mod mem;
pub mod progress;
pub mod timing;

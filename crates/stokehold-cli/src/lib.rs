//! # stokehold-cli
//!
//! The library half of the `stokehold` command. The binary (`src/main.rs`) only parses arguments
//! and calls the libraries; the demo and the progress bars live in `stokehold-demo` (which the
//! Python bindings share), re-exported here so the subcommands keep one path to them.
#![deny(missing_docs)]

pub use stokehold_demo::{checksum, demo, mem, progress, timing};

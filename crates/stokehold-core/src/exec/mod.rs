//! Execution: threads, channels, budgets, autotuning, stats, and the ops that own threads.

pub mod autotune;
pub mod background;
pub mod budget;
pub mod copy;
pub mod executor;
pub mod interrupt;
pub mod options;
pub mod parallel;
pub mod pool;
pub mod prefetch;
pub mod stats;
pub mod trace;

pub use budget::Budget;
pub use executor::{ExecIter, ExecOptions, Executor, DEFAULT_MEMORY_BUDGET};
pub use options::{executor_of, DefaultExecutor};
pub use parallel::{Parallelism, AUTOTUNE};
pub use stats::{OpReport, OpStats, StatsReport};

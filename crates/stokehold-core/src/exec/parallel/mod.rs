//! The parallel map engine: worker loops on the executor's pool feeding an ordered (or
//! as-completed) output buffer.
//!
//! * Random-access input: a worker claims the next run of sequence numbers and computes them
//!   itself (`get_many` of `start + s` for each) — fetch, map, and any batching upstream all run
//!   on the worker. Inline (parallelism 0), the consumer claims and computes the runs.
//! * Stream input: a worker takes the input lock, pulls the next element (its sequence number is
//!   its stream position) and records the input's state after it, then maps outside the lock.
//!
//! Results wait in a buffer keyed by sequence number. In order mode the consumer takes `low`, the
//! next number; as-completed mode takes any ready one. The buffer is bounded twice: by a window of
//! claimed-but-not-taken elements, and by the pipeline's memory budget (an empty buffer may always
//! take one element). The checkpoint is `low` plus the numbers already handed out past it
//! (as-completed mode only) and, for a stream, the input's state before `low`: restoring
//! recomputes whatever was in flight, so save -> restore -> continue equals an uninterrupted run.
//!
//! Files: `iter.rs` the consumer side (`ParallelIter`, the checkpoint), `worker.rs` the worker
//! loop (admission, claims, runs), `reorder.rs` the reorder buffer, `shared.rs` the state they
//! share under one lock; this file the stage's API.

mod iter;
mod reorder;
mod shared;
mod worker;

#[cfg(test)]
mod tests;

pub use super::parallelism::{Parallelism, AUTOTUNE, MAX_THREADS};
pub(crate) use iter::{ParallelIter, StageSpec};
pub use shared::handoffs_pending;

//! The state a parallel stage's consumer and workers share: where the input comes from, the
//! sequence numbers claimed, computed and taken, the reorder buffer, and the worker counts, under
//! one lock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use serde_json::Value as Json;

use super::reorder::Ready;
use crate::dataset::{DatasetIter, MapDataset};
use crate::exec::executor::{Executor, Reservation};
use crate::exec::stats::OpStats;
use crate::ops::map::MapFn;

/// Where workers get their input.
pub(crate) enum Source {
    /// Element `start + s` of a random-access dataset.
    Index { ds: Arc<dyn MapDataset>, start: u64 },
    /// The next element of a stream, mapped by `f`.
    Stream {
        input: Mutex<StreamInput>,
        f: Option<MapFn>,
        epoch: u64,
    },
}

pub(crate) struct StreamInput {
    pub(super) it: Box<dyn DatasetIter>,
    pub(super) next_seq: u64,
    pub(super) done: bool,
}

pub(super) struct St {
    pub(super) next_claim: u64,
    /// Sequence numbers handed out before a restore (as-completed mode): not recomputed.
    pub(super) skip: BTreeSet<u64>,
    pub(super) ready: Ready,
    pub(super) in_flight: usize,
    pub(super) end: Option<u64>,
    pub(super) low: u64,
    pub(super) ahead: BTreeSet<u64>,
    /// Stream input only: the input's state before each sequence number from `low` on.
    pub(super) states: BTreeMap<u64, Json>,
    pub(super) target: usize,
    pub(super) spawned: usize,
    pub(super) live: usize,
    pub(super) window: usize,
    pub(super) est_bytes: usize,
    /// Mean compute time of one element (ns, moving average): sizes a worker's claim.
    pub(super) est_ns: u64,
    /// Workers waiting in `admit` for room: the consumer wakes them as it takes an element
    /// only when there are any (a notify is a system call, waiter or not: inline, with no
    /// worker, one per element was 7 % of the consumer's time, `perf record`).
    pub(super) idle: usize,
    /// Whether this iterator has claimed a run yet (its first is one element, see `claim_run`).
    pub(super) claimed: bool,
    /// The iterator's first element, from its claim until it is in the buffer: in a scoped stage
    /// the other workers wait for it before they start (see
    /// [`FIRST_ALONE`](super::worker::FIRST_ALONE)).
    pub(super) first: Option<u64>,
    /// The consumer is waiting for an element (in `next`).
    pub(super) waiting: bool,
    /// The consumer has taken an element.
    pub(super) took: bool,
    /// A worker woke the waiting consumer with its first element and counted it in
    /// [`HANDOFFS`]; the consumer takes it out when it takes the element.
    pub(super) handoff: bool,
    pub(super) stop: bool,
}

/// Consumers woken with their iterator's first element that have not taken it yet, in every
/// stage of the process. A binding whose pipeline threads share a lock with the consumer
/// (Python's GIL) has a worker that is about to take that lock wait while this is not zero, so
/// that the consumer gets its first element without queueing behind the worker's next run (a
/// new one-worker map of a 0.15 ms Python function gave its first element 1.0 ms after `iter()`,
/// 0.4 ms so). Only the first: at every element, the worker's waits cost more than they saved
/// (numpy's `sin` of 2000 values at one worker, 216k elements/s -> 192-197k).
pub(super) static HANDOFFS: AtomicUsize = AtomicUsize::new(0);

/// Consumers woken with their first element that have not taken it yet (see [`HANDOFFS`]).
pub fn handoffs_pending() -> usize {
    HANDOFFS.load(Ordering::SeqCst)
}

/// Takes the stage's handoff (if any) out of [`HANDOFFS`].
pub(super) fn end_handoff(st: &mut St) {
    if std::mem::take(&mut st.handoff) {
        HANDOFFS.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(super) struct Shared {
    pub(super) label: String,
    pub(super) source: Source,
    pub(super) st: Mutex<St>,
    pub(super) cv_out: Condvar,
    pub(super) cv_in: Condvar,
    pub(super) stats: Arc<OpStats>,
    pub(super) exec: Executor,
    /// The reorder buffer's bytes in the executor's budget.
    pub(super) held: Reservation,
    pub(super) ordered: bool,
    /// The stage's functions share a scope (Python's GIL,
    /// [`StageSpec::scoped`](super::StageSpec::scoped)).
    pub(super) scoped: bool,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, St> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

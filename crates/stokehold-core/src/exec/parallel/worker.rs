//! The worker loop of a parallel stage: admission (room in the window and the memory budget),
//! claiming a run of sequence numbers (random-access input) or pulling the next element (stream),
//! computing it, and handing the results to the reorder buffer. The consumer runs the same
//! claim and run itself when the stage is inline.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use super::reorder::Item;
use super::shared::{Shared, Source, St, HANDOFFS};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::ops::map::Ctx;

/// Decrements the live count when a worker ends, however it ends.
pub(super) struct LiveGuard(Arc<Shared>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.live -= 1;
        self.0.cv_out.notify_all();
    }
}

/// Waits until worker `id` may claim an element; `None` when it should exit.
pub(super) fn admit(sh: &Shared, id: usize) -> Option<MutexGuard<'_, St>> {
    let mut st = sh.lock();
    loop {
        if st.stop || st.end.is_some_and(|e| st.next_claim >= e) {
            return None;
        }
        let room = has_room(&st);
        let empty = st.in_flight == 0 && st.ready.is_empty();
        // Until one element has been measured its size is unknown: one at a time.
        let known = st.est_bytes > 0 || st.ready.len() + st.in_flight == 0;
        let mem = empty || (known && sh.exec.budget().fits(st.est_bytes * (st.in_flight + 1)));
        if id < st.target && room && mem {
            return Some(st);
        }
        // Timed: the budget is shared with other ops, whose releases do not notify us.
        st.idle += 1;
        st = sh
            .cv_in
            .wait_timeout(st, Duration::from_millis(20))
            .unwrap_or_else(|e| e.into_inner())
            .0;
        st.idle -= 1;
    }
}

/// The longest a worker of a scoped stage waits for the iterator's first element before it starts
/// its own run: CPython's switch interval (5 ms), the longest a consumer would otherwise wait for
/// the GIL with its first element ready.
/// (Long in this module's tests, whose stage checks the order and not the bound.)
pub(super) const FIRST_ALONE: Duration = if cfg!(test) {
    Duration::from_secs(5)
} else {
    Duration::from_millis(5)
};

/// Waits (at most [`FIRST_ALONE`]) until the iterator's first element, which another worker
/// computes, is in the buffer. In a scoped stage (a Python map) a second worker that starts its
/// run meanwhile queues for the GIL, takes it as the first element's worker lets go, and holds it
/// for its own call while the consumer waits with its element ready. A two-worker map of a 1 ms
/// pure-Python function handed 48 of 420 first elements over later than 1.8 ms so, 7 of 420
/// with this wait (`bench/micro/first_element.py`). A function that lets go of the GIL for long
/// loses at most this wait, once an epoch.
pub(super) fn first_alone<'a>(sh: &'a Shared, st: MutexGuard<'a, St>) -> MutexGuard<'a, St> {
    sh.cv_in
        .wait_timeout_while(st, FIRST_ALONE, |st| st.first.is_some() && !st.stop)
        .unwrap_or_else(|e| e.into_inner())
        .0
}

pub(super) fn worker(sh: Arc<Shared>, id: usize) {
    let _live = LiveGuard(sh.clone());
    let stage = Arc::downgrade(&sh);
    let _probe = crate::exec::set_stop_probe(Box::new(move || {
        stage.upgrade().is_none_or(|sh| sh.lock().stop)
    }));
    let mut alone = sh.scoped;
    loop {
        let Some(st) = admit(&sh, id) else { return };
        if std::mem::take(&mut alone) && st.first.is_some() {
            // Admitted again afterwards: the room and the budget may have changed meanwhile.
            drop(first_alone(&sh, st));
            continue;
        }
        crate::exec::set_stage_threads(st.target);
        let Some(claimed) = claim(&sh, st) else {
            return;
        };
        if !run(&sh, claimed, true) {
            return;
        }
    }
}

/// Claims work with the state locked (`st`, let go before a stream's input is pulled): the next
/// run of sequence numbers of a random-access input, or the next element of a stream. `None`
/// when there is nothing left to claim.
pub(super) fn claim(
    sh: &Shared,
    mut st: MutexGuard<'_, St>,
) -> Option<Vec<(u64, Option<Result<Example>>)>> {
    match &sh.source {
        Source::Index { .. } => {
            let seqs = claim_run(sh, &mut st);
            (!seqs.is_empty()).then(|| seqs.into_iter().map(|s| (s, None)).collect())
        }
        Source::Stream { .. } => {
            st.in_flight += 1;
            drop(st);
            pull(sh).map(|c| vec![c])
        }
    }
}

/// Computes the claimed elements and hands them to the buffer (on a worker, or on the consumer
/// when the stage runs inline); false when the stage is stopping. A worker's run also records
/// its thread's CPU time and its wait for a core (four system calls, which an inline run of
/// cheap Python calls would feel), for AUTOTUNE's look at workers that wait.
pub(super) fn run(sh: &Shared, claimed: Vec<(u64, Option<Result<Example>>)>, worker: bool) -> bool {
    let n = claimed.len();
    let t = Instant::now();
    let at = if worker {
        crate::exec::thread_times()
    } else {
        None
    };
    let one_by_one = |claimed: Vec<(u64, Option<Result<Example>>)>| {
        claimed
            .into_iter()
            .map(|(seq, element)| (seq, compute(sh, seq, element)))
            .collect::<Vec<_>>()
    };
    let done = match &sh.source {
        // A run of a random-access input in one call (a map's calls in one scope, see
        // `MapDataset::get_many`).
        Source::Index { ds, start } => {
            let indices: Vec<u64> = claimed.iter().map(|(seq, _)| start + seq).collect();
            match catch_unwind(AssertUnwindSafe(|| ds.get_many(&indices))) {
                Ok(rs) if rs.len() == n => claimed
                    .into_iter()
                    .zip(rs)
                    .map(|((seq, _), r)| (seq, Some(r)))
                    .collect(),
                // A panic: each element again on its own, so the error names the one.
                _ => one_by_one(claimed),
            }
        }
        _ => one_by_one(claimed),
    };
    sh.stats.add_busy_run(t, at, n);
    sh.exec.trace().span("element", &sh.stats.name, t);
    let per = (t.elapsed().as_nanos() as u64 / n as u64).max(1);
    let mut st = sh.lock();
    st.in_flight -= n;
    st.est_ns = if st.est_ns == 0 {
        per
    } else {
        (st.est_ns * 7 + per) / 8
    };
    // The stage's bound moves with its runs' length: its buffer's fill is read against it.
    sh.stats.set_capacity(limit(&st));
    if st.stop {
        return false;
    }
    // The run's bytes enter the budget in one add (under the lock, before anyone can take them).
    let mut held = 0;
    let mut added = false;
    for (seq, res) in done {
        if st.first == Some(seq) {
            st.first = None;
            if sh.scoped {
                sh.cv_in.notify_all();
            }
        }
        let Some(res) = res else { continue };
        let bytes = res.as_ref().map_or(0, Example::nbytes);
        let b = bytes.max(1); // an element of no bytes still marks the size as known
        st.est_bytes = if st.est_bytes == 0 {
            b
        } else {
            (st.est_bytes * 7 + b) / 8
        };
        held += bytes;
        st.ready.insert(seq, Item { res, bytes });
        added = true;
    }
    sh.held.hold(held);
    // In order, the consumer can take only the lowest element: a run finished ahead of it
    // does not wake the consumer (on two cores, each wake-up took a core from a worker). An
    // inline run is the consumer's own, and no worker claims at the inline setting: nobody to
    // wake (a notify is a system call, waiter or not).
    let (mut wake_out, mut wake_in) = (false, false);
    if worker {
        if added && (!sh.ordered || st.ready.contains(st.low)) {
            if st.waiting && !st.took && !st.handoff {
                st.handoff = true;
                HANDOFFS.fetch_add(1, Ordering::SeqCst);
            }
            wake_out = st.waiting;
        } else if !added {
            wake_in = true;
        }
    }
    // Only a consumer that waits is woken, and only once the lock is let go: woken while the
    // worker still held it, the consumer went back to sleep on the lock and was woken again.
    // The consumer of a two-worker batch epoch (`shard_read_bench`, 3906 batches) slept 310
    // times an epoch so, 207 now, about one per run; the workers were preempted 1850 times in
    // six epochs, 1258 now (`perf record -e sched:sched_switch`).
    drop(st);
    if wake_out {
        sh.cv_out.notify_all();
    }
    if wake_in {
        sh.cv_in.notify_all();
    }
    true
}

/// Most elements one claim takes: a run of cheap elements (a Python function of a few to tens of
/// microseconds) is computed back to back and handed over with one lock and one wake-up, where
/// one claim per element paid a consumer wake-up (a scheduler round trip, hundreds of
/// microseconds on a loaded machine) per element. 64, not 16: a Python map returning a constant
/// (3 us an element) ran at 110k elements/s with one worker and runs of 16, the consumer woken
/// and the worker blocked on the GIL about once every 9 elements; 220-290k with runs of 64.
/// 256, not 64: the same map at under a microsecond an element (`bench/pymap`'s constant map,
/// 50000 elements into padded_batch(64), two alternating runs each) took 1.33-1.37 us an
/// element with one worker and 1.19 with two at runs of 64, 0.98-1.05 and 0.79-0.80 at runs of
/// 256; numpy's sin of 2000 values (4-5 us) on one worker went from 187-213k to 208-223k
/// elements/s. Only elements under 4 us (1 ms / 256) are held to fewer than `RUN_NS` of work.
pub(super) const MAX_RUN: usize = 256;
/// A claim covers about this much compute: long enough to amortise a hand-off, short enough
/// that the consumer never waits for a long run (an element this slow is claimed alone).
pub(super) const RUN_NS: u64 = 1_000_000;

/// How many elements one claim wants: one until an element has been timed, then as many as
/// take about [`RUN_NS`] (at most [`MAX_RUN`]).
pub(super) fn run_len(st: &St) -> usize {
    match st.est_ns {
        0 => 1,
        ns => ((RUN_NS / ns) as usize).clamp(1, MAX_RUN),
    }
}

/// Claimed-but-not-taken elements allowed: the window, widened so that every worker (or the
/// consumer, inline) can hold two whole runs, one being taken while the next is computed
/// (unchanged for elements slow enough to be claimed one at a time).
pub(super) fn limit(st: &St) -> usize {
    st.window + st.target.max(1) * 2 * (run_len(st) - 1)
}

/// Whether a worker may claim: a whole run fits under [`limit`]. With room for only part of one,
/// a worker woken by every element the consumer took claimed runs of one or two elements, each
/// with its own wake-up and its own turn at the GIL for a Python map (one wake-up per element
/// while the consumer emptied a batch's worth).
pub(super) fn has_room(st: &St) -> bool {
    st.in_flight + st.ready.len() + run_len(st) <= limit(st)
}

/// Claims the next run of free sequence numbers (random-access input), within the widened
/// window and the memory budget, and counts them in flight.
pub(super) fn claim_run(sh: &Shared, st: &mut St) -> Vec<u64> {
    let room = limit(st)
        .saturating_sub(st.in_flight + st.ready.len())
        .max(1);
    // The first claim is one element: the consumer is waiting for it, and a whole run (up to
    // RUN_NS of work) would be its wait for the epoch's first element. A Python function of
    // 0.23 ms, known from the last epoch, was claimed in runs of four: the first element came
    // after all four.
    let mut want = if st.claimed { run_len(st).min(room) } else { 1 };
    let first = !st.claimed;
    st.claimed = true;
    while want > 1 && !sh.exec.budget().fits(st.est_bytes * (st.in_flight + want)) {
        want -= 1;
    }
    let mut seqs = Vec::with_capacity(want);
    while seqs.len() < want {
        loop {
            let c = st.next_claim;
            if !st.skip.remove(&c) {
                break;
            }
            st.next_claim += 1;
        }
        if st.end.is_some_and(|e| st.next_claim >= e) {
            break;
        }
        seqs.push(st.next_claim);
        st.next_claim += 1;
    }
    st.in_flight += seqs.len();
    if first {
        st.first = seqs.first().copied();
    }
    seqs
}

/// Pulls the next stream element; `None` at the end of the input (or when stopping).
pub(super) fn pull(sh: &Shared) -> Option<(u64, Option<Result<Example>>)> {
    let Source::Stream { input, .. } = &sh.source else {
        unreachable!("stream source")
    };
    let t = Instant::now();
    let mut inp = input.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if inp.done || sh.lock().stop {
            let mut st = sh.lock();
            st.in_flight -= 1;
            return None;
        }
        let seq = inp.next_seq;
        let r = catch_unwind(AssertUnwindSafe(|| inp.it.next()))
            .unwrap_or_else(|p| Err(Error::from_panic(&sh.label, p)));
        let got = match r {
            Ok(None) => {
                inp.done = true;
                let mut st = sh.lock();
                st.end = Some(seq);
                st.in_flight -= 1;
                sh.cv_out.notify_all();
                sh.cv_in.notify_all();
                return None;
            }
            Ok(Some(e)) => Ok(e),
            Err(e) => Err(e),
        };
        inp.next_seq += 1;
        let after = inp.it.state();
        let mut st = sh.lock();
        st.states.insert(seq + 1, after);
        if st.skip.remove(&seq) {
            continue;
        }
        drop(st);
        sh.stats.add_input_wait(t);
        return Some((seq, Some(got)));
    }
}

/// Computes element `seq`: `None` when there is nothing to hand out.
pub(super) fn compute(
    sh: &Shared,
    seq: u64,
    element: Option<Result<Example>>,
) -> Option<Result<Example>> {
    let r = catch_unwind(AssertUnwindSafe(|| match (&sh.source, element) {
        (Source::Index { ds, start }, _) => ds.get(start + seq),
        (Source::Stream { .. }, Some(Err(e))) => Err(e),
        (Source::Stream { f: None, .. }, Some(Ok(e))) => Ok(e),
        (
            Source::Stream {
                f: Some(f), epoch, ..
            },
            Some(Ok(e)),
        ) => f(
            e,
            &Ctx {
                op: &sh.label,
                index: seq,
                epoch: *epoch,
            },
        ),
        (Source::Stream { .. }, None) => unreachable!("stream elements are pulled"),
    }));
    Some(r.unwrap_or_else(|p| Err(Error::from_panic(&sh.label, p))))
}

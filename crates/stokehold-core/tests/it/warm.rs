//! The warm next epoch: a prefetch whose consumer reached the end of epoch `e` runs on into
//! epoch `e + 1`, and the next `iter(e + 1)` of the same op adopts that thread. Results and
//! states must be a fresh iterator's; the adoption itself shows in how often the map ran.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stokehold_core::{map_fn, Dataset, PipelineIter};

use crate::common::xs;

const N: u64 = 20;
const DEPTH: usize = 2;

/// `range(N).shuffle().map(count).prefetch(DEPTH)`, the map counting its calls in `calls`.
fn counted(calls: &Arc<AtomicU64>) -> Dataset {
    let c = calls.clone();
    Dataset::range(N)
        .shuffle(7)
        .map(
            "count",
            map_fn(move |e, _| {
                c.fetch_add(1, Ordering::SeqCst);
                Ok(e)
            }),
        )
        .prefetch(DEPTH)
        .unwrap()
}

/// The call count once it has reached `want` (waiting up to 60 s: a loaded machine may leave
/// the thread without a core for a long while, which a count that stood still for a moment
/// took for the end) and a moment later, when calls past `want` would have shown.
fn settled_at(calls: &AtomicU64, want: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    while calls.load(Ordering::SeqCst) < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    calls.load(Ordering::SeqCst)
}

fn all(it: &mut PipelineIter) -> Vec<i64> {
    let mut out = Vec::new();
    while let Some(e) = it.next().unwrap() {
        out.push(e);
    }
    xs(&out)
}

#[test]
fn the_next_iterator_adopts_the_thread_already_on_its_epoch() {
    let calls = Arc::new(AtomicU64::new(0));
    let ds = counted(&calls);
    let fresh = counted(&Arc::new(AtomicU64::new(0)));
    let e0 = all(&mut PipelineIter::new(ds.clone(), 0).unwrap());
    assert_eq!(e0, all(&mut PipelineIter::new(fresh.clone(), 0).unwrap()));
    // Warm: the thread computed epoch 1's first elements (the buffer's DEPTH, and one more
    // that waits for room) with nobody asking yet.
    assert_eq!(
        settled_at(&calls, N + DEPTH as u64 + 1),
        N + DEPTH as u64 + 1
    );

    let mut it = PipelineIter::new(ds.clone(), 1).unwrap();
    let mut plain = PipelineIter::new(fresh.clone(), 1).unwrap();
    assert_eq!(
        it.state(),
        plain.state(),
        "an adopted iterator starts where a fresh one does"
    );
    let mut head = Vec::new();
    for _ in 0..5 {
        head.push(it.next().unwrap().unwrap());
        plain.next().unwrap().unwrap();
    }
    let saved = it.state();
    assert_eq!(saved, plain.state(), "states stay a fresh iterator's");
    let mut e1 = xs(&head);
    e1.extend(all(&mut it));
    assert_eq!(e1[5..], all(&mut plain)[..]);
    assert_ne!(e0, e1, "reshuffled per epoch");
    // Adopted, not recomputed: epoch 1 cost N calls in all (and epoch 2's warm-up as many as
    // epoch 1's); a fresh iterator would have run its first DEPTH + 1 elements again.
    let want = 2 * N + DEPTH as u64 + 1;
    assert_eq!(settled_at(&calls, want), want);

    // The adopted iterator's state restores on a fresh iterator of the other pipeline object.
    let mut restored = PipelineIter::new(fresh.clone(), 1).unwrap();
    restored.set_state(&saved).unwrap();
    assert_eq!(all(&mut restored), e1[5..].to_vec());
}

#[test]
fn an_iterator_of_another_epoch_starts_fresh() {
    let calls = Arc::new(AtomicU64::new(0));
    let ds = counted(&calls);
    let fresh = counted(&Arc::new(AtomicU64::new(0)));
    all(&mut PipelineIter::new(ds.clone(), 0).unwrap());
    // Epoch 3, not the parked epoch 1: the parked thread is dropped, the elements are epoch 3's.
    let got = all(&mut PipelineIter::new(ds.clone(), 3).unwrap());
    assert_eq!(got, all(&mut PipelineIter::new(fresh, 3).unwrap()));
    // And a second pass over epoch 0 is epoch 0's, whatever was parked.
    let again = all(&mut PipelineIter::new(ds.clone(), 0).unwrap());
    let first = all(&mut PipelineIter::new(counted(&calls), 0).unwrap());
    assert_eq!(again, first);
}

#[test]
fn a_stream_input_is_not_run_ahead() {
    // filter makes a stream: its next epoch is not opened before someone asks for it.
    let calls = Arc::new(AtomicU64::new(0));
    let c = calls.clone();
    let ds = Dataset::range(N)
        .map(
            "count",
            map_fn(move |e, _| {
                c.fetch_add(1, Ordering::SeqCst);
                Ok(e)
            }),
        )
        .filter("all", stokehold_core::filter_fn(|_, _| Ok(true)))
        .prefetch(DEPTH)
        .unwrap();
    all(&mut PipelineIter::new(ds, 0).unwrap());
    assert_eq!(settled_at(&calls, N), N);
}

#[test]
fn a_warm_epoch_of_an_autotuned_op_starts_at_the_parallelism_the_last_one_settled_on() {
    use std::sync::atomic::AtomicBool;
    use stokehold_core::exec::{ExecOptions, Executor, Parallelism};
    use stokehold_core::DatasetIter;

    use crate::autotune::{assert_read, describe, CPU_BOUND};
    // A map parallelized by AUTOTUNE on 2 cores of a described machine (its decisions do not
    // depend on the load of the one running the test): epoch 0 runs on the two workers a new
    // op starts with. The thread that runs on into epoch 1 opened that epoch's iterator while
    // epoch 0's still held the op's second core slot, so epoch 1 started on one worker (and its
    // trial of two was cut short by the end of every later short epoch, so AUTOTUNE ran at half
    // speed for good). Epoch 1's first element waits (up to 20 s, far longer than a loaded
    // machine takes to start a second worker) for the second to start: only if epoch 1 started
    // on two workers does it.
    const LEN: u64 = 80;
    // (Epoch 1's elements are indices LEN.. of the map: an index past the end is a later epoch.)
    let (second, overlapped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, o) = (second.clone(), overlapped.clone());
    let f = map_fn(move |e, ctx| {
        // Slow enough to be claimed one at a time (not as one run of cheap elements).
        std::thread::sleep(Duration::from_millis(10));
        if ctx.index == LEN + 1 {
            s.store(true, Ordering::SeqCst);
        }
        if ctx.index == LEN {
            let t = Instant::now();
            while !s.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(1));
            }
            o.store(s.load(Ordering::SeqCst), Ordering::SeqCst);
        }
        Ok(e)
    });
    let stage = Dataset::range(LEN)
        .map("sleep", f)
        .parallelize(Parallelism::Autotune, true);
    let ds = stage.prefetch(2).unwrap();
    let exec = Executor::new(ExecOptions {
        cores: 2,
        ..ExecOptions::default()
    });
    let samplers = describe(&exec, &stage, CPU_BOUND);
    let mut first = exec.iter(&ds, 0).unwrap();
    assert_eq!(first.collect_all().unwrap().len(), LEN as usize);
    let report = first.stats();
    assert_read(&samplers, &report);
    let settled = report
        .ops
        .iter()
        .find(|o| o.op.starts_with("parallelize"))
        .map(|o| o.parallelism);
    assert_eq!(settled, Some(2), "{}", report.table());
    drop(first);
    let mut next = exec.iter(&ds, 1).unwrap();
    assert_eq!(next.collect_all().unwrap().len(), LEN as usize);
    assert!(
        overlapped.load(Ordering::SeqCst),
        "epoch 1 started on one worker:\n{}",
        next.stats().table()
    );
}

#[test]
fn every_epoch_of_a_plain_loop_runs_on_the_executor_its_first_iterator_made() {
    use stokehold_core::exec::{executor_of, Parallelism};
    // `for epoch in range(n): for batch in ds` with no executor installed: each epoch's
    // iterator reuses the op's default executor, so its threads, stats and what AUTOTUNE
    // learnt carry over. Before, every epoch made a new executor, its stats started from
    // zero and AUTOTUNE began again at one worker.
    let ds =
        Dataset::range(50).map_parallel("id", map_fn(|e, _| Ok(e)), Parallelism::Autotune, true);
    for epoch in 0..3u64 {
        assert_eq!(
            all(&mut PipelineIter::new(ds.clone(), epoch).unwrap()).len(),
            50
        );
        let exec = executor_of(&ds).expect("the op's executor");
        let op = &exec.stats().ops[0];
        assert_eq!(op.elements, 50 * (epoch + 1), "epoch {epoch}: {op:?}");
    }
}

#[test]
fn warm_start_false_stops_each_epoch_at_its_end() {
    // Issue 48 item 7: the map ran for elements of an epoch nobody had asked for yet.
    use stokehold_core::exec::ExecOptions;
    let calls = Arc::new(AtomicU64::new(0));
    let cold = ExecOptions {
        warm_start: false,
        ..ExecOptions::default()
    };
    let ds = counted(&calls).with_options(cold);
    assert!(
        ds.describe().contains("warm_start=false"),
        "{}",
        ds.describe()
    );
    let fresh = counted(&Arc::new(AtomicU64::new(0)));
    let e0 = all(&mut PipelineIter::new(ds.clone(), 0).unwrap());
    assert_eq!(e0, all(&mut PipelineIter::new(fresh.clone(), 0).unwrap()));
    assert_eq!(
        settled_at(&calls, N),
        N,
        "no call for epoch 1 before it is asked for"
    );
    let e1 = all(&mut PipelineIter::new(ds, 1).unwrap());
    assert_eq!(e1, all(&mut PipelineIter::new(fresh, 1).unwrap()));
    assert_eq!(settled_at(&calls, 2 * N), 2 * N);
}

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

/// The call count once it has stopped moving (the thread blocks when its buffer is full).
fn settled(calls: &AtomicU64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = calls.load(Ordering::SeqCst);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = calls.load(Ordering::SeqCst);
        if now == last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
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
    let c0 = settled(&calls);
    assert_eq!(c0, N + DEPTH as u64 + 1);

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
    assert_eq!(settled(&calls), 2 * N + DEPTH as u64 + 1);

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
    assert_eq!(settled(&calls), N);
}

#[test]
fn a_warm_epoch_of_an_autotuned_op_starts_at_the_parallelism_the_last_one_settled_on() {
    use std::sync::atomic::AtomicUsize;
    use stokehold_core::exec::{ExecOptions, Executor, Parallelism};
    use stokehold_core::DatasetIter;
    // A map of 10 ms sleeps parallelized by AUTOTUNE on 2 cores: the consumer always waits, and a second
    // worker doubles the rate, so epoch 0 settles on 2 workers or more. The thread that runs on into
    // epoch 1 opened that epoch's iterator while epoch 0's still held the op's second core
    // slot, so epoch 1 started on one worker (and its trial of two was cut short by the end of
    // every later short epoch, so AUTOTUNE ran at half speed for good).
    const LEN: u64 = 80;
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (r, m) = (running.clone(), most.clone());
    let f = map_fn(move |e, ctx| {
        let now = r.fetch_add(1, Ordering::SeqCst) + 1;
        // Epoch 1's first elements, before its tuner's first period (100 ms) could step up.
        if (LEN..LEN + 5).contains(&ctx.index) {
            m.fetch_max(now, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(10));
        r.fetch_sub(1, Ordering::SeqCst);
        Ok(e)
    });
    let ds = Dataset::range(LEN)
        .map("sleep", f)
        .parallelize(Parallelism::Autotune, true)
        .prefetch(2)
        .unwrap();
    let exec = Executor::new(ExecOptions {
        cores: 2,
        ..ExecOptions::default()
    });
    let mut first = exec.iter(&ds, 0).unwrap();
    assert_eq!(first.collect_all().unwrap().len(), LEN as usize);
    let report = first.stats();
    let settled = report
        .ops
        .iter()
        .find(|o| o.op.starts_with("parallelize"))
        .map(|o| o.parallelism);
    // Two workers or more: sleeping workers run on a core for almost none of their busy time,
    // so AUTOTUNE may also try them past the cores.
    assert!(
        settled.is_some_and(|p| p >= 2),
        "epoch 0 did not settle on 2 or more:\n{}",
        report.table()
    );
    drop(first);
    let mut next = exec.iter(&ds, 1).unwrap();
    assert_eq!(next.collect_all().unwrap().len(), LEN as usize);
    assert!(
        most.load(Ordering::SeqCst) >= 2,
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

//! Parallel map / parallelize: determinism across thread counts, order modes, state, faults.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use stokehold_core::exec::Parallelism::{self, Autotune, Fixed};
use stokehold_core::exec::{ExecOptions, Executor};
use stokehold_core::{map_fn, Dataset, DatasetIter, Error, Example, MapFn, Tensor};

use crate::common::*;

fn square() -> MapFn {
    map_fn(|e: Example, _| {
        let x = e.tensor("sq", "x")?.to_vec::<i64>()?[0];
        Ok(Example::new().with("x", Tensor::scalar(x * x)))
    })
}

/// A host check that refuses at once (Ctrl-C pressed while the consumer waits).
fn refuse() -> stokehold_core::Result<()> {
    Err(Error::Interrupted("host said stop".into()))
}

fn pipelines(par: Parallelism, det: bool) -> Vec<Dataset> {
    let base = Dataset::range(200);
    vec![
        base.map_parallel("sq", square(), par, det),
        base.shuffle(3).map_parallel("sq", square(), par, det),
        base.filter(
            "odd",
            stokehold_core::filter_fn(|e, _| Ok(e.tensor("f", "x")?.to_vec::<i64>()?[0] % 2 == 1)),
        )
        .map_parallel("sq", square(), par, det),
        base.shuffle(5).parallelize(par, det),
    ]
}

#[test]
fn one_thread_equals_eight_threads() {
    for (a, b) in pipelines(Fixed(1), true)
        .iter()
        .zip(pipelines(Fixed(8), true))
    {
        assert_eq!(run(a).unwrap(), run(&b).unwrap(), "{}", a.describe());
        assert_eq!(run(a).unwrap(), run_on(&b, 8).unwrap());
    }
    for (a, b) in pipelines(Fixed(1), true)
        .iter()
        .zip(pipelines(Autotune, true))
    {
        assert_eq!(run(a).unwrap(), run_on(&b, 8).unwrap(), "{}", b.describe());
    }
}

#[test]
fn matches_sequential_map() {
    let seq = run(&Dataset::range(300).shuffle(1).map("sq", square())).unwrap();
    let par = run(&Dataset::range(300)
        .shuffle(1)
        .map_parallel("sq", square(), Fixed(4), true))
    .unwrap();
    assert_eq!(seq, par);
}

#[test]
fn as_completed_mode_yields_every_element_once() {
    for ds in pipelines(Fixed(4), false) {
        let mut got = run(&ds).unwrap();
        let mut want = run(&ds_ordered(&ds)).unwrap();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{}", ds.describe());
    }
}

fn ds_ordered(ds: &Dataset) -> Dataset {
    // The same pipeline's parent, run sequentially.
    let parent = ds.parents()[0].clone();
    if ds.name().starts_with("map") {
        parent.map("sq", square())
    } else {
        parent
    }
}

#[test]
fn empty_one_and_len() {
    for par in [Fixed(1), Fixed(8), Autotune] {
        for det in [true, false] {
            let e = Dataset::range(0).map_parallel("sq", square(), par, det);
            assert_eq!(e.len(), Some(0));
            assert!(run(&e).unwrap().is_empty());
            let one = Dataset::range(1).map_parallel("sq", square(), par, det);
            assert_eq!(run(&one).unwrap(), vec![0]);
            let s = Dataset::range(0).filter("all", stokehold_core::filter_fn(|_, _| Ok(true)));
            assert!(run(&s.map_parallel("sq", square(), par, det))
                .unwrap()
                .is_empty());
            assert_eq!(
                Dataset::range(57)
                    .map_parallel("sq", square(), par, det)
                    .len(),
                Some(57)
            );
        }
    }
}

#[test]
fn save_restore_continue_equals_uninterrupted() {
    for det in [true, false] {
        for ds in pipelines(Fixed(3), det) {
            let full = run(&ds).unwrap();
            for k in [0, 1, 17, full.len()] {
                let mut resumed = save_restore_run(&ds, k).unwrap();
                if det {
                    assert_eq!(resumed, full, "{} k={k}", ds.describe());
                } else {
                    let mut f = full.clone();
                    f.sort();
                    resumed.sort();
                    assert_eq!(resumed, f, "{} k={k}", ds.describe());
                }
            }
        }
    }
}

#[test]
fn later_epochs_and_repeat_upstream() {
    let ds =
        Dataset::range(10)
            .shuffle(9)
            .repeat(Some(3))
            .map_parallel("sq", square(), Fixed(4), true);
    let seq = run(&Dataset::range(10)
        .shuffle(9)
        .repeat(Some(3))
        .map("sq", square()))
    .unwrap();
    assert_eq!(run(&ds).unwrap(), seq);
    let e1: Vec<_> = ds.iter(1).unwrap().collect_all().unwrap();
    assert_eq!(
        xs(&e1),
        xs(&Dataset::range(10)
            .shuffle(9)
            .repeat(Some(3))
            .map("sq", square())
            .iter(1)
            .unwrap()
            .collect_all()
            .unwrap())
    );
}

#[test]
fn worker_panic_is_an_error_not_a_hang() {
    let f = map_fn(|e: Example, ctx| {
        if ctx.index == 7 {
            panic!("bad element");
        }
        Ok(e)
    });
    for par in [Fixed(1), Fixed(4)] {
        let ds = Dataset::range(20).map_parallel("boom", f.clone(), par, true);
        let mut it = ds.iter(0).unwrap();
        let mut seen = 0;
        let err = loop {
            match it.next() {
                Ok(Some(_)) => seen += 1,
                Ok(None) => panic!("no error"),
                Err(e) => break e,
            }
        };
        assert_eq!(seen, 7);
        assert!(
            matches!(err, Error::Panic { ref message, .. } if message.contains("bad element")),
            "{err}"
        );
        // The pipeline goes on after the failed element.
        assert_eq!(it.collect_all().unwrap().len(), 12);
    }
}

#[test]
fn wrong_output_type_is_a_schema_error_downstream() {
    // The function returns a string feature where the next op needs numbers.
    let f = map_fn(|_e: Example, _| Ok(Example::new().with("x", Tensor::strings(&["a"]))));
    let ds = Dataset::range(10)
        .map_parallel("str", f, Fixed(2), true)
        .map("sq", square());
    let err = run(&ds).unwrap_err().to_string();
    assert!(err.contains("dtype") && err.contains("int64"), "{err}");
}

#[test]
fn dropping_mid_epoch_ends_threads() {
    run_isolated("parallel::isolated_dropping_mid_epoch_ends_threads");
}

#[test]
#[ignore = "run in its own process by dropping_mid_epoch_ends_threads"]
fn isolated_dropping_mid_epoch_ends_threads() {
    let before = threads();
    {
        let slow = map_fn(|e: Example, _| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            Ok(e)
        });
        let ds = Dataset::range(100_000)
            .map_parallel("slow", slow, Fixed(6), true)
            .prefetch(4)
            .unwrap();
        let mut it = ds.iter(0).unwrap();
        for _ in 0..20 {
            it.next().unwrap().unwrap();
        }
        assert!(threads() > before);
    }
    let after = wait_threads_at_most(before);
    assert!(after <= before, "threads before {before}, after {after}");
}

#[test]
fn one_failing_pipeline_leaves_others_working() {
    let bad =
        Dataset::range(50).map_parallel("boom", map_fn(|_, _| panic!("always")), Fixed(2), true);
    let good = Dataset::range(50).map_parallel("sq", square(), Fixed(2), true);
    let mut b = bad.iter(0).unwrap();
    let mut g = good.iter(0).unwrap();
    for _ in 0..50 {
        assert!(b.next().is_err());
        assert!(g.next().unwrap().is_some());
    }
    assert!(g.next().unwrap().is_none());
}

#[test]
fn a_host_check_interrupts_a_waiting_consumer_and_nothing_is_lost() {
    use stokehold_core::exec::interrupt;

    // Element 0 is held until the consumer has been interrupted: the check refuses, so next()
    // returns while it waits (not once the element comes, whatever the load), and the element
    // still comes on the next call.
    let base = Dataset::range(4);
    let (a, b) = (Gate::default(), Gate::default());
    for (ds, gate) in [
        (base.map("slow", a.holding(0)).prefetch(2).unwrap(), a),
        (base.map_parallel("slow", b.holding(0), Fixed(2), true), b),
    ] {
        let mut it = ds.iter(0).unwrap();
        let err = interrupt::with_check(refuse, || it.next()).unwrap_err();
        assert!(matches!(err, Error::Interrupted(_)), "{err}");
        gate.open();
        assert_eq!(xs(&it.collect_all().unwrap()), [0, 1, 2, 3]);
    }
}

#[test]
fn an_interrupt_while_a_batch_fills_loses_none_of_its_elements() {
    use stokehold_core::exec::interrupt;
    use stokehold_core::PipelineIter;

    // Batches of four of range(10) after a stage whose element `slow` is held at a gate until
    // the interrupt has come.
    let pipelines = |slow: i64| {
        let base = Dataset::range(10);
        let (a, b) = (Gate::default(), Gate::default());
        [
            (
                base.map_parallel("slow", a.holding(slow), Fixed(2), true),
                a,
            ),
            (base.map("slow", b.holding(slow)).prefetch(2).unwrap(), b),
        ]
        .map(|(d, gate)| (d.batch(4, false).unwrap(), gate))
    };
    let values = |b: &[Example]| -> Vec<Vec<i64>> {
        b.iter()
            .map(|b| b.tensor("t", "x").unwrap().to_vec::<i64>().unwrap())
            .collect()
    };
    let want: Vec<Vec<i64>> = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]];
    // Element 3 slow: the first batch holds 0, 1, 2 when the host check refuses.
    for (ds, gate) in pipelines(3) {
        let mut it = PipelineIter::new(ds.clone(), 0).unwrap();
        let err = interrupt::with_check(refuse, || it.next()).unwrap_err();
        assert!(matches!(err, Error::Interrupted(_)), "{err}");
        let saved = it.state();
        gate.open();
        // Going on after the interrupt.
        assert_eq!(
            values(&it.next_many(100).unwrap()),
            want,
            "{}",
            ds.describe()
        );
        // A checkpoint taken after the interrupt holds the elements the batch had; one that
        // claims a whole batch or more of them is refused.
        // (Elements 0-2 are ready within the first check tick unless the machine stalls the
        // workers that long; the refusal is checked when the state holds any.)
        if let Some(held) = saved["iter"]["pending"].as_array() {
            let mut bad = saved.clone();
            bad["iter"]["pending"] = serde_json::json!([held[0], held[0], held[0], held[0]]);
            let refused = PipelineIter::new(ds.clone(), 0).unwrap().set_state(&bad);
            assert!(matches!(refused, Err(Error::State(_))), "{refused:?}");
        }
        let mut again = PipelineIter::new(ds.clone(), 0).unwrap();
        again.set_state(&saved).unwrap();
        assert_eq!(
            values(&again.next_many(100).unwrap()),
            want,
            "restored: {}",
            ds.describe()
        );
    }
    // Element 5 slow: next_many has the first batch when the refusal comes, and gives it again.
    for (ds, gate) in pipelines(5) {
        let mut it = PipelineIter::new(ds.clone(), 0).unwrap();
        let err = interrupt::with_check(refuse, || it.next_many(3)).unwrap_err();
        assert!(matches!(err, Error::Interrupted(_)), "{err}");
        gate.open();
        assert_eq!(
            values(&it.next_many(3).unwrap()),
            want,
            "next_many: {}",
            ds.describe()
        );
    }
    // A zip whose second input waits: the first input's part is kept, in the state too.
    let gate = Gate::default();
    let slow_0 = gate.holding(0);
    let base = Dataset::range(6);
    let zipped = Dataset::zip_prefixed(vec![
        ("a_".into(), base.parallelize(Fixed(2), true)),
        (
            "b_".into(),
            base.map_parallel("slow", slow_0, Fixed(2), true),
        ),
    ]);
    let pairs = |it: &mut PipelineIter| -> Vec<(i64, i64)> {
        it.next_many(100)
            .unwrap()
            .iter()
            .map(|e| {
                let v = |n| e.tensor("t", n).unwrap().to_vec::<i64>().unwrap()[0];
                (v("a_x"), v("b_x"))
            })
            .collect()
    };
    let mut it = PipelineIter::new(zipped.clone(), 0).unwrap();
    let err = interrupt::with_check(refuse, || it.next()).unwrap_err();
    assert!(matches!(err, Error::Interrupted(_)), "{err}");
    let saved = it.state();
    gate.open();
    let want: Vec<(i64, i64)> = (0..6).map(|i| (i, i)).collect();
    assert_eq!(pairs(&mut it), want);
    let mut again = PipelineIter::new(zipped, 0).unwrap();
    again.set_state(&saved).unwrap();
    assert_eq!(pairs(&mut again), want, "restored");
    // The same through the epochs() loader: elements 0-4 taken when the refusal comes.
    let gate = Gate::default();
    let ds = Dataset::range(10)
        .map("slow", gate.holding(5))
        .parallelize(Fixed(2), true);
    let mut ep = ds.epochs(0, Some(1), None).unwrap();
    assert_eq!(ep.next_epoch().unwrap(), Some(0));
    let err = interrupt::with_check(refuse, || ep.next_many(8)).unwrap_err();
    assert!(matches!(err, Error::Interrupted(_)), "{err}");
    gate.open();
    assert_eq!(xs(&ep.next_many(20).unwrap()), (0..10).collect::<Vec<_>>());
}

#[test]
fn an_interrupt_while_a_shuffle_buffer_pulls_leaves_its_order_as_it_was() {
    use stokehold_core::exec::interrupt;
    use stokehold_core::PipelineIter;

    // A buffer of 8 over a stream of 40 whose element `slow` is held at `gate`: 5 is pulled while
    // the buffer first fills, 20 as the replacement for the 13th element drawn.
    let pipeline = |slow: i64, gate: &Gate| {
        // A prefetch hands over each element as it comes (a parallel stage hands over runs,
        // which may hold the slow one with those before it).
        Dataset::range(40)
            .map("slow", gate.holding(slow))
            .prefetch(2)
            .unwrap()
            .shuffle_buffer(8, 3)
            .unwrap()
    };
    let ids = |es: Vec<Example>| -> Vec<i64> {
        es.iter()
            .map(|e| e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0])
            .collect()
    };
    let open = Gate::default();
    open.open();
    let want = ids(PipelineIter::new(pipeline(-1, &open), 0)
        .unwrap()
        .next_many(100)
        .unwrap());
    for (slow, before) in [(5, 0), (20, 12)] {
        let gate = Gate::default();
        let mut it = PipelineIter::new(pipeline(slow, &gate), 0).unwrap();
        let first = ids(it.next_many(before).unwrap());
        let err = interrupt::with_check(refuse, || it.next()).unwrap_err();
        assert!(matches!(err, Error::Interrupted(_)), "{err}");
        let saved = it.state();
        gate.open();
        assert_eq!(first, want[..before], "slow {slow}: before the interrupt");
        assert_eq!(
            ids(it.next_many(100).unwrap()),
            want[before..],
            "slow {slow}: going on"
        );
        let mut again = PipelineIter::new(pipeline(slow, &open), 0).unwrap();
        again.set_state(&saved).unwrap();
        assert_eq!(
            ids(again.next_many(100).unwrap()),
            want[before..],
            "slow {slow}: restored"
        );
    }
}

#[test]
fn a_later_epoch_starts_every_worker_at_once() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    // Until an element of the op has been measured, its workers start one at a time (its size
    // is unknown to the memory budget). A later epoch's iterator knows it from the earlier one:
    // element 0 waits for element 1 to start, which happens only if a second worker starts
    // while the first is still busy.
    let (armed, second_started, overlapped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (a, s, o) = (armed.clone(), second_started.clone(), overlapped.clone());
    let f = map_fn(move |e: Example, _| {
        let x = e.tensor("wait", "x")?.to_vec::<i64>()?[0] % 3;
        // Slow enough to be claimed one at a time (not as one run of cheap elements).
        std::thread::sleep(Duration::from_millis(5));
        if x == 1 {
            s.store(true, SeqCst);
        }
        if x == 0 && a.load(SeqCst) {
            let t = Instant::now();
            // Long enough for a loaded machine to start the second worker; only a first
            // element computed alone waits it out.
            while !s.load(SeqCst) && t.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(1));
            }
            o.store(s.load(SeqCst), SeqCst);
        }
        Ok(e)
    });
    let ds = Dataset::range(3).map_parallel("wait", f, Fixed(2), true);
    // One executor for both epochs (as a Python dataset has): its op counters last.
    let exec = Executor::new(ExecOptions::default());
    assert_eq!(
        xs(&exec.iter(&ds, 0).unwrap().collect_all().unwrap()),
        vec![0, 1, 2]
    );
    armed.store(true, SeqCst);
    second_started.store(false, SeqCst);
    let mut it = exec.iter(&ds, 1).unwrap();
    let mut n = 0;
    while it.next().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 3);
    assert!(
        overlapped.load(SeqCst),
        "epoch 1 computed its first element alone"
    );
}

#[test]
fn a_later_epoch_hands_over_its_first_element_before_a_whole_run() {
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};
    // Cheap elements are claimed in runs, and a later epoch knows they are cheap from the
    // earlier one. Its first element must not wait for a run: here element 1 of the second epoch
    // waits (up to 10 s) until the consumer holds element 0, which a run of both would hand over
    // only after that wait.
    let (armed, got_first, waited_out) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (a, g, w) = (armed.clone(), got_first.clone(), waited_out.clone());
    let f = map_fn(move |e: Example, _| {
        let x = e.tensor("first", "x")?.to_vec::<i64>()?[0];
        if x == 1 && a.load(SeqCst) {
            let t = Instant::now();
            while !g.load(SeqCst) && t.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(1));
            }
            w.store(!g.load(SeqCst), SeqCst);
        }
        Ok(e)
    });
    let ds = Dataset::range(64).map_parallel("first", f, Fixed(1), true);
    let exec = Executor::new(ExecOptions::default());
    let all: Vec<i64> = (0..64).collect();
    assert_eq!(xs(&exec.iter(&ds, 0).unwrap().collect_all().unwrap()), all);
    armed.store(true, SeqCst);
    let mut it = exec.iter(&ds, 1).unwrap();
    let first = it.next().unwrap().expect("element 0");
    got_first.store(true, SeqCst);
    let mut got = xs(&[first]);
    got.extend(xs(&it.collect_all().unwrap()));
    assert_eq!(got, all);
    assert!(
        !waited_out.load(SeqCst),
        "element 0 was handed over only after element 1 of its run"
    );
}

thread_local!(static INSIDE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });

/// A map in a counting scope over a parent whose reads check they run outside it (a flag of
/// the thread: the scope and the calls in it run on one thread).
fn scoped(entered: &Arc<AtomicUsize>, fail_at: i64) -> Dataset {
    let e = entered.clone();
    let read = map_fn(move |e: Example, _| {
        assert!(!INSIDE.get(), "an input was read inside the scope");
        Ok(e)
    });
    let f = map_fn(move |e: Example, _| {
        assert!(INSIDE.get(), "a call ran outside the scope");
        let x = e.tensor("sq", "x")?.to_vec::<i64>()?[0];
        if x == fail_at {
            return Err(Error::invalid(format!("bad element {x}")));
        }
        Ok(Example::new().with("x", Tensor::scalar(x * x)))
    });
    let scope: stokehold_core::ScopeFn = Arc::new(move |_, calls: &mut dyn FnMut()| {
        e.fetch_add(1, SeqCst);
        INSIDE.set(true);
        calls();
        INSIDE.set(false);
    });
    Dataset::range(256)
        .map("read", read)
        .map_scoped("sq", f, scope)
}

#[test]
fn a_scoped_map_makes_its_calls_in_one_scope_per_batch_or_run() {
    let want = run(&Dataset::range(256).map("sq", square())).unwrap();
    // Sequential batches: one scope per batch of 64, the inputs read before it.
    let entered = Arc::new(AtomicUsize::new(0));
    let batched = scoped(&entered, -1).batch(64, false).unwrap();
    let mut it = batched.iter(0).unwrap();
    let mut got = Vec::new();
    while let Some(b) = it.next().unwrap() {
        got.extend(b.tensor("t", "x").unwrap().to_vec::<i64>().unwrap());
    }
    assert_eq!(got, want);
    assert_eq!(entered.load(SeqCst), 4);
    // Parallel workers: the same elements, in far fewer scopes than elements (runs).
    let entered = Arc::new(AtomicUsize::new(0));
    let par = scoped(&entered, -1).parallelize(Fixed(2), true);
    assert_eq!(run(&par).unwrap(), want);
    assert!(
        entered.load(SeqCst) < 256,
        "{} scopes",
        entered.load(SeqCst)
    );
}

#[test]
fn an_error_in_a_scoped_run_is_its_elements_alone() {
    let entered = Arc::new(AtomicUsize::new(0));
    let par = scoped(&entered, 100).parallelize(Fixed(2), true);
    // The raw iterator: it goes on after an element's error (a pipeline iterator ends there).
    let mut it = par.iter(0).unwrap();
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    loop {
        match it.next() {
            Ok(Some(e)) => ok.push(xs(&[e])[0]),
            Ok(None) => break,
            Err(e) => errors.push(e.to_string()),
        }
    }
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("bad element 100"), "{errors:?}");
    assert_eq!(ok.len(), 255);
    assert!(!ok.contains(&(100 * 100)));
}

#[test]
fn a_scoped_map_is_seen_through_random_access_ops_and_not_past_a_stream() {
    let entered = Arc::new(AtomicUsize::new(0));
    let s = scoped(&entered, -1);
    assert!(s.calls_in_scope());
    assert!(s.shuffle(3).batch(4, false).unwrap().calls_in_scope());
    assert!(!Dataset::range(8).map("sq", square()).calls_in_scope());
    // Behind a parallel stage (a stream), the function runs on that stage's threads.
    let stage = s.parallelize(Fixed(2), true);
    assert!(!stage.calls_in_scope());
    assert!(!stage.batch(4, false).unwrap().calls_in_scope());
}

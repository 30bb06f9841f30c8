//! Tests of the parallel stage's iterator and workers, through their internals.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::iter::{window_for, ParallelIter, StageSpec};
use super::shared::HANDOFFS;
use crate::dataset::{Dataset, DatasetIter};
use crate::error::Error;
use crate::example::Example;
use crate::exec::parallelism::{Parallelism, INLINE};
use crate::ops::map::MapFn;
use crate::tensor::Tensor;
use crate::{filter_fn, map_fn};

fn x(e: &Example) -> i64 {
    e.tensor("test", "x").unwrap().to_vec::<i64>().unwrap()[0]
}

fn square() -> MapFn {
    map_fn(|e: Example, _| Ok(Example::new().with("x", Tensor::scalar(x(&e) * x(&e)))))
}

fn inputs() -> Vec<Dataset> {
    let odd = filter_fn(|e, _| Ok(x(e) % 2 == 1));
    vec![
        Dataset::range(40).shuffle(3),
        Dataset::range(80).filter("odd", odd),
    ]
}

fn stage(parent: &Dataset, ordered: bool) -> ParallelIter {
    let spec = StageSpec {
        label: "map[sq](parallel)".into(),
        par: Parallelism::Fixed(1),
        ordered,
        scoped: false,
    };
    ParallelIter::new(spec, parent.clone(), Some(square()), 0).unwrap()
}

fn set_target(it: &mut ParallelIter, p: usize) {
    let mut st = it.shared.lock();
    st.target = p;
    st.window = window_for(p);
    it.shared.cv_in.notify_all();
    it.start(&mut st).unwrap();
}

/// A map that fails at element 3 ("bad element 3") and passes the others through.
fn fails_at_3() -> MapFn {
    map_fn(|e: Example, ctx| {
        if ctx.index == 3 {
            return Err(Error::invalid(format!("bad element {}", ctx.index)));
        }
        Ok(e)
    })
}

/// An ordered stage of `f` over `range(n)` at `par` workers.
fn map_stage(f: MapFn, n: u64, par: usize) -> ParallelIter {
    let spec = StageSpec {
        label: "map[f](parallel)".into(),
        par: Parallelism::Fixed(par),
        ordered: true,
        scoped: false,
    };
    ParallelIter::new(spec, Dataset::range(n), Some(f), 0).unwrap()
}

fn take(it: &mut ParallelIter, n: usize) -> Vec<i64> {
    (0..n)
        .map_while(|_| it.next().unwrap())
        .map(|e| x(&e))
        .collect()
}

/// In a scoped stage (a Python map), no other worker starts an element while the iterator's
/// first is computed; in any other, the second worker starts at once.
#[test]
fn a_scoped_stage_starts_its_other_workers_once_the_first_element_is_in() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    for scoped in [true, false] {
        let first_done = Arc::new(AtomicBool::new(false));
        let early = Arc::new(AtomicUsize::new(0));
        let (done, e) = (first_done.clone(), early.clone());
        let f = map_fn(move |ex: Example, _| {
            if x(&ex) == 0 {
                std::thread::sleep(Duration::from_millis(50));
                done.store(true, SeqCst);
            } else if !done.load(SeqCst) {
                e.fetch_add(1, SeqCst);
            }
            Ok(ex)
        });
        let spec = StageSpec {
            label: format!("map[first alone, scoped {scoped}](parallel)"),
            par: Parallelism::Fixed(2),
            ordered: true,
            scoped,
        };
        let mut it = ParallelIter::new(spec, Dataset::range(40), Some(f), 0).unwrap();
        // Measured, as by an earlier epoch: an unmeasured stage claims one element at a time
        // until its first is in, whatever the scope.
        it.shared.lock().est_bytes = 8;
        assert_eq!(take(&mut it, usize::MAX), (0..40).collect::<Vec<_>>());
        let early = early.load(SeqCst);
        if scoped {
            assert_eq!(early, 0, "elements started before the first was in");
        } else {
            assert!(early > 0, "the second worker waited for the first element");
        }
    }
}

#[test]
fn inline_computes_on_the_consumer_with_the_same_output_and_state() {
    for parent in inputs() {
        let mut all = stage(&parent, true);
        let want = take(&mut all, usize::MAX);
        // Inline from the start: no worker thread is ever started.
        let mut it = stage(&parent, true);
        set_target(&mut it, INLINE);
        let mut got = take(&mut it, 7);
        assert_eq!(it.shared.lock().spawned, 0, "a worker ran");
        let saved = it.state();
        // To one worker and back to inline mid-epoch, as AUTOTUNE switches.
        set_target(&mut it, 1);
        got.extend(take(&mut it, 9));
        set_target(&mut it, INLINE);
        got.extend(take(&mut it, usize::MAX));
        assert_eq!(got, want, "{}", parent.describe());
        // A checkpoint taken inline restores (inline or not) to the same continuation.
        for p in [INLINE, 2] {
            let mut again = stage(&parent, true);
            set_target(&mut again, p);
            again.set_state(&saved).unwrap();
            assert_eq!(take(&mut again, usize::MAX), want[7..], "restored at {p}");
        }
    }
}

#[test]
fn a_restored_autotuned_stage_reports_the_parallelism_it_runs_at() {
    // Restoring rebuilt the stage, which left its stats at AUTOTUNE's provisional one
    // worker while it ran on at three.
    let spec = StageSpec {
        label: "map[sq](parallel)".into(),
        par: Parallelism::Autotune,
        ordered: true,
        scoped: false,
    };
    let mut it = ParallelIter::new(spec, Dataset::range(40), Some(square()), 0).unwrap();
    take(&mut it, 5);
    let saved = it.state();
    set_target(&mut it, 3);
    it.stats.set_shape(3, window_for(3)); // as AUTOTUNE's step does
    it.set_state(&saved).unwrap();
    assert_eq!(it.stats.report().parallelism, 3);
    assert_eq!(
        take(&mut it, usize::MAX),
        (5..40).map(|v| v * v).collect::<Vec<_>>()
    );
}

#[test]
fn inline_as_completed_yields_every_element_once() {
    for parent in inputs() {
        let mut want = take(&mut stage(&parent, true), usize::MAX);
        let mut it = stage(&parent, false);
        let mut got = take(&mut it, 5);
        set_target(&mut it, INLINE);
        got.extend(take(&mut it, usize::MAX));
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }
}

#[test]
fn an_error_inline_names_its_element_and_the_stage_goes_on() {
    let f = fails_at_3();
    let mut it = map_stage(f, 6, 1);
    set_target(&mut it, INLINE);
    let got: Vec<_> = (0..6)
        .map(|_| it.next().map(|e| e.map(|e| x(&e))))
        .collect();
    assert!(matches!(&got[3], Err(e) if e.to_string().contains("bad element 3")));
    let ok: Vec<i64> = got.into_iter().filter_map(|r| r.ok().flatten()).collect();
    assert_eq!(ok, [0, 1, 2, 4, 5]);
    assert!(it.next().unwrap().is_none());
}

#[test]
fn a_first_element_handed_to_a_waiting_consumer_is_counted_until_taken() {
    // Element 0 is slow, so the consumer waits for it; the worker that finishes it counts
    // the hand-off (bindings defer to it), and taking the element ends the count.
    let slow_first = map_fn(|e: Example, ctx| {
        if ctx.index == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(e)
    });
    let mut it = map_stage(slow_first, 4, 1);
    assert_eq!(x(&it.next().unwrap().unwrap()), 0);
    {
        let st = it.shared.lock();
        assert!(st.took && !st.handoff && !st.waiting);
    }
    assert_eq!(take(&mut it, usize::MAX), [1, 2, 3]);
    // A hand-off still counted when the iterator is dropped is taken out (checked by the
    // stage's flag: other tests' stages may count their own in the global meanwhile).
    let shared = it.shared.clone();
    shared.lock().handoff = true;
    HANDOFFS.fetch_add(1, Ordering::SeqCst);
    drop(it);
    assert!(!shared.lock().handoff);
}

/// Groups of `n` through `next_into` until the end, as values.
fn take_groups(it: &mut ParallelIter, n: usize) -> Vec<i64> {
    let mut out = Vec::new();
    loop {
        let before = out.len();
        let k = it.next_into(n, &mut out).unwrap();
        assert_eq!(out.len() - before, k);
        if k < n {
            return out.iter().map(x).collect();
        }
    }
}

#[test]
fn next_into_hands_over_what_next_does_inline_and_on_workers() {
    for parent in inputs() {
        let want = take(&mut stage(&parent, true), usize::MAX);
        for p in [INLINE, 1, 2] {
            for n in [1, 5, 64] {
                let mut it = stage(&parent, true);
                set_target(&mut it, p);
                let got = take_groups(&mut it, n);
                assert_eq!(got, want, "{} at {p}, groups of {n}", parent.describe());
                assert_eq!(it.stats.elements(), want.len() as u64);
                // As completed: the same elements, once each.
                let mut it = stage(&parent, false);
                set_target(&mut it, p);
                let mut got = take_groups(&mut it, n);
                got.sort();
                let mut sorted = want.clone();
                sorted.sort();
                assert_eq!(got, sorted, "as completed at {p}, groups of {n}");
            }
        }
    }
}

#[test]
fn next_into_stops_at_an_error_with_the_elements_before_it() {
    let f = fails_at_3();
    for p in [INLINE, 2] {
        let mut it = map_stage(f.clone(), 8, 2);
        set_target(&mut it, p);
        let mut out = Vec::new();
        let err = it.next_into(6, &mut out).unwrap_err();
        assert!(err.to_string().contains("bad element 3"), "{err}");
        assert_eq!(out.iter().map(x).collect::<Vec<_>>(), [0, 1, 2], "at {p}");
        // The stage goes on after the element that failed.
        assert_eq!(take_groups(&mut it, 3), [4, 5, 6, 7], "at {p}");
    }
}

//! The conformance suite, exported: the checks every dataset must pass, whatever op or format
//! made it. Core's op suite (`tests/it/conformance.rs`, one line per op) and io's datasets (shard
//! folders, indexed TFRecords, the disk cache, tables: `io/tests/it/conformance_io.rs`) both run
//! [`check`]; a new op or format adds its line there.
//!
//! ```
//! use stokehold_core::{testing, Dataset};
//! testing::check("range.shuffle", &Dataset::range(20).shuffle(3), 40);
//! ```
//!
//! The checks panic with the dataset's name and what differed (they are for tests).

use std::sync::Arc;

use crate::dataset::{Dataset, DatasetIter, Hint, MapDataset};
use crate::example::{stack_examples, Example};
use crate::exec::Parallelism;
use crate::rng::Rng;
use crate::state::PipelineIter;
use crate::Result;

/// Every check below, with `cuts` random save/restore points over three epochs.
pub fn check(name: &str, ds: &Dataset, cuts: usize) {
    check_len_and_get(name, ds);
    check_batch_path(name, ds);
    check_hints(name, ds);
    check_deterministic(name, ds);
    check_threads(name, ds);
    check_resume(name, &ds.repeat(Some(3)), cuts);
    check_resume_across_execution(name, &ds.repeat(Some(2)));
}

/// The pipeline run other ways: prefetch depths (1, 8, AUTOTUNE), parallelism (2, AUTOTUNE),
/// and executors with other options (one core, seven cores and a small memory budget). None of
/// them changes the elements or a checkpoint's identity.
pub fn execution_variants(ds: &Dataset) -> Vec<(&'static str, Dataset)> {
    let opts = |cores: usize, memory_budget: usize| crate::ExecOptions {
        cores,
        memory_budget,
        ..crate::ExecOptions::default()
    };
    let budget = crate::ExecOptions::default().memory_budget;
    vec![
        ("as built", ds.clone()),
        ("prefetch(1)", ds.prefetch(1).expect("depth > 0")),
        ("prefetch(8)", ds.prefetch(8).expect("depth > 0")),
        ("prefetch(AUTOTUNE)", ds.prefetch_autotune()),
        (
            "parallelize(2)",
            ds.parallelize(Parallelism::Fixed(2), true),
        ),
        (
            "parallelize(AUTOTUNE).prefetch(2)",
            ds.parallelize(Parallelism::Autotune, true)
                .prefetch(2)
                .expect("depth > 0"),
        ),
        ("with_options(cores=1)", ds.with_options(opts(1, budget))),
        (
            "with_options(cores=7, memory_budget=1 MiB)",
            ds.with_options(opts(7, 1 << 20)),
        ),
    ]
}

/// A state saved under each [`execution_variants`] of `ds` restores under the next one (and
/// under `ds` as built), and the restored iterator continues as the uninterrupted run: a
/// checkpoint names the data, not how it was computed.
pub fn check_resume_across_execution(name: &str, ds: &Dataset) {
    let full = drain(&mut PipelineIter::new(ds.clone(), 0).unwrap());
    let variants = execution_variants(ds);
    let mut rng = Rng::keyed(98, &[name.len() as u64]);
    for (v, (from_name, from)) in variants.iter().enumerate() {
        for (to_name, to) in [&variants[(v + 1) % variants.len()], &variants[0]] {
            let k = rng.below(full.len() as u64 + 1) as usize;
            let mut it = PipelineIter::new(from.clone(), 0).unwrap();
            for _ in 0..k {
                it.next().unwrap();
            }
            let state: serde_json::Value = serde_json::from_str(&it.state().to_string()).unwrap();
            drop(it);
            let mut resumed = PipelineIter::new(to.clone(), 0).unwrap();
            resumed.set_state(&state).unwrap_or_else(|e| {
                panic!(
                    "{name}: a state saved under {from_name} at {k} refused under {to_name}: {e}"
                )
            });
            assert_eq!(
                drain(&mut resumed),
                full[k..],
                "{name}: saved under {from_name} at {k}, resumed under {to_name}"
            );
        }
    }
}

/// The elements of epoch `epoch`.
pub fn run(ds: &Dataset, epoch: u64) -> Vec<Example> {
    ds.iter(epoch)
        .and_then(|mut it| it.collect_all())
        .unwrap_or_else(|e| panic!("iterating {}: {e}", ds.describe()))
}

/// `len` (where known) equals the number of elements iterated; `get(i)` (where random access
/// holds) equals the i-th element iterated; `get(len)` is an error.
pub fn check_len_and_get(name: &str, ds: &Dataset) {
    let items = run(ds, 0);
    if let Some(n) = ds.len() {
        assert_eq!(n as usize, items.len(), "{name}: len vs iterated count");
    }
    if ds.is_random_access() {
        for (i, e) in items.iter().enumerate() {
            assert_eq!(&ds.get(i as u64).unwrap(), e, "{name}: get({i})");
        }
        assert!(
            ds.get(items.len() as u64).is_err(),
            "{name}: get past the end"
        );
    }
}

/// The batch path (`get_batch`, through each op's forwarding to its input) and a run
/// (`get_many`) equal the elements read one by one, for a random set of indices with repeats.
pub fn check_batch_path(name: &str, ds: &Dataset) {
    let Some(n) = ds.len().filter(|&n| n > 0 && ds.is_random_access()) else {
        return;
    };
    let mut rng = Rng::keyed(7, &[n]);
    let idx: Vec<u64> = (0..8).map(|_| rng.below(n)).collect();
    let one_by_one: Vec<Example> = idx.iter().map(|&i| ds.get(i).unwrap()).collect();
    if let Dataset::Map(m) = ds {
        let run: Vec<Example> = m.get_many(&idx).into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(run, one_by_one, "{name}: get_many({idx:?})");
    }
    match stack_examples("check", &one_by_one) {
        Ok(want) => assert_eq!(
            ds.get_batch(&idx).unwrap(),
            want,
            "{name}: get_batch({idx:?})"
        ),
        // Elements that do not stack must not stack through get_batch either.
        Err(_) => assert!(
            ds.get_batch(&idx).is_err(),
            "{name}: get_batch of elements that do not stack"
        ),
    }
}

/// Prefetch hints change speed, never results: the dataset read with its hints and through a
/// wrapper that drops them gives the same elements.
pub fn check_hints(name: &str, ds: &Dataset) {
    let Some(m) = ds.as_map() else { return };
    let plain = Dataset::from_map(NoHints(m.clone()));
    assert_eq!(run(&plain, 1), run(ds, 1), "{name}: with and without hints");
}

/// Two runs agree, and neither a prefetch of depth 1 or 8 nor a thread changes the output.
pub fn check_deterministic(name: &str, ds: &Dataset) {
    let a = run(ds, 1);
    assert_eq!(a, run(ds, 1), "{name}: two runs");
    assert_eq!(a, run(&ds.prefetch(1).unwrap(), 1), "{name}: prefetch(1)");
    assert_eq!(a, run(&ds.prefetch(8).unwrap(), 1), "{name}: prefetch(8)");
}

/// The same output on 1 and 4 worker threads (`parallelize`, deterministic).
pub fn check_threads(name: &str, ds: &Dataset) {
    let want = run(ds, 1);
    for par in [1, 4] {
        let on = ds.parallelize(Parallelism::Fixed(par), true);
        assert_eq!(run(&on, 1), want, "{name}: parallelize({par})");
    }
}

fn drain(it: &mut PipelineIter) -> Vec<Example> {
    let mut v = Vec::new();
    while let Some(e) = it.next().unwrap() {
        v.push(e);
    }
    v
}

/// Save at `cuts` random points -> restore into a fresh iterator -> continue equals the
/// uninterrupted run; every other cut also resumes twice in a chain. States round-trip as text.
pub fn check_resume(name: &str, ds: &Dataset, cuts: usize) {
    let full = drain(&mut PipelineIter::new(ds.clone(), 0).unwrap());
    let mut rng = Rng::keyed(99, &[name.len() as u64]);
    for c in 0..cuts {
        let k = rng.below(full.len() as u64 + 1) as usize;
        let mut it = PipelineIter::new(ds.clone(), 0).unwrap();
        for _ in 0..k {
            it.next().unwrap();
        }
        let state: serde_json::Value = serde_json::from_str(&it.state().to_string()).unwrap();
        let mut resumed = PipelineIter::new(ds.clone(), 0).unwrap();
        resumed.set_state(&state).unwrap();
        if c % 2 == 0 {
            assert_eq!(drain(&mut resumed), full[k..], "{name}: resume at {k}");
        } else {
            let k2 = k + rng.below((full.len() - k) as u64 + 1) as usize;
            let mut head = Vec::new();
            for _ in k..k2 {
                head.push(resumed.next().unwrap().unwrap());
            }
            let mut again = PipelineIter::new(ds.clone(), 0).unwrap();
            again.set_state(&resumed.state()).unwrap();
            head.extend(drain(&mut again));
            assert_eq!(head, full[k..], "{name}: chained resume at {k} then {k2}");
        }
    }
}

/// Save after every element of epoch 0 (and before the first) -> restore into a fresh iterator
/// -> the rest equals the uninterrupted run: the exhaustive form of [`check_resume`], for ops'
/// unit tests on small inputs.
pub fn check_resume_at_every_cut(name: &str, ds: &Dataset) {
    let all = run(ds, 0);
    for k in 0..=all.len() {
        let mut it = ds.iter(0).unwrap();
        for _ in 0..k {
            it.next().unwrap();
        }
        let state: serde_json::Value = serde_json::from_str(&it.state().to_string()).unwrap();
        let mut again = ds.iter(0).unwrap();
        again.set_state(&state).unwrap();
        assert_eq!(again.collect_all().unwrap(), all[k..], "{name}: cut {k}");
    }
}

/// Wraps `input` so that element `k` of every epoch fails with a user function's error (for
/// [`check_error_rule`]: an op built over it meets the error wherever it reads that element).
pub fn fail_at(input: &Dataset, k: u64) -> Dataset {
    let n = input.len().filter(|&n| n > 0 && n != crate::INFINITE);
    input.map(
        "fault",
        crate::map_fn(move |e, ctx| {
            let i = n.map_or(ctx.index, |n| ctx.index % n);
            if i == k {
                let msg = format!("injected fault at element {k}");
                return Err(crate::Error::Callback {
                    op: "fault".into(),
                    index: ctx.index,
                    source: msg.into(),
                });
            }
            Ok(e)
        }),
    )
}

/// The error-then-next rule (see [`crate::state`]) for a pipeline `faulty` whose input fails on
/// one element ([`fail_at`]), plain, behind a prefetch and on 4 threads: a loop that catches each
/// error and calls `next()` again (tf.data's habit) gets each error once and goes on, ends, and
/// then `next()` returns `None`, three times over; what it got equals what the same pipeline under
/// `ignore_errors()` yields, which runs to its end without an error, logging what it left out (at
/// least one element when the plain run raised).
pub fn check_error_rule(name: &str, faulty: &Dataset) {
    let variants = [
        ("plain", faulty.clone()),
        ("prefetch(4)", faulty.prefetch(4).expect("depth > 0")),
        (
            "parallelize(4)",
            faulty.parallelize(Parallelism::Fixed(4), true),
        ),
    ];
    for (how, ds) in variants {
        let mut it = PipelineIter::new(ds.clone(), 0).unwrap();
        let (mut caught, mut errors, mut ended) = (Vec::new(), 0, false);
        for _ in 0..100_000 {
            match it.next() {
                Ok(Some(e)) => caught.push(e),
                Ok(None) => {
                    ended = true;
                    break;
                }
                Err(_) => errors += 1,
            }
        }
        assert!(
            ended,
            "{name}/{how}: catching errors and going on never ended"
        );
        let raised = errors > 0;
        for _ in 0..3 {
            assert!(
                matches!(it.next(), Ok(None)),
                "{name}/{how}: next() after the end must be None"
            );
        }
        let skipping = ds.ignore_errors(false);
        let got = skipping
            .iter(0)
            .and_then(|mut it| it.collect_all())
            .unwrap_or_else(|e| panic!("{name}/{how}: ignore_errors() still raised: {e}"));
        let logged = crate::ops::ignore_errors::error_logs(&skipping)[0].count();
        if raised {
            assert!(logged >= 1, "{name}/{how}: the error was not logged");
            assert_eq!(
                caught, got,
                "{name}/{how}: going on after each error must give what ignore_errors() gives"
            );
        } else {
            assert_eq!(logged, 0, "{name}/{how}: nothing failed, nothing is logged");
            assert_eq!(
                got,
                run(&ds, 0),
                "{name}/{how}: ignore_errors() changed the output"
            );
        }
    }
}

/// A random-access dataset with its prefetch hints dropped (for [`check_hints`]).
struct NoHints(Arc<dyn MapDataset>);

impl MapDataset for NoHints {
    fn len(&self) -> u64 {
        self.0.len()
    }

    fn get(&self, index: u64) -> Result<Example> {
        self.0.get(index)
    }

    fn name(&self) -> String {
        format!("{} (no hints)", self.0.name())
    }

    fn get_batch(&self, indices: &[u64]) -> Result<Option<Example>> {
        self.0.get_batch(indices)
    }

    fn prefetch_useful(&self) -> bool {
        false
    }

    fn prefetch(&self, _index: u64, _hint: Hint) {}
}

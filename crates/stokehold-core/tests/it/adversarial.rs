//! Adversarial cases of the core (issue 18): indices past u64, the error-then-next rule, the
//! memory budget of every buffer. Each test failed on the code before its fix (main 2c81873);
//! docs/RELIABILITY.md has the table of before / after.

use std::time::Duration;

use stokehold_core::exec::{executor_of, ExecOptions, Parallelism};
use stokehold_core::ops::ignore_errors::error_logs;
use stokehold_core::{map_fn, Dataset, DatasetIter, Error, PipelineIter, Tensor};

/// `Dataset::range(n)` whose element `bad` (of every epoch) fails in a user function.
fn failing(n: u64, bad: u64) -> Dataset {
    Dataset::range(n).map(
        "check",
        map_fn(move |e, c| {
            if c.index % n == bad {
                return Err(Error::Callback {
                    op: "check".into(),
                    index: c.index,
                    source: "bad element".into(),
                });
            }
            Ok(e)
        }),
    )
}

fn xs(items: &[stokehold_core::Example]) -> Vec<i64> {
    items
        .iter()
        .map(|e| e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0])
        .collect()
}

/// Runs `it` to its end, catching errors as a user loop would ("catch, log, go on"): the
/// elements and the number of errors, at most `cap` calls.
fn catch_and_go_on(it: &mut PipelineIter, cap: usize) -> (Vec<stokehold_core::Example>, usize) {
    let (mut got, mut errors) = (Vec::new(), 0);
    for _ in 0..cap {
        match it.next() {
            Ok(Some(e)) => got.push(e),
            Ok(None) => break,
            Err(_) => errors += 1,
        }
    }
    (got, errors)
}

#[test]
fn an_epoch_past_the_u64_index_range_is_an_error_naming_the_op_not_empty() {
    let far = u64::MAX / 3;
    for ds in [
        Dataset::range(10),
        Dataset::range(10).shuffle(3),
        Dataset::range(10).batch(3, false).unwrap(),
        Dataset::range(10).map("m", map_fn(|e, _| Ok(e))),
    ] {
        let err = ds.iter(far).err().expect("an error, not an empty epoch");
        assert!(
            err.to_string().contains("past the 64-bit index range"),
            "{err}"
        );
    }
    let err = Dataset::range(10)
        .epochs(far, Some(2), None)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("epochs()"), "{err}");
    let err = Dataset::range(10)
        .epochs(0, Some(u64::MAX / 4), None)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("total length"), "{err}");
}

#[test]
fn a_global_index_past_u64_in_index_arithmetic_is_an_error() {
    // Endless input: indices are not cut into epochs, so the last index plus an offset wraps.
    let ds = Dataset::range(10).repeat(None).skip(5);
    let err = ds.get(u64::MAX - 2).unwrap_err();
    assert!(err.to_string().contains("skip(5)"), "{err}");
    // shuffle maps the last, partial epoch of the u64 range past u64::MAX
    let ds = Dataset::range(10).shuffle(1).repeat(None);
    let errs = (u64::MAX - 5..u64::MAX)
        .filter(|&i| ds.get(i).is_err())
        .count();
    assert!(
        errs > 0,
        "some index of the last partial epoch maps past u64"
    );
}

#[test]
fn after_an_elements_error_the_iterator_goes_on_whatever_the_op() {
    let variants: Vec<(&str, Dataset)> = vec![
        ("random-access map", failing(10, 3)),
        ("map + prefetch", failing(10, 3).prefetch(4).unwrap()),
        (
            "parallel map",
            Dataset::range(10).map_parallel(
                "check",
                map_fn(|e, c| {
                    if c.index == 3 {
                        Err(Error::schema("check", "bad"))
                    } else {
                        Ok(e)
                    }
                }),
                Parallelism::Fixed(4),
                true,
            ),
        ),
        ("map + batch", failing(10, 3).batch(2, false).unwrap()),
    ];
    for (how, ds) in variants {
        let mut it = PipelineIter::new(ds, 0).unwrap();
        let (got, errors) = catch_and_go_on(&mut it, 100);
        assert_eq!(errors, 1, "{how}: the error is raised once");
        // tf.data's rule: the next call goes on after the failed element (a batch that held it
        // is the one left out).
        let want: Vec<i64> = match how {
            "map + batch" => vec![0, 1, 4, 5, 6, 7, 8, 9],
            _ => vec![0, 1, 2, 4, 5, 6, 7, 8, 9],
        };
        let flat: Vec<i64> = got
            .iter()
            .flat_map(|e| e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap())
            .collect();
        assert_eq!(flat, want, "{how}");
        assert!(!it.failed() && matches!(it.next(), Ok(None)), "{how}");
    }
}

#[test]
fn a_caught_error_is_left_out_of_its_epoch_and_the_next_epochs_are_whole() {
    let mut ep = failing(10, 3).epochs(0, Some(3), None).unwrap();
    let mut per_epoch = Vec::new();
    let mut errors = 0;
    while ep.next_epoch().unwrap().is_some() {
        let mut n = 0;
        loop {
            match ep.next() {
                Ok(Some(_)) => n += 1,
                Ok(None) => break,
                Err(_) => errors += 1,
            }
        }
        per_epoch.push(n);
    }
    // Every epoch meets element 3: its error is raised once and the epoch goes on past it.
    assert_eq!((per_epoch, errors), (vec![9, 9, 9], 3));
    // An error in the middle of a loop over epochs does not empty the epochs after it.
    let mut ep = failing(10, 13).epochs(0, Some(3), None).unwrap();
    let mut lens = Vec::new();
    while ep.next_epoch().unwrap().is_some() {
        let mut n = 0;
        while let Ok(Some(_)) = ep.next() {
            n += 1;
        }
        lens.push(n);
    }
    assert_eq!(
        lens,
        vec![10, 10, 10],
        "13 % 10 fails in no epoch of range(10)"
    );
}

#[test]
fn ignore_errors_skips_exactly_and_stays_checkpointable() {
    let ds = failing(10, 3).ignore_errors(false);
    let all = stokehold_core::testing::run(&ds, 0);
    assert_eq!(xs(&all), vec![0, 1, 2, 4, 5, 6, 7, 8, 9]);
    let log = &error_logs(&ds)[0];
    assert_eq!(log.count(), 1);
    assert_eq!(log.first()[0].index, 3);
    assert!(log.first()[0].error.contains("bad element"));
    stokehold_core::testing::check_resume_at_every_cut("ignore_errors", &ds);
    // Over a stream (a parallel map): the input moves past the failure.
    let par = failing(10, 3)
        .parallelize(Parallelism::Fixed(3), true)
        .ignore_errors(false);
    assert_eq!(xs(&stokehold_core::testing::run(&par, 0)).len(), 9);
}

#[test]
fn a_plain_prefetch_counts_its_bytes_in_a_budget_that_stats_report() {
    // 1 MiB elements behind prefetch(8), with no with_options and no parallel op.
    let big = Dataset::range(32).map(
        "big",
        map_fn(|mut e, _| {
            e.insert(
                "blob",
                Tensor::from_vec(vec![1 << 20], vec![0u8; 1 << 20]).unwrap(),
            );
            Ok(e)
        }),
    );
    let ds = big.prefetch(8).unwrap();
    let mut it = ds.iter(0).unwrap();
    it.next().unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let exec = executor_of(&ds).expect("the prefetch's own executor");
    assert!(
        exec.budget().peak() >= 1 << 20,
        "peak {}",
        exec.budget().peak()
    );
    let stats = exec.stats();
    assert!(
        stats.ops.iter().any(|o| o.op.starts_with("prefetch")),
        "{}",
        stats.table()
    );
    // Behind a parallel map the two share one budget: 8 MiB under a 4 MiB budget holds at most
    // the budget plus one element per buffer.
    let ds = big
        .parallelize(Parallelism::Fixed(2), true)
        .prefetch(16)
        .unwrap()
        .with_options(ExecOptions {
            memory_budget: 4 << 20,
            ..ExecOptions::default()
        });
    let mut it = ds.iter(0).unwrap();
    it.next().unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let peak = executor_of(&ds).unwrap().budget().peak();
    assert!(peak <= (4 << 20) + 2 * (1 << 20) + 4096, "peak {peak}");
    drop(it);
}

#[test]
fn an_autotuned_prefetch_buffers_small_elements_deeper_than_large_ones() {
    use stokehold_core::exec::prefetch::AUTOTUNE_MAX_DEPTH;
    use stokehold_core::exec::Executor;
    // Elements of `bytes` behind prefetch(AUTOTUNE) on a 2-core executor: the consumer takes
    // one, then waits while the thread fills the buffer, until `done` with the depth it went to
    // (the stats' capacity) and the budget's peak (or a minute: a loaded machine may leave the
    // thread without a core for long, so no fixed wait is enough), then 100 ms more for
    // anything past it to show. That depth and peak.
    let filled = |bytes: usize, done: fn(usize, usize) -> bool| {
        let ds = Dataset::range(200)
            .map(
                "blob",
                map_fn(move |mut e, _| {
                    e.insert(
                        "blob",
                        Tensor::from_vec(vec![bytes], vec![0u8; bytes]).unwrap(),
                    );
                    Ok(e)
                }),
            )
            .prefetch_autotune();
        let exec = Executor::new(ExecOptions {
            cores: 2,
            ..Default::default()
        });
        let mut it = exec.iter(&ds, 0).unwrap();
        it.next().unwrap().unwrap();
        let now = || {
            let stats = exec.stats();
            let op = stats.ops.iter().find(|o| o.op.starts_with("prefetch"));
            let depth = op.unwrap_or_else(|| panic!("{}", stats.table())).capacity;
            (depth, exec.budget().peak())
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !done(now().0, now().1) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(100));
        now()
    };
    // 1 KiB elements: as deep as it goes, and filled past the two it starts at.
    let (depth, peak) = filled(1 << 10, |depth, peak| {
        depth == AUTOTUNE_MAX_DEPTH && peak >= 32 << 10
    });
    assert_eq!(depth, AUTOTUNE_MAX_DEPTH);
    assert!(peak >= 32 << 10, "peak {peak}");
    // 1 MiB: about 4 MiB of them.
    let (depth, _) = filled(1 << 20, |depth, _| depth >= 3);
    assert!((3..=4).contains(&depth), "depth {depth}");
    // 8 MiB: the two it starts at, and no more held.
    let (depth, peak) = filled(8 << 20, |_, peak| peak >= 2 * (8 << 20));
    assert_eq!(depth, 2);
    assert!(peak < 3 * (8 << 20), "peak {peak}");
}

#[test]
fn next_many_returns_the_elements_before_an_error_then_raises_it() {
    let mut it = PipelineIter::new(failing(10, 3), 0).unwrap();
    assert_eq!(xs(&it.next_many(10).unwrap()), vec![0, 1, 2]);
    assert!(it.next_many(10).is_err());
    assert_eq!(xs(&it.next_many(10).unwrap()), vec![4, 5, 6, 7, 8, 9]);
    let mut ep = failing(10, 3).epochs(0, Some(2), None).unwrap();
    ep.next_epoch().unwrap();
    assert_eq!(ep.next_many(100).unwrap().len(), 3);
    assert!(ep.next_many(100).is_err());
    assert_eq!(
        ep.next_many(100).unwrap().len(),
        6,
        "the epoch goes on past it"
    );
    ep.next_epoch().unwrap();
    assert_eq!(
        ep.next_many(100).unwrap().len(),
        3,
        "the next epoch starts whole"
    );
}

#[test]
fn a_range_value_past_i64_is_an_error_not_negative() {
    let ds = Dataset::range(u64::MAX);
    let err = ds.get(1 << 63).unwrap_err();
    assert!(err.to_string().contains("range"), "{err}");
    assert_eq!(xs(&[ds.get((1 << 63) - 1).unwrap()]), vec![i64::MAX]);
}

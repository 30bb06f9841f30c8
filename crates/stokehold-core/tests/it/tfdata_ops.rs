//! The tf.data ops added for parity: unbatch, rebatch, window, group_by_window, from_generator, and
//! the AUTOTUNE arguments (interleave cycle_length, prefetch depth). Expected values are written by
//! hand from tf.data's documentation.

use stokehold_core::exec::{ExecOptions, Executor};
use stokehold_core::{
    filter_fn, generator_fn, interleave_fn, key_fn, map_fn, stack, Dataset, DatasetIter, Example,
    ExampleIter, Parallelism, PipelineIter, Tensor, Value,
};

use crate::common::*;

fn values(elements: &[Example], f: &str) -> Vec<Vec<i64>> {
    elements
        .iter()
        .map(|e| e.tensor("t", f).unwrap().to_vec::<i64>().unwrap())
        .collect()
}

/// `n` elements: id `i` and a clip of `1 + i % 3` int64 samples `10 i + k`.
fn clips(n: usize) -> Dataset {
    let rows: Vec<Tensor> = (0..n)
        .map(|i| {
            let len = 1 + i % 3;
            Tensor::from_vec(vec![len], (0..len).map(|k| (i * 10 + k) as i64).collect()).unwrap()
        })
        .collect();
    let refs: Vec<&Tensor> = rows.iter().collect();
    Dataset::from_columns(
        Example::new()
            .with(
                "id",
                Tensor::from_vec(vec![n], (0..n as i64).collect()).unwrap(),
            )
            .with("clip", stack("t", "clip", &refs).unwrap()),
    )
    .unwrap()
}

fn all(ds: &Dataset) -> Vec<Example> {
    ds.iter(0).unwrap().collect_all().unwrap()
}

#[test]
fn parallelism_from_arg_spells_autotune_as_minus_one() {
    assert_eq!(
        Parallelism::from_arg("interleave", "cycle_length", -1).unwrap(),
        Parallelism::Autotune
    );
    assert_eq!(
        Parallelism::from_arg("map", "num_parallel_calls", 7).unwrap(),
        Parallelism::Fixed(7)
    );
    for bad in [0, -2, i64::MIN] {
        let err = Parallelism::from_arg("interleave", "num_parallel_calls", bad)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!(
                "interleave(num_parallel_calls={bad}): must be > 0 or AUTOTUNE (-1)"
            )),
            "{err}"
        );
    }
    assert_eq!(Parallelism::Autotune.to_arg(), stokehold_core::AUTOTUNE);
    assert_eq!(Parallelism::Fixed(3).to_arg(), 3);
    assert_eq!(Parallelism::Autotune.resolve(6), 6);
    assert_eq!(Parallelism::Autotune.resolve(0), 1);
    assert_eq!(Parallelism::Fixed(2).resolve(6), 2);
}

/// Input element x opens x + 2 elements valued 100 x + k.
fn opener() -> stokehold_core::InterleaveFn {
    interleave_fn(|e: Example, _| {
        let x = e.tensor("t", "x")?.to_vec::<i64>()?[0];
        Ok(Dataset::range(x as u64 + 2).map(
            "val",
            map_fn(move |e: Example, _| {
                let k = e.tensor("t", "x")?.to_vec::<i64>()?[0];
                Ok(Example::new().with("x", Tensor::scalar(100 * x + k)))
            }),
        ))
    })
}

#[test]
fn interleave_autotuned_cycle_is_the_core_count_and_restores_on_another_machine() {
    let tuned = Dataset::range(9)
        .interleave_with("open", opener(), Parallelism::Autotune, 2, None, true)
        .unwrap();
    assert!(
        tuned.name().contains("cycle_length=autotune"),
        "{}",
        tuned.name()
    );
    for cores in [1, 3, 4] {
        let fixed = Dataset::range(9)
            .interleave("open", opener(), cores, 2, None, true)
            .unwrap();
        assert_eq!(
            run_on(&tuned, cores).unwrap(),
            run_on(&fixed, cores).unwrap(),
            "{cores} cores"
        );
    }
    assert_ne!(run_on(&tuned, 1).unwrap(), run_on(&tuned, 3).unwrap());
    // Saved on a 3-core machine, restored on a 5-core one: the epoch finishes as on 3 cores.
    let on = |cores| {
        Executor::new(ExecOptions {
            cores,
            ..ExecOptions::default()
        })
    };
    let full = run_on(&tuned, 3).unwrap();
    for k in [0, 1, 7, 20, full.len()] {
        let (three, five) = (on(3), on(5));
        let mut it = three.iter(&tuned, 0).unwrap();
        let mut got = Vec::new();
        for _ in 0..k {
            got.push(it.next().unwrap().unwrap());
        }
        let state = it.state();
        let mut restored = five.iter(&tuned, 0).unwrap();
        restored.set_state(&state).unwrap();
        got.extend(restored.collect_all().unwrap());
        assert_eq!(xs(&got), full, "cut {k}");
    }
    // A fixed cycle length refuses a state saved with another.
    let fixed4 = Dataset::range(9)
        .interleave("open", opener(), 4, 2, None, true)
        .unwrap();
    let mut it = on(3).iter(&tuned, 0).unwrap();
    it.next().unwrap();
    let err = fixed4.iter(0).unwrap().set_state(&it.state()).unwrap_err();
    assert!(
        err.to_string().contains("saved with cycle_length=3"),
        "{err}"
    );
}

#[test]
fn prefetch_autotune_names_itself_the_same_everywhere_and_changes_nothing() {
    let ds = clips(13).shuffle(2);
    let auto = ds.prefetch_autotune();
    assert_eq!(auto.name(), "prefetch(autotune)");
    assert_eq!(
        ds.prefetch_with(Parallelism::from_arg("prefetch", "buffer_size", -1).unwrap())
            .unwrap()
            .name(),
        "prefetch(autotune)"
    );
    assert_eq!(
        ds.prefetch_with(Parallelism::Fixed(3)).unwrap().name(),
        "prefetch(3)"
    );
    assert!(ds.prefetch_with(Parallelism::Fixed(0)).is_err());
    assert_eq!(all(&auto), all(&ds));
    let (a, b) = (
        PipelineIter::new(auto.clone(), 0).unwrap(),
        PipelineIter::new(ds.prefetch_autotune(), 0).unwrap(),
    );
    assert_eq!(a.state(), b.state());
}

#[test]
fn window_stacks_ragged_clips_and_unbatch_undoes_it() {
    let input = clips(10);
    let w = input.window(4, None, 1, false).unwrap();
    let windows = all(&w);
    assert_eq!(
        values(&windows, "id"),
        vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]
    );
    let Some(Value::Ragged(r)) = windows[0].get("clip") else {
        panic!("clips of lengths 1, 2, 3, 1 stack ragged")
    };
    assert_eq!(&r.splits()[..], &[0, 1, 3, 6, 7]);
    // window(size) then unbatch gives the input back (a stream: the last window is short).
    let back = w.unbatch();
    assert!(!back.is_random_access());
    assert_eq!(all(&back), all(&input));
    // With full windows only, unbatch keeps random access.
    let full = input.window(5, None, 1, true).unwrap().unbatch();
    assert!(full.is_random_access());
    assert_eq!(full.get(7).unwrap(), input.get(7).unwrap());
}

#[test]
fn rebatch_batch_path_equals_element_by_element() {
    // MapUnbatch reads each input element once per batch; hiding it behind a map makes batch
    // read row by row. Both must give the same batches.
    let input = clips(23).batch(4, true).unwrap();
    let fast = input.rebatch(3, false).unwrap();
    let slow = input
        .unbatch()
        .map("id", map_fn(|e, _| Ok(e)))
        .batch(3, false)
        .unwrap();
    assert!(fast.is_random_access() && slow.is_random_access());
    assert_eq!(fast.len(), Some(7));
    assert_eq!(all(&fast), all(&slow));
    // And the stream path (short last input batch) agrees with tf.data's unbatch().batch().
    let stream = clips(23)
        .batch(4, false)
        .unwrap()
        .rebatch(6, false)
        .unwrap();
    let ids: Vec<i64> = values(&all(&stream), "id").concat();
    assert_eq!(ids, (0..23).collect::<Vec<_>>());
    assert_eq!(all(&stream).len(), 4);
}

#[test]
fn group_by_window_buckets_clips_by_length_into_dense_batches() {
    // bucket_by_sequence_length's core: the key is the clip length, so each window is dense.
    let ds = clips(20)
        .shuffle(5)
        .group_by_window(
            "len",
            key_fn(|e, _| Ok(e.tensor("t", "clip")?.shape()[0] as i64)),
            3,
            Some("len"),
        )
        .unwrap()
        .prefetch(2)
        .unwrap();
    let windows = all(&ds);
    let mut seen = Vec::new();
    for w in &windows {
        let len = w.tensor("t", "len").unwrap().to_vec::<i64>().unwrap()[0];
        let clip = w.tensor("t", "clip").expect("dense: one length per window");
        assert_eq!(clip.shape()[1] as i64, len);
        seen.extend(w.tensor("t", "id").unwrap().to_vec::<i64>().unwrap());
    }
    seen.sort();
    assert_eq!(seen, (0..20).collect::<Vec<_>>());
    // Lengths 1, 2, 3 have 7, 7, 6 clips: two full windows each, then 1, 1 and 0 left over.
    assert_eq!(windows.len(), 8);
}

#[test]
fn from_generator_resumes_by_replaying_and_sees_its_epoch() {
    let ds = Dataset::from_generator(
        "squares",
        generator_fn(|epoch| {
            let it = (0..6i64).map(move |i| {
                Ok(Example::new().with("x", Tensor::scalar(epoch as i64 * 1000 + i * i)))
            });
            Ok(Box::new(it) as ExampleIter)
        }),
    )
    .repeat(Some(2))
    .filter(
        "not9",
        filter_fn(|e, _| Ok(e.tensor("t", "x")?.to_vec::<i64>()?[0] % 1000 != 9)),
    )
    .prefetch(3)
    .unwrap();
    let full = run(&ds).unwrap();
    assert_eq!(full, vec![0, 1, 4, 16, 25, 1000, 1001, 1004, 1016, 1025]);
    for k in 0..=full.len() {
        assert_eq!(save_restore_run(&ds, k).unwrap(), full, "cut {k}");
    }
}

#[test]
fn from_generator_factory_errors_pass_through_unchanged() {
    #[derive(Debug)]
    struct Custom;
    impl std::fmt::Display for Custom {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "custom failure")
        }
    }
    impl std::error::Error for Custom {}
    let ds = Dataset::from_generator(
        "fails",
        generator_fn(|_| {
            Err(stokehold_core::Error::Callback {
                op: "from_generator[fails]".into(),
                index: 0,
                source: Box::new(Custom),
            })
        }),
    );
    let err = ds.prefetch(1).unwrap().iter(0).unwrap().next().unwrap_err();
    let stokehold_core::Error::Callback { source, .. } = err else {
        panic!("the factory's own error")
    };
    assert!(source.downcast_ref::<Custom>().is_some());
}

/// Runs epochs `0..n` of `ds`, one iterator each (a `for` loop each, in Python).
fn epochs(ds: &Dataset, n: u64) -> Vec<Vec<i64>> {
    (0..n)
        .map(|e| xs(&ds.iter(e).unwrap().collect_all().unwrap()))
        .collect()
}

/// tf.data restarts what is under `take` on each pass of an outer `repeat` and on each new
/// iterator (issue 49, class 1): each pass of `range(3).repeat().take(4)` is `[0, 1, 2, 0]`,
/// whether the input is random access or a stream, and a checkpoint anywhere resumes exactly.
#[test]
fn take_over_an_endless_repeat_restarts_each_pass_as_tf_data() {
    let stream = || {
        Dataset::from_generator(
            "range",
            generator_fn(|_| {
                let it = (0..3i64).map(|i| Ok(Example::new().with("x", Tensor::scalar(i))));
                Ok(Box::new(it) as ExampleIter)
            }),
        )
    };
    for (what, base) in [("random access", Dataset::range(3)), ("stream", stream())] {
        let ds = base.repeat(None).take(4).repeat(Some(2));
        let full = run(&ds).unwrap();
        assert_eq!(full, vec![0, 1, 2, 0, 0, 1, 2, 0], "{what}");
        for k in 0..=full.len() {
            assert_eq!(save_restore_run(&ds, k).unwrap(), full, "{what}: cut {k}");
        }
    }
    // Two iterators (two `for` loops) over range(4).repeat().take(6) see the same elements.
    let ds = Dataset::range(4).repeat(None).take(6);
    assert_eq!(epochs(&ds, 2), vec![vec![0, 1, 2, 3, 0, 1]; 2]);
    // skip under the repeat restarts too: range(5).skip(3).repeat().take(3).repeat(2).
    let ds = Dataset::range(5)
        .skip(3)
        .repeat(None)
        .take(3)
        .repeat(Some(2));
    assert_eq!(run(&ds).unwrap(), vec![3, 4, 3, 3, 4, 3]);
    // The Keras validation idiom: the same batches every epoch.
    let val = Dataset::range(10)
        .batch(4, false)
        .unwrap()
        .repeat(None)
        .take(2);
    let firsts = |ds: &Dataset, e: u64| -> Vec<i64> {
        let elements = ds.iter(e).unwrap().collect_all().unwrap();
        elements
            .iter()
            .map(|b| b.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0])
            .collect()
    };
    assert_eq!(firsts(&val, 0), vec![0, 4]);
    assert_eq!(firsts(&val, 3), vec![0, 4]);
    // Batches of an endless repeat line up with its passes: range(3).repeat().batch(2).take(2)
    // is [0 1] [2 0] on every pass.
    let ds = Dataset::range(3)
        .repeat(None)
        .batch(2, false)
        .unwrap()
        .take(2);
    assert_eq!(firsts(&ds, 0), vec![0, 2]);
    assert_eq!(firsts(&ds, 1), vec![0, 2]);
}

/// Each pass of `shuffle(seed).repeat().take(k)` starts a fresh epoch of the shuffle (tf.data
/// reshuffles each new iterator): a new order every pass, the same for the same seed.
#[test]
fn take_over_a_repeated_shuffle_draws_a_fresh_order_each_pass() {
    let ds = Dataset::range(50).shuffle(7).repeat(None).take(50);
    let passes = epochs(&ds, 3);
    for p in &passes {
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            (0..50).collect::<Vec<_>>(),
            "each pass is a whole epoch"
        );
    }
    assert_ne!(passes[0], passes[1]);
    assert_ne!(passes[1], passes[2]);
    assert_eq!(passes, epochs(&ds, 3));
}

/// padded_batch pads an axis of length 0 with a non-zero value (issue 49, class 2): the batch
/// has that axis at 0, and the padding value is not written anywhere.
#[test]
fn padded_batch_of_zero_length_rows_with_a_padding_value() {
    use stokehold_core::{BatchOptions, PadValue};
    let empty = || Example::new().with("v", Tensor::from_vec::<i64>(vec![0], vec![]).unwrap());
    let ds = Dataset::from_generator(
        "empty",
        generator_fn(move |_| Ok(Box::new(std::iter::once(Ok(empty()))) as ExampleIter)),
    );
    let opts = BatchOptions::padded(
        1,
        false,
        Default::default(),
        Default::default(),
        Some(PadValue::Int(99)),
    );
    let out = all(&ds.batch_with(opts).unwrap());
    let v = out[0].tensor("t", "v").unwrap();
    assert_eq!(v.shape(), &[1, 0]);
    assert_eq!(v.data().len(), 0);
}

/// `shard` of a stream keeps positions `r, r + w, ...` as tf.data's does (issue 49, class 8),
/// the same elements as sharding the random-access input, and resumes exactly.
#[test]
fn shard_of_a_stream_is_by_position_and_resumes() {
    use stokehold_core::ShardPolicy;
    let stream = Dataset::range(11).filter("all", filter_fn(|_, _| Ok(true)));
    for (w, r) in [(1, 0), (3, 0), (3, 2), (4, 1)] {
        let ds = stream.shard(w, r, ShardPolicy::Even).unwrap();
        let want: Vec<i64> = (0..11).filter(|i| i % w as i64 == r as i64).collect();
        assert_eq!(run(&ds).unwrap(), want, "shard({w}, {r})");
        let by_index = Dataset::range(11).shard(w, r, ShardPolicy::Even).unwrap();
        assert_eq!(
            run(&by_index).unwrap(),
            want,
            "random access shard({w}, {r})"
        );
        for k in 0..=want.len() {
            assert_eq!(save_restore_run(&ds, k).unwrap(), want, "cut {k}");
        }
    }
    let err = match stream.shard(2, 0, ShardPolicy::Drop) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("shard of a stream with policy drop"),
    };
    assert!(
        err.contains("policy \"even\" shards a stream by position"),
        "{err}"
    );
}

/// Batching batches that are already ragged is refused, as tf.data refuses it, with what to do
/// instead (issue 49, class 8).
#[test]
fn batching_ragged_batches_again_says_what_to_do() {
    let ragged = Dataset::from_generator(
        "rows",
        generator_fn(|_| {
            let it = (0..5usize)
                .map(|n| Ok(Example::new().with("x", Tensor::from_vec(vec![n], vec![1i64; n])?)));
            Ok(Box::new(it) as ExampleIter)
        }),
    )
    .batch(2, false)
    .unwrap();
    let err = ragged
        .batch(2, false)
        .unwrap()
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"x\" is ragged") && err.contains("pad the first batch (padded_batch)"),
        "{err}"
    );
}

/// What the datasets an interleave opens leave out (their own `ignore_errors()`, a TFRecord
/// reader's `on_error="skip"`) is counted in the pipeline's one skip log, at any depth.
#[test]
fn skips_inside_interleaved_datasets_are_counted_in_the_pipelines_log() {
    let open = interleave_fn(|e: Example, _| {
        let base = e.tensor("t", "x")?.to_vec::<i64>()?[0];
        let inner = Dataset::range(3)
            .map(
                "fail_at_1",
                map_fn(move |e, c| match c.index {
                    1 => Err(stokehold_core::Error::schema(
                        "fail_at_1",
                        format!("file {base}"),
                    )),
                    _ => Ok(e),
                }),
            )
            .ignore_errors(false);
        Ok(inner)
    });
    let ds = Dataset::range(4)
        .interleave("files", open, 2, 1, None, true)
        .unwrap()
        .batch(2, false)
        .unwrap()
        .prefetch(2)
        .unwrap();
    let got = run_batches(&ds);
    assert_eq!(got, 8, "two of three elements of each of 4 datasets");
    let logs = stokehold_core::ops::ignore_errors::error_logs(&ds);
    let count: u64 = logs.iter().map(|l| l.count()).sum();
    assert_eq!(count, 4, "one skipped element per opened dataset");
    let first: Vec<String> = logs
        .iter()
        .flat_map(|l| l.first())
        .map(|s| s.error)
        .collect();
    assert!(first.iter().any(|m| m.contains("file 3")), "{first:?}");
}

fn run_batches(ds: &Dataset) -> usize {
    ds.iter(0)
        .unwrap()
        .collect_all()
        .unwrap()
        .iter()
        .map(|b| b.tensor("t", "x").unwrap().shape()[0])
        .sum()
}

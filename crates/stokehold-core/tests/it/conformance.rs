//! The op conformance suite: every op runs through the same checks.
//!
//! For each pipeline below, on a ragged in-memory input, an empty input and a one-element input:
//! * `len` (where known) equals the number of elements iterated;
//! * `get(i)` (where random access holds) equals the i-th element of iteration;
//! * the output does not depend on the prefetch depth (1 vs 8) or on running on a thread;
//! * save at k -> restore into a fresh iterator -> continue equals the uninterrupted run, for
//!   >= 200 cut points spread over 3 epochs, and again after a chained second resume;
//! * a state is refused by another pipeline.
//!
//! The checks are `stokehold_core::testing`'s (io runs them on its datasets too). An op added to
//! the engine gets a line in `pipelines()`.

use std::sync::Arc;

use stokehold_core::exec::ExecOptions;
use stokehold_core::ops::bucket::{BucketOptions, ElementLength};
use stokehold_core::ops::element::{cast_feature, pad_or_trim};
use stokehold_core::ops::gather::InMemoryTable;
use stokehold_core::ops::pack::{PackMode, PackOptions};
use stokehold_core::testing::run;
use stokehold_core::{
    filter_fn, generator_fn, key_fn, map_fn, stack, stack_examples, testing, BatchOptions, DType,
    Dataset, DatasetIter, Example, ExampleIter, PadSpec, PadValue, PipelineIter, ShardPolicy,
    Tensor,
};

type Build = fn(&Dataset) -> Dataset;

/// (name, builder) for every op, alone and in typical chains.
fn pipelines() -> Vec<(&'static str, Build)> {
    vec![
        ("identity", |d| d.clone()),
        ("map", |d| {
            d.map(
                "add_one",
                map_fn(|mut e, c| {
                    e.insert("idx", Tensor::scalar(c.index as i64));
                    Ok(e)
                }),
            )
        }),
        ("map_scoped", |d| {
            let scope: stokehold_core::ScopeFn =
                std::sync::Arc::new(|_, calls: &mut dyn FnMut()| calls());
            d.map_scoped(
                "add_one",
                map_fn(|mut e, c| {
                    e.insert("idx", Tensor::scalar(c.index as i64));
                    Ok(e)
                }),
                scope,
            )
        }),
        ("filter", |d| {
            d.filter("even", filter_fn(|e, _| Ok(id(e) % 2 == 0)))
        }),
        ("shuffle", |d| d.shuffle(3)),
        ("shuffle_buffer", |d| d.shuffle_buffer(4, 9).unwrap()),
        ("shuffle_buffer_over_stream", |d| {
            d.filter("all", filter_fn(|_, _| Ok(true)))
                .shuffle_buffer(5, 1)
                .unwrap()
        }),
        ("repeat2", |d| d.repeat(Some(2))),
        ("repeat_stream", |d| {
            d.filter("all", filter_fn(|_, _| Ok(true))).repeat(Some(2))
        }),
        ("take", |d| d.take(5)),
        ("skip", |d| d.skip(3)),
        ("take_stream", |d| {
            d.filter("all", filter_fn(|_, _| Ok(true))).take(4)
        }),
        ("skip_stream", |d| {
            d.filter("all", filter_fn(|_, _| Ok(true))).skip(2)
        }),
        ("enumerate", |d| d.enumerate("pos")),
        ("batch", |d| d.batch(4, false).unwrap()),
        ("batch_drop", |d| d.batch(4, true).unwrap()),
        ("batch_stream", |d| {
            d.filter("odd", filter_fn(|e, _| Ok(id(e) % 2 == 1)))
                .batch(3, false)
                .unwrap()
        }),
        ("padded_batch", |d| d.batch_with(padded(3)).unwrap()),
        ("random_crop", |d| d.random_crop("audio", 0, 2, 5, true)),
        ("pad_or_trim", |d| {
            d.map("pad", pad_or_trim("audio", 0, 4, PadValue::Int(-1)))
        }),
        ("cast", |d| d.map("cast", cast_feature("audio", DType::F32))),
        ("prefetch", |d| d.prefetch(3).unwrap()),
        ("demo_chain", |d| {
            d.shuffle(11)
                .random_crop("audio", 0, 3, 2, true)
                .batch(4, false)
                .unwrap()
                .prefetch(2)
                .unwrap()
        }),
        ("map_parallel", |d| {
            d.map_parallel(
                "id",
                map_fn(|e, _| Ok(e)),
                stokehold_core::Parallelism::Fixed(3),
                true,
            )
        }),
        ("parallelize_batch", |d| {
            d.shuffle(2)
                .batch(3, false)
                .unwrap()
                .parallelize(stokehold_core::Parallelism::Autotune, true)
        }),
        ("map_parallel_stream", |d| {
            d.filter("all", filter_fn(|_, _| Ok(true))).map_parallel(
                "id",
                map_fn(|e, _| Ok(e)),
                stokehold_core::Parallelism::Fixed(2),
                true,
            )
        }),
        ("interleave", |d| {
            d.interleave(
                "twice",
                stokehold_core::interleave_fn(|e, _| {
                    Dataset::from_columns(stack_examples("t", &[e.clone(), e])?)
                }),
                3,
                2,
                Some(stokehold_core::Parallelism::Fixed(2)),
                true,
            )
            .unwrap()
        }),
        ("flat_map", |d| {
            d.flat_map(
                "one",
                stokehold_core::interleave_fn(|e, _| {
                    Dataset::from_columns(stack_examples("t", &[e])?)
                }),
            )
        }),
        ("zip", |d| {
            Dataset::zip_prefixed(vec![("a/".into(), d.clone()), ("b/".into(), d.shuffle(1))])
        }),
        ("concatenate", |d| {
            d.concatenate(&d.filter("all", filter_fn(|_, _| Ok(true))))
        }),
        ("sample_from_datasets", |d| {
            stokehold_core::sample_from_datasets(
                vec![d.clone(), d.skip(1)],
                vec![1.0, 2.0],
                5,
                false,
            )
            .unwrap()
        }),
        ("sample_from_datasets_by_tokens", |d| {
            stokehold_core::sample_from_datasets_by(
                vec![d.clone(), d.skip(1)],
                vec![1.0, 2.0],
                5,
                false,
                stokehold_core::MixBy::Tokens("audio".into()),
            )
            .unwrap()
        }),
        ("elastic_shard_of_a_stream", |d| {
            d.filter("all", filter_fn(|_, _| Ok(true)))
                .elastic_shard(3, 1, ShardPolicy::Drop)
                .unwrap()
        }),
        ("shard", |d| d.shard(3, 1, ShardPolicy::Even).unwrap()),
        ("shard_drop", |d| {
            d.shuffle(4).shard(4, 3, ShardPolicy::Drop).unwrap()
        }),
        ("shard_pad", |d| d.shard(5, 2, ShardPolicy::Pad).unwrap()),
        ("shard_stream", |d| {
            d.filter("all", filter_fn(|_, _| Ok(true)))
                .shard(3, 1, ShardPolicy::Even)
                .unwrap()
        }),
        ("elastic_shard", |d| {
            d.elastic_shard(3, 2, ShardPolicy::Even).unwrap()
        }),
        ("worker_split", |d| {
            d.shard(2, 1, ShardPolicy::Even)
                .unwrap()
                .worker_split(2, 0)
                .unwrap()
        }),
        ("window_shuffle", |d| d.window_shuffle(4, 8).unwrap()),
        ("slice", |d| d.slice(2, 9)),
        ("cache", |d| d.cache().unwrap()),
        ("cache_then_shuffle", |d| d.cache().unwrap().shuffle(6)),
        ("gather", |d| {
            // Rows of a 10 x 2 table at id % 10.
            let rows = Tensor::from_vec(vec![10, 2], (0..20).map(|v| v as f32).collect()).unwrap();
            let table = Arc::new(InMemoryTable::new(rows).unwrap());
            d.map(
                "id_mod_10",
                map_fn(|mut e, _| {
                    let k = id(&e) % 10;
                    e.insert("row", Tensor::scalar(k));
                    Ok(e)
                }),
            )
            .gather(table, "row", "features")
        }),
        ("with_options", |d| {
            d.map_parallel(
                "id",
                map_fn(|e, _| Ok(e)),
                stokehold_core::Parallelism::Fixed(2),
                true,
            )
            .with_options(ExecOptions {
                memory_budget: 1 << 20,
                cores: 2,
                trace_events: 16,
                ..ExecOptions::default()
            })
        }),
        ("unbatch", |d| d.batch(3, false).unwrap().unbatch()),
        ("unbatch_random_access", |d| {
            d.batch(3, true).unwrap().unbatch()
        }),
        ("rebatch", |d| {
            d.batch(3, false).unwrap().rebatch(5, false).unwrap()
        }),
        ("rebatch_random_access", |d| {
            d.batch(2, true)
                .unwrap()
                .shuffle(4)
                .rebatch(3, true)
                .unwrap()
        }),
        ("window", |d| d.window(3, Some(2), 1, false).unwrap()),
        ("window_stride_drop", |d| {
            d.window(3, Some(1), 2, true).unwrap()
        }),
        ("window_stream", |d| {
            d.filter("all", filter_fn(|_, _| Ok(true)))
                .window(4, Some(3), 2, false)
                .unwrap()
        }),
        ("window_stream_skipping", |d| {
            d.filter("all", filter_fn(|_, _| Ok(true)))
                .window(2, Some(5), 1, true)
                .unwrap()
        }),
        ("group_by_window", |d| {
            d.group_by_window("m3", key_fn(|e, _| Ok(id(e) % 3)), 3, Some("key"))
                .unwrap()
        }),
        ("group_by_window_stream", |d| {
            d.filter("all", filter_fn(|_, _| Ok(true)))
                .group_by_window("m2", key_fn(|e, _| Ok(id(e) % 2)), 4, None)
                .unwrap()
        }),
        ("bucket_by_sequence_length", |d| {
            d.bucket_by_sequence_length(
                ElementLength::Feature {
                    name: "audio".into(),
                    axis: 0,
                },
                BucketOptions {
                    boundaries: vec![3, 5],
                    batch_sizes: vec![2, 3, 2],
                    pad_to_bucket_boundary: false,
                    ..Default::default()
                },
            )
            .unwrap()
        }),
        ("bucket_stream_boundary_drop", |d| {
            d.filter("all", filter_fn(|_, _| Ok(true)))
                .bucket_by_sequence_length(
                    ElementLength::Feature {
                        name: "audio".into(),
                        axis: 0,
                    },
                    BucketOptions {
                        boundaries: vec![2, 4, 7],
                        batch_sizes: vec![3, 2, 2, 1],
                        pad_to_bucket_boundary: true,
                        drop_remainder: true,
                        ..Default::default()
                    },
                )
                .unwrap()
        }),
        ("pack_first_fit", |d| {
            d.pack(pack_opts(PackMode::FirstFit, false)).unwrap()
        }),
        ("pack_best_fit_shuffled_stream", |d| {
            d.filter("all", filter_fn(|_, _| Ok(true)))
                .pack(pack_opts(PackMode::BestFit, true))
                .unwrap()
        }),
        ("pack_concat_then_split", |d| {
            // Rows of 8 samples cut into rows of 5: every row but the last holds a cut element.
            let opts = PackOptions {
                lengths: vec![("audio".into(), 5), ("id".into(), 3)],
                num_packing_bins: 1,
                mode: PackMode::ConcatThenSplit,
                cu_seqlens: true,
                ..pack_opts(PackMode::ConcatThenSplit, false)
            };
            d.pack(opts).unwrap()
        }),
        ("from_generator", |d| {
            // The generator replays the input: the same sequence each call, as exact resume needs.
            let d = d.clone();
            Dataset::from_generator(
                "replay",
                generator_fn(move |epoch| {
                    let mut it = d.iter(epoch)?;
                    let iter = std::iter::from_fn(move || it.next().transpose());
                    Ok(Box::new(iter) as ExampleIter)
                }),
            )
        }),
        ("interleave_autotune_cycle", |d| {
            d.interleave_with(
                "twice",
                stokehold_core::interleave_fn(|e, _| {
                    Dataset::from_columns(stack_examples("t", &[e.clone(), e])?)
                }),
                stokehold_core::Parallelism::Autotune,
                2,
                None,
                true,
            )
            .unwrap()
        }),
        ("prefetch_autotune", |d| d.prefetch_autotune()),
        ("epochs", |d| {
            // The loader's pipeline: epochs 1 and 2 back to back under a prefetch.
            d.shuffle(6)
                .epochs(1, Some(2), None)
                .unwrap()
                .pipeline()
                .clone()
        }),
        ("stream_chain", |d| {
            d.filter("not3", filter_fn(|e, _| Ok(id(e) % 3 != 0)))
                .shuffle_buffer(3, 4)
                .unwrap()
                .batch(2, false)
                .unwrap()
                .prefetch(2)
                .unwrap()
        }),
    ]
}

/// Audio rows of 8 samples with their ids (scalars: length 1) in rows of 3, 3 bins open.
fn pack_opts(mode: PackMode, shuffle_bins: bool) -> PackOptions {
    PackOptions {
        lengths: vec![("audio".into(), 8), ("id".into(), 3)],
        num_packing_bins: 3,
        mode,
        meta_features: vec!["id".into()],
        shuffle_bins,
        seed: 11,
        cu_seqlens: false,
    }
}

fn padded(size: usize) -> BatchOptions {
    BatchOptions {
        size,
        drop_remainder: false,
        padding: Some(Default::default()),
        default_pad: PadSpec {
            value: Some(PadValue::Int(-7)),
            shape: None,
        },
    }
}

fn id(e: &Example) -> i64 {
    e.tensor("test", "id").unwrap().to_vec::<i64>().unwrap()[0]
}

/// `n` elements: an int64 id and a ragged int16 "audio" clip of 1..=6 samples.
fn ragged_input(n: usize) -> Dataset {
    let clips: Vec<Tensor> = (0..n)
        .map(|i| {
            let len = 1 + (i * 7) % 6;
            Tensor::from_vec(vec![len], (0..len).map(|k| (i * 10 + k) as i16).collect()).unwrap()
        })
        .collect();
    let ids = Tensor::from_vec(vec![n], (0..n as i64).collect()).unwrap();
    let mut cols = Example::new().with("id", ids);
    if n > 0 {
        let refs: Vec<&Tensor> = clips.iter().collect();
        cols.insert("audio", stack("test", "audio", &refs).unwrap());
    } else {
        cols.insert(
            "audio",
            Tensor::from_vec(vec![0, 1], Vec::<i16>::new()).unwrap(),
        );
    }
    Dataset::from_columns(cols).unwrap()
}

/// `n` elements of bytes features: a string (empty for every third), a pair of strings, and a
/// ragged list of 0-3 words; and an int64 id.
fn strings_input(n: usize) -> Dataset {
    let text = |i: usize, k: usize| "ab\0c".repeat((i + k) % 3).into_bytes();
    let names: Vec<Vec<u8>> = (0..n).map(|i| text(i, 0)).collect();
    let pairs: Vec<Vec<u8>> = (0..2 * n).map(|j| text(j / 2, j % 2 + 1)).collect();
    let pair = Tensor::strings(&pairs);
    let pair = Tensor::strings_from_parts(
        vec![n, 2],
        pair.data().clone(),
        pair.offsets().unwrap().clone(),
    )
    .unwrap();
    let words: Vec<Tensor> = (0..n)
        .map(|i| Tensor::strings(&(0..i % 4).map(|k| text(i, k)).collect::<Vec<_>>()))
        .collect();
    let refs: Vec<&Tensor> = words.iter().collect();
    let cols = Example::new()
        .with(
            "id",
            Tensor::from_vec(vec![n], (0..n as i64).collect()).unwrap(),
        )
        .with("name", Tensor::strings(&names))
        .with("pair", pair)
        .with("words", stack("test", "words", &refs).unwrap());
    Dataset::from_columns(cols).unwrap()
}

/// Three epochs, as a pipeline that repeats (so iterator state crosses epoch boundaries).
fn three_epochs(ds: &Dataset) -> Dataset {
    ds.repeat(Some(3))
}

#[test]
fn every_op_len_get_and_empty_inputs() {
    for n in [0usize, 1, 23] {
        for (name, build) in pipelines() {
            let ds = build(&ragged_input(n));
            testing::check_len_and_get(&format!("{name}/n={n}"), &ds);
            testing::check_batch_path(&format!("{name}/n={n}"), &ds);
            testing::check_hints(&format!("{name}/n={n}"), &ds);
        }
    }
}

#[test]
fn every_op_gives_the_same_output_on_1_and_4_threads() {
    for (name, build) in pipelines() {
        testing::check_threads(name, &build(&ragged_input(23)));
    }
}

#[test]
fn every_op_goes_on_after_an_elements_error_as_ignore_errors_does() {
    for (name, build) in pipelines() {
        let faulty = testing::fail_at(&ragged_input(23), 7);
        testing::check_error_rule(name, &build(&faulty));
    }
}

#[test]
fn every_op_is_deterministic_across_runs_and_prefetch_depths() {
    for (name, build) in pipelines() {
        testing::check_deterministic(name, &build(&ragged_input(23)));
    }
}

#[test]
fn every_op_resumes_exactly_over_three_epochs() {
    for (name, build) in pipelines() {
        let ds = three_epochs(&build(&ragged_input(23)));
        testing::check_resume(name, &ds, 200);
    }
}

#[test]
fn shuffles_differ_between_epochs_and_cover_the_epoch() {
    let ds = ragged_input(50).shuffle(5);
    let ids = |e: u64| run(&ds, e).iter().map(id).collect::<Vec<_>>();
    let (a, b) = (ids(0), ids(1));
    assert_ne!(a, b);
    let mut s = a.clone();
    s.sort();
    assert_eq!(s, (0..50).collect::<Vec<_>>());
}

#[test]
fn state_of_another_pipeline_is_refused() {
    let a = ragged_input(10).shuffle(1);
    let b = ragged_input(10).shuffle(2);
    let mut it = PipelineIter::new(a, 0).unwrap();
    it.next().unwrap();
    let mut other = PipelineIter::new(b, 0).unwrap();
    let err = other.set_state(&it.state()).unwrap_err().to_string();
    assert!(err.contains("another pipeline"), "{err}");
    let mut bad = it.state();
    bad["version"] = 99.into();
    let err = other.set_state(&bad).unwrap_err().to_string();
    assert!(err.contains("version 99"), "{err}");
}

#[test]
fn failing_function_reports_op_and_index() {
    let ds = ragged_input(5).map(
        "boom",
        map_fn(|e, c| {
            if c.index == 3 {
                return Err(stokehold_core::Error::Callback {
                    op: c.op.to_string(),
                    index: c.index,
                    source: "bad element".into(),
                });
            }
            Ok(e)
        }),
    );
    let err = ds
        .prefetch(2)
        .unwrap()
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("map[boom]") && err.contains("element 3"),
        "{err}"
    );
}

#[test]
fn panicking_function_becomes_an_error_not_a_hang() {
    let ds = ragged_input(5).map("panics", map_fn(|_, _| panic!("kaboom")));
    let err = ds
        .prefetch(2)
        .unwrap()
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap_err()
        .to_string();
    assert!(err.contains("kaboom"), "{err}");
}

#[test]
fn repeat_forever_over_empty_stream_ends() {
    let ds = ragged_input(3)
        .filter("none", filter_fn(|_, _| Ok(false)))
        .repeat(None);
    assert!(run(&ds, 0).is_empty());
}

#[test]
fn padded_batch_pads_and_reports_lengths() {
    let ds = ragged_input(5).batch_with(padded(3)).unwrap();
    let b = ds.get(0).unwrap();
    let audio = b.tensor("t", "audio").unwrap();
    // clip lengths 1, 2, 3 (1 + 7i mod 6) -> padded to 3
    assert_eq!(audio.shape(), &[3, 3]);
    assert_eq!(
        audio.to_vec::<i16>().unwrap(),
        vec![0, -7, -7, 10, 11, -7, 20, 21, 22]
    );
    assert_eq!(
        b.tensor("t", "audio_lengths")
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![1, 2, 3]
    );
    // A fixed shape smaller than an element is an error naming the feature.
    let mut opts = padded(3);
    opts.default_pad.shape = Some(vec![Some(2)]);
    let err = ragged_input(5)
        .batch_with(opts)
        .unwrap()
        .get(0)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"audio\"") && err.contains("larger than padded_shape"),
        "{err}"
    );
    // Padding named for a feature the elements do not have is a mistake, not a no-op.
    let mut opts = padded(3);
    opts.padding = Some(
        [("adio".to_string(), PadSpec::default())]
            .into_iter()
            .collect(),
    );
    let err = ragged_input(5)
        .batch_with(opts)
        .unwrap()
        .get(0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"adio\""), "{err}");
}

#[test]
fn batch_size_zero_is_rejected() {
    assert!(ragged_input(3).batch(0, false).is_err());
    assert!(ragged_input(3).prefetch(0).is_err());
}

#[test]
fn ragged_batch_has_row_splits() {
    let b = ragged_input(4).batch(4, false).unwrap().get(0).unwrap();
    let stokehold_core::Value::Ragged(r) = b.get("audio").unwrap() else {
        panic!("ragged")
    };
    assert_eq!(&r.splits()[..], &[0, 1, 3, 6, 10]);
}

#[test]
fn prefetch_thread_ends_after_drop() {
    // The closure owns a token; once the dataset handles here are dropped, only the prefetch
    // thread's iterator keeps it alive, so the token dying proves the thread let go and exited.
    let token = Arc::new(());
    let alive = Arc::downgrade(&token);
    let ds = ragged_input(23)
        .map(
            "slow",
            map_fn(move |e, _| {
                let _keep = &token;
                std::thread::sleep(std::time::Duration::from_millis(5));
                Ok(e)
            }),
        )
        .repeat(None)
        .prefetch(2)
        .unwrap();
    let mut it = ds.iter(0).unwrap();
    it.next().unwrap();
    drop(ds);
    assert!(alive.upgrade().is_some());
    drop(it);
    // Up to 30 s: a loaded machine may leave the exiting thread without a core for long.
    let gone = (0..3000).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        alive.upgrade().is_none()
    });
    assert!(
        gone,
        "prefetch thread still holds the pipeline 30 s after the iterator was dropped"
    );
}

#[test]
fn batch_fast_path_equals_element_by_element() {
    // An identity map hides the in-memory fast path, so `slow` stacks element by element.
    let identity = map_fn(|e, _| Ok(e));
    let chains: Vec<(&str, Build)> = vec![
        ("plain", |d| d.clone()),
        ("shuffle", |d| d.shuffle(8)),
        ("take_skip", |d| d.skip(2).take(9)),
        ("repeat", |d| d.repeat(Some(2))),
    ];
    // Two equal-length ragged rows (0 and 6 both have 1 sample) batch densely on both paths.
    let equal_rows = ragged_input(23).take(7).skip(6);
    for input in [ragged_input(23), equal_rows, strings_input(23)] {
        for (name, chain) in &chains {
            for size in [1, 3, 4] {
                let fast = chain(&input).batch(size, false).unwrap();
                let slow = chain(&input)
                    .map("id", identity.clone())
                    .batch(size, false)
                    .unwrap();
                assert_eq!(run(&fast, 1), run(&slow, 1), "{name}, batch {size}");
            }
        }
    }
}

/// A random-access input standing for one on storage, as a shard folder is: prefetch hints
/// help it, and its batch path stacks the stored elements (`stack_examples`, which a reader's
/// batch path must agree with). In-memory bytes columns have no batch path of their own.
struct Stacked(Dataset);

impl stokehold_core::MapDataset for Stacked {
    fn len(&self) -> u64 {
        self.0.len().unwrap()
    }
    fn get(&self, index: u64) -> stokehold_core::Result<Example> {
        self.0.get(index)
    }
    fn name(&self) -> String {
        "stacked".into()
    }
    fn prefetch_useful(&self) -> bool {
        true
    }
    fn batch_pads(&self) -> bool {
        true
    }
    fn get_batch(&self, indices: &[u64]) -> stokehold_core::Result<Option<Example>> {
        let rows = indices
            .iter()
            .map(|&i| self.0.get(i))
            .collect::<stokehold_core::Result<Vec<_>>>()?;
        stack_examples("stacked", &rows).map(Some)
    }
}

/// `padded_batch` over an input with a batch path ([`Stacked`]: `get_batch` stacks the
/// elements, dense or ragged, and the batch is padded whole) gives what padding its elements one
/// by one gives (the same columns behind a filter, a stream): values, lengths and errors, for a
/// ragged clip, a dense 2-D feature, bytes, a scalar, fixed shapes and padding values.
#[test]
fn padded_batch_of_a_stacked_batch_equals_padding_its_elements() {
    let n = 7;
    let clips: Vec<Tensor> = (0..n)
        .map(|i| Tensor::from_vec(vec![1 + i % 4], vec![i as i16; 1 + i % 4]).unwrap())
        .collect();
    let clips: Vec<&Tensor> = clips.iter().collect();
    let words: Vec<String> = (0..n * 2).map(|k| format!("w{k}")).collect();
    let columns = Example::new()
        .with("audio", stack("test", "audio", &clips).unwrap())
        .with(
            "grid",
            Tensor::from_vec(vec![n, 2, 3], (0..n as i32 * 6).collect()).unwrap(),
        )
        .with(
            "words",
            Tensor::strings(&words).reshape(vec![n, 2]).unwrap(),
        )
        .with("w", Tensor::from_vec(vec![n], vec![0.5f32; n]).unwrap());
    let columns = Dataset::from_columns(columns).unwrap();
    let input = Dataset::from_map(Stacked(columns));
    let spec = |value: f64, shape: Option<Vec<Option<usize>>>| PadSpec {
        value: Some(PadValue::Float(value)),
        shape,
    };
    let cases: Vec<(&str, Vec<(&str, PadSpec)>)> = vec![
        ("defaults", vec![]),
        ("clip to 8", vec![("audio", spec(3.0, Some(vec![Some(8)])))]),
        (
            "grid to 4x3",
            vec![("grid", spec(-1.0, Some(vec![Some(4), None])))],
        ),
        (
            "grid as it is",
            vec![("grid", spec(9.0, Some(vec![Some(2), Some(3)])))],
        ),
        (
            "words to 3",
            vec![("words", spec(0.0, Some(vec![Some(3)])))],
        ),
        (
            "clip too small",
            vec![("audio", spec(0.0, Some(vec![Some(2)])))],
        ),
        (
            "grid wrong rank",
            vec![("grid", spec(0.0, Some(vec![Some(2)])))],
        ),
        ("no such feature", vec![("audo", spec(0.0, None))]),
    ];
    for (what, specs) in cases {
        let mut opts = padded(3);
        opts.padding = Some(specs.into_iter().map(|(k, v)| (k.to_string(), v)).collect());
        let by_batch = input.batch_with(opts.clone()).unwrap();
        assert!(by_batch.as_map().is_some(), "{what}: random access");
        let by_element = input
            .filter("all", filter_fn(|_, _| Ok(true)))
            .batch_with(opts)
            .unwrap();
        let a: Vec<_> = (0..3)
            .map(|i| by_batch.get(i).map_err(|e| e.to_string()))
            .collect();
        let b = match by_element.iter(0) {
            Ok(mut it) => (0..3)
                .map(|_| it.next().map(|e| e.unwrap()).map_err(|e| e.to_string()))
                .collect::<Vec<_>>(),
            Err(e) => vec![Err(e.to_string())],
        };
        assert_eq!(a[0], b[0], "{what}");
        if b[0].is_ok() {
            assert_eq!(a, b, "{what}");
        }
    }
    // The lengths of a padded feature may not replace a feature of the input's.
    let clash = Dataset::from_columns(
        Example::new()
            .with(
                "x",
                Tensor::from_vec(vec![2, 2], vec![1i64, 2, 3, 4]).unwrap(),
            )
            .with(
                "x_lengths",
                Tensor::from_vec(vec![2], vec![0i64, 0]).unwrap(),
            ),
    )
    .unwrap();
    let err = clash.batch_with(padded(2)).unwrap().get(0).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
}

/// `padded_batch` over a map whose results differ beyond axis 0 pads them, also where the map
/// has a batch path (an input on storage: it maps the input's batch row by row and stacks the
/// results, which cannot stack these): the map's batch path is not taken for padding.
#[test]
fn padded_batch_over_a_map_pads_results_that_do_not_stack() {
    let square = map_fn(|e, _| {
        let k = 1 + e.tensor("t", "x")?.to_vec::<i64>()?[0] as usize % 3;
        Ok(e.with("img", Tensor::from_vec(vec![k, k], vec![1u8; k * k])?))
    });
    let input = Dataset::from_map(Stacked(Dataset::range(4))).map("square", square);
    // padded(3)'s default, -7, is no uint8: refused by name (tf.data refuses it too).
    let err = input.batch_with(padded(3)).unwrap().get(0).unwrap_err();
    assert!(
        err.to_string()
            .contains("padding value -7 does not convert to uint8 exactly (feature \"img\")"),
        "{err}"
    );
    let mut opts = padded(3);
    opts.default_pad.value = Some(PadValue::UInt(7));
    let b = input.batch_with(opts).unwrap().get(0).unwrap();
    assert_eq!(b.tensor("t", "img").unwrap().shape(), &[3, 3, 3]);
    let img = b.tensor("t", "img").unwrap().to_vec::<u8>().unwrap();
    assert_eq!(&img[..9], &[1, 7, 7, 7, 7, 7, 7, 7, 7]);
    assert_eq!(
        b.tensor("t", "img_lengths")
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![1, 1, 2, 2, 3, 3]
    );
}

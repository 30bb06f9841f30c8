//! Plan semantics in core: execution stages hoisted over `repeat`, the `epochs` loader (elements,
//! draining, checkpoints, refused states), shuffles without reshuffling, the padded_batch
//! `_lengths` collision, and the executor found through the dataset.

use serde_json::Value as Json;
use stokehold_core::exec::executor_of;
use stokehold_core::ops::map::MapFn;
use stokehold_core::ops::plan::Epochs;
use stokehold_core::{
    filter_fn, map_fn, stack, BatchOptions, Dataset, DatasetIter, Error, Example, PadValue,
    Parallelism, Tensor,
};

use crate::common::xs;

/// A random-access pipeline whose epochs differ (shuffle) and whose elements say where they
/// came from (`x`: the source index; `i`: the global index).
fn base(n: u64) -> Dataset {
    Dataset::range(n).shuffle(5).map(
        "tag",
        map_fn(|mut e, c| {
            e.insert("i", Tensor::scalar(c.index as i64));
            Ok(e)
        }),
    )
}

/// `base` under execution stages (a deterministic parallelize, then a prefetch).
fn staged(n: u64) -> Dataset {
    base(n)
        .parallelize(Parallelism::Fixed(2), true)
        .prefetch(3)
        .unwrap()
}

fn run_epoch(ds: &Dataset, epoch: u64) -> Vec<Example> {
    ds.iter(epoch).unwrap().collect_all().unwrap()
}

/// Every remaining element of `l` as (epoch, element), epoch by epoch.
fn rest(l: &mut Epochs) -> Vec<(u64, Example)> {
    let mut out = Vec::new();
    // A restored loader resumes inside its epoch: its first next_epoch yields the rest of it.
    while let Some(epoch) = l.next_epoch().unwrap() {
        while let Some(e) = l.next().unwrap() {
            out.push((epoch, e));
        }
    }
    out
}

/// Takes `k` elements from `l` (starting epochs as needed); returns them.
fn take(l: &mut Epochs, k: usize) -> Vec<(u64, Example)> {
    let mut out = Vec::new();
    if k == 0 {
        return out;
    }
    let mut epoch = l.current_epoch();
    loop {
        if let Some(ep) = epoch {
            while out.len() < k {
                match l.next().unwrap() {
                    Some(e) => out.push((ep, e)),
                    None => break,
                }
            }
            if out.len() == k {
                return out;
            }
        }
        epoch = l.next_epoch().unwrap();
        if epoch.is_none() {
            return out;
        }
    }
}

#[test]
fn epochs_equal_iteration_of_each_epoch() {
    for ds in [base(7), staged(7)] {
        let mut l = ds.epochs(2, Some(3), None).unwrap();
        assert_eq!(l.per_epoch(), 7);
        assert_eq!(l.epochs_left(), Some(3));
        assert_eq!(l.epoch_len(), 0);
        for want_epoch in 2..5 {
            assert_eq!(l.next_epoch().unwrap(), Some(want_epoch));
            assert_eq!((l.epoch_len(), l.remaining_in_epoch()), (7, 7));
            let mut got = Vec::new();
            while let Some(e) = l.next().unwrap() {
                got.push(e);
            }
            assert_eq!(got, run_epoch(&ds, want_epoch), "epoch {want_epoch}");
            assert_eq!(got, run_epoch(&base(7), want_epoch));
            assert_eq!(l.remaining_in_epoch(), 0);
            assert_eq!(l.epochs_left(), Some(4 - want_epoch));
        }
        assert_eq!(l.next_epoch().unwrap(), None);
        assert!(l.next().unwrap().is_none());
    }
    // The stages are kept, and a prefetch added only where there is none.
    let d = base(4).epochs(0, Some(1), None).unwrap();
    assert!(d
        .pipeline()
        .describe()
        .ends_with("-> epochs(start_index=0, len=4) -> prefetch(2)"));
    let d = staged(4).epochs(1, None, None).unwrap();
    assert!(d.pipeline().describe().ends_with(
        "-> epochs(start_index=4, len=18446744073709551615) -> \
         parallelize[input](parallel, deterministic=true) -> prefetch(3)"
    ));
    assert_eq!(d.epochs_left(), None);
    let d = staged(4).epochs(0, Some(1), Some(9)).unwrap();
    assert!(d
        .pipeline()
        .describe()
        .ends_with("deterministic=true) -> prefetch(9)"));
}

#[test]
fn endless_epochs_run_on() {
    let mut l = staged(3).epochs(0, None, Some(1)).unwrap();
    for epoch in 0..5 {
        assert_eq!(l.next_epoch().unwrap(), Some(epoch));
        let got: Vec<Example> = std::iter::from_fn(|| l.next().unwrap()).collect();
        assert_eq!(got, run_epoch(&base(3), epoch));
    }
}

#[test]
fn leaving_an_epoch_early_skips_the_rest_of_it() {
    let mut l = staged(6).epochs(0, Some(3), None).unwrap();
    assert_eq!(l.next_epoch().unwrap(), Some(0));
    let first: Vec<Example> = (0..2).map(|_| l.next().unwrap().unwrap()).collect();
    assert_eq!(first, run_epoch(&base(6), 0)[..2]);
    assert_eq!(l.remaining_in_epoch(), 4);
    assert_eq!(l.next_epoch().unwrap(), Some(1));
    // Epoch 1 untouched: epoch 2 starts where it ends.
    assert_eq!(l.next_epoch().unwrap(), Some(2));
    let got: Vec<Example> = std::iter::from_fn(|| l.next().unwrap()).collect();
    assert_eq!(got, run_epoch(&base(6), 2));
    assert_eq!(l.next_epoch().unwrap(), None);
}

#[test]
fn epochs_resume_exactly_at_every_cut_with_chained_resumes() {
    let make = || staged(5).epochs(1, Some(3), None).unwrap();
    let flat = rest(&mut make());
    assert_eq!(flat.len(), 15);
    for cut in 0..=flat.len() {
        let mut a = make();
        let head = take(&mut a, cut);
        assert_eq!(head, flat[..cut], "cut {cut}");
        let state = a.state();
        assert_eq!(state["format"], "stokehold-epochs");
        assert_eq!(
            (state["start"].clone(), state["count"].clone()),
            (Json::from(1), Json::from(3))
        );
        assert_eq!(state["per_epoch"], 5);
        // JSON text round trip, as a checkpoint file would do.
        let text = state.to_string();
        let mut b = make();
        b.set_state(&serde_json::from_str(&text).unwrap()).unwrap();
        // A chained resume: a few more elements, then save and restore again.
        let more = take(&mut b, 3);
        let mut c = make();
        c.set_state(&b.state()).unwrap();
        let mut got = head;
        got.extend(more);
        got.extend(rest(&mut c));
        assert_eq!(got, flat, "cut {cut}");
    }
}

#[test]
fn epochs_state_is_the_python_loaders() {
    let mut l = base(4).epochs(0, None, None).unwrap();
    let s = l.state();
    let keys: Vec<&str> = s.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    let mut want = vec![
        "format",
        "version",
        "start",
        "count",
        "per_epoch",
        "epoch",
        "taken",
        "iter",
    ];
    want.sort();
    let mut keys = keys;
    keys.sort();
    assert_eq!(keys, want);
    assert_eq!(
        (s["count"].clone(), s["iter"].clone()),
        (Json::Null, Json::Null)
    );
    l.next_epoch().unwrap();
    l.next().unwrap();
    let s = l.state();
    assert_eq!(
        (s["epoch"].clone(), s["taken"].clone()),
        (0.into(), 1.into())
    );
    assert_eq!(s["iter"]["format"], "stokehold-state");
}

fn state_error(r: stokehold_core::Result<()>) -> String {
    match r {
        Err(Error::State(m)) => m,
        other => panic!("expected a state error, got {other:?}"),
    }
}

#[test]
fn epochs_refuse_foreign_and_late_states() {
    let make = |count| base(4).epochs(0, Some(count), None).unwrap();
    let mut a = make(2);
    a.next_epoch().unwrap();
    a.next().unwrap();
    let st = a.state();
    // Other arguments.
    let m = state_error(make(3).set_state(&st));
    assert_eq!(
        m,
        "this state is of epochs(start, count, len) = (0, 2, 4), this loader (0, 3, 4)"
    );
    let m = state_error(base(4).epochs(0, None, None).unwrap().set_state(&st));
    assert!(m.ends_with("this loader (0, None, 4)"), "{m}");
    // Not a loader state.
    let it_state = base(4).iter(0).unwrap().state();
    let m = state_error(make(2).set_state(&it_state));
    assert_eq!(
        m,
        "not an epochs() loader state (format stokehold-epochs, version 1)"
    );
    // A started loader.
    let m = state_error(a.set_state(&st));
    assert_eq!(
        m,
        "set_state() on a loader that has started; make a new one"
    );
    // Out of range.
    for (epoch, taken) in [(3, 0), (0, 5), (1, -1)] {
        let mut bad = st.clone();
        bad["epoch"] = epoch.into();
        bad["taken"] = taken.into();
        let m = state_error(make(2).set_state(&bad));
        assert_eq!(
            m,
            format!("epoch {epoch} / taken {taken} lies outside this loader")
        );
    }
    // The end itself is a valid position (nothing left to run).
    let mut end = st.clone();
    end["epoch"] = 2.into();
    end["taken"] = 0.into();
    end["iter"] = Json::Null;
    let mut l = make(2);
    l.set_state(&end).unwrap();
    assert_eq!(l.next_epoch().unwrap(), None);
}

#[test]
fn epochs_need_a_finite_random_access_pipeline() {
    let stream = Dataset::range(4).filter("all", filter_fn(|_, _| Ok(true)));
    let err = stream.epochs(0, Some(1), None).err().unwrap().to_string();
    assert!(
        err.contains(
            "epochs() needs a random-access pipeline, and range(4) -> filter[all] is a stream"
        ),
        "{err}"
    );
    // A prefetch over a stream is no stage over a random-access base.
    assert!(stream.prefetch(2).unwrap().epochs(0, None, None).is_err());
    let err = Dataset::range(4)
        .repeat(None)
        .epochs(0, Some(1), None)
        .err()
        .unwrap();
    assert!(err.to_string().contains("needs a finite dataset"), "{err}");
    assert!(Dataset::range(4).epochs(0, Some(1), Some(0)).is_err());
}

#[test]
fn stages_are_hoisted_over_repeat() {
    let plain = base(6).repeat(Some(2));
    let want = run_epoch(&plain, 0);
    assert_eq!(want.len(), 12);

    let pre = base(6).prefetch(3).unwrap().repeat(Some(2));
    assert!(
        pre.describe().ends_with("-> repeat(2) -> prefetch(3)"),
        "{}",
        pre.describe()
    );
    assert_eq!(run_epoch(&pre, 0), want);
    assert_eq!(run_epoch(&pre, 1), run_epoch(&plain, 1));

    let par = base(6)
        .parallelize(Parallelism::Fixed(2), true)
        .prefetch(2)
        .unwrap()
        .repeat(Some(2));
    assert!(
        par.describe().ends_with(
            "-> repeat(2) -> parallelize[input](parallel, deterministic=true) -> prefetch(2)"
        ),
        "{}",
        par.describe()
    );
    assert_eq!(run_epoch(&par, 0), want);

    // Not stages: an as-completed parallelize, a parallel map with a function over a stream, a
    // prefetch over a stream. The repeat stays outside.
    let unordered = base(6)
        .parallelize(Parallelism::Fixed(2), false)
        .repeat(Some(2));
    assert!(unordered
        .describe()
        .ends_with("deterministic=false) -> repeat(2)"));
    let mapped = base(6)
        .filter("all", filter_fn(|_, _| Ok(true)))
        .map_parallel("id", map_fn(|e, _| Ok(e)), Parallelism::Fixed(2), true)
        .repeat(Some(2));
    assert!(mapped
        .describe()
        .ends_with("deterministic=true) -> repeat(2)"));
    let stream = Dataset::range(6)
        .filter("all", filter_fn(|_, _| Ok(true)))
        .prefetch(2)
        .unwrap()
        .repeat(Some(2));
    assert!(stream.describe().ends_with("prefetch(2) -> repeat(2)"));
    assert_eq!(crate::common::run(&stream).unwrap().len(), 12);
}

#[test]
fn shuffle_without_reshuffling_keeps_one_order() {
    let order = |ds: &Dataset, epoch| xs(&run_epoch(ds, epoch));
    let fixed = Dataset::range(50).shuffle_with(4, false).unwrap();
    assert_eq!(order(&fixed, 0), order(&fixed, 1));
    assert_eq!(order(&fixed, 0), order(&Dataset::range(50).shuffle(4), 0));
    assert_eq!(
        fixed.name(),
        "shuffle(seed=4, reshuffle_each_iteration=false)"
    );
    let fresh = Dataset::range(50).shuffle_with(4, true).unwrap();
    assert_ne!(order(&fresh, 0), order(&fresh, 1));
    assert_eq!(fresh.name(), "shuffle(seed=4)");
    // Over `repeat`, the repetitions of a fixed shuffle are identical too.
    let rep = xs(&run_epoch(&fixed.repeat(Some(2)), 0));
    assert_eq!(rep[..50], rep[50..]);

    let buf = Dataset::range(50).shuffle_buffer_with(8, 2, false).unwrap();
    assert_eq!(order(&buf, 0), order(&buf, 3));
    assert_ne!(order(&buf, 0), (0..50).collect::<Vec<i64>>());
    assert_eq!(
        buf.name(),
        "shuffle(buffer_size=8, seed=2, reshuffle_each_iteration=false)"
    );
    let buf = Dataset::range(50).shuffle_buffer_with(8, 2, true).unwrap();
    assert_ne!(order(&buf, 0), order(&buf, 3));
    assert_eq!(buf.name(), "shuffle(buffer_size=8, seed=2)");
}

#[test]
fn padded_batch_refuses_to_overwrite_a_lengths_feature() {
    let clips: Vec<Tensor> = (1..4usize)
        .map(|n| Tensor::from_vec(vec![n], vec![1i16; n]).unwrap())
        .collect();
    let refs: Vec<&Tensor> = clips.iter().collect();
    let cols = Example::new()
        .with("x", stack("t", "x", &refs).unwrap())
        .with(
            "x_lengths",
            Tensor::from_vec(vec![3], vec![7i64, 8, 9]).unwrap(),
        );
    let ds = Dataset::from_columns(cols).unwrap();
    let opts = BatchOptions::padded(3, false, Default::default(), Default::default(), None);
    let err = ds.batch_with(opts).unwrap().get(0).unwrap_err().to_string();
    assert!(
        err.contains(
            "padded_batch: feature \"x_lengths\" already exists; the lengths of padded feature \
             \"x\" would overwrite it: rename it first"
        ),
        "{err}"
    );
    // Without the collision the lengths are there.
    let ok = Dataset::from_columns(Example::new().with("x", stack("t", "x", &refs).unwrap()))
        .unwrap()
        .batch_with(BatchOptions::padded(
            3,
            false,
            Default::default(),
            Default::default(),
            None,
        ))
        .unwrap()
        .get(0)
        .unwrap();
    assert_eq!(
        ok.tensor("t", "x_lengths")
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        [1, 2, 3]
    );
}

#[test]
fn padded_options_from_maps() {
    let shapes = [("a".to_string(), vec![Some(4)])].into_iter().collect();
    let values = [
        ("a".to_string(), PadValue::Float(2.0)),
        ("b".to_string(), PadValue::Int(3)),
    ]
    .into_iter()
    .collect();
    let o = BatchOptions::padded(2, true, shapes, values, Some(PadValue::Int(-1)));
    let p = o.padding.as_ref().unwrap();
    assert_eq!((o.size, o.drop_remainder), (2, true));
    assert_eq!(
        (p["a"].value.clone(), p["a"].shape.clone()),
        (Some(PadValue::Float(2.0)), Some(vec![Some(4)]))
    );
    assert_eq!(
        (p["b"].value.clone(), p["b"].shape.clone()),
        (Some(PadValue::Int(3)), None)
    );
    assert_eq!(o.default_pad.value, Some(PadValue::Int(-1)));
}

#[test]
fn executor_found_through_the_dataset() {
    // with_options: found from a later op, before and after iterating.
    let opts = stokehold_core::ExecOptions {
        memory_budget: 1 << 21,
        ..Default::default()
    };
    let w = base(8)
        .parallelize(Parallelism::Fixed(2), true)
        .with_options(opts);
    let later = w.take(3);
    assert_eq!(executor_of(&later).unwrap().budget().limit(), 1 << 21);

    // Without with_options: the default executor the parallel op ran on, once it has run.
    let p = base(8).parallelize(Parallelism::Fixed(2), true);
    assert!(executor_of(&p).is_none());
    assert_eq!(run_epoch(&p.take(100), 0).len(), 8);
    let s = executor_of(&p)
        .expect("remembered by the parallel op")
        .stats();
    assert_eq!(s.ops.iter().map(|o| o.elements).sum::<u64>(), 8);

    // The loader's re-applied stage reports to the same place: ds.stats() covers ds.epochs().
    let q = base(8).parallelize(Parallelism::Fixed(2), true);
    let mut l = q.epochs(0, Some(2), None).unwrap();
    while l.next_epoch().unwrap().is_some() {
        while l.next().unwrap().is_some() {}
    }
    let s = executor_of(&q)
        .expect("found from the original dataset")
        .stats();
    // The loader's prefetch stage reports there too (its buffer shares the budget).
    let parallel = s.ops.iter().filter(|o| !o.op.starts_with("prefetch"));
    assert_eq!(parallel.map(|o| o.elements).sum::<u64>(), 16);
    assert!(executor_of(&Dataset::range(3).prefetch(1).unwrap()).is_none());
}

#[test]
fn cache_of_a_parallel_map_points_to_the_sequential_map() {
    // In order, a parallel map over random access is map().parallelize(): the cache builds
    // under the stage and the shuffle after it has random access.
    let load = || map_fn(|e, _| Ok(e));
    let ordered = Dataset::range(10)
        .map_parallel("load", load(), Parallelism::Fixed(2), true)
        .cache()
        .unwrap();
    let shuffled = ordered.try_shuffle(0).unwrap();
    assert!(shuffled
        .describe()
        .ends_with("shuffle(seed=0) -> parallelize[input](parallel, deterministic=true)"));
    assert_eq!(crate::common::run(&shuffled).unwrap().len(), 10);
    // As completed, the order is the stage's: the cache keeps a stream.
    let ds = Dataset::range(10)
        .map_parallel("load", load(), Parallelism::Fixed(2), false)
        .cache()
        .unwrap();
    let err = ds.try_shuffle(0).err().unwrap().to_string();
    for part in [
        "shuffle(seed=0) needs random access",
        "cache() keeps what parallelize[input](parallel, deterministic=false) yields",
        "Run the map sequentially before cache() (`map(fn)` without num_parallel_calls keeps \
         random access)",
        "parallelize() after the shuffle",
        "`ds.map(fn).cache().shuffle(seed=0).batch(32).parallelize()`",
    ] {
        assert!(err.contains(part), "{part:?} not in {err}");
    }
    let err = ds.window_shuffle(4, 1).err().unwrap().to_string();
    assert!(
        err.contains("window_shuffle(window=4, seed=1) needs random access"),
        "{err}"
    );
    // Elsewhere the plain stream advice stays.
    let f = Dataset::range(3).filter("all", filter_fn(|_, _| Ok(true)));
    assert!(f
        .try_shuffle(0)
        .err()
        .unwrap()
        .to_string()
        .contains("shuffle(buffer_size=...)"));
}

/// Doubles `x` and records the global index the function saw.
fn double() -> MapFn {
    map_fn(|mut e, c| {
        let x = e.tensor("test", "x")?.to_vec::<i64>()?[0];
        e.insert("x", Tensor::scalar(2 * x));
        e.insert("seen", Tensor::scalar(c.index as i64));
        Ok(e)
    })
}

/// Core plans a parallel map (the one place of the rule; the bindings call it): over a
/// random-access input, or execution stages over one, `map_parallel` is
/// `map(f).parallelize(par)`: the same plan and elements, the length known, the map on a
/// random-access base under the stage (so `epochs()` and ops after it build under it), and a
/// state saved at one parallelism restores at another. Over a stream it stays a stream.
#[test]
fn map_parallel_over_random_access_is_map_then_parallelize() {
    for input in [base(9), staged(9)] {
        for (par, det) in [
            (Parallelism::Fixed(3), true),
            (Parallelism::Autotune, true),
            (Parallelism::Fixed(2), false),
        ] {
            let planned = input.map_parallel("double", double(), par, det);
            let by_hand = input.map("double", double()).parallelize(par, det);
            assert_eq!(planned.describe(), by_hand.describe());
            assert_eq!(planned.describe_data(), by_hand.describe_data());
            assert_eq!(planned.len(), Some(9));
            let mut got = run_epoch(&planned, 1);
            let mut want = run_epoch(&by_hand, 1);
            if !det {
                let key = |e: &Example| xs(std::slice::from_ref(e))[0];
                got.sort_by_key(key);
                want.sort_by_key(key);
            }
            assert_eq!(got, want, "{par:?} deterministic={det}");
            if det {
                // The map runs on a random-access base: `get` of the base is the element.
                let (mapped, _) = planned.peel_stages().expect("random access under stages");
                assert!(mapped.is_random_access());
                assert_eq!(mapped.get(4).unwrap(), run_epoch(&planned, 0)[4]);
                assert_eq!(
                    mapped.describe(),
                    input.peel_stages().unwrap().0.describe() + " -> map[double]"
                );
            }
        }
    }
    // Ops after it build under the stage, and epochs() runs it.
    let planned = base(6).map_parallel("double", double(), Parallelism::Fixed(2), true);
    assert!(planned.batch(2, false).unwrap().describe().ends_with(
        "-> batch(2, drop_remainder=false) -> parallelize[input](parallel, deterministic=true)"
    ));
    let mut l = planned.epochs(0, Some(2), None).unwrap();
    assert_eq!(rest(&mut l).len(), 12);

    // A state saved at one parallelism restores at another (and with none), mid-epoch.
    let at = |par| base(8).map_parallel("double", double(), par, true);
    let want = run_epoch(&base(8).map("double", double()), 2);
    for (save, load) in [
        (Parallelism::Fixed(1), Parallelism::Fixed(4)),
        (Parallelism::Fixed(4), Parallelism::Autotune),
        (Parallelism::Autotune, Parallelism::Fixed(1)),
    ] {
        let mut a = at(save).iter(2).unwrap();
        let head: Vec<Example> = (0..3).map(|_| a.next().unwrap().unwrap()).collect();
        let state = a.state();
        let mut b = at(load).iter(2).unwrap();
        b.set_state(&state).unwrap();
        let mut got = head;
        got.extend(b.collect_all().unwrap());
        assert_eq!(got, want, "{save:?} -> {load:?}");
        let mut c = base(8).map("double", double()).iter(2).unwrap();
        c.set_state(&state).unwrap();
        assert_eq!(
            c.collect_all().unwrap(),
            want[3..],
            "{save:?} -> sequential"
        );
    }

    // Over a stream: the streaming parallel map, a stream of the same elements.
    let stream = Dataset::range(9).filter("all", filter_fn(|_, _| Ok(true)));
    let par = stream.map_parallel("double", double(), Parallelism::Fixed(2), true);
    assert!(par.peel_stages().is_none());
    assert!(par
        .describe()
        .ends_with("-> map[double](parallel, deterministic=true)"));
    assert_eq!(
        xs(&run_epoch(&par, 0)),
        xs(&run_epoch(&stream.map("double", double()), 0))
    );
}

//! zip, concatenate, sample_from_datasets; each under 1 and 8 threads.

use stokehold_core::exec::Parallelism::Fixed;
use stokehold_core::{filter_fn, sample_from_datasets, Dataset, DatasetIter};

use crate::common::*;

fn stream(n: u64) -> Dataset {
    Dataset::range(n).filter("all", filter_fn(|_, _| Ok(true)))
}

#[test]
fn zip_merges_and_stops_at_shortest() {
    let a = Dataset::range(5);
    let b = Dataset::range(3).shuffle(2);
    let z = Dataset::zip_prefixed(vec![("a/".into(), a.clone()), ("b/".into(), b.clone())]);
    assert_eq!(z.len(), Some(3));
    let els = z.iter(0).unwrap().collect_all().unwrap();
    assert_eq!(els.len(), 3);
    assert_eq!(els[0].names(), vec!["a/x", "b/x"]);
    let zs = Dataset::zip_prefixed(vec![("a/".into(), stream(5)), ("b/".into(), stream(3))]);
    let zel = zs.iter(0).unwrap().collect_all().unwrap();
    let col = |els: &[stokehold_core::Example], f: &str| -> Vec<i64> {
        els.iter()
            .map(|e| e.tensor("t", f).unwrap().to_vec::<i64>().unwrap()[0])
            .collect()
    };
    assert_eq!(col(&zel, "a/x"), vec![0, 1, 2]);
    assert_eq!(col(&zel, "b/x"), vec![0, 1, 2]);
    assert_eq!(col(&els, "a/x"), vec![0, 1, 2]);
    let mut bx = col(&els, "b/x");
    bx.sort();
    assert_eq!(bx, vec![0, 1, 2]);
    let clash = Dataset::zip(vec![a.clone(), a]);
    assert!(run(&clash).unwrap_err().to_string().contains("clashes"));
    let empty = Dataset::zip(vec![Dataset::range(0), stream(4)]);
    assert!(empty.iter(0).unwrap().collect_all().unwrap().is_empty());
    let z1 = Dataset::zip_prefixed(vec![
        ("a/".into(), Dataset::range(7)),
        ("b/".into(), stream(7)),
    ]);
    let p1 = z1.map_parallel("id", stokehold_core::map_fn(|e, _| Ok(e)), Fixed(1), true);
    let p8 = z1.map_parallel("id", stokehold_core::map_fn(|e, _| Ok(e)), Fixed(8), true);
    assert_eq!(
        p1.iter(0).unwrap().collect_all().unwrap(),
        p8.iter(0).unwrap().collect_all().unwrap()
    );
    let mut it = z1.iter(0).unwrap();
    it.next().unwrap();
    let s = it.state();
    let mut it2 = z1.iter(0).unwrap();
    it2.set_state(&s).unwrap();
    assert_eq!(it.collect_all().unwrap(), it2.collect_all().unwrap());
}

#[test]
fn concatenate_random_access_and_streams() {
    let c = Dataset::range(3).concatenate(&Dataset::range(2));
    assert_eq!(c.len(), Some(5));
    assert!(c.is_random_access());
    assert_eq!(run(&c).unwrap(), vec![0, 1, 2, 0, 1]);
    let cs = stream(3).concatenate(&stream(2));
    assert_eq!(cs.len(), None);
    assert_eq!(run(&cs).unwrap(), vec![0, 1, 2, 0, 1]);
    assert_eq!(
        run(&Dataset::range(0).concatenate(&stream(0))).unwrap(),
        Vec::<i64>::new()
    );
    assert_eq!(
        run(&Dataset::range(1).concatenate(&Dataset::range(0))).unwrap(),
        vec![0]
    );
    for k in 0..6 {
        assert_eq!(save_restore_run(&cs, k).unwrap(), vec![0, 1, 2, 0, 1]);
        assert_eq!(save_restore_run(&c, k).unwrap(), vec![0, 1, 2, 0, 1]);
    }
    let p1 = c.shuffle(4).parallelize(Fixed(1), true);
    let p8 = c.shuffle(4).parallelize(Fixed(8), true);
    assert_eq!(run(&p1).unwrap(), run(&p8).unwrap());
}

fn tagged(n: u64, tag: i64) -> Dataset {
    Dataset::range(n).map(
        "tag",
        stokehold_core::map_fn(move |e: stokehold_core::Example, _| {
            let x = e.tensor("t", "x")?.to_vec::<i64>()?[0];
            Ok(stokehold_core::Example::new()
                .with("x", stokehold_core::Tensor::scalar(tag * 1000 + x)))
        }),
    )
}

#[test]
fn mixing_is_seeded_weighted_and_never_hangs() {
    let mix = |stop| {
        sample_from_datasets(
            vec![tagged(300, 1), tagged(300, 2)],
            vec![0.75, 0.25],
            7,
            stop,
        )
        .unwrap()
    };
    let a = run(&mix(false)).unwrap();
    assert_eq!(a, run(&mix(false)).unwrap());
    assert_eq!(a.len(), 600);
    let first_200_from_1 = a[..200].iter().filter(|v| **v < 2000).count();
    assert!(
        (120..=180).contains(&first_200_from_1),
        "{first_200_from_1}"
    );
    // Each input keeps its own order.
    let ones: Vec<_> = a.iter().filter(|v| **v < 2000).copied().collect();
    assert_eq!(ones, (1000..1300).collect::<Vec<_>>());
    // stop_on_empty ends when the first input runs out.
    let s = run(&mix(true)).unwrap();
    assert!(s.len() < 600 && s.len() >= 300, "{}", s.len());
    // Empty inputs, zero weights.
    let e =
        sample_from_datasets(vec![tagged(0, 1), tagged(0, 2)], vec![1.0, 1.0], 1, false).unwrap();
    assert!(run(&e).unwrap().is_empty());
    let z =
        sample_from_datasets(vec![tagged(5, 1), tagged(5, 2)], vec![0.0, 1.0], 1, false).unwrap();
    assert_eq!(run(&z).unwrap(), (2000..2005).collect::<Vec<_>>());
    let one = sample_from_datasets(vec![tagged(1, 1)], vec![1.0], 1, true).unwrap();
    assert_eq!(run(&one).unwrap(), vec![1000]);
    assert!(sample_from_datasets(vec![tagged(1, 1)], vec![-1.0], 1, true).is_err());
    for k in [0, 5, 300, 600] {
        assert_eq!(save_restore_run(&mix(false), k).unwrap(), a);
    }
    let p1 = mix(false).map_parallel("id", stokehold_core::map_fn(|e, _| Ok(e)), Fixed(1), true);
    let p8 = mix(false).map_parallel("id", stokehold_core::map_fn(|e, _| Ok(e)), Fixed(8), true);
    assert_eq!(run(&p1).unwrap(), run(&p8).unwrap());
}

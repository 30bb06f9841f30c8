//! interleave / flat_map against orders produced by TensorFlow (testdata/interleave).

use serde_json::Value as Json;
use stokehold_core::exec::Parallelism::{Autotune, Fixed};
use stokehold_core::{interleave_fn, map_fn, Dataset, Example, InterleaveFn, Parallelism, Tensor};

use crate::common::*;

fn fixtures() -> Json {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/interleave/tf_interleave.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Input element x opens `lengths[x]` elements valued x * 1000 + k (as in the fixture script).
fn opener(lengths: Vec<u64>) -> InterleaveFn {
    interleave_fn(move |e: Example, _| {
        let x = e.tensor("t", "x")?.to_vec::<i64>()?[0];
        let inner = Dataset::range(lengths[x as usize]).map(
            "val",
            map_fn(move |e: Example, _| {
                let k = e.tensor("t", "x")?.to_vec::<i64>()?[0];
                Ok(Example::new().with("x", Tensor::scalar(x * 1000 + k)))
            }),
        );
        Ok(inner)
    })
}

fn lengths(case: &Json) -> Vec<u64> {
    case["lengths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

fn expected(case: &Json) -> Vec<i64> {
    case["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect()
}

fn build(case: &Json, par: Option<Parallelism>, det: bool) -> Dataset {
    let l = lengths(case);
    let (c, b) = (
        case["cycle_length"].as_u64().unwrap() as usize,
        case["block_length"].as_u64().unwrap() as usize,
    );
    Dataset::range(l.len() as u64)
        .interleave("open", opener(l), c, b, par, det)
        .unwrap()
}

#[test]
fn order_matches_tensorflow() {
    let fx = fixtures();
    let cases = fx["interleave"].as_array().unwrap();
    assert!(cases.len() >= 8);
    for case in cases {
        let want = expected(case);
        assert_eq!(
            run(&build(case, None, true)).unwrap(),
            want,
            "sequential {case}"
        );
        assert_eq!(
            run(&build(case, Some(Fixed(1)), true)).unwrap(),
            want,
            "1 thread {case}"
        );
        assert_eq!(
            run(&build(case, Some(Fixed(8)), true)).unwrap(),
            want,
            "8 threads {case}"
        );
        assert_eq!(
            run_on(&build(case, Some(Autotune), true), 8).unwrap(),
            want,
            "autotune {case}"
        );
    }
}

#[test]
fn flat_map_matches_tensorflow() {
    for case in fixtures()["flat_map"].as_array().unwrap() {
        let l = lengths(case);
        let ds = Dataset::range(l.len() as u64).flat_map("open", opener(l));
        assert_eq!(run(&ds).unwrap(), expected(case), "{case}");
    }
}

#[test]
fn as_completed_mode_yields_the_same_multiset() {
    for case in fixtures()["interleave"].as_array().unwrap() {
        let mut got = run(&build(case, Some(Fixed(4)), false)).unwrap();
        let mut want = expected(case);
        got.sort();
        want.sort();
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn save_restore_continue_equals_uninterrupted() {
    let fx = fixtures();
    for case in fx["interleave"].as_array().unwrap().iter().step_by(3) {
        let want = expected(case);
        for par in [None, Some(Fixed(3))] {
            let ds = build(case, par, true);
            for k in [0, 1, want.len() / 2, want.len()] {
                assert_eq!(
                    save_restore_run(&ds, k).unwrap(),
                    want,
                    "{case} k={k} par={par:?}"
                );
            }
        }
    }
    let ds = Dataset::range(3).flat_map("open", opener(vec![2, 0, 3]));
    assert_eq!(save_restore_run(&ds, 2).unwrap(), run(&ds).unwrap());
}

#[test]
fn empty_and_one_element_inputs() {
    for par in [None, Some(Fixed(2))] {
        let empty = Dataset::range(0)
            .interleave("open", opener(vec![]), 3, 2, par, true)
            .unwrap();
        assert!(run(&empty).unwrap().is_empty());
        let one = Dataset::range(1)
            .interleave("open", opener(vec![1]), 3, 2, par, true)
            .unwrap();
        assert_eq!(run(&one).unwrap(), vec![0]);
    }
    assert!(Dataset::range(1)
        .interleave("open", opener(vec![1]), 0, 1, None, true)
        .is_err());
}

#[test]
fn opener_errors_reach_the_consumer() {
    let f = interleave_fn(|_e, ctx| {
        Err(stokehold_core::Error::invalid(format!(
            "cannot open input {}",
            ctx.index
        )))
    });
    let ds = Dataset::range(3)
        .interleave("open", f, 2, 1, Some(Fixed(2)), true)
        .unwrap();
    let err = run(&ds).unwrap_err().to_string();
    assert!(err.contains("cannot open input 0"), "{err}");
}

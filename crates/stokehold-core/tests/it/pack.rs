//! pack against the rows Grain's FirstFitPackIterDataset / BestFitPackIterDataset emit
//! (testdata/pack, `shuffle_bins=False`): the same rows in the same order, value by value,
//! segment ids and positions included; and concat-then-split against Grain's
//! ConcatThenSplitIterDataset (testdata/pack/grain_cts.json, `make_cts_fixture.py`).

use serde_json::Value as Json;
use stokehold_core::ops::pack::{PackMode, PackOptions};
use stokehold_core::{stack_examples, Dataset, Example, Tensor};

fn fixtures() -> Json {
    fixture("grain_pack.json")
}

fn fixture(name: &str) -> Json {
    let path = format!("{}/../../testdata/pack/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every row of `got` equals Grain's `want`, feature by feature.
fn assert_rows(got: &[Example], want: &Json, what: &str) {
    let want = want.as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (row, w)) in got.iter().zip(want).enumerate() {
        let w = w.as_object().unwrap();
        let mut names = row.names();
        names.sort_unstable();
        let mut want_names: Vec<&str> = w.keys().map(String::as_str).collect();
        want_names.sort_unstable();
        assert_eq!(names, want_names, "{what}");
        for (name, values) in w {
            let t = row.tensor("t", name).unwrap();
            let v: Vec<i64> = t
                .to_vec::<i32>()
                .unwrap()
                .into_iter()
                .map(i64::from)
                .collect();
            assert_eq!(v, ints(values), "{what}: row {i}: {name}");
        }
    }
}

#[test]
fn concat_then_split_rows_match_grain_value_by_value() {
    let fx = fixture("grain_cts.json");
    let cases = fx["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 5);
    for case in cases {
        let lengths: Vec<(String, usize)> = case["lengths"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap() as usize))
            .collect();
        let meta_features: Vec<String> = case["meta"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap().to_string())
            .collect();
        let ds = input(&ints(&case["inputs"]), &ints(&case["targets"]))
            .pack(PackOptions {
                lengths,
                num_packing_bins: 1,
                mode: PackMode::ConcatThenSplit,
                meta_features,
                shuffle_bins: false,
                seed: 0,
                cu_seqlens: false,
            })
            .unwrap();
        let got = ds.iter(0).unwrap().collect_all().unwrap();
        let what = format!(
            "concat_then_split {} meta {}",
            case["lengths"], case["meta"]
        );
        assert_rows(&got, &case["rows"], &what);
        stokehold_core::testing::check_resume_at_every_cut("pack", &ds);
    }
}

fn ints(v: &Json) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// Element x: inputs = x * 100 + k, targets = x * 100 + 50 + k (int32), as in the script.
fn input(inputs: &[i64], targets: &[i64]) -> Dataset {
    let elements: Vec<Example> = inputs
        .iter()
        .zip(targets)
        .enumerate()
        .map(|(x, (&a, &b))| {
            let x = x as i32;
            let va: Vec<i32> = (0..a as i32).map(|k| x * 100 + k).collect();
            let vb: Vec<i32> = (0..b as i32).map(|k| x * 100 + 50 + k).collect();
            Example::new()
                .with("inputs", Tensor::from_vec(vec![a as usize], va).unwrap())
                .with("targets", Tensor::from_vec(vec![b as usize], vb).unwrap())
        })
        .collect();
    Dataset::from_columns(stack_examples("t", &elements).unwrap()).unwrap()
}

#[test]
fn rows_match_grain_value_by_value() {
    let fx = fixtures();
    let cases = fx["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    for case in cases {
        let lengths: Vec<(String, usize)> = case["lengths"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap() as usize))
            .collect();
        let mode = match case["mode"].as_str().unwrap() {
            "first_fit" => PackMode::FirstFit,
            _ => PackMode::BestFit,
        };
        let ds = input(&ints(&case["inputs"]), &ints(&case["targets"]))
            .pack(PackOptions {
                lengths,
                num_packing_bins: case["bins"].as_u64().unwrap() as usize,
                mode,
                meta_features: vec![],
                shuffle_bins: false,
                seed: 0,
                cu_seqlens: false,
            })
            .unwrap();
        let got = ds.iter(0).unwrap().collect_all().unwrap();
        let what = format!("{} {} bins={}", case["mode"], case["lengths"], case["bins"]);
        assert_rows(&got, &case["rows"], &what);
    }
}

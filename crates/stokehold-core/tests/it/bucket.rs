//! bucket_by_sequence_length against the batches TensorFlow produces (testdata/bucket): the same
//! ids in the same batches in the same order, and the same padded values.

use serde_json::Value as Json;
use stokehold_core::ops::bucket::{BucketOptions, ElementLength};
use stokehold_core::{stack_examples, Dataset, Example, PadValue, Tensor};

fn fixtures() -> Json {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/bucket/tf_bucket.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ints(v: &Json) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// Element x: {"id": x, "seq": [x * 100 + k for k < lengths[x]]}, as in the fixture script.
fn input(lengths: &[i64]) -> Dataset {
    let elements: Vec<Example> = lengths
        .iter()
        .enumerate()
        .map(|(x, &n)| {
            let v: Vec<i64> = (0..n).map(|k| x as i64 * 100 + k).collect();
            Example::new()
                .with("id", Tensor::scalar(x as i64))
                .with("seq", Tensor::from_vec(vec![n as usize], v).unwrap())
        })
        .collect();
    if elements.is_empty() {
        let cols = Example::new()
            .with("id", Tensor::from_vec(vec![0], Vec::<i64>::new()).unwrap())
            .with(
                "seq",
                Tensor::from_vec(vec![0, 0], Vec::<i64>::new()).unwrap(),
            );
        return Dataset::from_columns(cols).unwrap();
    }
    Dataset::from_columns(stack_examples("t", &elements).unwrap()).unwrap()
}

#[test]
fn batches_match_tensorflow_value_by_value() {
    let fx = fixtures();
    let cases = fx["cases"].as_array().unwrap();
    assert!(cases.len() >= 9);
    for case in cases {
        let opts = BucketOptions {
            boundaries: ints(&case["boundaries"]),
            batch_sizes: ints(&case["batch_sizes"])
                .iter()
                .map(|&b| b as usize)
                .collect(),
            default_value: None,
            padding_values: match case.get("padding_values") {
                Some(v) => [("seq".to_string(), PadValue::Float(v.as_f64().unwrap()))].into(),
                None => Default::default(),
            },
            pad_to_bucket_boundary: case.get("pad_to_bucket_boundary") == Some(&Json::Bool(true)),
            no_padding: case.get("no_padding") == Some(&Json::Bool(true)),
            drop_remainder: case.get("drop_remainder") == Some(&Json::Bool(true)),
            ..Default::default()
        };
        let length = ElementLength::Feature {
            name: "seq".into(),
            axis: 0,
        };
        let ds = input(&ints(&case["lengths"]))
            .bucket_by_sequence_length(length, opts)
            .unwrap();
        let got = ds.iter(0).unwrap().collect_all().unwrap();
        let want = case["batches"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{case}");
        for (b, w) in got.iter().zip(want) {
            assert_eq!(
                b.tensor("t", "id").unwrap().to_vec::<i64>().unwrap(),
                ints(&w["ids"]),
                "{case}"
            );
            let seq = b.tensor("t", "seq").unwrap();
            let rows: Vec<Vec<i64>> = w["seq"].as_array().unwrap().iter().map(ints).collect();
            let width = rows[0].len();
            assert_eq!(seq.shape(), &[rows.len(), width], "{case}");
            assert_eq!(seq.to_vec::<i64>().unwrap(), rows.concat(), "{case}");
        }
    }
}

//! Example parsing on arbitrary bytes: the fast batch parser and prost never panic, and when both
//! accept a record they read the same values for every feature.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stokehold_core::{DType, Value};
use stokehold_io::tfrecord::example::convert::{decode_proto, feature_summary, feature_tensor};
use stokehold_io::tfrecord::{ParseFeature as FeatureSpec, ParseSpec, Parser};

fuzz_target!(|data: &[u8]| {
    // A fixed spec of every kind: must not panic whatever the bytes.
    let fixed = ParseSpec::new()
        .with("a", FeatureSpec::fixed(vec![2], DType::I64))
        .and_then(|s| s.with("b", FeatureSpec::fixed(vec![], DType::Bytes)))
        .and_then(|s| s.with("c", FeatureSpec::var(DType::F32)))
        .expect("valid spec");
    let _ = Parser::new(fixed).parse_batch(&[data, data]);

    let Ok(p) = decode_proto(data) else { return };
    let Some(features) = p.features else { return };
    let mut spec = ParseSpec::new();
    for (name, f) in &features.feature {
        let dtype = feature_summary(f).0.unwrap_or(DType::F32);
        spec.add(name, FeatureSpec::var(dtype)).expect("distinct names");
    }
    let Ok(parsed) = Parser::new(spec).parse_batch(&[data]) else { return };
    for (name, f) in &features.feature {
        let Some(Value::Ragged(col)) = parsed.get(name) else { panic!("no column {name:?}") };
        let got = col.row(0).expect("one row");
        let want = feature_tensor(f).expect("tensor");
        if !(got.is_empty() && want.is_empty()) {
            assert_eq!(got.data(), want.data(), "feature {name:?}");
            assert_eq!(got.offsets(), want.offsets(), "feature {name:?}");
        }
    }
});

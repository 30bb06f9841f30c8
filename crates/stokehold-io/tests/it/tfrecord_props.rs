//! Property tests: framing write -> read, Example encode -> decode, and the fast batch parser
//! agreeing with prost on any Example.

use proptest::prelude::*;
use stokehold_core::{DType, Example, Tensor, Value};
use stokehold_io::tfrecord::example::proto;
use stokehold_io::tfrecord::*;

fn arb_records() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..20)
}

fn arb_compression() -> impl Strategy<Value = Compression> {
    prop_oneof![
        Just(Compression::None),
        Just(Compression::Gzip),
        Just(Compression::Zlib)
    ]
}

fn arb_feature() -> impl Strategy<Value = proto::Feature> {
    use proto::Kind;
    let kind = prop_oneof![
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 0..5)
            .prop_map(|value| Kind::BytesList(proto::BytesList { value })),
        prop::collection::vec(any::<f32>(), 0..8)
            .prop_map(|value| Kind::FloatList(proto::FloatList { value })),
        prop::collection::vec(any::<i64>(), 0..8)
            .prop_map(|value| Kind::Int64List(proto::Int64List { value })),
    ];
    prop::option::weighted(0.9, kind).prop_map(|kind| proto::Feature { kind })
}

fn arb_example() -> impl Strategy<Value = proto::Example> {
    prop::collection::btree_map("[a-z]{1,6}", arb_feature(), 0..6).prop_map(|feature| {
        proto::Example {
            features: Some(proto::Features { feature }),
        }
    })
}

fn bits(t: &Tensor) -> Vec<u8> {
    t.data().to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn framing_round_trip(recs in arb_records(), comp in arb_compression()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.tfrecord");
        let mut w = RecordWriter::create(&path, comp).unwrap();
        for r in &recs {
            w.write(r).unwrap();
        }
        w.finish().unwrap();
        let mut r = RecordReader::open(&path, ReadOptions { compression: comp, ..Default::default() }).unwrap();
        let mut got = Vec::new();
        while let Some((_, d)) = r.next_record().unwrap() {
            got.push(d.to_vec());
        }
        prop_assert_eq!(got, recs);
    }

    #[test]
    fn example_encode_decode_round_trip(
        ints in prop::collection::vec(any::<i64>(), 0..10),
        floats in prop::collection::vec(any::<f32>(), 0..10),
        strs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..30), 0..5),
    ) {
        let e = Example::new()
            .with("a", Tensor::from_vec(vec![ints.len()], ints.clone()).unwrap())
            .with("b", Tensor::from_vec(vec![floats.len()], floats.clone()).unwrap())
            .with("c", Tensor::strings(&strs));
        let d = decode_example(&encode_example(&e).unwrap()).unwrap();
        prop_assert_eq!(d.tensor("t", "a").unwrap().to_vec::<i64>().unwrap(), ints);
        prop_assert_eq!(bits(d.tensor("t", "b").unwrap()), bits(e.tensor("t", "b").unwrap()));
        prop_assert_eq!(d.tensor("t", "c").unwrap(), e.tensor("t", "c").unwrap());
    }

    /// The wire walker of the batch parser and prost read the same values out of any Example.
    #[test]
    fn batch_parser_agrees_with_prost(exs in prop::collection::vec(arb_example(), 1..6)) {
        let recs: Vec<Vec<u8>> = exs.iter().map(prost::Message::encode_to_vec).collect();
        let mut names: Vec<(String, Option<DType>)> = Vec::new();
        for e in &exs {
            for (n, f) in &e.features.as_ref().unwrap().feature {
                let (d, _) = example::convert::feature_summary(f);
                match names.iter_mut().find(|(m, _)| m == n) {
                    None => names.push((n.clone(), d)),
                    Some((_, seen)) if seen.is_none() => *seen = d,
                    Some(_) => {}
                }
            }
        }
        // One var-len spec per name, with the first list kind seen for it (a feature without a
        // list reads as no values of any kind). The parse fails exactly when a name has two kinds.
        let names: Vec<(String, DType)> =
            names.into_iter().map(|(n, d)| (n, d.unwrap_or(DType::F32))).collect();
        let mut spec = ParseSpec::new();
        for (n, d) in &names {
            spec.add(n, ParseFeature::var(*d)).unwrap();
        }
        let slices: Vec<&[u8]> = recs.iter().map(|r| &r[..]).collect();
        let parsed = Parser::new(spec).parse_batch(&slices);
        let consistent = names.iter().all(|(n, d)| exs.iter().all(|e| {
            let f = e.features.as_ref().unwrap().feature.get(n);
            f.is_none_or(|f| { let (fd, _) = example::convert::feature_summary(f); fd.is_none() || fd == Some(*d) })
        }));
        prop_assert_eq!(parsed.is_ok(), consistent);
        let Ok(parsed) = parsed else { return Ok(()) };
        for (n, _) in &names {
            let Some(Value::Ragged(col)) = parsed.get(n) else { panic!("ragged column") };
            for (i, e) in exs.iter().enumerate() {
                let row = col.row(i).unwrap();
                match e.features.as_ref().unwrap().feature.get(n) {
                    Some(f) => {
                        let want = example::convert::feature_tensor(f).unwrap();
                        if !want.is_empty() || !row.is_empty() {
                            prop_assert_eq!(bits(&row), bits(&want));
                            prop_assert_eq!(row.offsets(), want.offsets());
                        }
                    }
                    None => prop_assert_eq!(row.len(), 0),
                }
            }
        }
    }
}

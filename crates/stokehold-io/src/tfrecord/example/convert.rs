//! Conversions between `tf.train.Example` (via the prost messages) and the core [`Example`].
//!
//! Encoding flattens each dense feature: integer and bool dtypes become an Int64List, float32,
//! float16 and bfloat16 a FloatList, float64 its raw little-endian bytes (a FloatList would round
//! it), bytes a BytesList; a dtype or rank TensorFlow would not give back is recorded in side
//! features ([`super::layout`]). Decoding without a spec gives each feature in its recorded dtype
//! and shape, else as a 1-D tensor of its list's dtype (int64, float32 or bytes), in name order
//! (the proto map has no order).

use prost::Message;
use stokehold_core::cast::cast;
use stokehold_core::{DType, Error, Example, Result, Tensor, Value};

use super::layout;
use super::proto::{self, BytesList, Feature, FloatList, Int64List, Kind};

/// Serializes a core example (dense features only) as a `tf.train.Example`.
pub fn encode_example(e: &Example) -> Result<Vec<u8>> {
    Ok(to_proto(e)?.encode_to_vec())
}

/// The prost message for a core example.
pub fn to_proto(e: &Example) -> Result<proto::Example> {
    let mut feature = std::collections::BTreeMap::new();
    for (name, v) in e.iter() {
        let Value::Tensor(t) = v else {
            return Err(Error::schema(
                "encode_example",
                format!("feature {name:?} is ragged; a tf.train.Example holds one example"),
            ));
        };
        feature.insert(name.to_string(), tensor_feature(name, t)?);
        layout::insert_side_features(&mut feature, &|n| e.get(n).is_some(), name, t)?;
    }
    Ok(proto::Example {
        features: Some(proto::Features { feature }),
    })
}

fn tensor_feature(name: &str, t: &Tensor) -> Result<Feature> {
    let kind = match t.dtype() {
        DType::Bytes => Kind::BytesList(BytesList {
            value: (0..t.len())
                .map(|i| t.string(i).unwrap_or(b"").to_vec())
                .collect(),
        }),
        DType::F32 => Kind::FloatList(FloatList {
            value: t.to_vec::<f32>()?,
        }),
        // Raw bytes, recorded as float64 (`tf.io.decode_raw(x, tf.float64)`): exact.
        DType::F64 => Kind::BytesList(BytesList {
            value: vec![t.data().to_vec()],
        }),
        // Exact: every float16 and bfloat16 is a float32.
        DType::F16 | DType::BF16 => Kind::FloatList(FloatList {
            value: cast(t, DType::F32)?.to_vec::<f32>()?,
        }),
        DType::I64 => Kind::Int64List(Int64List {
            value: t.to_vec::<i64>()?,
        }),
        DType::U64 => {
            // Bit-preserving: TensorFlow has no unsigned list; u64 round-trips through i64 bits.
            let v = t.to_vec::<u64>()?.into_iter().map(|x| x as i64).collect();
            Kind::Int64List(Int64List { value: v })
        }
        d => {
            let c = cast(t, DType::I64).map_err(|e| {
                Error::schema("encode_example", format!("feature {name:?} ({d}): {e}"))
            })?;
            Kind::Int64List(Int64List {
                value: c.to_vec::<i64>()?,
            })
        }
    };
    Ok(Feature { kind: Some(kind) })
}

/// Decodes a serialized `tf.train.Example` with prost.
pub fn decode_proto(record: &[u8]) -> Result<proto::Example> {
    proto::Example::decode(record).map_err(|e| {
        Error::schema(
            "decode_example",
            format!("not a valid tf.train.Example: {e}"),
        )
    })
}

/// Decodes a serialized `tf.train.Example` into 1-D tensors (no spec), features sorted by name.
pub fn decode_example(record: &[u8]) -> Result<Example> {
    from_proto(&decode_proto(record)?)
}

/// The core example of a prost message, sorted by name: each feature in the dtype and shape its
/// side features record ([`layout`]; they are dropped), else a 1-D tensor. A feature with no
/// list becomes an empty float32 tensor (TensorFlow reads it as zero values).
pub fn from_proto(p: &proto::Example) -> Result<Example> {
    let mut out = Example::new();
    let Some(f) = &p.features else { return Ok(out) };
    // A BTreeMap: already in name order.
    for (name, feature) in &f.feature {
        if layout::is_side_feature(&f.feature, name) {
            continue;
        }
        let t = feature_tensor(feature)?;
        let dtype = layout::recorded_dtype(&f.feature, name);
        let shape = layout::recorded_shape(&f.feature, name);
        out.insert(name, layout::restore(name, t, dtype, shape)?);
    }
    Ok(out)
}

/// One feature as a 1-D tensor.
pub fn feature_tensor(f: &Feature) -> Result<Tensor> {
    Ok(match &f.kind {
        Some(Kind::BytesList(b)) => Tensor::strings(&b.value),
        Some(Kind::FloatList(l)) => Tensor::from_vec(vec![l.value.len()], l.value.clone())?,
        Some(Kind::Int64List(l)) => Tensor::from_vec(vec![l.value.len()], l.value.clone())?,
        None => Tensor::from_vec(vec![0], Vec::<f32>::new())?,
    })
}

/// What a feature holds: its wire dtype and number of values (for `inspect`).
pub fn feature_summary(f: &Feature) -> (Option<DType>, usize) {
    match &f.kind {
        Some(Kind::BytesList(b)) => (Some(DType::Bytes), b.value.len()),
        Some(Kind::FloatList(l)) => (Some(DType::F32), l.value.len()),
        Some(Kind::Int64List(l)) => (Some(DType::I64), l.value.len()),
        None => (None, 0),
    }
}

/// Decodes a serialized `tf.train.SequenceExample`: the context as in [`decode_example`], and
/// each feature list as a ragged value (one row per step, values of one kind), sorted by name.
pub fn decode_sequence_example(record: &[u8]) -> Result<(Example, Example)> {
    let p = proto::SequenceExample::decode(record).map_err(|e| {
        Error::schema(
            "decode_sequence_example",
            format!("not a valid tf.train.SequenceExample: {e}"),
        )
    })?;
    let context = from_proto(&proto::Example {
        features: p.context,
    })?;
    let mut lists = Example::new();
    let Some(fl) = p.feature_lists else {
        return Ok((context, lists));
    };
    let mut names: Vec<&String> = fl.feature_list.keys().collect();
    names.sort();
    for name in names {
        let steps: Vec<Tensor> = fl.feature_list[name]
            .feature
            .iter()
            .map(feature_tensor)
            .collect::<Result<_>>()?;
        let kinds: Vec<DType> = fl.feature_list[name]
            .feature
            .iter()
            .filter_map(|f| feature_summary(f).0)
            .collect();
        let dtype = kinds.first().copied().unwrap_or(DType::F32);
        if kinds.iter().any(|d| *d != dtype) {
            return Err(Error::schema(
                "decode_sequence_example",
                format!("feature list {name:?} mixes {dtype} and other kinds"),
            ));
        }
        // Steps without a list read as no values of the list's kind.
        let empty = match dtype {
            DType::Bytes => Tensor::strings::<&[u8]>(&[]),
            DType::I64 => Tensor::from_vec(vec![0], Vec::<i64>::new())?,
            _ => Tensor::from_vec(vec![0], Vec::<f32>::new())?,
        };
        let steps: Vec<Tensor> = steps
            .into_iter()
            .map(|t| if t.is_empty() { empty.clone() } else { t })
            .collect();
        let mut splits = vec![0u64];
        for t in &steps {
            splits.push(splits.last().unwrap() + t.len() as u64);
        }
        let values = if steps.is_empty() {
            empty
        } else {
            let refs: Vec<&Tensor> = steps.iter().collect();
            match stokehold_core::stack("decode_sequence_example", name, &refs)? {
                Value::Tensor(t) => t.reshape(vec![t.len()])?,
                Value::Ragged(r) => r.values().clone(),
            }
        };
        lists.insert(
            name,
            Value::Ragged(stokehold_core::Ragged::new(values, splits.into())?),
        );
    }
    Ok((context, lists))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_example_decodes_to_ragged_lists() {
        let f = |v: Vec<i64>| Feature {
            kind: Some(Kind::Int64List(Int64List { value: v })),
        };
        let tokens = proto::FeatureList {
            feature: vec![f(vec![1, 2]), f(vec![]), f(vec![3])],
        };
        let mut lists = std::collections::BTreeMap::new();
        lists.insert("tokens".to_string(), tokens);
        let mut ctx = std::collections::BTreeMap::new();
        ctx.insert("id".to_string(), f(vec![7]));
        let se = proto::SequenceExample {
            context: Some(proto::Features { feature: ctx }),
            feature_lists: Some(proto::FeatureLists {
                feature_list: lists,
            }),
        };
        let (c, l) = decode_sequence_example(&se.encode_to_vec()).unwrap();
        assert_eq!(
            c.tensor("t", "id").unwrap().to_vec::<i64>().unwrap(),
            vec![7]
        );
        let Some(Value::Ragged(r)) = l.get("tokens") else {
            panic!("ragged")
        };
        assert_eq!(&r.splits()[..], &[0, 2, 2, 3]);
        assert_eq!(r.values().to_vec::<i64>().unwrap(), vec![1, 2, 3]);
        assert!(decode_sequence_example(b"\x0a\x05garbage").is_err());
    }

    #[test]
    fn the_same_example_encodes_to_the_same_bytes_in_name_order() {
        // Features inserted out of name order: the encoding follows the names, every time (a
        // hash map's order differed from map to map, so two writes of one dataset differed).
        let names = [
            "zeta", "alpha", "mu", "beta", "omega", "kappa", "delta", "gamma",
        ];
        let mut e = Example::new();
        for (i, n) in names.iter().enumerate() {
            e.insert(
                n,
                Value::Tensor(Tensor::from_vec(vec![1], vec![i as i64]).unwrap()),
            );
        }
        let first = encode_example(&e).unwrap();
        for _ in 0..20 {
            assert_eq!(encode_example(&e).unwrap(), first);
        }
        let p = <proto::Example as prost::Message>::decode(&first[..]).unwrap();
        let got: Vec<&String> = p.features.as_ref().unwrap().feature.keys().collect();
        let mut sorted = names.to_vec();
        sorted.sort_unstable();
        assert_eq!(got, sorted);
        // The keys come back sorted whatever the container: check the bytes themselves.
        let at = |n: &str| {
            first
                .windows(n.len())
                .position(|w| w == n.as_bytes())
                .unwrap()
        };
        let offsets: Vec<usize> = sorted.iter().map(|n| at(n)).collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
    }
}

//! How a tensor that `tf.train.Example` cannot hold as it is (a dtype other than int64, float32
//! and bytes; a rank other than 1) is written so that it reads back the same, and how it is read
//! back: the rule of docs/FORMAT.md, "Dtypes and shapes in tf.train.Example".
//!
//! * The values go in the list TensorFlow reads most directly: integers and bool in an
//!   `Int64List` (uint64 by its bits), float16 and bfloat16 in a `FloatList` (exact: both are
//!   subsets of float32), float64 as its little-endian bytes, one `BytesList` value
//!   (`tf.io.decode_raw(x, tf.float64)`): a `FloatList` would round it.
//! * Feature `<name>:dtype` (one bytes value, the numpy name, e.g. `b"uint8"`) records a dtype
//!   other than int64, float32 and bytes; feature `<name>:shape` (an `Int64List`, `[]` for a
//!   scalar) records a rank other than 1. A rank-1 int64, float32 or bytes feature, what
//!   TensorFlow writes itself, gets neither.
//! * Reading without a spec ([`super::convert::decode_example`]) restores the dtype and shape and
//!   drops the side features; a spec reads the values as before and ignores them.
//!
//! ```
//! use stokehold_core::{Example, Tensor};
//! use stokehold_io::tfrecord::{decode_example, encode_example};
//! let e = Example::new()
//!     .with("label", Tensor::scalar(3i64))
//!     .with("pixels", Tensor::from_vec(vec![2, 2], vec![0u8, 1, 254, 255]).unwrap());
//! let back = decode_example(&encode_example(&e).unwrap()).unwrap();
//! assert_eq!(back, e);
//! ```

use std::collections::BTreeMap;

use stokehold_core::cast::cast;
use stokehold_core::{DType, Error, Result, Tensor};

use super::proto::{BytesList, Feature, Int64List, Kind};

/// Suffix of the feature recording a tensor's dtype.
pub const DTYPE_SUFFIX: &str = ":dtype";
/// Suffix of the feature recording a tensor's shape.
pub const SHAPE_SUFFIX: &str = ":shape";

const OP: &str = "encode_example";

/// Whether `dtype` is one `tf.train.Example` holds as it is.
fn native(dtype: DType) -> bool {
    matches!(dtype, DType::I64 | DType::F32 | DType::Bytes)
}

/// The side features of tensor `t` of feature `name` (none for a rank-1 int64, float32 or bytes
/// tensor).
pub fn side_features(name: &str, t: &Tensor) -> Vec<(String, Feature)> {
    let mut out = Vec::new();
    if !native(t.dtype()) {
        let kind = Kind::BytesList(BytesList {
            value: vec![t.dtype().name().as_bytes().to_vec()],
        });
        out.push((
            format!("{name}{DTYPE_SUFFIX}"),
            Feature { kind: Some(kind) },
        ));
    }
    if t.shape().len() != 1 {
        let kind = Kind::Int64List(Int64List {
            value: t.shape().iter().map(|&d| d as i64).collect(),
        });
        out.push((
            format!("{name}{SHAPE_SUFFIX}"),
            Feature { kind: Some(kind) },
        ));
    }
    out
}

/// Inserts `name`'s side features into `features`, refusing a name the example already uses.
pub fn insert_side_features(
    features: &mut BTreeMap<String, Feature>,
    names: &dyn Fn(&str) -> bool,
    name: &str,
    t: &Tensor,
) -> Result<()> {
    for (side, f) in side_features(name, t) {
        if names(&side) {
            return Err(Error::schema(
                OP,
                format!(
                    "feature {name:?} ({} {:?}) records its dtype and shape in feature {side:?}, \
                     which the example already has: rename one of them",
                    t.dtype(),
                    t.shape()
                ),
            ));
        }
        features.insert(side, f);
    }
    Ok(())
}

/// The recorded dtype of `name`, when `features` has a valid `<name>:dtype` (one bytes value
/// naming a dtype); a feature of that name holding anything else is the user's own.
pub fn recorded_dtype(features: &BTreeMap<String, Feature>, name: &str) -> Option<DType> {
    match &features.get(&format!("{name}{DTYPE_SUFFIX}"))?.kind {
        Some(Kind::BytesList(b)) if b.value.len() == 1 => {
            std::str::from_utf8(&b.value[0]).ok()?.parse().ok()
        }
        _ => None,
    }
}

/// The recorded shape of `name`, when `features` has a valid `<name>:shape` (non-negative
/// int64s).
pub fn recorded_shape(features: &BTreeMap<String, Feature>, name: &str) -> Option<Vec<usize>> {
    match &features.get(&format!("{name}{SHAPE_SUFFIX}"))?.kind {
        Some(Kind::Int64List(l)) => l.value.iter().map(|&d| usize::try_from(d).ok()).collect(),
        _ => None,
    }
}

/// Whether `side` is a side feature of another feature of `features` that reading restores.
pub fn is_side_feature(features: &BTreeMap<String, Feature>, side: &str) -> bool {
    let base = |suffix: &str| {
        side.strip_suffix(suffix)
            .filter(|b| features.contains_key(*b))
    };
    base(DTYPE_SUFFIX).is_some_and(|b| recorded_dtype(features, b).is_some())
        || base(SHAPE_SUFFIX).is_some_and(|b| recorded_shape(features, b).is_some())
}

/// The values of a feature, flat as read (`t`), in the `dtype` and `shape` recorded beside them.
/// Values that do not fit the recorded dtype or shape are an error naming the feature.
pub fn restore(
    name: &str,
    t: Tensor,
    dtype: Option<DType>,
    shape: Option<Vec<usize>>,
) -> Result<Tensor> {
    let bad = |why: String| Error::schema("decode_example", format!("feature {name:?}: {why}"));
    let t = match dtype {
        None => t,
        Some(d) if d == t.dtype() => t,
        Some(d) if t.dtype() == DType::Bytes => {
            // Raw little-endian values (float64, or any fixed-size dtype): one bytes value.
            let size = d
                .size()
                .ok_or_else(|| bad(format!("recorded dtype {d} is not a fixed-size one")))?;
            let raw = match t.len() {
                0 => &[][..],
                1 => t.string(0).unwrap_or(b""),
                n => return Err(bad(format!("{n} bytes values, want one raw {d} buffer"))),
            };
            if raw.len() % size != 0 {
                let n = raw.len();
                return Err(bad(format!("{n} raw bytes are not whole {d} values")));
            }
            let raw = bytes::Bytes::copy_from_slice(raw);
            Tensor::new(d, vec![raw.len() / size], raw)?
        }
        Some(DType::U64) if t.dtype() == DType::I64 => {
            // The bits, as written.
            let v: Vec<u64> = t.to_vec::<i64>()?.into_iter().map(|x| x as u64).collect();
            Tensor::from_vec(vec![v.len()], v)?
        }
        Some(d) => {
            let back = cast(&t, d).map_err(|e| bad(e.to_string()))?;
            if cast(&back, t.dtype())?.data() != t.data() {
                return Err(bad(format!(
                    "its {} values do not all fit the recorded dtype {d}",
                    t.dtype()
                )));
            }
            back
        }
    };
    match shape {
        None => Ok(t),
        Some(s) if s.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) == Some(t.len()) => {
            t.reshape(s)
        }
        Some(s) => Err(bad(format!(
            "{} values do not fill the recorded shape {s:?}",
            t.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::convert::{decode_example, encode_example};
    use super::*;
    use stokehold_core::Example;

    fn every_dtype() -> Example {
        let mut e = Example::new();
        let ints =
            |d: DType, v: Vec<i64>| cast(&Tensor::from_vec(vec![v.len()], v).unwrap(), d).unwrap();
        for d in DType::ALL {
            let t = match d {
                DType::Bytes => Tensor::strings(&[b"a".as_slice(), b"", b"\xff"]),
                DType::F16 | DType::BF16 | DType::F32 | DType::F64 => cast(
                    &Tensor::from_vec(vec![4], vec![0.1f64, -0.0, 1e30, -2.5]).unwrap(),
                    d,
                )
                .unwrap(),
                DType::Bool => ints(d, vec![0, 1, 1, 0]),
                DType::U64 => Tensor::from_vec(vec![4], vec![0u64, 1, u64::MAX, 1 << 63]).unwrap(),
                DType::I64 => Tensor::from_vec(vec![4], vec![i64::MIN, -1, 0, i64::MAX]).unwrap(),
                _ => ints(d, vec![0, 1, 100, 127]),
            };
            let n = d.name();
            e.insert(
                &format!("{n}_scalar"),
                t.slice_rows(2, 3).unwrap().reshape(vec![]).unwrap(),
            );
            e.insert(
                &format!("{n}_2d"),
                t.reshape(vec![2, 2]).unwrap_or(t.clone()),
            );
            e.insert(&format!("{n}_empty"), t.slice_rows(0, 0).unwrap());
            e.insert(&format!("{n}_vec"), t);
        }
        e
    }

    #[test]
    fn every_dtype_and_rank_reads_back_the_same() {
        let e = every_dtype();
        let back = decode_example(&encode_example(&e).unwrap()).unwrap();
        for (name, v) in e.iter() {
            assert_eq!(back.get(name), Some(v), "{name}");
        }
        assert_eq!(
            back.len(),
            e.len(),
            "side features are dropped: {:?}",
            back.names()
        );
    }

    #[test]
    fn native_rank1_features_get_no_side_features() {
        let t = Tensor::from_vec(vec![3], vec![1i64, 2, 3]).unwrap();
        assert!(side_features("x", &t).is_empty());
        let s = side_features("x", &Tensor::scalar(1u8));
        let names: Vec<&str> = s.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["x:dtype", "x:shape"]);
    }

    #[test]
    fn a_taken_side_name_and_values_past_the_dtype_are_named_errors() {
        let e = Example::new()
            .with("x", Tensor::scalar(1u8))
            .with("x:dtype", Tensor::strings(&[b"mine"]));
        let err = encode_example(&e).unwrap_err().to_string();
        assert!(
            err.contains("\"x:dtype\"") && err.contains("rename"),
            "{err}"
        );
        let t = Tensor::from_vec(vec![1], vec![300i64]).unwrap();
        let err = restore("x", t, Some(DType::U8), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"x\"") && err.contains("uint8"), "{err}");
    }

    #[test]
    fn a_side_name_that_does_not_parse_is_the_users_feature() {
        let e = Example::new()
            .with("x", Tensor::from_vec(vec![1], vec![1i64]).unwrap())
            .with("x:dtype", Tensor::strings(&[b"not a dtype"]));
        let back = decode_example(&encode_example(&e).unwrap()).unwrap();
        assert_eq!(back, e);
    }
}

//! The record encoding: one [`Example`] as a flat run of 8-byte-aligned little-endian fields.
//!
//! ```text
//! record   := u32 feature_count, u32 0, feature*          (features in schema order)
//! feature  := u8 kind (0 tensor, 1 ragged), u8 dtype code, u8 ndim, u8 0, u32 0,
//!             u64 dims[ndim],                              (of the values tensor)
//!             [ragged] u64 nsplits, u64 splits[nsplits],
//!             [bytes dtype] u64 offsets[prod(dims) + 1],
//!             u64 data_len, data, zero padding to a multiple of 8
//! ```
//! Names live once in the manifest's schema, not in every record. Decoding slices tensors out of
//! the record's [`Bytes`] without copying; since every field is a multiple of 8 bytes and records
//! start 8-aligned, the data of every tensor is 8-aligned in the memory map.

use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::alloc::Filler;
use stokehold_core::{DType, Example, Ragged, Tensor, Value};

use super::format::{u32_at, u64_at, Kind, ShardFeature};

/// Appends the encoding of `e` to `out`; features must follow `schema` (names, kinds, dtypes).
pub fn encode(e: &Example, schema: &[ShardFeature], out: &mut Vec<u8>) -> Result<(), String> {
    if e.len() != schema.len() {
        return Err(format!(
            "has features {:?}, the schema has {:?}",
            e.names(),
            names(schema)
        ));
    }
    out.extend_from_slice(&(e.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    for ((name, value), spec) in e.iter().zip(schema) {
        let kind = match value {
            Value::Tensor(_) => Kind::Tensor,
            Value::Ragged(_) => Kind::Ragged,
        };
        if name != spec.name || value.dtype() != spec.dtype || kind != spec.kind {
            return Err(format!(
                "feature {name:?} ({:?} {}) does not match the schema's {:?} ({:?} {})",
                kind,
                value.dtype(),
                spec.name,
                spec.kind,
                spec.dtype
            ));
        }
        let (tensor, splits) = match value {
            Value::Tensor(t) => (t, None),
            Value::Ragged(r) => (r.values(), Some(r.splits())),
        };
        out.extend_from_slice(&[
            kind as u8,
            tensor.dtype().code(),
            tensor.shape().len() as u8,
            0,
        ]);
        out.extend_from_slice(&0u32.to_le_bytes());
        put_u64s(out, tensor.shape().iter().map(|d| *d as u64));
        if let Some(s) = splits {
            put_u64s(
                out,
                std::iter::once(s.len() as u64).chain(s.iter().copied()),
            );
        }
        if let Some(o) = tensor.offsets() {
            put_u64s(out, o.iter().copied());
        }
        out.extend_from_slice(&(tensor.data().len() as u64).to_le_bytes());
        out.extend_from_slice(tensor.data());
        out.resize(out.len().next_multiple_of(8), 0);
    }
    Ok(())
}

fn put_u64s(out: &mut Vec<u8>, it: impl Iterator<Item = u64>) {
    for v in it {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn names(schema: &[ShardFeature]) -> Vec<&str> {
    schema.iter().map(|s| s.name.as_str()).collect()
}

/// A bounds-checked reader over a record.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn need(&self, n: usize, what: &str) -> Result<(), String> {
        match self.at.checked_add(n) {
            Some(end) if end <= self.b.len() => Ok(()),
            _ => Err(format!(
                "{what} runs past the end of the record at byte {}",
                self.at
            )),
        }
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        self.need(8, what)?;
        self.at += 8;
        Ok(u64_at(self.b, self.at - 8))
    }

    /// `n` little-endian u64s, left in place.
    fn u64s(&mut self, n: u64, what: &str) -> Result<U64s<'a>, String> {
        let len = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(8))
            .ok_or("count overflows")?;
        self.need(len, what)?;
        self.at += len;
        Ok(U64s(&self.b[self.at - len..self.at]))
    }
}

/// Little-endian u64s inside a record.
#[derive(Clone, Copy, PartialEq, Eq)]
struct U64s<'a>(&'a [u8]);

impl<'a> U64s<'a> {
    fn iter(self) -> impl Iterator<Item = u64> + 'a {
        self.0.chunks_exact(8).map(|c| u64_at(c, 0))
    }

    fn to_vec(self) -> Vec<u64> {
        self.iter().collect()
    }
}

/// One feature of a record, parsed in place without allocating: [`decode`] turns it into a
/// value, [`gather`] copies its data straight into a batch.
struct FeatureView<'a> {
    kind: u8,
    dtype: DType,
    dims: U64s<'a>,
    splits: Option<U64s<'a>>,
    offsets: Option<U64s<'a>>,
    /// Where the data lies in the record.
    data: std::ops::Range<usize>,
}

impl FeatureView<'_> {
    fn shape(&self) -> Vec<usize> {
        self.dims.iter().map(|d| d as usize).collect()
    }
}

/// Parses a record of `names.len()` features, calling `f(feature number, view)` for each in
/// order. Every length is checked against the record; nothing is copied.
fn parse<'a>(
    rec: &'a [u8],
    names: &[Arc<str>],
    mut f: impl FnMut(usize, FeatureView<'a>) -> Result<(), String>,
) -> Result<(), String> {
    let mut c = Cursor { b: rec, at: 0 };
    c.need(8, "record header")?;
    let count = u32_at(rec, 0) as usize;
    c.at = 8;
    if count != names.len() {
        return Err(format!(
            "record has {count} features, the schema {}",
            names.len()
        ));
    }
    for (k, name) in names.iter().enumerate() {
        c.need(8, "feature header")?;
        let (kind, code, ndim) = (rec[c.at], rec[c.at + 1], rec[c.at + 2] as u64);
        c.at += 8;
        let dtype = DType::from_code(code).ok_or_else(|| format!("unknown dtype code {code}"))?;
        let dims = c.u64s(ndim, "shape")?;
        let splits = match kind {
            0 => None,
            1 => {
                let n = c.u64("splits count")?;
                Some(c.u64s(n, "row splits")?)
            }
            k => return Err(format!("feature {name:?}: unknown kind {k}")),
        };
        let elems = dims
            .iter()
            .try_fold(1usize, |a, d| a.checked_mul(usize::try_from(d).ok()?))
            .ok_or("shape overflows")?;
        let offsets = match dtype {
            DType::Bytes => {
                let n = (elems as u64).checked_add(1).ok_or("shape overflows")?;
                Some(c.u64s(n, "string offsets")?)
            }
            _ => None,
        };
        let len = c.u64("data length")? as usize;
        c.need(len, "tensor data")?;
        if let Some(size) = dtype.size() {
            if elems.checked_mul(size) != Some(len) {
                let shape: Vec<u64> = dims.to_vec();
                return Err(format!(
                    "feature {name:?}: {len} data bytes for {dtype}{shape:?}"
                ));
            }
        }
        let data = c.at..c.at + len;
        c.need(len.next_multiple_of(8), "padding")?;
        c.at += len.next_multiple_of(8);
        f(
            k,
            FeatureView {
                kind,
                dtype,
                dims,
                splits,
                offsets,
                data,
            },
        )?;
    }
    if c.at != rec.len() {
        return Err(format!("{} bytes after the last feature", rec.len() - c.at));
    }
    Ok(())
}

/// Decodes a record into an example named by `names`; tensors are views of `rec`.
pub fn decode(rec: &Bytes, names: &[Arc<str>]) -> Result<Example, String> {
    let mut out = Example::new();
    parse(rec, names, |k, v| {
        let name = &names[k];
        let bad = |e: stokehold_core::Error| format!("feature {name:?}: {e}");
        let data = rec.slice(v.data.clone());
        let tensor = match v.offsets {
            Some(o) => Tensor::strings_from_parts(v.shape(), data, o.to_vec().into()),
            None => Tensor::new(v.dtype, v.shape(), data),
        }
        .map_err(bad)?;
        let value = match v.splits {
            None => Value::Tensor(tensor),
            Some(s) => Value::Ragged(Ragged::new(tensor, s.to_vec().into()).map_err(bad)?),
        };
        out.insert(name, value);
        Ok(())
    })?;
    Ok(out)
}

/// Stacks records straight into one buffer per feature, as `batch` would stack their decoded
/// examples, without building the examples. `Ok(None)` when that needs more than copying:
/// ragged or string features, or a feature whose shape differs between the records (the
/// element path then stacks or reports the error). `Err` names the record (its position in
/// `records`) that does not parse.
pub fn gather(
    records: &[impl AsRef<[u8]>],
    names: &[Arc<str>],
) -> Result<Option<Example>, (usize, String)> {
    let Some(first) = records.first() else {
        return Ok(None);
    };
    // Per feature: dtype, the first record's dims, the output buffer.
    let mut cols: Vec<(DType, U64s, Filler)> = Vec::with_capacity(names.len());
    let mut simple = true;
    parse(first.as_ref(), names, |_, v| {
        simple &= v.kind == 0 && v.offsets.is_none();
        cols.push((v.dtype, v.dims, Filler::new(v.data.len() * records.len())));
        Ok(())
    })
    .map_err(|e| (0, e))?;
    if !simple {
        return Ok(None);
    }
    for (r, rec) in records.iter().enumerate() {
        let rec = rec.as_ref();
        parse(rec, names, |k, v| {
            let (dtype, dims, buf) = &mut cols[k];
            if v.kind != 0 || v.dtype != *dtype || v.dims != *dims {
                simple = false;
            } else {
                buf.push(&rec[v.data]);
            }
            Ok(())
        })
        .map_err(|e| (r, e))?;
        if !simple {
            return Ok(None);
        }
    }
    let mut out = Example::new();
    for (name, (dtype, dims, buf)) in names.iter().zip(cols) {
        let shape = std::iter::once(records.len())
            .chain(dims.iter().map(|d| d as usize))
            .collect();
        let t = Tensor::new(dtype, shape, Bytes::from(buf.into_vec()))
            .map_err(|e| (0, format!("feature {name:?}: {e}")))?;
        out.insert(name, Value::Tensor(t));
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::format::ShardFeature;

    fn spec_of(e: &Example) -> Vec<ShardFeature> {
        e.iter()
            .map(|(n, v)| ShardFeature {
                name: n.into(),
                dtype: v.dtype(),
                kind: if matches!(v, Value::Ragged(_)) {
                    Kind::Ragged
                } else {
                    Kind::Tensor
                },
                shape: None,
            })
            .collect()
    }

    #[test]
    fn round_trip_dense_ragged_strings_scalars() {
        let ragged = Ragged::new(
            Tensor::from_vec(vec![5, 2], (0..10).map(|x| x as f32).collect()).unwrap(),
            vec![0u64, 2, 2, 5].into(),
        )
        .unwrap();
        let e = Example::new()
            .with(
                "img",
                Tensor::from_vec(vec![2, 3], vec![1u8, 2, 3, 4, 5, 6]).unwrap(),
            )
            .with("label", Tensor::scalar(7i64))
            .with("text", Tensor::strings(&["héllo", "", "wörld"]))
            .with("tokens", ragged)
            .with("empty", Tensor::from_vec::<f64>(vec![0], vec![]).unwrap());
        let schema = spec_of(&e);
        let mut buf = Vec::new();
        encode(&e, &schema, &mut buf).unwrap();
        assert_eq!(buf.len() % 8, 0);
        let names: Vec<Arc<str>> = schema.iter().map(|s| s.name.as_str().into()).collect();
        let back = decode(&Bytes::from(buf), &names).unwrap();
        assert_eq!(back, e);
        let img = back.tensor("t", "img").unwrap();
        assert_eq!(
            img.data().as_ptr() as usize % 8,
            0,
            "data is 8-aligned in the record"
        );
    }

    fn encoded(examples: &[Example]) -> (Vec<Bytes>, Vec<Arc<str>>) {
        let schema = spec_of(&examples[0]);
        let records = examples
            .iter()
            .map(|e| {
                let mut buf = Vec::new();
                encode(e, &schema, &mut buf).unwrap();
                Bytes::from(buf)
            })
            .collect();
        (
            records,
            schema.iter().map(|s| s.name.as_str().into()).collect(),
        )
    }

    #[test]
    fn gather_copies_dense_records_into_the_stacked_batch() {
        let examples: Vec<Example> = (0..5i64)
            .map(|x| {
                Example::new().with("id", Tensor::scalar(x)).with(
                    "m",
                    Tensor::from_vec(vec![2, 2], vec![x as f64; 4]).unwrap(),
                )
            })
            .collect();
        let (records, names) = encoded(&examples);
        let got = gather(&records, &names)
            .unwrap()
            .expect("dense records gather");
        assert_eq!(
            got,
            stokehold_core::stack_examples("batch", &examples).unwrap()
        );
    }

    #[test]
    fn gather_declines_what_needs_more_than_copying_and_names_a_bad_record() {
        let strings: Vec<Example> = (0..3)
            .map(|x| Example::new().with("s", Tensor::strings(&[format!("{x}")])))
            .collect();
        let (records, names) = encoded(&strings);
        assert!(gather(&records, &names).unwrap().is_none(), "strings");
        let lengths: Vec<Example> = (1..4usize)
            .map(|n| Example::new().with("v", Tensor::from_vec(vec![n], vec![1u8; n]).unwrap()))
            .collect();
        let (records, names) = encoded(&lengths);
        assert!(gather(&records, &names).unwrap().is_none(), "shapes differ");
        let dense: Vec<Example> = (0..3i64)
            .map(|x| Example::new().with("id", Tensor::scalar(x)))
            .collect();
        let (mut records, names) = encoded(&dense);
        records[2] = records[2].slice(..records[2].len() - 8);
        assert_eq!(gather(&records, &names).unwrap_err().0, 2);
    }

    #[test]
    fn truncated_or_garbled_records_are_errors_not_panics() {
        let e = Example::new().with("x", Tensor::strings(&["abc", "de"]));
        let schema = spec_of(&e);
        let mut buf = Vec::new();
        encode(&e, &schema, &mut buf).unwrap();
        let names: Vec<Arc<str>> = vec!["x".into()];
        for cut in 0..buf.len() {
            assert!(
                decode(&Bytes::copy_from_slice(&buf[..cut]), &names).is_err(),
                "cut {cut}"
            );
        }
        for i in 0..buf.len() {
            let mut b = buf.clone();
            b[i] ^= 0xff;
            let _ = decode(&Bytes::from(b), &names); // must not panic
        }
    }
}

//! Examples (named features) and the values they hold.
//!
//! A feature's value is a dense [`Tensor`] or a [`Ragged`] column: rows of different lengths along
//! axis 0, stored as one contiguous values buffer plus row splits. The same two types describe a
//! single element, a batch, and a whole in-memory dataset (an arena), so batching is one copy of
//! each row into one buffer and indexing a cached dataset is a zero-copy slice.

use std::sync::Arc;

use bytes::Bytes;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use serde_json::Value as Json;

/// Rows of varying length along axis 0: row `i` is `values[splits[i]..splits[i+1]]`.
///
/// All rows share the dtype and the trailing dimensions of `values`.
#[derive(Clone, Debug, PartialEq)]
pub struct Ragged {
    values: Tensor,
    splits: Arc<[u64]>,
}

impl Ragged {
    /// Builds a ragged column, checking that `splits` starts at 0, never decreases and ends at the
    /// number of rows of `values`.
    pub fn new(values: Tensor, splits: Arc<[u64]>) -> Result<Self> {
        let rows = values.shape().first().copied().unwrap_or(0) as u64;
        let ok = !values.shape().is_empty()
            && splits.first() == Some(&0)
            && splits.last() == Some(&rows)
            && splits.windows(2).all(|w| w[0] <= w[1]);
        if !ok {
            return Err(Error::invalid(format!(
                "ragged splits must run from 0 to {rows} without decreasing"
            )));
        }
        Ok(Ragged { values, splits })
    }

    /// The concatenated rows.
    pub fn values(&self) -> &Tensor {
        &self.values
    }

    /// Row boundaries (length = rows + 1).
    pub fn splits(&self) -> &Arc<[u64]> {
        &self.splits
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.splits.len() - 1
    }

    /// Row `i` as a zero-copy tensor of shape `[len_i, ...]`.
    pub fn row(&self, i: usize) -> Result<Tensor> {
        if i >= self.rows() {
            return Err(out_of_range(i, self.rows()));
        }
        self.values
            .slice_rows(self.splits[i] as usize, self.splits[i + 1] as usize)
    }
}

fn out_of_range(i: usize, n: usize) -> Error {
    Error::OutOfRange {
        index: i as u64,
        len: n as u64,
        what: "column".into(),
    }
}

/// The value of one feature.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A dense tensor.
    Tensor(Tensor),
    /// A ragged column (only in batches and in-memory columns).
    Ragged(Ragged),
}

impl Value {
    /// The dtype of the (values) tensor.
    pub fn dtype(&self) -> DType {
        match self {
            Value::Tensor(t) => t.dtype(),
            Value::Ragged(r) => r.values.dtype(),
        }
    }

    /// Bytes of memory referred to.
    pub fn nbytes(&self) -> usize {
        match self {
            Value::Tensor(t) => t.nbytes(),
            Value::Ragged(r) => r.values.nbytes() + r.splits.len() * 8,
        }
    }

    /// The dense tensor, or a schema error naming `op` and `name`.
    pub fn as_tensor(&self, op: &str, name: &str) -> Result<&Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            Value::Ragged(_) => Err(Error::schema(op, format!("feature {name:?} is ragged"))),
        }
    }

    /// Its length as an element of a sequence ([`Tensor::length`]; a ragged value's rows).
    pub fn length(&self) -> usize {
        match self {
            Value::Tensor(t) => t.length(),
            Value::Ragged(r) => r.rows(),
        }
    }

    /// Number of rows (length of axis 0) when this value is seen as a column.
    pub fn rows(&self) -> Result<usize> {
        match self {
            Value::Tensor(t) => t
                .shape()
                .first()
                .copied()
                .ok_or_else(|| Error::invalid("a scalar has no rows")),
            Value::Ragged(r) => Ok(r.rows()),
        }
    }

    /// Row `i` of this value seen as a column: one element of a batch or of an arena.
    pub fn row(&self, i: usize) -> Result<Tensor> {
        match self {
            Value::Tensor(t) => match t.row_view(i) {
                Some(row) => Ok(row),
                None => Err(out_of_range(i, self.rows()?)),
            },
            Value::Ragged(r) => r.row(i),
        }
    }
}

impl Value {
    /// Rows `rows` of this column stacked into a batch, exactly as [`stack`] would stack
    /// `row(r)` for each `r` (dense when the rows agree in shape, ragged otherwise), but copied
    /// straight from the column into one buffer: no per-row tensors. A bytes column's strings
    /// are copied into one buffer the same way, their offsets rebased (per-row tensors, each with
    /// its own offsets, had made a batch of 64 short strings cost about 140 ns a string).
    pub fn gather_rows(&self, rows: &[usize]) -> Result<Option<Value>> {
        let n = self.rows()?;
        if let Some(&bad) = rows.iter().find(|&&r| r >= n) {
            return Err(out_of_range(bad, n));
        }
        let (values, ranges): (&Tensor, Vec<(usize, usize)>) = match self {
            Value::Tensor(t) => (t, rows.iter().map(|&r| (r, r + 1)).collect()),
            Value::Ragged(r) => (
                &r.values,
                rows.iter()
                    .map(|&i| (r.splits[i] as usize, r.splits[i + 1] as usize))
                    .collect(),
            ),
        };
        let total: usize = ranges.iter().map(|(a, b)| b - a).sum();
        let (data, offsets) = match values.offsets() {
            Some(off) => {
                let (data, offsets) = gather_strings(values, off, &ranges, total);
                (data, Some(offsets))
            }
            None => {
                let rb = values.row_bytes();
                let mut data = crate::alloc::Filler::new(total * rb);
                for &(a, b) in &ranges {
                    data.push(&values.data()[a * rb..b * rb]);
                }
                (data.into_vec(), None)
            }
        };
        let tensor = |shape: Vec<usize>| match offsets {
            Some(o) => Tensor::strings_from_parts(shape, Bytes::from(data), o.into()),
            None => Tensor::new(values.dtype(), shape, Bytes::from(data)),
        };
        let tail = &values.shape()[1..];
        let first_len = ranges[0].1 - ranges[0].0;
        let uniform = ranges.iter().all(|(a, b)| b - a == first_len);
        let mut shape = vec![rows.len()];
        if let Value::Ragged(_) = self {
            if !uniform {
                let mut vshape = vec![total];
                vshape.extend_from_slice(tail);
                let mut splits = Vec::with_capacity(rows.len() + 1);
                splits.push(0u64);
                for (a, b) in &ranges {
                    splits.push(splits.last().unwrap() + (b - a) as u64);
                }
                return Ok(Some(Value::Ragged(Ragged::new(
                    tensor(vshape)?,
                    splits.into(),
                )?)));
            }
            shape.push(first_len);
        }
        shape.extend_from_slice(tail);
        Ok(Some(Value::Tensor(tensor(shape)?)))
    }
}

/// The strings of rows `ranges` (of `values`, a bytes tensor with offsets `off`) in one buffer,
/// with their offsets from 0: `total` rows in all.
fn gather_strings(
    values: &Tensor,
    off: &[u64],
    ranges: &[(usize, usize)],
    total: usize,
) -> (Vec<u8>, Vec<u64>) {
    // Strings per row of `values` (its elements beyond axis 0).
    let per: usize = values.shape()[1..].iter().product();
    let span = |&(a, b): &(usize, usize)| (off[a * per] as usize, off[b * per] as usize);
    let bytes: usize = ranges
        .iter()
        .map(|r| {
            let (from, to) = span(r);
            to - from
        })
        .sum();
    let mut data = Vec::with_capacity(bytes);
    let mut offsets = Vec::with_capacity(total * per + 1);
    offsets.push(0u64);
    for r @ &(a, b) in ranges {
        let (from, to) = span(r);
        let shift = data.len() as u64;
        data.extend_from_slice(&values.data()[from..to]);
        offsets.extend(
            off[a * per + 1..=b * per]
                .iter()
                .map(|&o| o - from as u64 + shift),
        );
    }
    (data, offsets)
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Self {
        Value::Tensor(t)
    }
}

impl From<Ragged> for Value {
    fn from(r: Ragged) -> Self {
        Value::Ragged(r)
    }
}

/// A dataset element: named features in a fixed order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Example {
    features: Vec<(Arc<str>, Value)>,
}

impl Example {
    /// An empty example.
    pub fn new() -> Self {
        Example::default()
    }

    /// Builder-style insert.
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.insert(name, value);
        self
    }

    /// Sets feature `name`, replacing a previous value in place.
    pub fn insert(&mut self, name: &str, value: impl Into<Value>) {
        let value = value.into();
        match self.features.iter_mut().find(|(n, _)| &**n == name) {
            Some(slot) => slot.1 = value,
            None => self.features.push((name.into(), value)),
        }
    }

    /// [`Example::insert`] with a name already shared (one a binding keeps for names it meets
    /// again and again), so that the name is not copied into a new allocation.
    pub fn insert_shared(&mut self, name: Arc<str>, value: impl Into<Value>) {
        let value = value.into();
        match self.features.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.features.push((name, value)),
        }
    }

    /// Removes and returns feature `name`.
    pub fn remove(&mut self, name: &str) -> Option<Value> {
        let pos = self.features.iter().position(|(n, _)| &**n == name)?;
        Some(self.features.remove(pos).1)
    }

    /// The value of feature `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.features
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| v)
    }

    /// The dense tensor of feature `name`, or a schema error naming `op`.
    pub fn tensor(&self, op: &str, name: &str) -> Result<&Tensor> {
        self.get(name)
            .ok_or_else(|| {
                Error::schema(
                    op,
                    format!(
                        "no feature {name:?}; {}",
                        crate::suggest::names_present(name, &self.names())
                    ),
                )
            })?
            .as_tensor(op, name)
    }

    /// Feature names in order.
    pub fn names(&self) -> Vec<&str> {
        self.features.iter().map(|(n, _)| &**n).collect()
    }

    /// (name, value) pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.features.iter().map(|(n, v)| (&**n, v))
    }

    /// The features, taken out in order (no value cloned, so a buffer only this example held
    /// stays unique).
    pub fn into_features(self) -> Vec<(Arc<str>, Value)> {
        self.features
    }

    /// Number of features.
    pub fn len(&self) -> usize {
        self.features.len()
    }

    /// True when there are no features.
    pub fn is_empty(&self) -> bool {
        self.features.is_empty()
    }

    /// Bytes of memory referred to by all features.
    pub fn nbytes(&self) -> usize {
        self.features.iter().map(|(_, v)| v.nbytes()).sum()
    }

    /// Row `i` of every feature (the inverse of [`stack`]).
    pub fn row(&self, i: usize) -> Result<Example> {
        let features = self
            .features
            .iter()
            .map(|(n, v)| Ok((n.clone(), Value::Tensor(v.row(i)?))))
            .collect::<Result<_>>()?;
        Ok(Example { features })
    }
}

/// Stacks tensors of one feature into a column: a dense `[n, ...]` tensor when all shapes agree,
/// otherwise a [`Ragged`] column when only axis 0 differs. Anything else is a schema error that
/// names `op` and `name`. One allocation, one copy per row.
pub fn stack(op: &str, name: &str, items: &[&Tensor]) -> Result<Value> {
    let first = items
        .first()
        .ok_or_else(|| Error::invalid(format!("{op}: nothing to stack")))?;
    let dtype = first.dtype();
    if let Some(t) = items.iter().find(|t| t.dtype() != dtype) {
        return Err(Error::schema(
            op,
            format!("feature {name:?} mixes dtypes {dtype} and {}", t.dtype()),
        ));
    }
    // Element by element, not `==` on the slices: that calls memcmp once per item, which cost
    // more than copying a 1 KiB row (map + batch 256 over shards: 1.51 -> 1.78 M records/s,
    // `shard_read_bench DIR 1000000 1024 3`).
    let same =
        |a: &[usize], b: &[usize]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y);
    let uniform = items.iter().all(|t| same(t.shape(), first.shape()));
    if !uniform {
        let tail = first.shape().get(1..);
        let ragged_ok = tail.is_some() && items.iter().all(|t| t.shape().get(1..) == tail);
        if !ragged_ok {
            let shapes: Vec<_> = items.iter().take(4).map(|t| t.shape().to_vec()).collect();
            return Err(Error::schema(
                op,
                format!(
                    "feature {name:?} has shapes {shapes:?}... that differ beyond axis 0; \
                     use padded_batch"
                ),
            ));
        }
    }
    let values = concat_rows(items, uniform)?;
    if uniform {
        let mut shape = vec![items.len()];
        shape.extend_from_slice(first.shape());
        return Ok(Value::Tensor(values.reshape(shape)?));
    }
    let mut splits = Vec::with_capacity(items.len() + 1);
    splits.push(0u64);
    for t in items {
        splits.push(splits.last().unwrap() + t.shape()[0] as u64);
    }
    Ok(Value::Ragged(Ragged::new(values, splits.into())?))
}

/// Concatenates along axis 0 (or, for `flat`, treats every tensor as one row). Returns a tensor
/// whose shape is `[total_rows, ...]`, or `[n * prod]` flattened when `flat` (callers reshape).
fn concat_rows(items: &[&Tensor], flat: bool) -> Result<Tensor> {
    let first = items[0];
    let rows: usize = if flat {
        items.iter().map(|t| t.len()).sum()
    } else {
        items.iter().map(|t| t.shape()[0]).sum()
    };
    let mut shape = if flat {
        vec![rows]
    } else {
        first.shape().to_vec()
    };
    if !flat {
        shape[0] = rows;
    }
    if first.dtype() == DType::Bytes {
        let total: usize = items.iter().map(|t| t.data().len()).sum();
        let mut data = crate::alloc::large_vec(total);
        let mut offsets = Vec::with_capacity(shape.iter().product::<usize>() + 1);
        offsets.push(0u64);
        for t in items {
            let base = data.len() as u64;
            data.extend_from_slice(t.data());
            offsets.extend(
                t.offsets().expect("bytes tensor")[1..]
                    .iter()
                    .map(|o| o + base),
            );
        }
        return Tensor::strings_from_parts(shape, Bytes::from(data), offsets.into());
    }
    // One pre-sized buffer (on huge pages when large, `alloc::large_vec`), written once; large copies are split across threads
    // (`from_arrays` over a list of clips: the memory bus, not one core, is the limit).
    let parts: Vec<&[u8]> = items.iter().map(|t| &t.data()[..]).collect();
    let data = crate::exec::copy::concat(&parts);
    Tensor::new(first.dtype(), shape, Bytes::from(data))
}

/// [`stack_examples`] of `rows`, where `rows[k]` came from row `k` of the batch `source`
/// (a map over [`Example::row`] views): a dense feature whose every row is still the view of
/// `source`'s row (same dtype, shape and bytes in place, which a map that leaves the feature
/// alone keeps) is `source`'s column again, with no copy; the others are stacked.
pub fn restack(op: &str, source: &Example, rows: &[Example]) -> Result<Example> {
    stack_reusing(op, Some(source), rows)
}

/// Stacks each feature of `rows`, reusing `source`'s column where [`rows_in_place`] says so.
fn stack_reusing(op: &str, source: Option<&Example>, rows: &[Example]) -> Result<Example> {
    let first = rows
        .first()
        .ok_or_else(|| Error::invalid(format!("{op}: empty batch")))?;
    let mut out = Example::new();
    for (name, _) in first.iter() {
        if let Some(Value::Tensor(column)) = source.and_then(|s| s.get(name)) {
            if rows_in_place(column, name, rows) {
                out.insert(name, Value::Tensor(column.clone()));
                continue;
            }
        }
        let items = rows
            .iter()
            .map(|e| e.tensor(op, name).map_err(|_| missing(op, name, e)))
            .collect::<Result<Vec<_>>>()?;
        out.insert(name, stack(op, name, &items)?);
    }
    Ok(out)
}

/// True when feature `name` of every `rows[k]` is the view of row `k` of the dense `column`.
fn rows_in_place(column: &Tensor, name: &str, rows: &[Example]) -> bool {
    let (shape, data) = (column.shape(), column.data());
    if column.dtype() == DType::Bytes || shape.first() != Some(&rows.len()) {
        return false;
    }
    let row_bytes = data.len() / rows.len().max(1);
    rows.iter().enumerate().all(|(k, e)| match e.get(name) {
        Some(Value::Tensor(t)) => {
            t.dtype() == column.dtype()
                && t.shape() == &shape[1..]
                && t.data().len() == row_bytes
                && std::ptr::eq(t.data().as_ptr(), data[k * row_bytes..].as_ptr())
        }
        _ => false,
    })
}

fn missing(op: &str, name: &str, e: &Example) -> Error {
    if let Some(Value::Ragged(_)) = e.get(name) {
        return Error::schema(op, ragged_again(name));
    }
    Error::schema(
        op,
        format!(
            "feature {name:?} is missing: {}",
            crate::suggest::names_present(name, &e.names())
        ),
    )
}

/// Why a batch of already ragged batches is refused, and what to do instead (tf.data refuses it
/// too, without the advice).
fn ragged_again(name: &str) -> String {
    format!(
        "feature {name:?} is ragged (an earlier batch stacked rows of different lengths), and \
         ragged batches do not nest: pad the first batch (padded_batch) to batch again, or \
         rebatch(n) / unbatch() to change the batch size"
    )
}

/// Stacks each feature of `elements` (which must share feature names) into one batch example.
pub fn stack_examples(op: &str, elements: &[Example]) -> Result<Example> {
    stack_reusing(op, None, elements)
}

/// An example as a JSON value, whole (`{"name": tensor, ...}` in feature order; a tensor is
/// `{"dtype", "shape", "data"}` with its buffer in base64, plus `"offsets"` for bytes; a ragged
/// column `{"values": tensor, "splits"}`): for the rare state that has to carry elements
/// themselves (a batch half-built when Ctrl-C came, see `ops/batch.rs`).
pub(crate) fn example_to_json(e: &Example) -> Json {
    use base64::Engine;
    let tensor = |t: &Tensor| {
        let mut j = serde_json::json!({
            "dtype": t.dtype().name(),
            "shape": t.shape(),
            "data": base64::engine::general_purpose::STANDARD.encode(t.data()),
        });
        if let Some(o) = t.offsets() {
            j["offsets"] = serde_json::json!(&o[..]);
        }
        j
    };
    Json::Array(
        e.iter()
            .map(|(name, v)| {
                let value = match v {
                    Value::Tensor(t) => tensor(t),
                    Value::Ragged(r) => {
                        serde_json::json!({"values": tensor(r.values()), "splits": &r.splits()[..]})
                    }
                };
                serde_json::json!([name, value])
            })
            .collect(),
    )
}

/// The examples a state holds under `key` ([`example_to_json`] each; none when absent).
pub(crate) fn examples_from_state(state: &Json, key: &str) -> Result<Vec<Example>> {
    match state.get(key) {
        Some(Json::Array(items)) => items.iter().map(example_from_json).collect(),
        _ => Ok(Vec::new()),
    }
}

/// The example [`example_to_json`] made.
pub(crate) fn example_from_json(j: &Json) -> Result<Example> {
    use base64::Engine;
    let bad = |what: &str| Error::State(format!("a held element in the state: {what}"));
    let u64s = |j: &Json| -> Result<Vec<u64>> {
        serde_json::from_value(j.clone()).map_err(|e| bad(&e.to_string()))
    };
    let tensor = |j: &Json| -> Result<Tensor> {
        let dtype: DType = j["dtype"]
            .as_str()
            .ok_or_else(|| bad("no dtype"))?
            .parse()?;
        let shape: Vec<usize> =
            serde_json::from_value(j["shape"].clone()).map_err(|e| bad(&e.to_string()))?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(j["data"].as_str().ok_or_else(|| bad("no data"))?)
            .map_err(|e| bad(&e.to_string()))?;
        match j.get("offsets") {
            Some(o) => Tensor::strings_from_parts(shape, data.into(), u64s(o)?.into()),
            None => Tensor::new(dtype, shape, data.into()),
        }
    };
    let mut e = Example::new();
    for item in j.as_array().ok_or_else(|| bad("not a list"))? {
        let (Some(name), Some(value)) = (item[0].as_str(), item.get(1)) else {
            return Err(bad("not a [name, value] pair"));
        };
        let v = match value.get("splits") {
            Some(splits) => Value::Ragged(Ragged::new(
                tensor(&value["values"])?,
                u64s(splits)?.into(),
            )?),
            None => Value::Tensor(tensor(value)?),
        };
        e.insert(name, v);
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: Vec<i32>) -> Tensor {
        Tensor::from_vec(vec![v.len()], v).unwrap()
    }

    #[test]
    fn an_example_goes_through_json_and_back_unchanged() {
        let ragged = Ragged::new(
            Tensor::from_vec(vec![5, 2], (0..10).map(|v| v as f32).collect()).unwrap(),
            vec![0, 2, 2, 5].into(),
        )
        .unwrap();
        let e = Example::new()
            .with("scalar", Tensor::scalar(-7i64))
            .with(
                "half",
                Tensor::from_vec(vec![3], vec![half::f16::from_f32(1.5); 3]).unwrap(),
            )
            .with("names", Tensor::strings(&[b"a\0b".as_slice(), b"", b"xyz"]))
            .with(
                "empty",
                Tensor::from_vec(vec![0, 4], Vec::<u8>::new()).unwrap(),
            )
            .with("ragged", ragged);
        let j = example_to_json(&e);
        let back = example_from_json(&serde_json::from_str(&j.to_string()).unwrap()).unwrap();
        assert_eq!(back, e);
        assert!(example_from_json(&serde_json::json!([["x", {"dtype": "complex"}]])).is_err());
    }

    #[test]
    fn stack_uniform_is_dense() {
        let (a, b) = (t(vec![1, 2]), t(vec![3, 4]));
        let v = stack("batch", "x", &[&a, &b]).unwrap();
        let Value::Tensor(d) = &v else {
            panic!("dense expected")
        };
        assert_eq!(d.shape(), &[2, 2]);
        assert_eq!(v.row(1).unwrap(), b);
    }

    #[test]
    fn stack_ragged_rows_round_trip() {
        let (a, b, c) = (t(vec![1]), t(vec![2, 3, 4]), t(vec![]));
        let v = stack("batch", "x", &[&a, &b, &c]).unwrap();
        assert!(matches!(v, Value::Ragged(_)));
        assert_eq!(v.rows().unwrap(), 3);
        for (i, want) in [a, b, c].iter().enumerate() {
            assert_eq!(&v.row(i).unwrap(), want);
        }
    }

    #[test]
    fn stack_rejects_mixed_dtype_and_rank() {
        let a = t(vec![1]);
        let f = Tensor::from_vec(vec![1], vec![1.0f32]).unwrap();
        assert!(stack("batch", "x", &[&a, &f])
            .unwrap_err()
            .to_string()
            .contains("mixes"));
        let m = Tensor::from_vec(vec![1, 1], vec![1i32]).unwrap();
        assert!(stack("batch", "x", &[&a, &m])
            .unwrap_err()
            .to_string()
            .contains("padded_batch"));
    }

    #[test]
    fn stack_strings() {
        let (a, b) = (Tensor::strings(&["ab"]), Tensor::strings(&["c", "de"]));
        let v = stack("batch", "s", &[&a, &b]).unwrap();
        assert_eq!(v.row(1).unwrap().string(1), Some(&b"de"[..]));
    }
}

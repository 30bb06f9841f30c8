//! Parsing serialized `tf.train.Example`s into tensors: per batch (the fast order: batch the
//! serialized records, then parse each batch straight into its output buffers) or per element.
//!
//! ```
//! use stokehold_core::{DType, Tensor};
//! use stokehold_io::tfrecord::{encode_example, ParseFeature, ParseSpec, Parser};
//! let e = stokehold_core::Example::new()
//!     .with("label", Tensor::from_vec(vec![1], vec![7i64]).unwrap())
//!     .with("ids", Tensor::from_vec(vec![3], vec![1i64, 2, 3]).unwrap());
//! let rec = encode_example(&e).unwrap();
//! let spec = ParseSpec::new()
//!     .with("label", ParseFeature::fixed(vec![], DType::I64)).unwrap()
//!     .with("ids", ParseFeature::var(DType::I64)).unwrap();
//! let batch = Parser::new(spec).parse_batch(&[&rec[..], &rec[..]]).unwrap();
//! assert_eq!(batch.tensor("t", "label").unwrap().to_vec::<i64>().unwrap(), vec![7, 7]);
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::suggest::names_present;
use stokehold_core::{map_fn, DType, Error, Example, MapFn, Ragged, Result, Tensor, Value};

use super::spec::{ParseFeature, ParseSpec};
use super::wire::{append_values, scan_example, Slot, BYTES, FLOAT, INT64};

/// Name of the feature that holds a serialized record in elements of a TFRecord dataset.
pub const RECORD: &str = "record";

/// Specs with more features than this look names up in a hash map instead of comparing them.
const LINEAR_LOOKUP: usize = 12;

/// Parses serialized Examples with one spec. Cheap to clone.
#[derive(Clone)]
pub struct Parser {
    spec: Arc<ParseSpec>,
    names: Arc<HashMap<Vec<u8>, usize>>,
}

/// The output buffer of one feature over a batch.
struct Sink {
    data: Vec<u8>,
    /// Byte offsets of strings (bytes features).
    offsets: Vec<u64>,
    /// Row splits (var-len features), in values.
    splits: Vec<u64>,
    count: u64,
}

impl Parser {
    /// A parser for `spec`.
    pub fn new(spec: ParseSpec) -> Self {
        let names = spec
            .features()
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.as_bytes().to_vec(), i))
            .collect();
        Parser {
            spec: Arc::new(spec),
            names: Arc::new(names),
        }
    }

    /// The spec.
    pub fn spec(&self) -> &ParseSpec {
        &self.spec
    }

    /// Parses a batch: fixed-length features become `[n, *shape]` tensors, var-len features
    /// ragged columns (values + row splits).
    pub fn parse_batch(&self, records: &[&[u8]]) -> Result<Example> {
        let mut b = self.builder(records.len());
        for rec in records {
            b.push(rec)?;
        }
        b.finish()
    }

    /// A batch under construction: records are parsed as they are pushed, straight into the
    /// batch's buffers (sized for `capacity` records), so no record needs to outlive its push.
    pub fn builder(&self, capacity: usize) -> BatchBuilder<'_> {
        let feats = self.spec.features();
        BatchBuilder {
            parser: self,
            sinks: feats.iter().map(|(_, s)| Sink::new(s, capacity)).collect(),
            slots: vec![Slot::default(); feats.len()],
            rows: 0,
        }
    }

    fn lookup(&self, key: &[u8]) -> Option<usize> {
        let feats = self.spec.features();
        if feats.len() <= LINEAR_LOOKUP {
            feats.iter().position(|(n, _)| n.as_bytes() == key)
        } else {
            self.names.get(key).copied()
        }
    }

    /// Parses one record: fixed-length features get their `shape`, var-len features a 1-D tensor.
    pub fn parse_one(&self, record: &[u8]) -> Result<Example> {
        let batch = self.parse_batch(&[record])?;
        let mut out = Example::new();
        for (name, v) in batch.iter() {
            out.insert(name, v.row(0)?);
        }
        Ok(out)
    }

    /// A map function over batches whose feature `record` holds `[n]` serialized Examples: it
    /// replaces `record` by the parsed features and keeps the others. A scalar `record` (one
    /// record) is refused, naming both, rather than parsed into a batch of one.
    pub fn batch_fn(&self, record: &str) -> MapFn {
        self.parse_fn(record, Some(true))
    }

    /// A map function over single elements whose feature `record` holds one serialized Example
    /// (a scalar); a batch of records (`[n]`, even `[1]`) is refused, naming both.
    pub fn element_fn(&self, record: &str) -> MapFn {
        self.parse_fn(record, Some(false))
    }

    /// A map function that parses `record` as the input holds it: a scalar is one record
    /// (features get their spec's shape), a rank-1 feature a batch (`[n, *shape]`), as
    /// `tf.io.parse_single_example` / `tf.io.parse_example` would. `batched` (`Some`) insists
    /// on one of them: a mismatch is an error naming both, never a silent change of shape.
    pub fn parse_fn(&self, record: &str, batched: Option<bool>) -> MapFn {
        let (p, record) = (self.clone(), record.to_string());
        map_fn(move |mut e, ctx| {
            let t = take_records(&mut e, &record)?;
            let is_batch = match t.shape().len() {
                0 => false,
                1 => true,
                _ => {
                    return Err(Error::schema(
                        "parse_example",
                        format!(
                            "element {}: feature {record:?} has shape {:?}; it must hold one \
                             serialized Example (a scalar) or a batch of them (rank 1)",
                            ctx.index,
                            t.shape()
                        ),
                    ))
                }
            };
            if let Some(want) = batched.filter(|&b| b != is_batch) {
                return Err(batch_mismatch(&record, &t, want, ctx.index));
            }
            if !is_batch {
                return merge(e, p.parse_one(t.string(0).unwrap_or(b""))?);
            }
            let recs: Vec<&[u8]> = (0..t.len()).map(|i| t.string(i).unwrap_or(b"")).collect();
            merge(e, p.parse_batch(&recs)?)
        })
    }
}

/// `batched=` says one thing and feature `record` another: both named, and what to pass.
fn batch_mismatch(record: &str, t: &Tensor, batched: bool, index: u64) -> Error {
    let holds = if batched {
        "one record (a scalar)".to_string()
    } else {
        format!("a batch of {} records (shape {:?})", t.len(), t.shape())
    };
    let wants = if batched {
        "batched=True wants a batch (rank 1: after .batch(n))"
    } else {
        "batched=False wants one record per element (a scalar)"
    };
    Error::schema(
        "parse_example",
        format!(
            "element {index}: feature {record:?} holds {holds}, but {wants}; leave batched out \
             (None) to parse what the input holds"
        ),
    )
}

/// A batch being parsed; see [`Parser::builder`].
pub struct BatchBuilder<'p> {
    parser: &'p Parser,
    sinks: Vec<Sink>,
    slots: Vec<Slot>,
    rows: usize,
}

impl BatchBuilder<'_> {
    /// Parses one serialized Example into the batch. On error the batch is unusable (its
    /// buffers may hold part of the record).
    pub fn push(&mut self, rec: &[u8]) -> Result<()> {
        let r = self.rows;
        let p = self.parser;
        scan_example(rec, &mut self.slots, &|k| p.lookup(k)).map_err(|w| {
            let why = format!("{} at byte {}", w.what, w.at);
            Error::schema(
                "parse_example",
                format!("record {r} is not a valid tf.train.Example: {why}"),
            )
        })?;
        let feats = p.spec.features();
        for ((name, spec), (slot, sink)) in feats.iter().zip(self.slots.iter().zip(&mut self.sinks))
        {
            sink.push(rec, slot, spec).map_err(|why| {
                // A missing feature is most often a typo in the spec: say what the record has.
                let present = if slot.present {
                    String::new()
                } else {
                    format!("; {}", names_present(name, &record_features(rec)))
                };
                Error::schema(
                    "parse_example",
                    format!("record {r}, feature {name:?}: {why}{present}"),
                )
            })?;
        }
        self.rows += 1;
        Ok(())
    }

    /// Records pushed so far.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// True before the first push.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The batch: `[n, *shape]` tensors and ragged columns.
    pub fn finish(self) -> Result<Example> {
        let mut out = Example::new();
        for ((name, spec), sink) in self.parser.spec.features().iter().zip(self.sinks) {
            out.insert(name, sink.finish(spec, self.rows)?);
        }
        Ok(out)
    }
}

/// The feature names a serialized Example holds (an error path: it scans the record again).
fn record_features(rec: &[u8]) -> Vec<String> {
    let names = std::cell::RefCell::new(Vec::new());
    let _ = scan_example(rec, &mut [], &|k| {
        names
            .borrow_mut()
            .push(String::from_utf8_lossy(k).into_owned());
        None
    });
    let mut names = names.into_inner();
    names.sort_unstable();
    names.dedup();
    names
}

fn take_records(e: &mut Example, record: &str) -> Result<Tensor> {
    let names = e.names().iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match e.remove(record) {
        Some(Value::Tensor(t)) if t.dtype() == DType::Bytes => Ok(t),
        _ => Err(Error::schema(
            "parse_example",
            format!(
                "needs a bytes feature {record:?} of serialized Examples; features are {names:?}"
            ),
        )),
    }
}

fn merge(mut rest: Example, parsed: Example) -> Result<Example> {
    for (n, v) in parsed.iter() {
        rest.insert(n, v.clone());
    }
    Ok(rest)
}

fn kind_of(dtype: DType) -> u8 {
    match dtype {
        DType::Bytes => BYTES,
        DType::F32 => FLOAT,
        _ => INT64,
    }
}

fn kind_name(kind: u8) -> &'static str {
    match kind {
        BYTES => "bytes_list",
        FLOAT => "float_list",
        _ => "int64_list",
    }
}

impl Sink {
    fn new(spec: &ParseFeature, rows: usize) -> Self {
        // What is reserved up front is a hint, sized by an argument (the batch size): capped, so
        // a huge batch size grows its buffers as records come instead of reserving (and
        // aborting on) memory for records that may never exist.
        const HINT_BYTES: usize = 64 << 20;
        let rows = rows.min(HINT_BYTES / 8);
        let per = spec.fixed_count().unwrap_or(1);
        let width = spec.dtype().size().unwrap_or(0);
        let mut s = Sink {
            // A hint only: a product that would wrap reserves nothing.
            data: stokehold_core::alloc::large_vec(
                rows.checked_mul(per)
                    .and_then(|n| n.checked_mul(width))
                    .filter(|&n| n <= HINT_BYTES)
                    .unwrap_or(0),
            ),
            offsets: Vec::new(),
            splits: Vec::new(),
            count: 0,
        };
        if spec.dtype() == DType::Bytes {
            s.offsets.reserve(
                rows.checked_mul(per)
                    .filter(|&n| n <= HINT_BYTES / 8)
                    .map_or(1, |n| n.saturating_add(1)),
            );
            s.offsets.push(0);
        }
        if spec.fixed_count().is_none() {
            s.splits.reserve(rows + 1);
            s.splits.push(0);
        }
        s
    }

    /// Appends one record's values, or its default, or explains what is wrong.
    fn push(
        &mut self,
        rec: &[u8],
        slot: &Slot,
        spec: &ParseFeature,
    ) -> std::result::Result<(), String> {
        let want = kind_of(spec.dtype());
        if slot.kind != 0 && slot.kind != want {
            return Err(format!(
                "holds a {} but the spec asks for {} ({})",
                kind_name(slot.kind),
                kind_name(want),
                spec.dtype()
            ));
        }
        let (len0, off0) = (self.data.len(), self.offsets.len());
        let is_bytes = want == BYTES;
        let n = append_values(rec, slot, &mut self.data, &mut self.offsets)
            .map_err(|w| format!("{} at byte {}", w.what, w.at))?;
        match spec {
            ParseFeature::VarLen { .. } => {
                self.count += n as u64;
                self.splits.push(self.count);
            }
            ParseFeature::FixedLen { shape, default, .. } => {
                // Fits: `ParseSpec::add` refused shapes whose product overflows.
                let per: usize = shape.iter().product();
                if n == per {
                    return Ok(());
                }
                // A default fills in for a missing feature, and for an empty `Feature()` (no
                // list set), which TensorFlow reads as missing; an empty list that is set (an
                // empty `float_list`) is an error, as in TensorFlow.
                let unset = !slot.present || slot.kind == 0;
                let Some(d) = default.as_ref().filter(|_| n == 0 && unset) else {
                    let what = if slot.present && n == 0 {
                        "is present but empty (a default fills in only a missing feature)".into()
                    } else if slot.present {
                        format!("has {n} values")
                    } else {
                        "is missing".into()
                    };
                    return Err(format!("{what}; FixedLen{shape:?} needs {per}"));
                };
                self.data.truncate(len0);
                self.offsets.truncate(off0);
                for i in 0..per {
                    let j = if d.len() == 1 { 0 } else { i };
                    if is_bytes {
                        self.data.extend_from_slice(d.string(j).unwrap_or(b""));
                        self.offsets.push(self.data.len() as u64);
                    } else {
                        let w = d.dtype().size().unwrap_or(0);
                        self.data.extend_from_slice(&d.data()[j * w..(j + 1) * w]);
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(self, spec: &ParseFeature, rows: usize) -> Result<Value> {
        let dtype = spec.dtype();
        let (shape, splits) = match spec {
            ParseFeature::FixedLen { shape, .. } => {
                let mut s = vec![rows];
                s.extend_from_slice(shape);
                (s, None)
            }
            ParseFeature::VarLen { .. } => (vec![self.count as usize], Some(self.splits)),
        };
        let values = if dtype == DType::Bytes {
            Tensor::strings_from_parts(shape, Bytes::from(self.data), self.offsets.into())?
        } else {
            Tensor::new(dtype, shape, Bytes::from(self.data))?
        };
        Ok(match splits {
            None => Value::Tensor(values),
            Some(s) => Value::Ragged(Ragged::new(values, s.into())?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tfrecord::encode_example;
    use stokehold_core::Ctx;

    fn parse(records: Tensor, batched: Option<bool>) -> Result<Example> {
        let spec = ParseSpec::new()
            .with("label", ParseFeature::fixed(vec![], DType::I64))
            .unwrap();
        let ctx = Ctx {
            op: "parse",
            index: 4,
            epoch: 0,
        };
        Parser::new(spec).parse_fn("record", batched)(Example::new().with("record", records), &ctx)
    }

    #[test]
    fn batched_is_inferred_from_the_input_and_a_mismatch_names_both() {
        // Issue 48: unbatched records parsed as batches gave `label` shape [1], silently.
        let rec = encode_example(&Example::new().with("label", Tensor::scalar(7i64))).unwrap();
        let one = Tensor::strings(&[&rec]).reshape(vec![]).unwrap();
        let two = Tensor::strings(&[&rec, &rec]);
        let shape = |e: Result<Example>| e.unwrap().tensor("t", "label").unwrap().shape().to_vec();
        assert_eq!(shape(parse(one.clone(), None)), Vec::<usize>::new());
        assert_eq!(shape(parse(one.clone(), Some(false))), Vec::<usize>::new());
        assert_eq!(shape(parse(two.clone(), None)), vec![2]);
        assert_eq!(shape(parse(two.clone(), Some(true))), vec![2]);
        let e = parse(one, Some(true)).unwrap_err().to_string();
        assert!(
            e.contains("element 4")
                && e.contains("one record (a scalar)")
                && e.contains("batched=True wants a batch")
                && e.contains("leave batched out"),
            "{e}"
        );
        let e = parse(Tensor::strings(&[&rec]), Some(false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a batch of 1 records (shape [1])"), "{e}");
        let e = parse(two.reshape(vec![1, 2]).unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("shape [1, 2]"), "{e}");
    }
}

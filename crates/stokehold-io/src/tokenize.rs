//! `tokenize`: text into token ids with a Hugging Face `tokenizer.json`, through the Rust
//! `tokenizers` crate (feature `tokenize`: pure Rust, the `fancy-regex` engine instead of
//! Oniguruma, no C or C++ build), as a map function on the pipeline's threads.
//!
//! A document is a bytes scalar (UTF-8); a batch of them is a 1-D bytes tensor. Each document
//! is encoded as the Python `tokenizers` package's `Tokenizer.encode(text, add_special_tokens)`
//! does (the tokenizer's own normalizer, pre-tokenizer, model, post-processor, and its padding
//! and truncation if the file sets them), so the ids are the same; then `bos_id` / `eos_id` go
//! around them. A scalar gives ids `[n]`, a batch a ragged `[B, None]` column. The documents of
//! a batch are encoded one after another on the thread that maps the batch: `tokenizers`' own
//! thread pool is never used, so `num_parallel_calls` is the one knob of parallelism.
//!
//! `max_length` truncates with the tokenizer's own truncation (Python's
//! `enable_truncation(max_length - bos - eos, direction=side)`): the ids with the tokenizer's
//! special tokens and `bos_id` / `eos_id` are at most `max_length` long, and an EOS is never
//! cut off.
//!
//! ```
//! use stokehold_core::{Ctx, Example, Tensor};
//! use stokehold_io::tokenize::{load_tokenizer, tokenize_fn, TokenizeOptions};
//! let json = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
//!   "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
//!   "decoder": null, "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1,
//!   "world": 2}, "unk_token": "[UNK]"}}"#;
//! let tok = load_tokenizer("tokenize", json).unwrap();
//! let opts = TokenizeOptions { eos_id: Some(0), ..Default::default() };
//! let f = tokenize_fn("text", "ids", tok, &opts).unwrap();
//! let e = Example::new().with("text", Tensor::strings(&["hello world"]).reshape(vec![]).unwrap());
//! let ctx = Ctx { op: "tokenize", index: 0, epoch: 0 };
//! let out = f(e, &ctx).unwrap();
//! assert_eq!(out.tensor("t", "ids").unwrap().to_vec::<i32>().unwrap(), vec![1, 2, 0]);
//! ```

use std::path::Path;
use std::sync::Arc;

use stokehold_core::{Ctx, DType, Error, Example, MapFn, Ragged, Result, Tensor};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::options::Choice;

/// Which end of a document `max_length` cuts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Side {
    /// Keep the start (the `tokenizers` default).
    #[default]
    Right,
    /// Keep the end.
    Left,
}

impl Choice for Side {
    const ARG: &'static str = "truncation_side";
    const CHOICES: &'static [(&'static str, Self)] =
        &[("right", Side::Right), ("left", Side::Left)];
}

/// The dtype of the ids.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IdType {
    /// `int32` (vocabularies up to 2**31 ids).
    #[default]
    I32,
    /// `int64`.
    I64,
}

impl Choice for IdType {
    const ARG: &'static str = "dtype";
    const CHOICES: &'static [(&'static str, Self)] =
        &[("int32", IdType::I32), ("int64", IdType::I64)];
}

/// Options of `tokenize`; the default encodes as `Tokenizer.encode(text)` does.
#[derive(Clone, Debug)]
pub struct TokenizeOptions {
    /// Let the tokenizer's post-processor add its special tokens (default true, as `encode`).
    pub add_special_tokens: bool,
    /// An id put before each document's ids (default none).
    pub bos_id: Option<u32>,
    /// An id put after each document's ids (default none).
    pub eos_id: Option<u32>,
    /// The most ids a document gets, `bos_id` / `eos_id` included (default: no limit beyond
    /// the tokenizer's own truncation).
    pub max_length: Option<usize>,
    /// Which end `max_length` cuts (default the right: keep the start).
    pub side: Side,
    /// The ids' dtype (default int32).
    pub dtype: IdType,
}

impl Default for TokenizeOptions {
    fn default() -> Self {
        TokenizeOptions {
            add_special_tokens: true,
            bos_id: None,
            eos_id: None,
            max_length: None,
            side: Side::Right,
            dtype: IdType::I32,
        }
    }
}

/// The tokenizer of a `tokenizer.json`: `source` is the file's JSON text when it starts with
/// `{` (after blanks), else the file's path. A file that cannot be read is an I/O error naming
/// it; JSON that is not a tokenizer an error naming `op`, the file and what `tokenizers` says.
pub fn load_tokenizer(op: &str, source: &str) -> Result<Arc<Tokenizer>> {
    let (text, from) = if source.trim_start().starts_with('{') {
        (source.to_string(), "the JSON given".to_string())
    } else {
        let path = Path::new(source);
        let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let text = String::from_utf8(text).map_err(|e| {
            Error::corrupt(
                path,
                e.utf8_error().valid_up_to() as u64,
                format!("{op}: a tokenizer.json must be UTF-8 JSON"),
            )
        })?;
        (text, format!("{source:?}"))
    };
    Tokenizer::from_bytes(text.as_bytes())
        .map(Arc::new)
        .map_err(|e| {
            Error::invalid(format!(
                "{op}(tokenizer={from}): not a Hugging Face tokenizer.json: {e}"
            ))
        })
}

/// A map function encoding feature `feature` (a document, or a 1-D batch of them) into feature
/// `out` (see the module docs). Checks the options against the tokenizer first: a `max_length`
/// with no room for a document's ids is an error naming the numbers.
pub fn tokenize_fn(
    feature: &str,
    out: &str,
    tokenizer: Arc<Tokenizer>,
    opts: &TokenizeOptions,
) -> Result<MapFn> {
    let extra = usize::from(opts.bos_id.is_some()) + usize::from(opts.eos_id.is_some());
    let mut tok = tokenizer;
    if let Some(max) = opts.max_length {
        // The post-processor's tokens count whether added or not: `tokenizers` subtracts them
        // from the truncation length unchecked (it would wrap below them).
        let special = tok
            .get_post_processor()
            .map_or(0, |p| tokenizers::PostProcessor::added_tokens(p, false));
        if max < extra + special || max == 0 {
            return Err(Error::invalid(format!(
                "tokenize(max_length={max}): leaves no room for text: bos_id/eos_id take {extra} \
                 and the tokenizer's special tokens {special}"
            )));
        }
        let direction = match opts.side {
            Side::Right => TruncationDirection::Right,
            Side::Left => TruncationDirection::Left,
        };
        let mut t = (*tok).clone();
        t.with_truncation(Some(TruncationParams {
            direction,
            max_length: max - extra,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
        }))
        .map_err(|e| Error::invalid(format!("tokenize(max_length={max}): {e}")))?;
        tok = Arc::new(t);
    }
    let (feature, out, opts) = (feature.to_string(), out.to_string(), opts.clone());
    Ok(Arc::new(move |mut e: Example, ctx: &Ctx| {
        let t = e.tensor(ctx.op, &feature)?;
        let value = encode_value(&tok, &opts, t, ctx, &feature)?;
        e.insert(&out, value);
        Ok(e)
    }))
}

/// A document's ids, or a batch's as a ragged column.
fn encode_value(
    tok: &Tokenizer,
    opts: &TokenizeOptions,
    t: &Tensor,
    ctx: &Ctx,
    feature: &str,
) -> Result<stokehold_core::Value> {
    if t.dtype() != DType::Bytes || t.shape().len() > 1 {
        return Err(Error::schema(
            ctx.op,
            format!(
                "element {}: feature {feature:?} is {}{:?}; tokenize takes text: a bytes scalar \
                 (a document) or a 1-D bytes array (a batch)",
                ctx.index,
                t.dtype(),
                t.shape()
            ),
        ));
    }
    let rows = t.shape().first().copied();
    let mut ids: Vec<u32> = Vec::new();
    let mut splits = vec![0u64];
    for r in 0..rows.unwrap_or(1) {
        let text = t.string(r).unwrap_or_default();
        let text = std::str::from_utf8(text).map_err(|err| {
            let row = rows.map(|_| format!(" row {r}")).unwrap_or_default();
            Error::invalid(format!(
                "{}: element {}: feature {feature:?}{row} is not UTF-8 (invalid byte at offset \
                 {})",
                ctx.op,
                ctx.index,
                err.valid_up_to()
            ))
        })?;
        let enc = tok
            .encode_fast(text, opts.add_special_tokens)
            .map_err(|err| {
                Error::invalid(format!(
                    "{}: element {}: the tokenizer failed: {err}",
                    ctx.op, ctx.index
                ))
            })?;
        ids.extend(opts.bos_id);
        ids.extend_from_slice(enc.get_ids());
        ids.extend(opts.eos_id);
        splits.push(ids.len() as u64);
    }
    let n = ids.len();
    let values = match opts.dtype {
        IdType::I64 => Tensor::from_vec(vec![n], ids.into_iter().map(i64::from).collect())?,
        IdType::I32 => {
            let v: Vec<i32> = ids
                .into_iter()
                .map(|id| {
                    i32::try_from(id).map_err(|_| {
                        Error::invalid(format!(
                            "{}: element {}: id {id} does not fit int32; tokenize with \
                             dtype=\"int64\"",
                            ctx.op, ctx.index
                        ))
                    })
                })
                .collect::<Result<_>>()?;
            Tensor::from_vec(vec![n], v)?
        }
    };
    Ok(match rows {
        None => values.into(),
        Some(_) => Ragged::new(values, splits.into())?.into(),
    })
}

//! The Megatron `.idx` index (megatron-core `indexed_dataset.py`, "MMIDIDX"):
//!
//! ```text
//! magic      9 bytes  b"MMIDIDX\x00\x00"
//! version    u64 LE   1
//! dtype      u8       1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16
//! sequences  u64 LE   S
//! documents  u64 LE   D (document boundaries: D = documents + 1, the first 0, the last S)
//! lengths    S x i32  tokens per sequence
//! pointers   S x i64  byte offset of each sequence in the .bin
//! doc_idx    D x i64  first sequence of each document
//! (modes     S x i8   multimodal files only; not read)
//! ```
//!
//! Every count is checked against the file's length before anything is allocated, and every
//! sequence against the `.bin`'s length, so a lying header is an error naming the file and the
//! field, never a panic or a huge allocation.

use std::path::Path;

use stokehold_core::{DType, Error, Result};

/// The `.idx` magic.
pub const MAGIC: &[u8; 9] = b"MMIDIDX\x00\x00";
/// Bytes before the arrays.
pub const HEADER_LEN: usize = 9 + 8 + 1 + 8 + 8;

/// A parsed, checked `.idx`.
#[derive(Clone, Debug, PartialEq)]
pub struct MegatronIndex {
    /// Token type of the `.bin`.
    pub dtype: DType,
    /// Tokens per sequence.
    pub lengths: Vec<i32>,
    /// Byte offset of each sequence in the `.bin`.
    pub pointers: Vec<u64>,
    /// Document boundaries (first sequence of each document, then the sequence count).
    pub documents: Vec<u64>,
}

/// The dtype of megatron-core's `DType` code.
pub fn dtype_of_code(code: u8) -> Option<DType> {
    Some(match code {
        1 => DType::U8,
        2 => DType::I8,
        3 => DType::I16,
        4 => DType::I32,
        5 => DType::I64,
        6 => DType::F64,
        7 => DType::F32,
        8 => DType::U16,
        _ => return None,
    })
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().unwrap())
}

/// Parses `buf` (the whole `.idx` at `path`) and checks each sequence against a `.bin` of
/// `bin_len` bytes.
pub fn parse(buf: &[u8], path: &Path, bin_len: u64) -> Result<MegatronIndex> {
    let bad = |offset: usize, reason: String| Error::corrupt(path, offset as u64, reason);
    if buf.len() < HEADER_LEN {
        return Err(bad(
            0,
            format!(
                "a Megatron .idx has a {HEADER_LEN}-byte header; the file has {} bytes",
                buf.len()
            ),
        ));
    }
    if &buf[..9] != MAGIC {
        return Err(bad(
            0,
            "not a Megatron .idx: missing the MMIDIDX magic".into(),
        ));
    }
    let version = u64_at(buf, 9);
    if version != 1 {
        return Err(bad(
            9,
            format!("version {version}; megatron-core writes and reads 1"),
        ));
    }
    let code = buf[17];
    let dtype = dtype_of_code(code).ok_or_else(|| {
        bad(
            17,
            format!("dtype code {code} is none of megatron-core's (1 ..= 8)"),
        )
    })?;
    let (s, d) = (u64_at(buf, 18), u64_at(buf, 26));
    // Lengths (4 bytes), pointers (8) per sequence, 8 per document boundary.
    let need = s
        .checked_mul(12)
        .and_then(|x| x.checked_add(d.checked_mul(8)?))
        .and_then(|x| x.checked_add(HEADER_LEN as u64));
    match need {
        Some(n) if n <= buf.len() as u64 => {}
        _ => {
            return Err(bad(
                18,
                format!(
                "sequence count {s} and document count {d} need {} bytes of index; the file has {}",
                need.map_or("more than 2^64".into(), |n| n.to_string()),
                buf.len()
            ),
            ))
        }
    }
    let (s, d) = (s as usize, d as usize);
    let lengths: Vec<i32> = buf[HEADER_LEN..HEADER_LEN + 4 * s]
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let at = HEADER_LEN + 4 * s;
    let pointers: Vec<i64> = buf[at..at + 8 * s]
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let at = at + 8 * s;
    let documents: Vec<u64> = buf[at..at + 8 * d]
        .chunks_exact(8)
        .map(|c| u64_at(c, 0))
        .collect();
    let width = dtype.size().unwrap() as u64;
    for (i, (&n, &p)) in lengths.iter().zip(&pointers).enumerate() {
        let end = (n >= 0 && p >= 0)
            .then(|| (n as u64).checked_mul(width)?.checked_add(p as u64))
            .flatten();
        if end.is_none_or(|e| e > bin_len) {
            return Err(bad(
                HEADER_LEN + 4 * i,
                format!(
                "sequence {i}: {n} tokens at byte {p} of the .bin run past its {bin_len} bytes \
                 (lengths / pointers field)"
            ),
            ));
        }
    }
    if let Some(i) = (1..d).find(|&i| documents[i] < documents[i - 1]) {
        return Err(bad(
            at + 8 * i,
            format!(
                "document index {i} goes backwards ({} after {})",
                documents[i],
                documents[i - 1]
            ),
        ));
    }
    if documents.last().is_some_and(|&l| l > s as u64) {
        return Err(bad(
            at,
            format!(
                "document index ends at sequence {} of {s}",
                documents[d - 1]
            ),
        ));
    }
    Ok(MegatronIndex {
        dtype,
        lengths,
        pointers: pointers.into_iter().map(|p| p as u64).collect(),
        documents,
    })
}

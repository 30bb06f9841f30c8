//! The line index of a JSONL file: where each non-blank line starts and how long it is, so that
//! the file can be read at random (`len`, `ds[i]`, global shuffle).
//!
//! # Format (version 1)
//!
//! The index of `data.jsonl` is `data.jsonl.idx` (the TFRecord index's naming and side folder,
//! [`crate::tfrecord::index::find_index`]), all integers little-endian:
//!
//! | bytes      | field                                                                  |
//! |------------|------------------------------------------------------------------------|
//! | 8          | magic `b"STKJLIX1"` (the trailing `1` is the version)                  |
//! | 8          | `n`: number of lines, u64                                              |
//! | 8          | size in bytes of the JSONL file it describes, u64 (stale-index check)  |
//! | 16 × `n`   | per line: offset of its first byte, u64; its length without `\n`, u64  |
//! | 4          | masked CRC32C (as TFRecord uses) of all the bytes before it            |
//!
//! Lines that hold only whitespace are not listed (Python's `json` refuses them; JSONL readers
//! skip them). A trailing `\r` is part of the line (JSON reads it as whitespace). The index is
//! written atomically ([`crate::atomic::write_atomic`]); one that is stale (made for another
//! size) is rebuilt, one that is corrupt is refused naming it.

use std::path::{Path, PathBuf};

use stokehold_core::{Error, Result};

use crate::tfrecord::index::{checked_entries, entries_body, header, seal, IndexEntry, FIXED};

/// Magic bytes and version of the JSONL line index.
pub const MAGIC: &[u8; 8] = b"STKJLIX1";

/// The non-blank lines of `data`, in order: offset and length (without the `\n`).
pub fn scan_lines(data: &[u8]) -> Vec<IndexEntry> {
    let mut out = Vec::new();
    let mut start = 0usize;
    while start < data.len() {
        let end = data[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(data.len(), |p| start + p);
        if !data[start..end].iter().all(u8::is_ascii_whitespace) {
            out.push(IndexEntry {
                offset: start as u64,
                len: (end - start) as u64,
            });
        }
        start = end + 1;
    }
    out
}

/// The bytes of an index of `entries` for a file of `file_size` bytes.
pub fn encode(entries: &[IndexEntry], file_size: u64) -> Vec<u8> {
    seal(entries_body(MAGIC, entries, file_size, 0))
}

/// Parses and checks index bytes (`path` names them in errors): the entries and the size of the
/// file they describe. Entries must be in order, not overlap, and end inside the file.
pub fn decode(path: &Path, b: &[u8]) -> Result<(Vec<IndexEntry>, u64)> {
    let bad = |offset: u64, why: String| Error::corrupt(path, offset, format!("index: {why}"));
    let (_, n, file_size) = header(path, b, &[MAGIC], "a stokehold JSONL index")?;
    let want = n.checked_mul(16).and_then(|x| x.checked_add(FIXED as u64));
    if want != Some(b.len() as u64) {
        return Err(bad(
            8,
            format!("{n} lines need {want:?} bytes, the index has {}", b.len()),
        ));
    }
    // A line is its bytes; the next one starts after its `\n`.
    let entries = checked_entries(b, n, file_size, (0, 1), &bad)?;
    Ok((entries, file_size))
}

/// The line index of the file `file` (`remote`: a URL) whose bytes are `data`: read from its
/// sidecar when there is a current one, else scanned and (for a local file, when the folder is
/// writable) written beside it for the next run. Returns the entries and the index path written
/// or read (`None`: kept in memory only).
pub fn read_or_build(
    file: &Path,
    data: &[u8],
    remote: bool,
) -> Result<(Vec<IndexEntry>, Option<PathBuf>)> {
    let ipath = crate::tfrecord::index::find_index(file);
    if crate::storage::head(&ipath)?.is_some() {
        let b = crate::storage::read(&ipath)?;
        let (entries, size) = decode(&ipath, &b)?;
        if size == data.len() as u64 {
            return Ok((entries, Some(ipath)));
        }
    }
    let entries = scan_lines(data);
    if remote {
        return Ok((entries, None));
    }
    // A folder we may not write to (a read-only data set) still reads: the scan is kept in
    // memory.
    let written = crate::atomic::write_sidecar(&ipath, &encode(&entries, data.len() as u64))?;
    Ok((entries, written))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_lines_are_left_out_and_the_last_line_needs_no_newline() {
        let e = scan_lines(b"{\"a\":1}\n\n  \r\n{\"a\":2}");
        let got: Vec<_> = e.iter().map(|e| (e.offset, e.len)).collect();
        assert_eq!(got, vec![(0, 7), (13, 7)]);
    }

    #[test]
    fn round_trip_and_refusals() {
        let e = scan_lines(b"1\n22\n333\n");
        let b = encode(&e, 9);
        assert_eq!(decode(Path::new("x.idx"), &b).unwrap(), (e, 9));
        let mut flipped = b.clone();
        flipped[30] ^= 1;
        let err = decode(Path::new("x.idx"), &flipped)
            .unwrap_err()
            .to_string();
        assert!(err.contains("x.idx") && err.contains("CRC"), "{err}");
        let err = decode(Path::new("x.idx"), &b[..20])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a stokehold JSONL index"), "{err}");
    }
}

//! The index sidecar: where each record of a plain TFRecord file starts, so that the file can be
//! read at random (`len`, `ds[i]`, global shuffle).
//!
//! # Format (version 1)
//!
//! The index of `data.tfrecord` is `data.tfrecord.idx`, all integers little-endian:
//!
//! | bytes      | field                                                                  |
//! |------------|------------------------------------------------------------------------|
//! | 8          | magic `b"STKTFIX1"` (the trailing `1` is the version)                  |
//! | 8          | `n`: number of records, u64                                            |
//! | 8          | size in bytes of the TFRecord file it describes, u64 (stale-index check)|
//! | 16 × `n`   | per record: offset of its header, u64; length of its data, u64         |
//! | 4          | masked CRC32C (as TFRecord uses) of all the bytes before it            |
//!
//! Records are in file order. An index built in skip mode lists only the good records, so random
//! access then never meets the corrupt ones; it also records what it left out, so that nothing is
//! lost silently: such an index is **version 2** (magic `b"STKTFIX2"`), the same layout with, before
//! the CRC, `k`: number of corrupt records left out, u64, and `k` u64 offsets of where they were.
//! A reader with `on_corrupt = raise` then refuses the file naming the first offset; with skip it
//! counts them. An index without skips stays version 1. 16 bytes per record: 8 MB for 500k
//! records.

use std::path::{Path, PathBuf};

use stokehold_core::{Error, Result};

use super::crc::masked_crc;
use super::reader::{ReadOptions, RecordReader};

/// Magic bytes and version of the index format.
pub const MAGIC: &[u8; 8] = b"STKTFIX1";
/// Magic of an index that lists corrupt records left out (version 2).
pub const MAGIC_SKIPS: &[u8; 8] = b"STKTFIX2";
pub(crate) const FIXED: usize = 8 + 8 + 8 + 4;

/// Where one record sits in its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// Offset of the record's header.
    pub offset: u64,
    /// Length of the record's data.
    pub len: u64,
}

/// The index path of a TFRecord file: the same name with `.idx` appended.
pub fn index_path(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(".idx");
    PathBuf::from(s)
}

/// The side folder an index may live in instead of beside its file: `<dir>/.stokehold-idx/`, so
/// that a glob over the data folder (tf.data's `list_files("train-*")`) matches data files only.
pub const SIDE_FOLDER: &str = ".stokehold-idx";

/// The index path of `file` in the side folder: `<dir>/.stokehold-idx/<name>.idx`.
pub fn side_index_path(file: &Path) -> PathBuf {
    let dir = file.parent().unwrap_or_else(|| Path::new(""));
    let name = index_path(Path::new(file.file_name().unwrap_or_default()));
    dir.join(SIDE_FOLDER).join(name)
}

/// Where `file`'s index is: beside it when there is one there, else in the side folder when
/// there is one there, else (for the "no index" error) beside it.
pub fn find_index(file: &Path) -> PathBuf {
    let beside = index_path(file);
    let exists = |p: &Path| crate::storage::head(p).is_ok_and(|m| m.is_some());
    if exists(&beside) {
        return beside;
    }
    let side = side_index_path(file);
    if exists(&side) {
        side
    } else {
        beside
    }
}

/// Collects entries and writes an index file atomically.
pub struct IndexWriter {
    path: PathBuf,
    entries: Vec<IndexEntry>,
}

impl IndexWriter {
    /// An index to be written at `path`.
    pub fn new(path: &Path) -> Self {
        IndexWriter {
            path: path.to_path_buf(),
            entries: Vec::new(),
        }
    }

    /// Adds the next record.
    pub fn push(&mut self, e: IndexEntry) {
        self.entries.push(e);
    }

    /// Writes the index for a TFRecord file of `file_size` bytes (temporary name, then rename).
    pub fn finish(self, file_size: u64) -> Result<PathBuf> {
        self.finish_with_skips(file_size, &[])
    }

    /// [`IndexWriter::finish`], listing the offsets of corrupt records left out.
    pub fn finish_with_skips(self, file_size: u64, skipped: &[u64]) -> Result<PathBuf> {
        let bytes = encode_with_skips(&self.entries, skipped, file_size);
        crate::atomic::write_atomic(&self.path, &bytes)
    }
}

/// The bytes of an index.
pub fn encode(entries: &[IndexEntry], file_size: u64) -> Vec<u8> {
    encode_with_skips(entries, &[], file_size)
}

/// The bytes of an index that also lists the offsets of corrupt records left out (version 2 when
/// there are any).
pub fn encode_with_skips(entries: &[IndexEntry], skipped: &[u64], file_size: u64) -> Vec<u8> {
    let magic = if skipped.is_empty() {
        MAGIC
    } else {
        MAGIC_SKIPS
    };
    let mut out = entries_body(magic, entries, file_size, 8 + 8 * skipped.len());
    if !skipped.is_empty() {
        out.extend_from_slice(&(skipped.len() as u64).to_le_bytes());
        skipped
            .iter()
            .for_each(|o| out.extend_from_slice(&o.to_le_bytes()));
    }
    seal(out)
}

/// The body every entry sidecar shares (this TFRecord index, the JSONL line index): `magic`,
/// the entry count, the described file's size, then offset and length of each entry, all u64
/// little-endian; `extra` bytes of capacity for what follows. [`seal`] ends it.
pub(crate) fn entries_body(
    magic: &[u8; 8],
    entries: &[IndexEntry],
    file_size: u64,
    extra: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIXED + 16 * entries.len() + extra);
    out.extend_from_slice(magic);
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    out.extend_from_slice(&file_size.to_le_bytes());
    for e in entries {
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(&e.len.to_le_bytes());
    }
    out
}

/// `out` with the masked CRC32C of all its bytes appended.
pub(crate) fn seal(mut out: Vec<u8>) -> Vec<u8> {
    let crc = masked_crc(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks a sealed sidecar `b` (its trailing CRC) and reads its `n` entries (from byte 24), each
/// starting at or after the end of the one before plus `gap`, and ending, `frame` bytes after
/// `offset + len`, inside a file of `file_size` bytes. `bad(offset in b, why)` is the error.
pub(crate) fn checked_entries(
    b: &[u8],
    n: u64,
    file_size: u64,
    (frame, gap): (u64, u64),
    bad: &dyn Fn(u64, String) -> Error,
) -> Result<Vec<IndexEntry>> {
    let body = &b[..b.len() - 4];
    let crc = u32::from_le_bytes(b[b.len() - 4..].try_into().unwrap());
    if masked_crc(body) != crc {
        return Err(bad(body.len() as u64, "bad CRC".into()));
    }
    let u64_at = |p: usize| u64::from_le_bytes(b[p..p + 8].try_into().unwrap());
    let mut entries = Vec::with_capacity(n as usize);
    let mut next_free = 0u64;
    for i in 0..n as usize {
        let e = IndexEntry {
            offset: u64_at(24 + 16 * i),
            len: u64_at(32 + 16 * i),
        };
        let end = e
            .len
            .checked_add(frame)
            .and_then(|x| x.checked_add(e.offset));
        if e.offset < next_free || !matches!(end, Some(x) if x <= file_size) {
            return Err(bad(
                (24 + 16 * i) as u64,
                format!("entry {i} {e:?} overlaps or overruns"),
            ));
        }
        next_free = end.unwrap().saturating_add(gap);
        entries.push(e);
    }
    Ok(entries)
}

/// Parses and checks index bytes (`path` names them in errors); returns the entries and the size
/// of the TFRecord file they describe.
pub fn decode(path: &Path, b: &[u8]) -> Result<(Vec<IndexEntry>, u64)> {
    decode_with_skips(path, b).map(|(e, size, _)| (e, size))
}

/// The fixed start of every entry sidecar (this index, the JSONL and WebDataset ones): which of
/// `magics` it has (its position), the entry count and the size of the file it describes; an
/// error naming `what` the bytes are not.
pub(crate) fn header(
    path: &Path,
    b: &[u8],
    magics: &[&[u8; 8]],
    what: &str,
) -> Result<(usize, u64, u64)> {
    let found = magics
        .iter()
        .position(|m| b.len() >= FIXED && &b[..8] == *m);
    let Some(version) = found else {
        let why = format!("index: not {what} (magic {:?}, version 1)", magics[0]);
        return Err(Error::corrupt(path, 0, why));
    };
    let u64_at = |p: usize| u64::from_le_bytes(b[p..p + 8].try_into().unwrap());
    Ok((version, u64_at(8), u64_at(16)))
}

/// [`decode`], also returning the offsets of corrupt records the index left out (version 2).
pub fn decode_with_skips(path: &Path, b: &[u8]) -> Result<(Vec<IndexEntry>, u64, Vec<u64>)> {
    let bad = |offset: u64, why: String| Error::corrupt(path, offset, format!("index: {why}"));
    let (version, n, file_size) =
        header(path, b, &[MAGIC, MAGIC_SKIPS], "a stokehold TFRecord index")?;
    let v2 = version == 1;
    let u64_at = |p: usize| u64::from_le_bytes(b[p..p + 8].try_into().unwrap());
    let mut want = n.checked_mul(16).and_then(|x| x.checked_add(FIXED as u64));
    let mut k = 0u64;
    if v2 {
        // The skip list follows the entries: its count, then its offsets.
        // Checked: a record count near 2^60 makes `w + 8` wrap (fuzzing found a slice panic).
        let at = want
            .filter(|&w| w.checked_add(8).is_some_and(|end| end <= b.len() as u64))
            .map(|w| w as usize - 4);
        k = at.map_or(0, u64_at);
        want = want
            .zip(k.checked_mul(8))
            .and_then(|(w, s)| w.checked_add(8)?.checked_add(s));
    }
    if want != Some(b.len() as u64) {
        return Err(bad(
            8,
            format!("{n} records need {want:?} bytes, the index has {}", b.len()),
        ));
    }
    // A record is framed by 16 bytes (length, its CRC, the data's CRC), records touch.
    let entries = checked_entries(b, n, file_size, (16, 0), &bad)?;
    let skips_at = 24 + 16 * n as usize + 8;
    let skipped = (0..k as usize).map(|j| u64_at(skips_at + 8 * j)).collect();
    Ok((entries, file_size, skipped))
}

/// Reads the index of `file` and checks that it matches the file's current size.
pub fn read_index(file: &Path) -> Result<Vec<IndexEntry>> {
    read_index_with_skips(file).map(|(e, _)| e)
}

/// [`read_index`], also returning the offsets of corrupt records the index left out.
pub fn read_index_with_skips(file: &Path) -> Result<(Vec<IndexEntry>, Vec<u64>)> {
    let ipath = find_index(file);
    let b = crate::storage::read(&ipath)?;
    let (entries, size, skipped) = decode_with_skips(&ipath, &b)?;
    let actual = match crate::storage::head(file)? {
        Some(m) => m.size,
        None => {
            let e = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or object");
            return Err(Error::io(file, e));
        }
    };
    if actual != size {
        return Err(Error::corrupt(
            &ipath,
            16,
            format!(
                "stale index: made for {size} bytes, {} has {actual}",
                file.display()
            ),
        ));
    }
    Ok((entries, skipped))
}

/// What [`build_index`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexSummary {
    /// Good records indexed.
    pub records: u64,
    /// Corrupt records left out (skip mode).
    pub skipped: u64,
    /// The index file written.
    pub path: PathBuf,
}

/// Scans a plain TFRecord file and writes its index (atomically). With `opts.on_corrupt` = skip,
/// corrupt records are left out of the index; with raise, the first one fails the call.
pub fn build_index(file: &Path, opts: ReadOptions) -> Result<IndexSummary> {
    build_index_in(file, opts, false)
}

/// [`build_index`], writing the index into the side folder ([`SIDE_FOLDER`], created if missing)
/// when `side_folder`, else beside the file.
pub fn build_index_in(file: &Path, opts: ReadOptions, side_folder: bool) -> Result<IndexSummary> {
    if opts.compression != super::Compression::None {
        return Err(Error::invalid(format!(
            "{}: an index needs an uncompressed TFRecord file (offsets in a compressed stream \
             cannot be read at random)",
            file.display()
        )));
    }
    let size = std::fs::metadata(file)
        .map_err(|e| Error::io(file, e))?
        .len();
    let mut r = RecordReader::open(file, opts)?;
    let ipath = match side_folder {
        false => index_path(file),
        true => {
            let p = side_index_path(file);
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
            }
            p
        }
    };
    let mut w = IndexWriter::new(&ipath);
    while let Some((offset, data)) = r.next_ref()? {
        let len = data.len() as u64;
        w.push(IndexEntry { offset, len });
    }
    let (records, skipped) = (r.records(), r.skipped());
    let path = w.finish_with_skips(size, r.skipped_offsets())?;
    Ok(IndexSummary {
        records,
        skipped,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `tfrecord_index` fuzz target: a version-2 index whose record count makes
    /// the skip list's position wrap panicked on a slice instead of being refused.
    #[test]
    fn a_v2_index_with_a_huge_record_count_is_refused_not_a_panic() {
        let mut b = MAGIC_SKIPS.to_vec();
        b.extend(0x0fff_ffff_ffff_fffeu64.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend([0xf5; 60]);
        let err = decode(Path::new("x.idx"), &b).unwrap_err().to_string();
        assert!(err.contains("x.idx") && err.contains("index"), "{err}");
    }
}

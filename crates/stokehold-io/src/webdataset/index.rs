//! The member index of a WebDataset tar shard: where each member that belongs to a sample starts,
//! how long it is and its name, so that opening a shard reads one small file instead of every
//! header of the tar (`len`, `ds[i]` and global shuffle then need no scan after the first).
//!
//! # Format (version 1)
//!
//! The index of `shard-0.tar` is `shard-0.tar.idx` (the TFRecord index's naming and side folder,
//! [`crate::tfrecord::index::find_index`]), all integers little-endian:
//!
//! | bytes      | field                                                                  |
//! |------------|------------------------------------------------------------------------|
//! | 8          | magic `b"STKWDIX1"` (the trailing `1` is the version)                  |
//! | 8          | `n`: number of members, u64                                            |
//! | 8          | size in bytes of the tar file it describes, u64 (stale-index check)    |
//! | 16 × `n`   | per member: offset of its data, u64; length of its data, u64           |
//! | per member | its name in the tar: length, u32; the name's UTF-8 bytes               |
//! | 4          | masked CRC32C (as TFRecord uses) of all the bytes before it            |
//!
//! Only members that belong to a sample are listed ([`super::scan::list_members`]), in tar order;
//! samples are grouped from the names by the same rule as a scan ([`super::scan::group`]). The
//! entries use the one entry-sidecar codec of the TFRecord and JSONL indexes; a member's data
//! starts at least one 512-byte header after the end of the one before. The index is written
//! atomically; one that is stale (made for another size) is rebuilt, one that is corrupt is
//! refused naming it.

use std::path::{Path, PathBuf};

use stokehold_core::{Error, Result};

use super::scan::Listed;
use crate::tfrecord::index::{checked_entries, entries_body, header, seal, IndexEntry};

/// Magic bytes and version of the WebDataset member index.
pub const MAGIC: &[u8; 8] = b"STKWDIX1";
/// A tar header: the least that separates one member's data from the next one's.
const HEADER: u64 = 512;

/// The bytes of an index of the members `listed` of a tar file of `file_size` bytes.
pub fn encode(listed: &[Listed], file_size: u64) -> Vec<u8> {
    let entries: Vec<IndexEntry> = listed
        .iter()
        .map(|m| IndexEntry {
            offset: m.offset,
            len: m.len,
        })
        .collect();
    let names: usize = listed.iter().map(|m| 4 + m.name.len()).sum();
    let mut out = entries_body(MAGIC, &entries, file_size, names);
    for m in listed {
        out.extend_from_slice(&(m.name.len() as u32).to_le_bytes());
        out.extend_from_slice(m.name.as_bytes());
    }
    seal(out)
}

/// Parses and checks index bytes (`path` names them in errors): the members and the size of the
/// tar file they describe. Members must be in order, apart by at least a header, end inside the
/// file, and have UTF-8 names.
pub fn decode(path: &Path, b: &[u8]) -> Result<(Vec<Listed>, u64)> {
    let bad = |offset: u64, why: String| Error::corrupt(path, offset, format!("index: {why}"));
    let (_, n, file_size) = header(path, b, &[MAGIC], "a stokehold WebDataset index")?;
    let names_at = n.checked_mul(16).and_then(|x| x.checked_add(24));
    let Some(names_at) = names_at.filter(|&x| x <= (b.len() - 4) as u64) else {
        return Err(bad(
            8,
            format!(
                "{n} members need more than the {} bytes the index has",
                b.len()
            ),
        ));
    };
    let entries = checked_entries(b, n, file_size, (0, HEADER), &bad)?;
    let end = b.len() - 4;
    let mut at = names_at as usize;
    let mut out = Vec::with_capacity(entries.len());
    for (i, e) in entries.into_iter().enumerate() {
        let len = b
            .get(at..at + 4)
            .map(|x| u32::from_le_bytes(x.try_into().unwrap()) as usize);
        let name = len
            .and_then(|len| b.get(at + 4..(at + 4).checked_add(len)?))
            .filter(|_| at + 4 + len.unwrap_or(0) <= end);
        let Some(name) = name else {
            return Err(bad(
                at as u64,
                format!("member {i}'s name overruns the index"),
            ));
        };
        let Ok(name) = std::str::from_utf8(name) else {
            return Err(bad(at as u64, format!("member {i}'s name is not UTF-8")));
        };
        at += 4 + name.len();
        out.push(Listed {
            name: name.to_string(),
            header_at: e.offset,
            offset: e.offset,
            len: e.len,
        });
    }
    if at != end {
        return Err(bad(
            at as u64,
            format!("{} bytes after the last name", end - at),
        ));
    }
    Ok((out, file_size))
}

/// The members of the tar shard `file` of `size` bytes: read from its sidecar when there is a
/// current one, else listed by `scan` and (when `write` and the folder is writable) written
/// beside it for the next open. Returns the members and the index path read or written (`None`:
/// kept in memory only).
pub fn read_or_build(
    file: &Path,
    size: u64,
    write: bool,
    scan: impl FnOnce() -> Result<Vec<Listed>>,
) -> Result<(Vec<Listed>, Option<PathBuf>)> {
    let ipath = crate::tfrecord::index::find_index(file);
    if crate::storage::head(&ipath)?.is_some() {
        let b = crate::storage::read(&ipath)?;
        let (listed, indexed) = decode(&ipath, &b)?;
        if indexed == size {
            return Ok((listed, Some(ipath)));
        }
    }
    let listed = scan()?;
    if !write {
        return Ok((listed, None));
    }
    // A folder we may not write to (a read-only data set) still reads: the scan is kept in
    // memory.
    let written = crate::atomic::write_sidecar(&ipath, &encode(&listed, size))?;
    Ok((listed, written))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed() -> Vec<Listed> {
        [
            ("a.txt", 512, 2),
            ("a.cls", 1536, 1),
            ("dir/b.x.txt", 2560, 0),
        ]
        .iter()
        .map(|&(name, offset, len)| Listed {
            name: name.into(),
            header_at: offset,
            offset,
            len,
        })
        .collect()
    }

    #[test]
    fn round_trip_and_refusals() {
        let b = encode(&listed(), 10240);
        assert_eq!(decode(Path::new("x.idx"), &b).unwrap(), (listed(), 10240));
        let mut flipped = b.clone();
        flipped[30] ^= 1;
        let err = decode(Path::new("x.idx"), &flipped)
            .unwrap_err()
            .to_string();
        assert!(err.contains("x.idx") && err.contains("CRC"), "{err}");
        let err = decode(Path::new("x.idx"), &b[..20])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a stokehold WebDataset index"), "{err}");
        // A file too small for the members: refused by the shared entry check.
        let err = decode(Path::new("x.idx"), &encode(&listed(), 1000))
            .unwrap_err()
            .to_string();
        assert!(err.contains("overlaps or overruns"), "{err}");
    }
}

//! Reading a tar shard's headers and grouping its members into samples, by webdataset's rules
//! (`webdataset/tariterators.py`: `tar_file_iterator`, `base_plus_ext`, `group_by_keys`).
//!
//! * Only regular files count; a name whose first path component is `__...__` is metadata and
//!   skipped.
//! * A member's key is its path up to the first dot of its basename (`dir/a.b.c.jpg` has key
//!   `dir/a` and extension `b.c.jpg`, lowercased); a name whose basename has no dot, or starts with
//!   one, belongs to no sample and is skipped.
//! * Consecutive members with the same key form one sample; a sample never spans two shards. An
//!   extension seen twice in one sample is an error (webdataset's "duplicate file name").

use std::io::Cursor;
use std::path::Path;

use stokehold_core::{Error, Result};

/// One member of a sample: its extension and where its bytes are in the tar file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The extension (lowercased): the feature name.
    pub ext: String,
    /// Offset of the member's data in the tar file.
    pub offset: u64,
    /// Length of the member's data.
    pub len: u64,
}

/// One sample: its key and its members, in tar order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// `__key__`: the members' common path up to the first dot of the basename.
    pub key: String,
    /// The members, in tar order.
    pub members: Vec<Member>,
}

/// Key and extension of a member name, as webdataset's `base_plus_ext` (`None`: no sample).
pub fn key_and_ext(name: &str) -> Option<(&str, &str)> {
    let base_at = name.rfind('/').map_or(0, |i| i + 1);
    let dot = name[base_at..].find('.')? + base_at;
    if dot == base_at {
        return None;
    }
    Some((&name[..dot], &name[dot + 1..]))
}

/// True for webdataset's metadata names: a first path component `__...__`.
pub fn is_meta(name: &str) -> bool {
    let first = name.split('/').next().unwrap_or("");
    first.len() >= 4 && first.starts_with("__") && first.ends_with("__")
}

/// One member that belongs to a sample, as listed in the tar file (or its index sidecar).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// The member's name in the tar file.
    pub name: String,
    /// Offset of its header (for errors; from a sidecar, the offset of its data).
    pub header_at: u64,
    /// Offset of its data.
    pub offset: u64,
    /// Length of its data.
    pub len: u64,
}

/// The members of the tar file `path` whose bytes are `data` that belong to samples (regular
/// files with a key, not metadata), in tar order: headers are read, data skipped. A member that
/// runs past the end of the file, or a header that does not parse, is an error naming the file
/// and the member's header offset.
pub fn list_members(path: &Path, data: &[u8]) -> Result<Vec<Listed>> {
    let size = data.len() as u64;
    let mut archive = tar::Archive::new(Cursor::new(data));
    let mut out = Vec::new();
    let mut at = 0u64;
    let bad = |offset: u64, why: String| Error::corrupt(path, offset, format!("tar: {why}"));
    let entries = archive
        .entries_with_seek()
        .map_err(|e| bad(0, e.to_string()))?;
    for entry in entries {
        let entry = entry.map_err(|e| bad(at, format!("a header that does not parse: {e}")))?;
        let header_at = entry.raw_header_position();
        at = entry.raw_file_position();
        let len = entry.size();
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if at.checked_add(len).is_none_or(|end| end > size) {
            return Err(bad(
                header_at,
                format!(
                    "member {name:?} is truncated: {len} bytes from offset {at}, the file has {size}"
                ),
            ));
        }
        // The next header follows the data, padded to 512 bytes (for errors before it parses).
        at += len.div_ceil(512) * 512;
        if !entry.header().entry_type().is_file() || is_meta(&name) || key_and_ext(&name).is_none()
        {
            continue;
        }
        out.push(Listed {
            name,
            header_at,
            offset: entry.raw_file_position(),
            len,
        });
    }
    Ok(out)
}

/// The samples the members `listed` (in tar order) make, by the rules above; an extension twice
/// in one sample is an error naming `path` and the member's header offset.
pub fn group(path: &Path, listed: &[Listed]) -> Result<Vec<Sample>> {
    let mut out: Vec<Sample> = Vec::new();
    for m in listed {
        let Some((key, ext)) = key_and_ext(&m.name) else {
            continue;
        };
        let ext = ext.to_lowercase();
        if out.last().is_none_or(|s| s.key != key) {
            out.push(Sample {
                key: key.to_string(),
                members: Vec::new(),
            });
        }
        let sample = out.last_mut().expect("pushed");
        if sample.members.iter().any(|x| x.ext == ext) {
            return Err(Error::corrupt(
                path,
                m.header_at,
                format!(
                    "tar: {}: extension {ext:?} twice in sample {key:?} (webdataset: duplicate file name)",
                    m.name
                ),
            ));
        }
        sample.members.push(Member {
            ext,
            offset: m.offset,
            len: m.len,
        });
    }
    Ok(out)
}

/// The samples of the tar file `path` whose bytes are `data` ([`list_members`], then [`group`]).
pub fn scan(path: &Path, data: &[u8]) -> Result<Vec<Sample>> {
    group(path, &list_members(path, data)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_at_the_first_dot_of_the_basename() {
        assert_eq!(key_and_ext("a.jpg"), Some(("a", "jpg")));
        assert_eq!(key_and_ext("d.x/s/a.b.c.JPG"), Some(("d.x/s/a", "b.c.JPG")));
        assert_eq!(key_and_ext("a."), Some(("a", "")));
        assert_eq!(key_and_ext("dir.x/file"), None);
        assert_eq!(key_and_ext(".hidden"), None);
        assert!(is_meta("__meta__") && is_meta("__x__/y.txt") && !is_meta("__x_/y.txt"));
    }
}

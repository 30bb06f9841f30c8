//! On-disk layout of a shard folder (spec: `docs/FORMAT.md`): constants, the fixed-size header,
//! footer and index entry of a shard file, and the manifest.
//!
//! Every integer is little-endian. Records and the index start at offsets that are multiples of 8,
//! so the tensors of an uncompressed record are aligned in the memory map.

use std::path::Path;

use serde::{Deserialize, Serialize};
use stokehold_core::choice::Choice;
use stokehold_core::{DType, Error, Result};

/// Version of the shard format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The manifest's `format` field.
pub const MANIFEST_FORMAT: &str = "stokehold-shards";
/// File name of the manifest inside a dataset folder.
pub const MANIFEST_NAME: &str = "manifest.json";
/// Suffix of files being written; they never count as part of a dataset.
pub const TMP_SUFFIX: &str = ".tmp";
/// First 8 bytes of a shard file.
pub const HEADER_MAGIC: &[u8; 8] = b"STKSHARD";
/// Last 8 bytes of a shard file.
pub const FOOTER_MAGIC: &[u8; 8] = b"STKSHEND";
/// Header size in bytes.
pub const HEADER_LEN: usize = 32;
/// Footer size in bytes.
pub const FOOTER_LEN: usize = 32;
/// Size of one index entry in bytes.
pub const ENTRY_LEN: usize = 24;
/// Default target size of a shard: 256 MiB. Shards of 100-300 MB are large enough that opening and
/// mapping them costs nothing next to reading them, and that a remote store streams each at full
/// speed; small enough that a folder of a few hundred shards spreads over ranks and workers, and a
/// shard-local (windowed) shuffle still mixes across many of them.
pub const DEFAULT_SHARD_BYTES: u64 = 256 << 20;

/// Name of shard number `i` in a folder.
pub fn shard_name(i: usize) -> String {
    format!("shard-{i:05}.stk")
}

/// How each record's bytes are compressed (each record on its own, so any record decodes alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Stored as encoded: tensors are zero-copy views of the memory map.
    None,
    /// LZ4 block format (fast; about 2x on typical features).
    Lz4,
    /// Zstandard at the given level (smaller, slower to write).
    Zstd,
}

impl Compression {
    /// The codec byte stored in the index.
    pub fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
        }
    }

    /// Inverse of [`Compression::code`].
    pub fn from_code(code: u8) -> Option<Self> {
        [Compression::None, Compression::Lz4, Compression::Zstd]
            .get(code as usize)
            .copied()
    }

    /// Parses `none`, `lz4` or `zstd` ([`Choice::parse`] for `write_shards`).
    pub fn parse(s: &str) -> Result<Self> {
        <Self as Choice>::parse("write_shards", s)
    }
}

impl Choice for Compression {
    const ARG: &'static str = "compression";
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ];
}

impl std::fmt::Display for Compression {
    /// The name `parse` takes and the manifest stores: `none`, `lz4`, `zstd`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        })
    }
}

/// How a feature is stored: dense or ragged along axis 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A dense tensor.
    Tensor,
    /// A ragged column (values + row splits).
    Ragged,
}

/// One feature of the schema: name, dtype, kind and shape (`null` where a dimension varies).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardFeature {
    /// Feature name.
    pub name: String,
    /// Element type (numpy name in the manifest: `"float32"`, `"bytes"`, ...).
    #[serde(with = "dtype_name")]
    pub dtype: DType,
    /// Dense or ragged.
    pub kind: Kind,
    /// Shape of the (values) tensor per record; `None` where records differ; `None` overall when
    /// even the rank differs.
    pub shape: Option<Vec<Option<u64>>>,
}

/// DTypes by their numpy names, so that the manifest reads as numpy users expect.
mod dtype_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use stokehold_core::DType;

    pub fn serialize<S: Serializer>(d: &DType, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(d.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DType, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// One shard as the manifest lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardEntry {
    /// File name, relative to the folder (a plain name: no separators, no `..`).
    pub file: String,
    /// Records in this shard.
    pub records: u64,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// CRC32C of the whole file, as 8 hex digits.
    pub crc32c: String,
    /// Content fingerprint, checked when the folder is opened without reading the records: the
    /// dataset record this shard starts at (catches a reordered manifest) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_record: Option<u64>,
    /// ... and the CRC32C of the shard's index, 8 hex digits, as its footer holds it (catches a
    /// shard swapped in from another dataset: the index holds every record's offset, sizes and
    /// checksum). Absent in manifests written before these fields: those folders still open,
    /// with names and counts checked only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_crc32c: Option<String>,
}

/// The manifest: the last file written, so a folder with a manifest is complete.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`MANIFEST_FORMAT`].
    pub format: String,
    /// Format version ([`FORMAT_VERSION`]).
    pub version: u32,
    /// Total records (sum over shards).
    pub num_records: u64,
    /// Features of every record, in record order.
    pub schema: Vec<ShardFeature>,
    /// Compression the writer asked for (records that do not shrink are stored raw).
    pub compression: Compression,
    /// The shards in record order.
    pub shards: Vec<ShardEntry>,
    /// Free-form facts about the write (source pipeline, seed, target size, ...).
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// The fixed 32-byte footer of a shard file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Footer {
    /// Where the index starts.
    pub index_offset: u64,
    /// Records in the shard.
    pub records: u64,
    /// CRC32C of the index bytes.
    pub index_crc: u32,
}

impl Footer {
    /// Serialises the footer.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut b = [0u8; FOOTER_LEN];
        b[0..8].copy_from_slice(&self.index_offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.records.to_le_bytes());
        b[16..20].copy_from_slice(&self.index_crc.to_le_bytes());
        b[20..24].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[24..32].copy_from_slice(FOOTER_MAGIC);
        b
    }

    /// Parses a footer, naming `path` in errors.
    pub fn decode(b: &[u8], path: &Path, offset: u64) -> Result<Self> {
        if b.len() != FOOTER_LEN || &b[24..32] != FOOTER_MAGIC {
            return Err(Error::corrupt(
                path,
                offset,
                "no shard footer (truncated or not a shard)",
            ));
        }
        let version = u32_at(b, 20);
        if version != FORMAT_VERSION {
            return Err(Error::corrupt(
                path,
                offset,
                format!("shard format version {version}; this build reads {FORMAT_VERSION}"),
            ));
        }
        Ok(Footer {
            index_offset: u64_at(b, 0),
            records: u64_at(b, 8),
            index_crc: u32_at(b, 16),
        })
    }
}

/// The 32-byte header: magic, version, then zeros (reserved).
pub fn encode_header() -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    b[0..8].copy_from_slice(HEADER_MAGIC);
    b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    b
}

/// Checks a header, naming `path` in errors.
pub fn check_header(b: &[u8], path: &Path) -> Result<()> {
    if b.len() < HEADER_LEN || &b[0..8] != HEADER_MAGIC {
        return Err(Error::corrupt(path, 0, "not a stokehold shard (bad magic)"));
    }
    let version = u32_at(b, 8);
    if version != FORMAT_VERSION {
        return Err(Error::corrupt(
            path,
            8,
            format!("shard format version {version}; this build reads {FORMAT_VERSION}"),
        ));
    }
    Ok(())
}

/// One index entry: where a record's stored bytes are and how to check and decode them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry {
    /// Offset of the stored bytes in the file.
    pub offset: u64,
    /// Length of the stored (possibly compressed) bytes.
    pub stored_len: u32,
    /// Length after decompression.
    pub raw_len: u32,
    /// CRC32C of the stored bytes.
    pub crc: u32,
    /// Codec byte ([`Compression::code`]).
    pub codec: u8,
}

impl Entry {
    /// Serialises the entry.
    pub fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut b = [0u8; ENTRY_LEN];
        b[0..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..12].copy_from_slice(&self.stored_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.raw_len.to_le_bytes());
        b[16..20].copy_from_slice(&self.crc.to_le_bytes());
        b[20] = self.codec;
        b
    }

    /// Parses an entry (`b` must be [`ENTRY_LEN`] bytes).
    pub fn decode(b: &[u8]) -> Self {
        Entry {
            offset: u64_at(b, 0),
            stored_len: u32_at(b, 8),
            raw_len: u32_at(b, 12),
            crc: u32_at(b, 16),
            codec: b[20],
        }
    }
}

/// CRC32C (Castagnoli) of `b`.
pub fn crc32c(b: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, b) as u32
}

/// Reads a little-endian u64 at `at` (the caller checked the bounds).
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Reads a little-endian u32 at `at` (the caller checked the bounds).
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The largest expansion a compressed record may declare (raw / stored bytes, plus
/// [`RATIO_SLACK`]); the writer stores a record raw rather than pass it, so no file it wrote is
/// refused. Beyond it a record is taken for corrupt before anything is allocated.
pub const MAX_RATIO: u64 = 1024;
/// Bytes a tiny record may expand to whatever its ratio.
pub const RATIO_SLACK: u64 = 64 << 10;

/// Whether `raw_len` bytes may come out of `stored_len` compressed bytes ([`MAX_RATIO`]).
pub fn ratio_ok(stored_len: u32, raw_len: u32) -> bool {
    raw_len as u64 <= (stored_len as u64) * MAX_RATIO + RATIO_SLACK
}

/// True for a shard file name a manifest may list: a plain name inside the folder.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0', ':'])
        && !name.ends_with(TMP_SUFFIX)
        && crate::atomic::is_temp_name(name).is_none()
        && name != crate::atomic::LOCK_NAME
        && name != MANIFEST_NAME
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_and_entry_round_trip() {
        let f = Footer {
            index_offset: 4096,
            records: 17,
            index_crc: 0xdead_beef,
        };
        assert_eq!(Footer::decode(&f.encode(), Path::new("x"), 0).unwrap(), f);
        let e = Entry {
            offset: 40,
            stored_len: 9,
            raw_len: 12,
            crc: 7,
            codec: 2,
        };
        assert_eq!(Entry::decode(&e.encode()), e);
    }

    #[test]
    fn crc32c_known_value() {
        // RFC 3720 test vector: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
    }

    #[test]
    fn names_outside_the_folder_are_not_plain() {
        for bad in [
            "../x.stk",
            "/etc/passwd",
            "a/b.stk",
            "..",
            "",
            "c:\\x",
            "manifest.json",
        ] {
            assert!(!is_plain_name(bad), "{bad}");
        }
        assert!(is_plain_name("shard-00001.stk"));
    }
}

//! Writing a shard folder, atomically.
//!
//! Each shard is written under a temporary name (`.shard-NNNNN.stk.tmp-<pid>-<n>`, the crate's one
//! convention, [`crate::atomic`]), synced, and renamed when full; the manifest is written last the
//! same way, and the folder synced. A folder without `manifest.json` is therefore never taken for a
//! dataset, whatever moment a write was killed at, and starting the write again removes the
//! leftovers of the interrupted one first. A writer holds the folder's lock
//! (`.stokehold.lock`) from `create` to drop: a second writer on the folder is refused.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use stokehold_core::{Error, Example, Result, Value};

use super::codec;
use super::format::*;
use crate::atomic::{sync_dir, write_atomic, FolderLock, TempFile};

/// Options of a write; every field documents its default.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// Target shard size in bytes; a shard closes once adding a record would pass it (a shard
    /// always holds at least one record). Default [`DEFAULT_SHARD_BYTES`] (256 MiB).
    pub shard_bytes: u64,
    /// Per-record compression. Default [`Compression::None`] (zero-copy reads).
    pub compression: Compression,
    /// zstd level when `compression` is zstd. Default 3.
    pub zstd_level: i32,
    /// Writes the records in a seeded random order (a keyed permutation; random-access input
    /// only). Default `None`: input order.
    pub shuffle_seed: Option<u64>,
    /// Threads that read, encode and compress. Default: the machine's cores. The output is the
    /// same for any value.
    pub threads: usize,
    /// Replace a complete dataset already in the folder. Default false (refuse).
    pub overwrite: bool,
    /// Extra facts stored in the manifest's `metadata`.
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            shard_bytes: DEFAULT_SHARD_BYTES,
            compression: Compression::None,
            zstd_level: 3,
            shuffle_seed: None,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            overwrite: false,
            metadata: Default::default(),
        }
    }
}

/// Where a write stands, handed to the progress callback after every chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Progress {
    /// Records written so far.
    pub records: u64,
    /// Bytes written so far.
    pub bytes: u64,
    /// Shards completed so far.
    pub shards: usize,
    /// Records in the input, when known.
    pub total: Option<u64>,
}

/// A record encoded, compressed and checksummed, ready to append.
pub struct Encoded {
    stored: Vec<u8>,
    raw_len: u32,
    codec: u8,
    crc: u32,
}

/// Encodes and compresses one example (pure: safe to run on any thread).
pub fn encode_record(
    e: &Example,
    schema: &[ShardFeature],
    compression: Compression,
    level: i32,
) -> std::result::Result<Encoded, String> {
    let mut raw = Vec::with_capacity(e.nbytes() + 64);
    codec::encode(e, schema, &mut raw)?;
    let raw_len = u32::try_from(raw.len()).map_err(|_| "a record over 4 GiB".to_string())?;
    let packed = match compression {
        Compression::None => None,
        Compression::Lz4 => Some(lz4_flex::block::compress(&raw)),
        Compression::Zstd => Some(zstd::bulk::compress(&raw, level).map_err(|e| e.to_string())?),
    };
    // A record that does not shrink is stored raw, and then reads zero-copy.
    let (stored, codec) = match packed {
        // Past the readers' expansion limit it is stored raw too (see `MAX_RATIO`).
        Some(p) if p.len() < raw.len() && ratio_ok(p.len() as u32, raw_len) => {
            (p, compression.code())
        }
        _ => (raw, Compression::None.code()),
    };
    Ok(Encoded {
        crc: crc32c(&stored),
        stored,
        raw_len,
        codec,
    })
}

impl Encoded {
    /// A record as another shard file stores it (bytes, decompressed length, codec, CRC32C of the
    /// bytes), appended as is: the assembler (`assemble.rs`) moves records without re-encoding.
    pub fn from_stored(stored: Vec<u8>, raw_len: u32, codec: u8, crc: u32) -> Encoded {
        Encoded {
            stored,
            raw_len,
            codec,
            crc,
        }
    }
}

/// The schema an example implies (shapes fixed to its own).
pub fn schema_of(e: &Example) -> Vec<ShardFeature> {
    e.iter()
        .map(|(name, v)| {
            let (kind, shape) = match v {
                Value::Tensor(t) => (Kind::Tensor, t.shape()),
                Value::Ragged(r) => (Kind::Ragged, r.values().shape()),
            };
            let shape = Some(shape.iter().map(|d| Some(*d as u64)).collect());
            ShardFeature {
                name: name.to_string(),
                dtype: v.dtype(),
                kind,
                shape,
            }
        })
        .collect()
}

/// Widens `schema`'s shapes so that `e` fits (a differing dimension becomes `None`).
fn merge_shapes(schema: &mut [ShardFeature], e: &Example) {
    for (spec, (_, v)) in schema.iter_mut().zip(e.iter()) {
        let shape = match v {
            Value::Tensor(t) => t.shape(),
            Value::Ragged(r) => r.values().shape(),
        };
        if let Some(s) = &mut spec.shape {
            if s.len() != shape.len() {
                spec.shape = None;
            } else {
                for (a, b) in s.iter_mut().zip(shape) {
                    if *a != Some(*b as u64) {
                        *a = None;
                    }
                }
            }
        }
    }
}

/// Size and alignment of the writes to a shard file. Writing whole, aligned 2 MiB chunks lets the
/// page cache hold the file in 2 MiB folios (ext4 and XFS on Linux 6.x do), which readers then
/// map with huge pages: a random read of a page-cached shard costs one TLB entry per 2 MiB. With
/// 1 MiB `BufWriter` flushes the same file is cached in 4 KiB pages: random `get` of 1 KiB
/// records ran at 0.68 M/s instead of 0.85 M/s (`shard_read_bench DIR 1000000 1024 3`, dev VM).
const CHUNK: usize = 2 << 20;

/// A file written in [`CHUNK`]-sized, [`CHUNK`]-aligned writes (the last one shorter).
struct ChunkWriter {
    file: File,
    buf: Vec<u8>,
}

impl ChunkWriter {
    fn new(file: File) -> Self {
        ChunkWriter {
            file,
            buf: Vec::with_capacity(CHUNK),
        }
    }

    fn write_all(&mut self, mut b: &[u8]) -> std::io::Result<()> {
        while !b.is_empty() {
            let take = b.len().min(CHUNK - self.buf.len());
            self.buf.extend_from_slice(&b[..take]);
            b = &b[take..];
            if self.buf.len() == CHUNK {
                self.file.write_all(&self.buf)?;
                self.buf.clear();
            }
        }
        Ok(())
    }

    /// Writes what is buffered and returns the file.
    fn into_inner(mut self) -> std::io::Result<File> {
        self.file.write_all(&self.buf)?;
        Ok(self.file)
    }
}

struct OpenShard {
    out: ChunkWriter,
    tmp: TempFile,
    name: String,
    pos: u64,
    entries: Vec<Entry>,
    crc: crc_fast::Digest,
}

impl OpenShard {
    fn write(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.out.write_all(b)?;
        self.crc.update(b);
        self.pos += b.len() as u64;
        Ok(())
    }
}

/// Writes records into a shard folder; [`ShardWriter::finish`] makes the folder a dataset.
pub struct ShardWriter {
    dir: PathBuf,
    opts: WriteOptions,
    schema: Option<Vec<ShardFeature>>,
    shards: Vec<ShardEntry>,
    cur: Option<OpenShard>,
    records: u64,
    bytes: u64,
    finished: bool,
    _lock: FolderLock,
}

impl ShardWriter {
    /// Prepares `dir` (created if missing): refuses a complete dataset unless `overwrite`, and
    /// removes what an interrupted write left (`shard-*.stk`, `*.tmp`) so a restart is clean.
    pub fn create(dir: impl AsRef<Path>, opts: WriteOptions) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        if opts.shard_bytes == 0 {
            return Err(Error::invalid("shard_bytes must be > 0"));
        }
        fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        // Taking the lock also removes temporary files a killed run left.
        let lock = FolderLock::take(&dir)?;
        let manifest = dir.join(MANIFEST_NAME);
        if manifest.exists() {
            if !opts.overwrite {
                return Err(Error::invalid(format!(
                    "{} already holds a complete dataset; pass overwrite to replace it",
                    dir.display()
                )));
            }
            // Manifest first: from here on the folder reads as incomplete, never as a mix.
            fs::remove_file(&manifest).map_err(|e| Error::io(&manifest, e))?;
            sync_dir(&dir)?;
        }
        for entry in fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // `.tmp` names are those of writers before the one temporary-name convention.
            let ours = (name.starts_with("shard-")
                && (name.ends_with(".stk") || name.ends_with(".stk.tmp")))
                || name == format!("{MANIFEST_NAME}{TMP_SUFFIX}");
            if ours {
                fs::remove_file(entry.path()).map_err(|e| Error::io(entry.path(), e))?;
            }
        }
        Ok(ShardWriter {
            dir,
            opts,
            schema: None,
            shards: Vec::new(),
            cur: None,
            records: 0,
            bytes: 0,
            finished: false,
            _lock: lock,
        })
    }

    /// Encodes and appends one example.
    pub fn push(&mut self, e: &Example) -> Result<()> {
        let schema = self.observe(e)?;
        let enc = encode_record(e, &schema, self.opts.compression, self.opts.zstd_level)
            .map_err(|r| self.record_error(r))?;
        self.push_encoded(enc)
    }

    /// Checks `e` against the schema (setting it from the first example) and widens shapes;
    /// returns the schema to encode with.
    pub fn observe(&mut self, e: &Example) -> Result<Vec<ShardFeature>> {
        match &mut self.schema {
            None => self.schema = Some(schema_of(e)),
            Some(s) => merge_shapes(s, e),
        }
        Ok(self.schema.clone().expect("set above"))
    }

    /// Merges the schema of records about to be pushed with [`ShardWriter::push_encoded`] (the
    /// schema of a part folder): names, kinds and dtypes must match; differing shapes widen as
    /// [`ShardWriter::observe`] widens them.
    pub fn merge_schema(&mut self, part: &[ShardFeature], what: &str) -> Result<()> {
        let Some(s) = &mut self.schema else {
            self.schema = Some(part.to_vec());
            return Ok(());
        };
        let key = |f: &ShardFeature| (f.name.clone(), f.kind, f.dtype);
        if s.len() != part.len() || s.iter().zip(part).any(|(a, b)| key(a) != key(b)) {
            let show = |v: &[ShardFeature]| -> Vec<String> {
                v.iter()
                    .map(|f| format!("{} {:?} {:?}", f.name, f.kind, f.dtype))
                    .collect()
            };
            return Err(Error::schema(
                "write_shards",
                format!(
                    "{what} has features {:?}, earlier records {:?}",
                    show(part),
                    show(s)
                ),
            ));
        }
        for (a, b) in s.iter_mut().zip(part) {
            a.shape = match (&a.shape, &b.shape) {
                (Some(x), Some(y)) if x.len() == y.len() => Some(
                    x.iter()
                        .zip(y)
                        .map(|(p, q)| if p == q { *p } else { None })
                        .collect(),
                ),
                _ => None,
            };
        }
        Ok(())
    }

    fn record_error(&self, reason: String) -> Error {
        Error::schema("write_shards", format!("record {}: {reason}", self.records))
    }

    /// Appends a record encoded by [`encode_record`].
    pub fn push_encoded(&mut self, enc: Encoded) -> Result<()> {
        let full = self.cur.as_ref().is_some_and(|c| {
            !c.entries.is_empty() && c.pos + enc.stored.len() as u64 > self.opts.shard_bytes
        });
        if full {
            self.close_shard()?;
        }
        if self.cur.is_none() {
            self.open_shard()?;
        }
        let cur = self.cur.as_mut().expect("opened above");
        let entry = Entry {
            offset: cur.pos,
            stored_len: enc.stored.len() as u32,
            raw_len: enc.raw_len,
            crc: enc.crc,
            codec: enc.codec,
        };
        let pad = enc.stored.len().next_multiple_of(8) - enc.stored.len();
        let tmp = cur.tmp.path().to_path_buf();
        cur.write(&enc.stored)
            .and_then(|_| cur.write(&[0u8; 8][..pad]))
            .map_err(|e| Error::io(tmp, e))?;
        cur.entries.push(entry);
        self.records += 1;
        self.bytes += (enc.stored.len() + pad) as u64;
        Ok(())
    }

    fn open_shard(&mut self) -> Result<()> {
        let name = shard_name(self.shards.len());
        let (tmp, file) = TempFile::create_in_locked(self.dir.join(&name))?;
        let mut s = OpenShard {
            out: ChunkWriter::new(file),
            tmp,
            name,
            pos: 0,
            entries: Vec::new(),
            crc: crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi),
        };
        s.write(&encode_header())
            .map_err(|e| Error::io(s.tmp.path(), e))?;
        self.cur = Some(s);
        Ok(())
    }

    fn close_shard(&mut self) -> Result<()> {
        let Some(mut s) = self.cur.take() else {
            return Ok(());
        };
        let index: Vec<u8> = s.entries.iter().flat_map(|e| e.encode()).collect();
        let footer = Footer {
            index_offset: s.pos,
            records: s.entries.len() as u64,
            index_crc: crc32c(&index),
        };
        let tmp = s.tmp.path().to_path_buf();
        s.write(&index)
            .and_then(|_| s.write(&footer.encode()))
            .map_err(|e| Error::io(&tmp, e))?;
        let file = s.out.into_inner().map_err(|e| Error::io(&tmp, e))?;
        s.tmp.commit(Some(file))?;
        let first: u64 = self.shards.iter().map(|e| e.records).sum();
        self.shards.push(ShardEntry {
            first_record: Some(first),
            index_crc32c: Some(format!("{:08x}", footer.index_crc)),
            file: s.name,
            records: s.entries.len() as u64,
            bytes: s.pos,
            crc32c: format!("{:08x}", s.crc.finalize() as u32),
        });
        Ok(())
    }

    /// Records written so far.
    pub fn progress(&self, total: Option<u64>) -> Progress {
        Progress {
            records: self.records,
            bytes: self.bytes,
            shards: self.shards.len(),
            total,
        }
    }

    /// Closes the last shard and writes the manifest: from now on the folder opens as a dataset.
    pub fn finish(mut self) -> Result<Manifest> {
        self.close_shard()?;
        let mut metadata = self.opts.metadata.clone();
        metadata.insert("target_shard_bytes".into(), self.opts.shard_bytes.into());
        metadata.insert("shuffle_seed".into(), self.opts.shuffle_seed.into());
        let manifest = Manifest {
            format: MANIFEST_FORMAT.into(),
            version: FORMAT_VERSION,
            num_records: self.records,
            schema: self.schema.clone().unwrap_or_default(),
            compression: self.opts.compression,
            shards: self.shards.clone(),
            metadata,
        };
        let text = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
        write_atomic(self.dir.join(MANIFEST_NAME), &text)?;
        self.finished = true;
        Ok(manifest)
    }
}

impl Drop for ShardWriter {
    /// An abandoned write removes its files (best effort): the folder is left absent, not half.
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // The open shard's temporary file goes with its `TempFile`.
        drop(self.cur.take());
        for s in &self.shards {
            let _ = fs::remove_file(self.dir.join(&s.file));
        }
    }
}

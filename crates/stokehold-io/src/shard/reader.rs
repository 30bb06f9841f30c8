//! Reading a shard folder as a random-access dataset.
//!
//! Opening checks everything that costs no more than reading the manifest, the footers and the
//! indexes: the manifest's format and version, that every shard name is a plain name inside the
//! folder, each file's size, magic, version, record count and index checksum. Each record's
//! checksum is checked when it is read; [`ShardDataset::verify`] also checks whole-file checksums.
//! Record `i` is found by a binary search over the shards' first indices (a few hundred at most)
//! and one index entry: no scan, no per-record state in memory.

use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use stokehold_core::dataset::prefetch_memory;
use stokehold_core::rng::key;
use stokehold_core::{stack_examples, Error, Example, Hint, MapDataset, Result};

use super::codec;
use super::format::*;
use crate::storage::stream_ahead::StreamAhead;
use crate::storage::{Object, Source};

/// Bytes of a record that a `Read` hint prefetches: its header and first data line. The CPU's own
/// prefetcher streams the rest once those are read; prefetching up to 4 KiB of a 1 KiB record
/// instead filled the core's miss buffers and stalled it (global-shuffle epoch of 1M 1 KiB
/// records: 1.01 M/s with 4096 here, 1.17 M/s with 128; `shard_read_bench DIR 1000000 1024 3`).
const PREFETCH_BYTES: usize = 128;

/// How long (ns) a single-record read trusts its shard's last length check (see
/// [`ShardDataset::check_len`]).
const CHECK_EVERY: u64 = 1_000_000;

struct ShardFile {
    path: PathBuf,
    /// Kept open to `fstat` before reads (see [`ShardDataset::check_len`]); `None` remotely.
    file: Option<Arc<File>>,
    /// A shard in an object store: read record by record with ranged reads; `data` is then
    /// empty.
    remote: Option<RemoteShard>,
    /// When the length was last found intact, in ns since `opened`.
    checked_at: AtomicU64,
    opened: Instant,
    /// The memory map of a local shard (empty for a remote one).
    data: Bytes,
    index_offset: usize,
    records: u64,
    index_crc: u32,
}

/// A remote shard: the object (each read pinned to the version it was opened at) and its whole
/// index, fetched at open in one request, so locating a record costs no request.
#[derive(Clone)]
struct RemoteShard {
    object: Object,
    index: Bytes,
}

impl ShardFile {
    /// The index entry of record `local` (< records): in the map, or in the fetched index.
    fn entry(&self, local: u64) -> &[u8] {
        let at = local as usize * ENTRY_LEN;
        match &self.remote {
            Some(r) => &r.index[at..at + ENTRY_LEN],
            None => {
                let at = self.index_offset + at;
                &self.data[at..at + ENTRY_LEN]
            }
        }
    }
}

/// A shard folder opened for reading: a [`MapDataset`] whose tensors are zero-copy views of the
/// memory map when records are stored uncompressed.
pub struct ShardDataset {
    dir: PathBuf,
    manifest: Manifest,
    shards: Vec<ShardFile>,
    starts: Vec<u64>,
    names: Vec<Arc<str>>,
    verify_records: bool,
    /// Remote shards fetched whole when the reads go in order (`None` for local shards).
    stream: Option<Arc<StreamAhead>>,
}

impl ShardDataset {
    /// Opens `dir`, checking records' checksums as they are read.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir, true)
    }

    /// Opens `dir`; `verify_records` (default true) checks each record's CRC32C on read.
    pub fn open_with(dir: impl AsRef<Path>, verify_records: bool) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let manifest = read_manifest(&dir)?;
        let mut shards = Vec::with_capacity(manifest.shards.len());
        let mut starts = Vec::with_capacity(manifest.shards.len());
        let mut total = 0u64;
        let mpath = dir.join(MANIFEST_NAME);
        let mut seen: std::collections::HashMap<&str, usize> = Default::default();
        for (k, entry) in manifest.shards.iter().enumerate() {
            if let Some(j) = seen.insert(entry.file.as_str(), k) {
                return Err(Error::corrupt(
                    &mpath,
                    0,
                    format!(
                        "shard {:?} is listed twice (entries {j} and {k}); refused",
                        entry.file
                    ),
                ));
            }
            starts.push(total);
            let s = open_shard(&dir, entry)?;
            check_fingerprint(&s, entry, total)?;
            total += s.records;
            shards.push(s);
        }
        if total != manifest.num_records {
            return Err(Error::corrupt(
                mpath,
                0,
                format!(
                    "num_records is {} but the shards hold {total}",
                    manifest.num_records
                ),
            ));
        }
        let names = manifest
            .schema
            .iter()
            .map(|f| Arc::from(f.name.as_str()))
            .collect();
        let remote: Option<Vec<Object>> = shards
            .iter()
            .map(|s| s.remote.as_ref().map(|r| r.object.clone()))
            .collect();
        let stream = remote
            .filter(|r| !r.is_empty())
            .map(|r| Arc::new(StreamAhead::new(r)));
        Ok(ShardDataset {
            dir,
            manifest,
            shards,
            starts,
            names,
            verify_records,
            stream,
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// (shard number, record within the shard) of dataset record `i` (< len).
    pub fn locate(&self, i: u64) -> (usize, u64) {
        let s = self.starts.partition_point(|&st| st <= i) - 1;
        (s, i - self.starts[s])
    }

    /// First dataset record of each shard, and the total at the end.
    pub fn shard_starts(&self) -> Vec<u64> {
        let mut v = self.starts.clone();
        v.push(self.manifest.num_records);
        v
    }

    /// The stored bytes of record `i` after decompression (checksum checked when enabled).
    pub fn raw_record(&self, i: u64) -> Result<Bytes> {
        Ok(self.to_bytes(i, self.record(i)?))
    }

    /// Record `i`'s bytes from [`ShardDataset::record`] as `Bytes`: a view of the map when borrowed.
    fn to_bytes(&self, i: u64, rec: Cow<'_, [u8]>) -> Bytes {
        match rec {
            Cow::Borrowed(b) => self.shards[self.locate(i).0].data.slice_ref(b),
            Cow::Owned(v) => Bytes::from(v),
        }
    }

    /// [`ShardDataset::raw_record`] without taking a reference on the map: borrowed when the
    /// record is stored uncompressed. The batch path uses it, since readers on several threads
    /// all counting references on one map make its counter's cache line bounce between cores.
    fn record(&self, i: u64) -> Result<Cow<'_, [u8]>> {
        self.check_len(self.locate(i).0, false)?;
        self.record_mapped(i)
    }

    /// Refuses to read shard `s` when its file is now shorter than its map: touching a mapped page
    /// past the end of the file raises SIGBUS, which kills the process. `force` (a batch: one
    /// `fstat` per shard it touches) always checks; a single record checks when the last
    /// intact check of its shard is over [`CHECK_EVERY`] old, since an `fstat` per record costs
    /// more than reading the record (sequential `get` of 1 KiB records fell from 3.06 to 0.96
    /// M/s). It catches a file truncated in place between reads; not a truncation during the
    /// read itself, nor (for single records) within [`CHECK_EVERY`] of the last check. Figures:
    /// docs/FORMAT.md, "Files changed underneath".
    fn check_len(&self, s: usize, force: bool) -> Result<()> {
        let sh = &self.shards[s];
        // A remote shard's reads are pinned to its ETag instead: a changed object is refused.
        let Some(file) = &sh.file else {
            return Ok(());
        };
        let now = sh.opened.elapsed().as_nanos() as u64;
        if !force && now.saturating_sub(sh.checked_at.load(Ordering::Relaxed)) < CHECK_EVERY {
            return Ok(());
        }
        let len = file.metadata().map_err(|e| Error::io(&sh.path, e))?.len();
        if len < sh.data.len() as u64 {
            return Err(Error::corrupt(
                &sh.path,
                len,
                format!(
                    "file shrank to {len} bytes while mapped ({} mapped): changed underneath \
                     the reader; refused rather than crash on the missing pages",
                    sh.data.len()
                ),
            ));
        }
        sh.checked_at.store(now, Ordering::Relaxed);
        Ok(())
    }

    /// [`ShardDataset::record`] without the length check (done by the caller).
    fn record_mapped(&self, i: u64) -> Result<Cow<'_, [u8]>> {
        let (s, local) = self.locate(i);
        let sh = &self.shards[s];
        let at = sh.index_offset + local as usize * ENTRY_LEN;
        let e = Entry::decode(sh.entry(local));
        let bad = |offset: u64, why: String| {
            Error::corrupt(
                &sh.path,
                offset,
                format!("record {local} (dataset record {i}): {why}"),
            )
        };
        let end = e.offset.checked_add(e.stored_len as u64);
        if e.offset < HEADER_LEN as u64 || end.is_none_or(|end| end > sh.index_offset as u64) {
            return Err(bad(
                at as u64,
                "index entry points outside the records".into(),
            ));
        }
        let end = end.expect("checked");
        match &sh.remote {
            None => self.unpack(i, &e, &sh.data[e.offset as usize..end as usize]),
            Some(r) => {
                let stored = match self.whole_shard(s, i)? {
                    Some(whole) => whole.slice(e.offset as usize..end as usize),
                    None => r.object.read_range(e.offset..end)?,
                };
                let rec = self.unpack(i, &e, &stored)?;
                Ok(Cow::Owned(rec.into_owned()))
            }
        }
    }

    /// Checks and decompresses record `i`'s stored bytes `stored` (its index entry `e`).
    fn unpack<'a>(&self, i: u64, e: &Entry, stored: &'a [u8]) -> Result<Cow<'a, [u8]>> {
        let (s, local) = self.locate(i);
        let sh = &self.shards[s];
        let at = sh.index_offset + local as usize * ENTRY_LEN;
        let bad = |offset: u64, why: String| {
            Error::corrupt(
                &sh.path,
                offset,
                format!("record {local} (dataset record {i}): {why}"),
            )
        };
        if self.verify_records && crc32c(stored) != e.crc {
            return Err(bad(
                e.offset,
                format!("checksum mismatch (stored {:08x})", e.crc),
            ));
        }
        let raw_len = e.raw_len as usize;
        // Checked before allocating: a crafted entry could declare 4 GiB for a few bytes.
        if e.codec != Compression::None.code() && !ratio_ok(e.stored_len, e.raw_len) {
            return Err(bad(
                at as u64,
                format!(
                    "declares {raw_len} bytes from {} compressed (over the {MAX_RATIO}x limit)",
                    e.stored_len
                ),
            ));
        }
        let raw = match Compression::from_code(e.codec) {
            Some(Compression::None) => return Ok(Cow::Borrowed(stored)),
            Some(Compression::Lz4) => {
                let mut out = vec![0u8; raw_len];
                lz4_flex::block::decompress_into(stored, &mut out)
                    .map(|n| out.truncate(n))
                    .map_err(|x| bad(e.offset, format!("lz4: {x}")))?;
                out
            }
            Some(Compression::Zstd) => zstd::bulk::decompress(stored, raw_len)
                .map_err(|x| bad(e.offset, format!("zstd: {x}")))?,
            None => return Err(bad(at as u64, format!("unknown codec {}", e.codec))),
        };
        if raw.len() != raw_len {
            return Err(bad(
                e.offset,
                format!("{} bytes decompressed, index says {raw_len}", raw.len()),
            ));
        }
        Ok(Cow::Owned(raw))
    }

    /// The shard's map and the index entry of dataset record `i` (< len); `None` past the map (a
    /// corrupt footer).
    fn entry_bytes(&self, i: u64) -> Option<(&Bytes, &[u8])> {
        let (s, local) = self.locate(i);
        let sh = &self.shards[s];
        if sh.remote.is_some() {
            // Nothing to prefetch into the CPU's caches: the bytes are not here yet.
            return None;
        }
        let at = sh.index_offset + local as usize * ENTRY_LEN;
        Some((&sh.data, sh.data.get(at..at + ENTRY_LEN)?))
    }

    /// Prefetches up to `bytes` of record `i` (< len), reading its (by now cached) index entry.
    fn prefetch_record(&self, i: u64, bytes: usize) {
        // Decoding the entry reads the map: checked like a read (a hint never fails, so a file
        // that shrank is left for the read to report).
        if self.check_len(self.locate(i).0, false).is_ok() {
            self.prefetch_mapped(i, bytes);
        }
    }

    /// [`ShardDataset::prefetch_record`] without the length check (done by the caller).
    fn prefetch_mapped(&self, i: u64, bytes: usize) {
        let Some((data, entry)) = self.entry_bytes(i) else {
            return;
        };
        let e = Entry::decode(entry);
        let (off, len) = (e.offset as usize, e.stored_len as usize);
        // A corrupt entry must not panic here: reading the record reports it.
        if let Some(rec) = off.checked_add(len).and_then(|end| data.get(off..end)) {
            for line in (0..len.min(bytes)).step_by(64) {
                prefetch_memory(rec[line..].as_ptr());
            }
        }
    }

    /// Remote shard `s` whole, when the reads (this one of dataset record `i` included) go in
    /// order; `None` to read by range (see [`StreamAhead`]).
    fn whole_shard(&self, s: usize, i: u64) -> Result<Option<Bytes>> {
        match &self.stream {
            Some(st) => st.read(s, i),
            None => Ok(None),
        }
    }

    /// Records `rows` (< len) of a folder with remote shards: each shard's records in one
    /// [`Object::read_ranges`] call (neighbours coalesced into multi-MiB requests, requests run
    /// concurrently), then checked and decompressed like single reads.
    fn remote_records(&self, rows: &[u64]) -> Result<Vec<Cow<'static, [u8]>>> {
        let mut out: Vec<Option<Cow<'static, [u8]>>> = vec![None; rows.len()];
        let mut by_shard: std::collections::BTreeMap<usize, Vec<(usize, Entry)>> =
            Default::default();
        for (k, &i) in rows.iter().enumerate() {
            let (s, local) = self.locate(i);
            let sh = &self.shards[s];
            if sh.remote.is_none() {
                out[k] = Some(Cow::Owned(self.record_mapped(i)?.into_owned()));
                continue;
            }
            let e = Entry::decode(sh.entry(local));
            let end = e.offset.checked_add(e.stored_len as u64);
            if e.offset < HEADER_LEN as u64 || end.is_none_or(|end| end > sh.index_offset as u64) {
                // The single read reports it with every detail.
                return Err(self.record_mapped(i).err().unwrap_or_else(|| {
                    self.bad_record(i, "index entry points outside the records".into())
                }));
            }
            if let Some(whole) = self.whole_shard(s, i)? {
                let stored =
                    whole.slice(e.offset as usize..(e.offset + e.stored_len as u64) as usize);
                out[k] = Some(Cow::Owned(self.unpack(i, &e, &stored)?.into_owned()));
                continue;
            }
            by_shard.entry(s).or_default().push((k, e));
        }
        for (s, items) in by_shard {
            let r = self.shards[s].remote.as_ref().expect("remote shard");
            let ranges: Vec<std::ops::Range<u64>> = items
                .iter()
                .map(|(_, e)| e.offset..e.offset + e.stored_len as u64)
                .collect();
            let got = r.object.read_ranges(&ranges)?;
            for ((k, e), stored) in items.iter().zip(got) {
                out[*k] = Some(Cow::Owned(self.unpack(rows[*k], e, &stored)?.into_owned()));
            }
        }
        Ok(out
            .into_iter()
            .map(|r| r.expect("every row read"))
            .collect())
    }

    /// The error for dataset record `i` (< len) that does not decode.
    fn bad_record(&self, i: u64, why: String) -> Error {
        let (s, local) = self.locate(i);
        Error::corrupt(
            &self.shards[s].path,
            0,
            format!("record {local} (dataset record {i}): {why}"),
        )
    }

    /// Reads every byte: each file's CRC32C against the manifest, and every record (checksum and
    /// decoding). Errors name the file and the record.
    pub fn verify(&self) -> Result<()> {
        self.verify_with(&mut |_| {})
    }

    /// [`ShardDataset::verify`], telling `progress` the bytes of shard files checked so far.
    pub fn verify_with(&self, progress: &mut dyn FnMut(u64)) -> Result<()> {
        if self.stream.is_some() {
            return self.verify_remote(progress);
        }
        let mut done = 0;
        for (sh, entry) in self.shards.iter().zip(&self.manifest.shards) {
            let whole = match &sh.remote {
                Some(r) => r.object.read_all()?,
                None => sh.data.clone(),
            };
            let got = format!("{:08x}", crc32c(&whole));
            if got != entry.crc32c {
                return Err(Error::corrupt(
                    &sh.path,
                    0,
                    format!("file checksum {got}, manifest says {}", entry.crc32c),
                ));
            }
            done += entry.bytes;
            progress(done);
        }
        let strict = ShardDataset {
            verify_records: true,
            ..self.clone_handles()
        };
        (0..self.manifest.num_records).try_for_each(|i| strict.get(i).map(drop))
    }

    /// [`ShardDataset::verify`] of remote shards: each shard downloaded once (one `GET`), its
    /// CRC32C checked, then its records checked from those bytes (not read again by range).
    fn verify_remote(&self, progress: &mut dyn FnMut(u64)) -> Result<()> {
        let n = self.shards.len();
        let mut done = 0;
        for (s, (sh, entry)) in self.shards.iter().zip(&self.manifest.shards).enumerate() {
            let Some(r) = &sh.remote else { continue };
            let whole = r.object.read_all()?;
            let got = format!("{:08x}", crc32c(&whole));
            if got != entry.crc32c {
                return Err(Error::corrupt(
                    &sh.path,
                    0,
                    format!("file checksum {got}, manifest says {}", entry.crc32c),
                ));
            }
            let mut strict = ShardDataset {
                verify_records: true,
                stream: None,
                ..self.clone_handles()
            };
            strict.shards[s] = mapped_shard(sh.path.clone(), entry, None, whole)?;
            let end = if s + 1 < n {
                self.starts[s + 1]
            } else {
                self.len()
            };
            (self.starts[s]..end).try_for_each(|i| strict.get(i).map(drop))?;
            done += entry.bytes;
            progress(done);
        }
        Ok(())
    }

    fn clone_handles(&self) -> ShardDataset {
        ShardDataset {
            dir: self.dir.clone(),
            manifest: self.manifest.clone(),
            shards: self
                .shards
                .iter()
                .map(|s| ShardFile {
                    path: s.path.clone(),
                    file: s.file.clone(),
                    remote: s.remote.clone(),
                    checked_at: AtomicU64::new(s.checked_at.load(Ordering::Relaxed)),
                    opened: s.opened,
                    data: s.data.clone(),
                    ..*s
                })
                .collect(),
            starts: self.starts.clone(),
            names: self.names.clone(),
            verify_records: self.verify_records,
            stream: self.stream.clone(),
        }
    }
}

impl MapDataset for ShardDataset {
    fn len(&self) -> u64 {
        self.manifest.num_records
    }

    fn get(&self, index: u64) -> Result<Example> {
        let (_, i) = stokehold_core::checked::wrap_index(index, self.len(), || self.name())?;
        let raw = self.raw_record(i)?;
        codec::decode(&raw, &self.names).map_err(|why| self.bad_record(i, why))
    }

    /// A batch in three passes over its records, so that their cache misses overlap instead of
    /// queueing one record after another: prefetch every index entry; read the entries and
    /// prefetch the records (as `hint_batch` does); then read the records (checksums checked) and copy their tensors
    /// straight into the batch ([`codec::gather`]). Ragged or string features, or shapes that
    /// differ, go through decoded examples and `stack`; `None` (the element path, which reports
    /// the precise error) when those do not stack.
    fn get_batch(&self, indices: &[u64]) -> Result<Option<Example>> {
        let n = self.len();
        if n == 0 || indices.is_empty() {
            return Ok(None);
        }
        let rows: Vec<u64> = indices.iter().map(|&i| i % n).collect();
        // One length check per shard the batch touches (usually one or two), before the hints:
        // they read index entries too.
        let mut checked: Vec<usize> = Vec::new();
        for &i in &rows {
            let s = self.locate(i).0;
            if !checked.contains(&s) {
                self.check_len(s, true)?;
                checked.push(s);
            }
        }
        // `hint_batch`'s two passes, without a length check per record (done above).
        for &i in &rows {
            if let Some((_, entry)) = self.entry_bytes(i) {
                prefetch_memory(entry.as_ptr())
            }
        }
        for &i in &rows {
            self.prefetch_mapped(i, 4096);
        }
        let records = if self.shards.iter().any(|s| s.remote.is_some()) {
            self.remote_records(&rows)?
        } else {
            rows.iter()
                .map(|&i| self.record_mapped(i))
                .collect::<Result<Vec<_>>>()?
        };
        match codec::gather(&records, &self.names) {
            Ok(Some(batch)) => Ok(Some(batch)),
            Err((r, why)) => Err(self.bad_record(rows[r], why)),
            Ok(None) => {
                let elements = records
                    .into_iter()
                    .zip(&rows)
                    .map(|(rec, &i)| {
                        codec::decode(&self.to_bytes(i, rec), &self.names)
                            .map_err(|why| self.bad_record(i, why))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(stack_examples("batch", &elements).ok())
            }
        }
    }

    fn prefetch_useful(&self) -> bool {
        true
    }

    /// Records that do not stack give `None` (see `get_batch`).
    fn batch_pads(&self) -> bool {
        true
    }

    /// `Locate` prefetches the record's index entry; `Read`, sent closer, decodes that (by now
    /// cached) entry and prefetches the record's first [`PREFETCH_BYTES`], so a random read
    /// overlaps its dependent misses with the work on earlier records; `Whole` (a batch's hint)
    /// prefetches up to 4 KiB of the record.
    fn prefetch(&self, index: u64, hint: Hint) {
        let n = self.len();
        if n == 0 {
            return;
        }
        match hint {
            Hint::Locate => {
                if let Some((_, entry)) = self.entry_bytes(index % n) {
                    prefetch_memory(entry.as_ptr())
                }
            }
            Hint::Read => self.prefetch_record(index % n, PREFETCH_BYTES),
            // Up to 4 KiB: nothing runs alongside that the misses could stall.
            Hint::Whole => self.prefetch_record(index % n, 4096),
        }
    }

    /// Named by content (record count and shard checksums), not by path: a checkpoint stays valid
    /// when the folder is moved or copied.
    fn name(&self) -> String {
        let crcs: Vec<u64> = self
            .manifest
            .shards
            .iter()
            .map(|s| u64::from_str_radix(&s.crc32c, 16).unwrap_or(0))
            .collect();
        format!(
            "shards(n={}, id={:016x})",
            self.len(),
            key(self.len(), &crcs)
        )
    }
}

/// Reads and checks the manifest of `dir`; a missing manifest means an incomplete folder.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST_NAME);
    if crate::storage::is_remote(dir) {
        // Written last by every writer: without it the folder is incomplete.
        return match crate::storage::head(&path)? {
            Some(_) => parse_manifest(&path, &crate::storage::read(&path)?),
            // A missing bucket or refused credentials say so here.
            None if crate::storage::list(&format!("{}/*", dir.display()))?.is_empty() => {
                Err(Error::io(
                    dir,
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "no shard folder here: nothing is stored under this prefix",
                    ),
                ))
            }
            None => Err(Error::corrupt(
                dir,
                0,
                format!(
                    "incomplete dataset: no {MANIFEST_NAME} (a write was interrupted or is \
                     running, or the URL is wrong); write it again"
                ),
            )),
        };
    }
    let text = match crate::storage::read_regular(&path) {
        Ok(t) => t,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            // Not our folder at all (TFRecord files, images, ...): say what it holds instead.
            if let Some(what) = crate::sniff::describe_folder(dir) {
                return Err(Error::io(
                    dir,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, what),
                ));
            }
            let tmp = std::fs::read_dir(dir)
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .filter(|e| {
                            // The crate's one convention, and the `.tmp` names older writers used.
                            let n = e.file_name().to_string_lossy().into_owned();
                            crate::atomic::is_temp_name(&n).is_some() || n.ends_with(TMP_SUFFIX)
                        })
                        .count()
                })
                .map_err(|e| Error::io(dir, e))?;
            return Err(Error::corrupt(
                dir,
                0,
                format!(
                    "incomplete dataset: no {MANIFEST_NAME} (a write was interrupted or is \
                     running; {tmp} temporary files); write it again"
                ),
            ));
        }
        Err(e) => return Err(e),
    };
    parse_manifest(&path, &text)
}

/// Parses and checks the manifest text read from `path`.
fn parse_manifest(path: &Path, text: &[u8]) -> Result<Manifest> {
    let head: serde_json::Value = serde_json::from_slice(text)
        .map_err(|e| Error::corrupt(path, e.column() as u64, format!("not JSON: {e}")))?;
    if head.get("format").and_then(|f| f.as_str()) != Some(MANIFEST_FORMAT) {
        return Err(Error::corrupt(
            path,
            0,
            format!("not a {MANIFEST_FORMAT} manifest"),
        ));
    }
    let version = head.get("version").and_then(|v| v.as_u64());
    if version != Some(FORMAT_VERSION as u64) {
        return Err(Error::corrupt(
            path,
            0,
            format!(
                "unknown format version {}; this build reads version {FORMAT_VERSION}",
                head.get("version")
                    .map_or("(none)".into(), |v| v.to_string())
            ),
        ));
    }
    let m: Manifest = serde_json::from_value(head)
        .map_err(|e| Error::corrupt(path, 0, format!("bad manifest: {e}")))?;
    for s in &m.shards {
        if !is_plain_name(&s.file) {
            return Err(Error::corrupt(
                path,
                0,
                format!(
                    "shard file {:?} is not a plain name inside the folder (refused)",
                    s.file
                ),
            ));
        }
    }
    Ok(m)
}

fn open_shard(dir: &Path, entry: &ShardEntry) -> Result<ShardFile> {
    let path = dir.join(&entry.file);
    if crate::storage::is_remote(&path) {
        return match crate::storage::open(&path)? {
            // The installed object cache's local copy.
            Source::Mapped { file, data } => mapped_shard(path, entry, Some(file), data),
            Source::Remote(object) => remote_shard(path, entry, object),
        };
    }
    // Checked before opening: opening a FIFO for reading blocks until a writer appears, and a
    // device or socket is no shard either.
    let kind = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
    if !kind.is_file() {
        return Err(Error::corrupt(
            &path,
            0,
            format!(
                "not a regular file ({:?}); a shard must be a plain file",
                kind.file_type()
            ),
        ));
    }
    let (file, size) = crate::storage::open_regular(&path)?;
    check_size(&path, size, entry)?;
    // SAFETY: the map is read-only; a file changed underneath by another process can show
    // inconsistent bytes, which the checksums catch, but never unsafety in this process beyond
    // what any mmap reader accepts (documented in docs/FORMAT.md).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(&path, e))?;
    huge_pages(&map);
    mapped_shard(path, entry, Some(Arc::new(file)), Bytes::from_owner(map))
}

/// The size on disk (or of the object) against the manifest's.
fn check_size(path: &Path, size: u64, entry: &ShardEntry) -> Result<()> {
    if size != entry.bytes {
        return Err(Error::corrupt(
            path,
            size.min(entry.bytes),
            format!(
                "{size} bytes on disk, manifest says {} (truncated or replaced)",
                entry.bytes
            ),
        ));
    }
    if size < (HEADER_LEN + FOOTER_LEN) as u64 {
        return Err(Error::corrupt(path, 0, "too short for a shard"));
    }
    Ok(())
}

/// Checks the footer against the manifest and the index's extent; the index's byte range.
fn check_footer(
    path: &Path,
    entry: &ShardEntry,
    foot: &[u8],
    foot_at: u64,
) -> Result<(Footer, std::ops::Range<u64>)> {
    let footer = Footer::decode(foot, path, foot_at)?;
    if footer.records != entry.records {
        return Err(Error::corrupt(
            path,
            foot_at,
            format!(
                "footer says {} records, manifest says {}",
                footer.records, entry.records
            ),
        ));
    }
    let index_len = footer.records.checked_mul(ENTRY_LEN as u64);
    if index_len.and_then(|l| l.checked_add(footer.index_offset)) != Some(foot_at) {
        return Err(Error::corrupt(
            path,
            foot_at,
            "index does not end at the footer",
        ));
    }
    let range = footer.index_offset..foot_at;
    Ok((footer, range))
}

fn check_index(path: &Path, footer: &Footer, index: &[u8]) -> Result<()> {
    if crc32c(index) != footer.index_crc {
        return Err(Error::corrupt(
            path,
            footer.index_offset,
            "index checksum mismatch",
        ));
    }
    Ok(())
}

/// A shard whose bytes are all in `data` (a memory map).
fn mapped_shard(
    path: PathBuf,
    entry: &ShardEntry,
    file: Option<Arc<File>>,
    data: Bytes,
) -> Result<ShardFile> {
    check_size(&path, data.len() as u64, entry)?;
    check_header(&data, &path)?;
    let foot_at = data.len() - FOOTER_LEN;
    let (footer, index) = check_footer(&path, entry, &data[foot_at..], foot_at as u64)?;
    check_index(
        &path,
        &footer,
        &data[index.start as usize..index.end as usize],
    )?;
    Ok(ShardFile {
        path,
        file,
        remote: None,
        // Checked just now (`size` above).
        checked_at: AtomicU64::new(0),
        opened: Instant::now(),
        index_offset: footer.index_offset as usize,
        records: footer.records,
        index_crc: footer.index_crc,
        data,
    })
}

/// A shard in an object store: header and footer in one round of requests, then the whole index
/// in one more; records are read by range later.
fn remote_shard(path: PathBuf, entry: &ShardEntry, object: Object) -> Result<ShardFile> {
    let size = object.size();
    check_size(&path, size, entry)?;
    let foot_at = size - FOOTER_LEN as u64;
    let ends = object.read_ranges(&[0..HEADER_LEN as u64, foot_at..size])?;
    check_header(&ends[0], &path)?;
    let (footer, range) = check_footer(&path, entry, &ends[1], foot_at)?;
    let index = object.read_range(range)?;
    check_index(&path, &footer, &index)?;
    Ok(ShardFile {
        path,
        file: None,
        remote: Some(RemoteShard { object, index }),
        checked_at: AtomicU64::new(0),
        opened: Instant::now(),
        index_offset: footer.index_offset as usize,
        records: footer.records,
        index_crc: footer.index_crc,
        data: Bytes::new(),
    })
}

/// Checks a shard against its manifest fingerprint (when the manifest has one): where it starts
/// in the dataset, and its index checksum. Costs nothing: the footer is read already.
fn check_fingerprint(s: &ShardFile, entry: &ShardEntry, start: u64) -> Result<()> {
    if let Some(first) = entry.first_record {
        if first != start {
            return Err(Error::corrupt(
                &s.path,
                0,
                format!(
                    "listed out of order: the manifest lists it at dataset record {start}, but it \
                     was written to start at record {first}"
                ),
            ));
        }
    }
    if let Some(want) = &entry.index_crc32c {
        let got = format!("{:08x}", s.index_crc);
        if &got != want {
            return Err(Error::corrupt(
                &s.path,
                0,
                format!(
                    "index checksum {got}, manifest says {want}: the shard is not the one this \
                     dataset was written with (swapped in from another dataset, or replaced)"
                ),
            ));
        }
    }
    Ok(())
}

/// Asks for the map to be backed by 2 MiB pages where the page cache can give them: pages read in
/// through it are then cached as 2 MiB folios (the writer's aligned 2 MiB writes do the same for
/// files it just wrote), and a random read costs one TLB entry per 2 MiB instead of per 4 KiB.
/// A hint only: nothing changes where the kernel or the file system cannot do it.
fn huge_pages(map: &memmap2::Mmap) {
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    #[cfg(not(target_os = "linux"))]
    let _ = map;
}

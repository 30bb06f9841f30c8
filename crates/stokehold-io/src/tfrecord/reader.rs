//! Reading TFRecord framing: `u64 length | u32 masked_crc(length) | data | u32 masked_crc(data)`,
//! all little-endian.
//!
//! The reader owns one buffer of (decompressed) bytes and walks it record by record, so a record
//! costs one header check, one CRC over its data and one copy out. On a corrupt record it either
//! raises ([`OnCorrupt::Raise`], the default) an [`Error::Corrupt`] naming the file and the offset,
//! or ([`OnCorrupt::Skip`]) counts it and resynchronises:
//!
//! * bad data CRC under a valid header: the header's length is trusted, the record is skipped;
//! * bad length CRC: the reader scans forward one byte at a time for the next position whose
//!   header CRC is valid and whose record fits in the file (and whose data CRC is valid when
//!   verifying) and continues there: every step consumes at least one byte, so it never spins;
//! * truncated tail (a header or a record cut short by the end of the file): counted, then the
//!   file ends.
//!
//! Skipped records go to the pipeline's one skip log, core's [`ErrorLog`] (a
//! [`SkippedElement::record`] each, naming the file and the offset), which the dataset that
//! reads reports through `error_log()`, so that `error_logs(ds)` (Python: `ds.skipped()`)
//! finds them at any depth.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::skip::{ErrorLog, SkippedElement};
use stokehold_core::{Error, Result};

use super::compression::Compression;
use super::crc::masked_crc;

/// Bytes of a record header (length and its CRC) and footer (data CRC).
pub const HEADER: usize = 12;
/// Bytes of the footer (the data CRC).
pub const FOOTER: usize = 4;
/// First buffer size: small, so that opening many files (interleave) or short inputs stays cheap.
const FIRST_BUF: usize = 64 << 10;
/// The buffer doubles on compaction up to this size, so long files are read in large chunks.
const PREFERRED_BUF: usize = 1 << 20;

/// What to do with a corrupt record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnCorrupt {
    /// Fail with [`Error::Corrupt`] naming the file and offset (the default).
    #[default]
    Raise,
    /// Skip it, count it, and go on with the next good record.
    Skip,
}

/// Spelled as every op's skip policy is (`on_error="raise"` or `"skip"`).
impl stokehold_core::choice::Choice for OnCorrupt {
    const ARG: &'static str = "on_error";
    const CHOICES: &'static [(&'static str, Self)] =
        &[("raise", OnCorrupt::Raise), ("skip", OnCorrupt::Skip)];
}

/// Options of a TFRecord reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReadOptions {
    /// Compression of the files (default none).
    pub compression: Compression,
    /// Check each record's data CRC (default true). The length CRC is always checked: it costs
    /// eight bytes of CRC and guards against acting on a garbage length.
    pub verify: bool,
    /// Raise (default) or skip corrupt records.
    pub on_corrupt: OnCorrupt,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            compression: Compression::None,
            verify: true,
            on_corrupt: OnCorrupt::Raise,
        }
    }
}

/// Reads the records of one TFRecord file (or any byte stream in TFRecord framing).
pub struct RecordReader {
    path: PathBuf,
    src: Box<dyn Read + Send>,
    buf: Vec<u8>,
    /// Cursor and end of valid bytes in `buf`.
    lo: usize,
    hi: usize,
    /// Stream offset of `buf[0]`.
    base: u64,
    eof: bool,
    /// The stream broke (a decompression error, counted under skip): the tail it cut is not
    /// counted a second time.
    broken: bool,
    opts: ReadOptions,
    records: u64,
    skipped: u64,
    /// Offsets of the records skipped (8 bytes each: an index built in skip mode lists them).
    skipped_at: Vec<u64>,
    log: Option<Arc<ErrorLog>>,
}

impl RecordReader {
    /// Opens `path` at its start.
    pub fn open(path: impl AsRef<Path>, opts: ReadOptions) -> Result<Self> {
        Self::open_at(path, opts, 0)
    }

    /// Opens `path` at stream offset `offset` (a record boundary from [`RecordReader::offset`]).
    /// Plain files seek; compressed files are decompressed up to the offset.
    pub fn open_at(path: impl AsRef<Path>, opts: ReadOptions, offset: u64) -> Result<Self> {
        let path = path.as_ref();
        if opts.compression == Compression::None {
            // No BufReader: the record buffer already makes large reads.
            let f = crate::storage::reader(path, offset)?;
            let mut r = Self::new(path, f, opts);
            r.base = offset;
            return Ok(r);
        }
        let mut r = Self::new(path, opts.compression.open(path)?, opts);
        r.discard_to(offset)?;
        Ok(r)
    }

    /// Reads records from `src`, already decompressed; `path` names it in errors.
    pub fn new(
        path: impl Into<PathBuf>,
        src: impl Read + Send + 'static,
        opts: ReadOptions,
    ) -> Self {
        RecordReader {
            path: path.into(),
            src: Box::new(src),
            buf: Vec::new(),
            lo: 0,
            hi: 0,
            base: 0,
            eof: false,
            broken: false,
            opts,
            records: 0,
            skipped: 0,
            skipped_at: Vec::new(),
            log: None,
        }
    }

    /// Also reports skipped records to `log`.
    pub fn with_log(mut self, log: Arc<ErrorLog>) -> Self {
        self.log = Some(log);
        self
    }

    /// The file (or label) this reader reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stream offset of the next record.
    pub fn offset(&self) -> u64 {
        self.base + self.lo as u64
    }

    /// Good records returned so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Corrupt records skipped so far (skip mode).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The next record's offset and data, copied out of the buffer.
    pub fn next_record(&mut self) -> Result<Option<(u64, Bytes)>> {
        Ok(self
            .next_ref()?
            .map(|(o, d)| (o, Bytes::copy_from_slice(d))))
    }

    /// The next record's offset and data, borrowed from the reader's buffer.
    pub fn next_ref(&mut self) -> Result<Option<(u64, &[u8])>> {
        loop {
            let off = self.offset();
            let avail = self.fill(HEADER)?;
            if avail == 0 {
                return Ok(None);
            }
            if avail < HEADER {
                if !self.broken {
                    self.corrupt(off, format!("truncated header: {avail} bytes at the end"))?;
                }
                self.lo = self.hi;
                return Ok(None);
            }
            let Some(len) = self.header_at(self.lo) else {
                let mut why = "bad length CRC (corrupt length)".to_string();
                if off == 0 && self.opts.compression == Compression::None {
                    // A compressed file read as plain: say so, and how to read it.
                    let head = &self.buf[self.lo..self.hi.min(self.lo + crate::sniff::HEAD_LEN)];
                    if let Some(hint) = super::compression::compressed_hint(head) {
                        why = format!("{why}: the file looks like {hint}");
                    }
                }
                self.corrupt(off, why)?;
                self.resync()?;
                continue;
            };
            if let Some(limit) = self.over_budget(len) {
                // A compressed stream can inflate any length from a few bytes: refuse before
                // buffering it. The rest of the stream cannot be framed without reading it.
                let msg = format!(
                    "record of {len} bytes declared in a {:?}-compressed stream is larger than \
                     the memory budget ({limit} bytes)",
                    self.opts.compression
                );
                self.corrupt(off, msg)?;
                self.broken = true;
                self.lo = self.hi;
                return Ok(None);
            }
            let total = record_size(len);
            let avail = self.fill(total.unwrap_or(usize::MAX))?;
            let Some(total) = total.filter(|t| *t <= avail) else {
                let msg = format!("truncated record: length {len} but only {avail} bytes remain");
                if !self.broken {
                    self.corrupt(off, msg)?;
                }
                self.lo = self.hi;
                return Ok(None);
            };
            if self.opts.verify && !self.data_ok(self.lo, len as usize) {
                self.corrupt(off, format!("bad data CRC (record of {len} bytes)"))?;
                self.lo += total;
                continue;
            }
            let start = self.lo + HEADER;
            self.lo += total;
            self.records += 1;
            return Ok(Some((off, &self.buf[start..start + len as usize])));
        }
    }

    /// The memory budget a record of `len` bytes passes, when it does not fit it and the stream
    /// is compressed. Uncompressed streams need no check: the buffer grows only as bytes arrive
    /// from the file, so a record costs at most twice the bytes really there.
    fn over_budget(&self, len: u64) -> Option<usize> {
        if self.opts.compression == Compression::None {
            return None;
        }
        let limit = stokehold_core::Executor::current()
            .map_or(stokehold_core::exec::executor::DEFAULT_MEMORY_BUDGET, |e| {
                e.budget().limit()
            });
        (len > limit as u64).then_some(limit)
    }

    /// The data length at buffer position `p` if the header there is valid.
    fn header_at(&self, p: usize) -> Option<u64> {
        let h = &self.buf[p..p + HEADER];
        let crc = u32::from_le_bytes(h[8..12].try_into().unwrap());
        (masked_crc(&h[..8]) == crc).then(|| u64::from_le_bytes(h[..8].try_into().unwrap()))
    }

    fn data_ok(&self, p: usize, len: usize) -> bool {
        let d = &self.buf[p + HEADER..p + HEADER + len];
        let f = &self.buf[p + HEADER + len..p + HEADER + len + FOOTER];
        masked_crc(d) == u32::from_le_bytes(f.try_into().unwrap())
    }

    /// Raises, or counts and logs the corrupt record at `offset`.
    fn corrupt(&mut self, offset: u64, reason: String) -> Result<()> {
        if self.opts.on_corrupt == OnCorrupt::Raise {
            return Err(Error::corrupt(&self.path, offset, reason));
        }
        if let Some(log) = &self.log {
            let ordinal = self.records + self.skipped;
            log.push(SkippedElement::record(ordinal, &self.path, offset, &reason));
        }
        self.skipped += 1;
        self.skipped_at.push(offset);
        Ok(())
    }

    /// Offsets of the corrupt records skipped so far.
    pub fn skipped_offsets(&self) -> &[u64] {
        &self.skipped_at
    }

    /// Moves the cursor past a bad header to the next plausible record start (or the end).
    fn resync(&mut self) -> Result<()> {
        self.lo += 1;
        loop {
            if self.fill(HEADER)? < HEADER {
                self.lo = self.hi;
                return Ok(());
            }
            if let Some(total) = self.header_at(self.lo).and_then(record_size) {
                let len = total - HEADER - FOOTER;
                if self.fill(total)? >= total && (!self.opts.verify || self.data_ok(self.lo, len)) {
                    return Ok(());
                }
            }
            self.lo += 1;
        }
    }

    /// Makes at least `n` bytes available from the cursor unless the stream ends first; returns
    /// the number available. The buffer grows by doubling only as data arrives, so a garbage
    /// length never allocates more than twice the bytes really there.
    fn fill(&mut self, n: usize) -> Result<usize> {
        while self.hi - self.lo < n && !self.eof {
            if self.lo > 0 && (self.lo == self.hi || self.lo >= self.buf.len() / 2) {
                self.buf.copy_within(self.lo..self.hi, 0);
                self.base += self.lo as u64;
                self.hi -= self.lo;
                self.lo = 0;
                if self.buf.len() < PREFERRED_BUF {
                    self.buf.resize(self.buf.len() * 2, 0);
                }
            }
            if self.hi == self.buf.len() {
                let grown = (self.buf.len() * 2).max(FIRST_BUF);
                self.buf.resize(grown, 0);
            }
            match self.src.read(&mut self.buf[self.hi..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.hi += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => match self.read_error(e) {
                    // Corrupt compressed data: raised, or (skip) counted once and the stream
                    // ends here, since nothing after the break can be decompressed.
                    Error::Corrupt { offset, reason, .. } => {
                        self.corrupt(offset, reason)?;
                        self.broken = true;
                        self.eof = true;
                    }
                    other => return Err(other),
                },
            }
        }
        Ok(self.hi - self.lo)
    }

    /// Decompression errors are corrupt data at the current offset; others are I/O errors. A
    /// compressed stream cut short (a truncated GZIP or ZLIB file) reads as `UnexpectedEof`, which
    /// a plain file never returns from `read`.
    fn read_error(&self, e: std::io::Error) -> Error {
        match e.kind() {
            std::io::ErrorKind::InvalidInput
            | std::io::ErrorKind::InvalidData
            | std::io::ErrorKind::UnexpectedEof => {
                let at = self.base + self.hi as u64;
                Error::corrupt(&self.path, at, format!("cannot decompress: {e}"))
            }
            _ => Error::io(&self.path, e),
        }
    }

    /// Reads and drops bytes up to stream offset `target`.
    fn discard_to(&mut self, target: u64) -> Result<()> {
        while self.offset() < target {
            let want = (target - self.offset()).min(PREFERRED_BUF as u64) as usize;
            let avail = self.fill(want)?;
            if avail == 0 {
                return Err(Error::State(format!(
                    "{}: offset {target} is past the end ({})",
                    self.path.display(),
                    self.offset()
                )));
            }
            self.lo += avail.min(want);
        }
        Ok(())
    }
}

/// Header + data + footer, or `None` when it cannot fit in memory.
fn record_size(len: u64) -> Option<usize> {
    usize::try_from(len).ok()?.checked_add(HEADER + FOOTER)
}

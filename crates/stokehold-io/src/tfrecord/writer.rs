//! Writing TFRecord framing, optionally compressed, atomically (temporary name, then rename).

use std::io::Write;
use std::path::{Path, PathBuf};

use stokehold_core::{Error, Result};

use super::compression::{Compression, FinishWrite};
use super::crc::masked_crc;
use super::index::{IndexEntry, IndexWriter};
use super::reader::{FOOTER, HEADER};
use crate::atomic::TempFile;

/// Frames one record into `out`: length, masked CRC of the length, data, masked CRC of the data.
pub fn frame_into(out: &mut Vec<u8>, data: &[u8]) {
    let len = (data.len() as u64).to_le_bytes();
    out.reserve(HEADER + data.len() + FOOTER);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
}

/// Writes records to one TFRecord file. The file appears under its final name only after
/// [`RecordWriter::finish`]; until then it is `.<name>.tmp-<pid>-<n>` ([`crate::atomic`]), and a writer dropped without
/// `finish` removes it. Optionally writes an index sidecar (see [`super::index`]) the same way.
pub struct RecordWriter {
    path: PathBuf,
    /// Removed when the writer is dropped unfinished.
    tmp: TempFile,
    out: Option<Box<dyn FinishWrite>>,
    frame: Vec<u8>,
    offset: u64,
    records: u64,
    index: Option<IndexWriter>,
}

impl RecordWriter {
    /// Creates a writer of `path` with `compression`.
    pub fn create(path: impl AsRef<Path>, compression: Compression) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let (tmp, f) = TempFile::create(&path)?;
        Ok(RecordWriter {
            path,
            tmp,
            out: Some(compression.wrap_writer(f)),
            frame: Vec::new(),
            offset: 0,
            records: 0,
            index: None,
        })
    }

    /// Also writes the index sidecar `index_path(path)` (plain files only: offsets in a
    /// compressed file cannot be read at random).
    pub fn with_index(mut self, compression: Compression) -> Result<Self> {
        if compression != Compression::None {
            return Err(Error::invalid(
                "an index needs an uncompressed TFRecord file",
            ));
        }
        self.index = Some(IndexWriter::new(&super::index::index_path(&self.path)));
        Ok(self)
    }

    /// Appends one record.
    pub fn write(&mut self, data: &[u8]) -> Result<()> {
        self.frame.clear();
        frame_into(&mut self.frame, data);
        let out = self.out.as_mut().expect("not finished");
        out.write_all(&self.frame)
            .map_err(|e| Error::io(self.tmp.path(), e))?;
        if let Some(ix) = &mut self.index {
            ix.push(IndexEntry {
                offset: self.offset,
                len: data.len() as u64,
            });
        }
        self.offset += self.frame.len() as u64;
        self.records += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Uncompressed bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.offset
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes, syncs and renames the file (and its index) to the final name.
    pub fn finish(mut self) -> Result<PathBuf> {
        let out = self.out.take().expect("finished once");
        out.finish().map_err(|e| Error::io(self.tmp.path(), e))?;
        // `None`: the compressors own the file handle, so the commit reopens it to fsync.
        self.tmp.commit(None)?;
        // The index goes last: a data file without its index is still a readable stream, while
        // an index without its file would be stale.
        if let Some(ix) = self.index.take() {
            ix.finish(self.offset)?;
        }
        Ok(self.path.clone())
    }
}

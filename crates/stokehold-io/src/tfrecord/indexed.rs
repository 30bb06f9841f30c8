//! Random access over indexed TFRecord files: `len`, `get(i)`, global shuffle.
//!
//! Each file is memory-mapped once; `get(i)` finds the file by binary search over cumulative
//! record counts and returns a zero-copy slice of the mapping, after checking the header against
//! the index and (with `verify`) the data CRC. Files must not be truncated while open.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::skip::{ErrorLog, SkippedElement};
use stokehold_core::{Error, Example, MapDataset, Result};

use super::crc::masked_crc;
use super::element::{describe_files, record_element};
use super::index::{read_index_with_skips, IndexEntry};
use super::reader::{OnCorrupt, ReadOptions};
use super::reader::{FOOTER, HEADER};
use crate::storage::stream_ahead::StreamAhead;

/// Indexed, memory-mapped TFRecord files.
pub struct IndexedTFRecord {
    files: Vec<PathBuf>,
    /// Each file through the storage seam: a memory map locally, ranged reads remotely.
    maps: Vec<crate::storage::Object>,
    entries: Vec<Vec<IndexEntry>>,
    /// `cum[k]` = records in files before `k`; one more entry than files.
    cum: Vec<u64>,
    verify: bool,
    /// Remote files fetched whole when the reads go in order (`None` for local files).
    stream: Option<StreamAhead>,
    /// The corrupt records an index built in skip mode left out (opened with skip).
    log: Arc<ErrorLog>,
}

impl IndexedTFRecord {
    /// Opens `files`, each with its `.idx` sidecar (an error names a file without one).
    pub fn open<P: AsRef<Path>>(files: &[P], verify: bool) -> Result<Self> {
        let opts = ReadOptions {
            verify,
            ..ReadOptions::default()
        };
        Self::open_with(files, opts)
    }

    /// Opens `files` with `opts`: an index built in skip mode lists the corrupt records it left
    /// out; `on_corrupt = raise` refuses such a file naming the first one, skip counts them all
    /// in the dataset's [`log`](Self::log) (its `error_log()`).
    pub fn open_with<P: AsRef<Path>>(files: &[P], opts: ReadOptions) -> Result<Self> {
        let verify = opts.verify;
        let mut ds = IndexedTFRecord {
            files: Vec::new(),
            maps: Vec::new(),
            entries: Vec::new(),
            cum: vec![0],
            verify,
            stream: None,
            log: Arc::new(ErrorLog::default()),
        };
        for f in files {
            let f = f.as_ref();
            let (entries, skipped) = read_index_with_skips(f).map_err(|e| match e {
                Error::Io { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                    Error::invalid(format!(
                        "{} has no index {}: run `stokehold index` (or build_index) first",
                        f.display(),
                        path.display()
                    ))
                }
                other => other,
            })?;
            for (j, &offset) in skipped.iter().enumerate() {
                let reason = "corrupt record left out of the index (built in skip mode)";
                if opts.on_corrupt == OnCorrupt::Raise {
                    return Err(Error::corrupt(
                        f,
                        offset,
                        format!("{reason}; {} in all", skipped.len()),
                    ));
                }
                // Its ordinal in the file: the good records before it, and the skipped ones.
                let ordinal = entries.partition_point(|e| e.offset < offset) + j;
                ds.log
                    .push(SkippedElement::record(ordinal as u64, f, offset, reason));
            }
            ds.maps.push(crate::storage::open_object(f)?);
            ds.cum.push(ds.cum.last().unwrap() + entries.len() as u64);
            ds.entries.push(entries);
            ds.files.push(f.to_path_buf());
        }
        if !ds.maps.is_empty() && ds.maps.iter().all(|m| m.is_remote()) {
            ds.stream = Some(StreamAhead::new(ds.maps.clone()));
        }
        Ok(ds)
    }

    /// The corrupt records the indexes left out (skip mode): the log `error_log()` reports.
    pub fn log(&self) -> &Arc<ErrorLog> {
        &self.log
    }

    /// The record `i` (in `0..len`) as bytes, checked.
    pub fn record(&self, i: u64) -> Result<Bytes> {
        let (k, j) = stokehold_core::checked::locate(&self.cum, i);
        let e = self.entries[k][j as usize];
        let (map, path) = (&self.maps[k], &self.files[k]);
        let off = e.offset as usize;
        let end = off + HEADER + e.len as usize + FOOTER;
        if end as u64 > map.size() {
            return Err(Error::corrupt(
                path,
                e.offset,
                "record runs past the end (file changed?)",
            ));
        }
        // One read for header, data and footer: a slice of the map locally, one request remotely
        // (or a slice of the whole file, fetched ahead while the reads go in order).
        let whole = match &self.stream {
            Some(s) => s.read(k, i)?,
            None => None,
        };
        let rec = match whole {
            Some(w) => w.slice(off..end),
            None => map.read_range(off as u64..end as u64)?,
        };
        let h = &rec[..HEADER];
        let len_ok = h[..8] == e.len.to_le_bytes()
            && masked_crc(&h[..8]) == u32::from_le_bytes(h[8..12].try_into().unwrap());
        if !len_ok {
            return Err(Error::corrupt(
                path,
                e.offset,
                "header does not match the index",
            ));
        }
        let n = rec.len();
        let data = rec.slice(HEADER..n - FOOTER);
        if self.verify {
            let crc = u32::from_le_bytes(rec[n - FOOTER..].try_into().unwrap());
            if masked_crc(&data) != crc {
                return Err(Error::corrupt(path, e.offset, "bad data CRC"));
            }
        }
        Ok(data)
    }
}

impl MapDataset for IndexedTFRecord {
    fn len(&self) -> u64 {
        *self.cum.last().unwrap()
    }

    fn get(&self, index: u64) -> Result<Example> {
        let (_, i) = stokehold_core::checked::wrap_index(index, self.len(), || self.name())?;
        Ok(record_element(self.record(i)?))
    }

    fn name(&self) -> String {
        format!(
            "tfrecord_indexed({}, verify={})",
            describe_files(&self.files),
            self.verify
        )
    }

    fn error_log(&self) -> Option<Arc<ErrorLog>> {
        Some(self.log.clone())
    }
}

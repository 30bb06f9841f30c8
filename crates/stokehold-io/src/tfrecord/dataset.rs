//! `TFRecordDataset`: the records of a list of files, as a stream (or, when every file has an
//! index sidecar, at random).
//!
//! Each element has one feature, [`RECORD`](super::RECORD) (`"record"`): a scalar bytes tensor
//! holding the serialized record. Parse it per element
//! ([`Parser::element_fn`](super::Parser::element_fn)) or, faster, batch first and parse each
//! batch ([`Parser::batch_fn`](super::Parser::batch_fn)).
//!
//! The stream's state is `{"file": i, "offset": o}`: the file being read and the stream offset of
//! its next record (for compressed files, an offset in the decompressed stream: resuming
//! decompresses up to it).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value as Json};
use stokehold_core::dataset::{state_u64, DatasetIter, IterDataset};
use stokehold_core::skip::ErrorLog;
use stokehold_core::{interleave_fn, Dataset, Error, Example, InterleaveFn, Result};

pub use super::element::{describe_files, record_element};
use super::indexed::IndexedTFRecord;
use super::reader::{ReadOptions, RecordReader};
use super::Compression;

/// A stream of the records of `files`, in order.
#[derive(Clone)]
pub struct TFRecordDataset {
    files: Arc<[PathBuf]>,
    opts: ReadOptions,
    log: Arc<ErrorLog>,
}

impl TFRecordDataset {
    /// The records of `files`, read with `opts`.
    pub fn new<P: AsRef<Path>>(files: impl IntoIterator<Item = P>, opts: ReadOptions) -> Self {
        let files = files
            .into_iter()
            .map(|p| p.as_ref().to_path_buf())
            .collect();
        TFRecordDataset {
            files,
            opts,
            log: Arc::new(ErrorLog::default()),
        }
    }

    /// The corrupt records skipped (count and first few), shared by every iterator of this
    /// dataset: the log its [`IterDataset::error_log`] reports.
    pub fn log(&self) -> &Arc<ErrorLog> {
        &self.log
    }

    /// The files.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// A reader of file `k` at stream offset `offset`, reporting to this dataset's log.
    pub fn open_reader(&self, k: usize, offset: u64) -> Result<RecordReader> {
        Ok(RecordReader::open_at(&self.files[k], self.opts, offset)?.with_log(self.log.clone()))
    }

    /// As a stream dataset.
    pub fn into_dataset(self) -> Dataset {
        Dataset::from_iter(self)
    }
}

/// The records of `files`: random-access when the files are uncompressed and every one has an
/// up-to-date index (see [`super::index`]), a stream otherwise. Returns the dataset and its log of
/// skipped corrupt records: the one its `error_log()` reports, which
/// [`error_logs`](stokehold_core::ops::ignore_errors::error_logs) finds under any later op.
pub fn tfrecord_dataset<P: AsRef<Path>>(
    files: impl IntoIterator<Item = P>,
    opts: ReadOptions,
) -> Result<(Dataset, Arc<ErrorLog>)> {
    let files: Vec<PathBuf> = files
        .into_iter()
        .map(|p| p.as_ref().to_path_buf())
        .collect();
    let indexed = opts.compression == Compression::None
        && !files.is_empty()
        && files.iter().all(|f| {
            let i = super::index::find_index(f);
            crate::storage::head(&i).is_ok_and(|m| m.is_some())
        });
    if indexed {
        let ds = IndexedTFRecord::open_with(&files, opts)?;
        let log = ds.log().clone();
        return Ok((Dataset::from_map(ds), log));
    }
    let ds = TFRecordDataset::new(files, opts);
    let log = ds.log().clone();
    Ok((ds.into_dataset(), log))
}

/// An interleave function that opens the TFRecord file named by the bytes feature `path_feature`
/// of each element (as `list_files` yields): `files.interleave("tfrecord", tfrecord_fn("path",
/// opts), cycle_length, block_length, num_parallel_calls, true)` is tf.data's
/// `files.interleave(TFRecordDataset, ...)`. Skipped corrupt records are logged to `log` (the
/// datasets it opens are not in the plan, so `error_logs` of the interleave does not see them).
pub fn tfrecord_fn(path_feature: &str, opts: ReadOptions, log: Arc<ErrorLog>) -> InterleaveFn {
    let feature = path_feature.to_string();
    interleave_fn(move |e, ctx| {
        let t = e.tensor(ctx.op, &feature)?;
        let path = t.string(0).filter(|_| t.len() == 1).ok_or_else(|| {
            Error::schema(
                ctx.op,
                format!("feature {feature:?} must hold one path, has {}", t.len()),
            )
        })?;
        let path = PathBuf::from(String::from_utf8_lossy(path).into_owned());
        let ds = TFRecordDataset {
            files: Arc::from([path]),
            opts,
            log: log.clone(),
        };
        Ok(ds.into_dataset())
    })
}

impl IterDataset for TFRecordDataset {
    fn iter(&self, _epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(TFRecordIter {
            ds: self.clone(),
            file: 0,
            reader: None,
        }))
    }

    fn name(&self) -> String {
        format!(
            "tfrecord({}, compression={:?}, verify={}, on_corrupt={:?})",
            describe_files(&self.files),
            self.opts.compression,
            self.opts.verify,
            self.opts.on_corrupt
        )
    }

    fn error_log(&self) -> Option<Arc<ErrorLog>> {
        Some(self.log.clone())
    }
}

struct TFRecordIter {
    ds: TFRecordDataset,
    file: usize,
    reader: Option<RecordReader>,
}

impl TFRecordIter {
    fn open(&mut self, offset: u64) -> Result<()> {
        self.reader = Some(self.ds.open_reader(self.file, offset)?);
        Ok(())
    }
}

impl DatasetIter for TFRecordIter {
    fn next(&mut self) -> Result<Option<Example>> {
        loop {
            if self.reader.is_none() {
                if self.file >= self.ds.files.len() {
                    return Ok(None);
                }
                self.open(0)?;
            }
            let r = self.reader.as_mut().expect("opened above");
            match r.next_record()? {
                Some((_, data)) => return Ok(Some(record_element(data))),
                None => {
                    self.reader = None;
                    self.file += 1;
                }
            }
        }
    }

    fn state(&self) -> Json {
        json!({ "file": self.file, "offset": self.reader.as_ref().map_or(0, |r| r.offset()) })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let file = state_u64(state, "file")? as usize;
        let offset = state_u64(state, "offset")?;
        if file > self.ds.files.len() {
            return Err(Error::State(format!(
                "tfrecord: file {file} of a dataset with {} files",
                self.ds.files.len()
            )));
        }
        self.file = file;
        self.reader = None;
        if file < self.ds.files.len() {
            self.open(offset)?;
        }
        Ok(())
    }
}

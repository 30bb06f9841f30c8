//! `on_corrupt` for shard folders, as TFRecord has it: [`ShardReadOptions`] and
//! [`open_shards_with`].
//!
//! `Raise` (the default) opens the folder as the random-access [`ShardDataset`]: a corrupt record
//! is an error wherever it is read. `Skip` wraps it in a stream that iterates the records in order
//! and skips each one that fails its checksum or does not decode, counting it in the pipeline's
//! one skip log, core's [`ErrorLog`] (the count and the first few in detail, as TFRecord's reader
//! keeps them), which the stream reports through `error_log()`: `error_logs(ds)` (Python:
//! `ds.skipped()`) finds it under any later op. The
//! stream has no random access: its length is not known until it has been read, since skipped
//! records shorten it. `ShardDataset::get(i)` on a corrupt record still raises: random access
//! names one record, and answering with another would be wrong.

use std::sync::Arc;

use serde_json::json;
use stokehold_core::{Dataset, DatasetIter, Error, Example, IterDataset, MapDataset, Result};

use super::reader::ShardDataset;
use crate::tfrecord::OnCorrupt;
use stokehold_core::skip::{ErrorLog, SkippedElement};

/// How a shard folder is read; every field documents its default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardReadOptions {
    /// Check each record's CRC32C as it is read. Default true.
    pub verify_records: bool,
    /// Raise on a corrupt record (default) or skip and count it (iteration only).
    pub on_corrupt: OnCorrupt,
}

impl Default for ShardReadOptions {
    fn default() -> Self {
        ShardReadOptions {
            verify_records: true,
            on_corrupt: OnCorrupt::Raise,
        }
    }
}

/// Opens a shard folder with `opts`; the log counts what `Skip` skipped (always empty for
/// `Raise`): under `Skip` it is the dataset's `error_log()`.
pub fn open_shards_with(
    dir: impl AsRef<std::path::Path>,
    opts: ShardReadOptions,
) -> Result<(Dataset, Arc<ErrorLog>)> {
    let ds = ShardDataset::open_with(dir, opts.verify_records)?;
    let log = Arc::new(ErrorLog::default());
    Ok(match opts.on_corrupt {
        OnCorrupt::Raise => (Dataset::from_map(ds), log),
        OnCorrupt::Skip => (
            Dataset::from_iter(SkipCorrupt {
                ds: Arc::new(ds),
                log: log.clone(),
            }),
            log,
        ),
    })
}

/// A shard folder read in order, corrupt records skipped and counted.
pub struct SkipCorrupt {
    ds: Arc<ShardDataset>,
    log: Arc<ErrorLog>,
}

impl IterDataset for SkipCorrupt {
    fn iter(&self, _epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(SkipIter {
            ds: self.ds.clone(),
            log: self.log.clone(),
            pos: 0,
        }))
    }

    fn name(&self) -> String {
        format!("skip_corrupt({})", self.ds.name())
    }

    fn error_log(&self) -> Option<Arc<ErrorLog>> {
        Some(self.log.clone())
    }
}

struct SkipIter {
    ds: Arc<ShardDataset>,
    log: Arc<ErrorLog>,
    /// The next record to read.
    pos: u64,
}

impl DatasetIter for SkipIter {
    fn next(&mut self) -> Result<Option<Example>> {
        while self.pos < self.ds.len() {
            let i = self.pos;
            self.pos += 1;
            match self.ds.get(i) {
                Ok(e) => return Ok(Some(e)),
                Err(Error::Corrupt {
                    path,
                    offset,
                    reason,
                }) => self
                    .log
                    .push(SkippedElement::record(i, &path, offset, &reason)),
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    fn state(&self) -> serde_json::Value {
        json!({ "pos": self.pos })
    }

    fn set_state(&mut self, state: &serde_json::Value) -> Result<()> {
        let pos = state
            .get("pos")
            .and_then(|p| p.as_u64())
            .filter(|p| *p <= self.ds.len())
            .ok_or_else(|| Error::State(format!("bad skip_corrupt state {state}")))?;
        self.pos = pos;
        Ok(())
    }
}

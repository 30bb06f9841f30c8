//! Skipping failed elements: the policy ([`OnError`]) and the one log of what was skipped
//! ([`ErrorLog`]), shared by every op that may leave an element out (`ignore_errors`, a loader's
//! or decoder's `on_error="skip"`, the corrupt records a TFRecord or shard reader skips). Below
//! the dataset model, so that any op can report its log through
//! [`crate::IterDataset::error_log`] (or [`crate::MapDataset::error_log`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::Error;

/// How many skipped elements an [`ErrorLog`] keeps in detail.
pub const KEEP_FIRST: usize = 16;

/// What an op does with an element it fails on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnError {
    /// The error reaches the consumer (the default).
    #[default]
    Raise,
    /// The element is left out and counted in the op's [`ErrorLog`].
    Skip,
}

impl crate::choice::Choice for OnError {
    const ARG: &'static str = "on_error";
    const CHOICES: &'static [(&'static str, Self)] =
        &[("raise", OnError::Raise), ("skip", OnError::Skip)];
}

/// One skipped element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedElement {
    /// Global index of the element in the op's input. For a record a file reader skipped
    /// ([`SkippedElement::record`]): the record's ordinal in its file, good and corrupt records
    /// counted, from where the reader started (the file's start unless it resumed mid-file).
    pub index: u64,
    /// The error, as its message (it names the op, and the file where there is one; for a
    /// skipped record, the file and the offset).
    pub error: String,
    /// For a record a file reader skipped: the file and the record's byte offset (in the
    /// decompressed stream of a compressed file). `None` for other elements.
    pub at: Option<(PathBuf, u64)>,
}

impl SkippedElement {
    /// An element that failed with `error` (its message is kept; an [`Error::Corrupt`]'s file
    /// and offset go to [`SkippedElement::at`] too).
    pub fn new(index: u64, error: &Error) -> Self {
        let at = match error {
            Error::Corrupt { path, offset, .. } => Some((path.clone(), *offset)),
            _ => None,
        };
        SkippedElement {
            index,
            error: error.to_string(),
            at,
        }
    }

    /// A corrupt record of `path` at byte `offset` that a reader skipped: its message is
    /// [`Error::Corrupt`]'s, naming the file and the offset.
    pub fn record(index: u64, path: &Path, offset: u64, reason: &str) -> Self {
        SkippedElement {
            index,
            error: Error::corrupt(path, offset, reason).to_string(),
            at: Some((path.to_path_buf(), offset)),
        }
    }

    /// What was wrong, without the file and offset that [`SkippedElement::at`] holds (for
    /// printing beside them, as `stokehold verify` does); the whole message for other elements.
    pub fn reason(&self) -> &str {
        let Some((path, offset)) = &self.at else {
            return &self.error;
        };
        let lead = Error::corrupt(path, *offset, "").to_string();
        self.error
            .strip_prefix(lead.as_str())
            .unwrap_or(&self.error)
    }
}

/// A shared tally of skipped elements: the count and the first [`KEEP_FIRST`] in detail, its
/// own and those of the logs it adopted (the datasets an op opened while it ran: interleave's
/// inner datasets), so that one log of the pipeline's plan counts them too.
#[derive(Debug, Default)]
pub struct ErrorLog {
    inner: Mutex<(u64, Vec<SkippedElement>)>,
    children: Mutex<Vec<Arc<ErrorLog>>>,
}

impl ErrorLog {
    /// Records one skipped element.
    pub fn push(&self, skipped: SkippedElement) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.0 += 1;
        if g.1.len() < KEEP_FIRST {
            g.1.push(skipped);
        }
    }

    /// Counts `child` (the log of a dataset opened while the op ran) in this log from now on.
    /// Children that skipped nothing and whose dataset is gone (no other holder) are let go
    /// here, so an op that opens a dataset per element does not keep a log per element.
    pub fn adopt(&self, child: Arc<ErrorLog>) {
        let mut c = self.children.lock().unwrap_or_else(|p| p.into_inner());
        c.retain(|l| l.count() > 0 || Arc::strong_count(l) > 1);
        if !c.iter().any(|l| Arc::ptr_eq(l, &child)) {
            c.push(child);
        }
    }

    fn children(&self) -> Vec<Arc<ErrorLog>> {
        self.children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many elements were skipped so far (adopted logs included).
    pub fn count(&self) -> u64 {
        let own = self.inner.lock().unwrap_or_else(|p| p.into_inner()).0;
        own + self.children().iter().map(|l| l.count()).sum::<u64>()
    }

    /// The first few skipped elements (this log's, then its adopted logs').
    pub fn first(&self) -> Vec<SkippedElement> {
        let mut out = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .clone();
        for l in self.children() {
            out.extend(l.first());
        }
        out.truncate(KEEP_FIRST);
        out
    }
}

/// Whether `e` is a failure of one element, which `OnError::Skip` may leave out.
pub fn skippable(e: &Error) -> bool {
    matches!(
        e,
        Error::Schema { .. } | Error::Io { .. } | Error::Corrupt { .. } | Error::Callback { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skipped_record_names_its_file_and_offset_and_keeps_its_reason() {
        let s = SkippedElement::record(3, Path::new("/d/a.tfrecord"), 120, "bad data CRC");
        assert_eq!(s.index, 3);
        assert_eq!(s.at, Some((PathBuf::from("/d/a.tfrecord"), 120)));
        assert!(
            s.error.contains("/d/a.tfrecord") && s.error.contains("120"),
            "{}",
            s.error
        );
        assert_eq!(s.reason(), "bad data CRC");
        let e = SkippedElement::new(4, &Error::schema("map", "no good"));
        assert_eq!((e.at.as_ref(), e.reason()), (None, e.error.as_str()));
        let c = SkippedElement::new(5, &Error::corrupt("/d/b", 7, "truncated"));
        assert_eq!(
            (c.at.clone(), c.reason()),
            (Some((PathBuf::from("/d/b"), 7)), "truncated")
        );
    }

    #[test]
    fn the_log_counts_all_and_keeps_the_first_few() {
        let log = ErrorLog::default();
        for i in 0..KEEP_FIRST as u64 + 5 {
            log.push(SkippedElement::new(i, &Error::schema("map", "x")));
        }
        assert_eq!(log.count(), KEEP_FIRST as u64 + 5);
        let first = log.first();
        assert_eq!(first.len(), KEEP_FIRST);
        assert_eq!(first[KEEP_FIRST - 1].index, KEEP_FIRST as u64 - 1);
    }
}

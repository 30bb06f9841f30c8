//! Skipping failed elements: the policy ([`OnError`]) and the one log of what was skipped
//! ([`ErrorLog`]), shared by every op that may leave an element out (`ignore_errors`, a loader's
//! or decoder's `on_error="skip"`, TFRecord's corrupt records). Below the dataset model, so that
//! any op can report its log through [`crate::IterDataset::error_log`].

use std::sync::Mutex;

use crate::error::{Error, Result};

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

impl OnError {
    /// `"raise"` or `"skip"`; anything else is an error naming `op`.
    pub fn parse(op: &str, s: &str) -> Result<OnError> {
        match s {
            "raise" => Ok(OnError::Raise),
            "skip" => Ok(OnError::Skip),
            _ => Err(Error::invalid(format!(
                "{op}(on_error={s:?}): must be \"raise\" or \"skip\""
            ))),
        }
    }
}

/// One skipped element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedElement {
    /// Global index of the element in the op's input.
    pub index: u64,
    /// The error, as its message (it names the op, and the file where there is one).
    pub error: String,
}

/// A shared tally of skipped elements: the count and the first [`KEEP_FIRST`] in detail.
#[derive(Debug, Default)]
pub struct ErrorLog {
    inner: Mutex<(u64, Vec<SkippedElement>)>,
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

    /// How many elements were skipped so far.
    pub fn count(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).0
    }

    /// The first few skipped elements.
    pub fn first(&self) -> Vec<SkippedElement> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.1.clone()
    }
}

/// Whether `e` is a failure of one element, which `OnError::Skip` may leave out.
pub fn skippable(e: &Error) -> bool {
    matches!(
        e,
        Error::Schema { .. } | Error::Io { .. } | Error::Corrupt { .. } | Error::Callback { .. }
    )
}

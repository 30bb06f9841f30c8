//! `ignore_errors()`: tf.data's op of that name. It leaves out the elements whose computation
//! failed with a failure of the element itself ([`skippable`]: a user function's error, a
//! missing or corrupt file, a schema mismatch), counts them in an [`ErrorLog`] (the first
//! [`KEEP_FIRST`](super::on_error::KEEP_FIRST) in detail) and goes on. Without it, the iterator
//! is done after an error (see [`crate::state`]).
//!
//! * Over a random-access input it reads `get(i)` itself and skips exactly the indices that
//!   failed; its state is the position, so it stays checkpointable.
//! * Over a stream it asks the input for the next element after a failure. Every op's iterator
//!   moves past a failed element (a map, a parallel map, a filter, a prefetch), so this skips the
//!   element; an input that fails twice in a row without moving (its state unchanged) cannot
//!   make progress, and that error is raised.
//!
//! ```
//! use stokehold_core::{map_fn, Dataset, Error};
//! let ds = Dataset::range(10)
//!     .map("check", map_fn(|e, c| if c.index == 4 { Err(Error::schema("check", "bad")) } else { Ok(e) }))
//!     .ignore_errors(false);
//! assert_eq!(ds.iter(0).unwrap().collect_all().unwrap().len(), 9);
//! assert_eq!(stokehold_core::ops::ignore_errors::error_logs(&ds)[0].count(), 1);
//! ```

use std::sync::Arc;

use serde_json::{json, Value as Json};

use super::on_error::{skippable, ErrorLog, SkippedElement};
use crate::dataset::{hint_ahead, state_u64, Dataset, DatasetIter, IterDataset, MapDataset};
use crate::error::{Error, Result};
use crate::example::Example;

/// Skips the elements of its input that fail (see the module docs).
pub struct IgnoreErrors {
    parent: Dataset,
    log: Arc<ErrorLog>,
    log_warning: bool,
}

impl Dataset {
    /// tf.data's `ignore_errors(log_warning)`: leaves out elements whose computation failed,
    /// counting them in the op's [`ErrorLog`] (found with [`error_logs`]); with `log_warning`
    /// each one is also written to stderr.
    pub fn ignore_errors(&self, log_warning: bool) -> Dataset {
        Dataset::from_iter(IgnoreErrors {
            parent: self.clone(),
            log: Arc::new(ErrorLog::default()),
            log_warning,
        })
    }
}

/// The error logs of every op of `ds` that skips elements (`ignore_errors`, a loader's
/// `on_error="skip"`, a TFRecord or shard reader skipping corrupt records), outermost first.
pub fn error_logs(ds: &Dataset) -> Vec<Arc<ErrorLog>> {
    let mut out = Vec::new();
    out.extend(match ds {
        Dataset::Iter(i) => i.error_log(),
        Dataset::Map(m) => m.error_log(),
    });
    for p in ds.parents() {
        for log in error_logs(&p) {
            if !out.iter().any(|l| Arc::ptr_eq(l, &log)) {
                out.push(log);
            }
        }
    }
    out
}

impl IterDataset for IgnoreErrors {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        let skip = Skipper {
            log: self.log.clone(),
            log_warning: self.log_warning,
        };
        Ok(match &self.parent {
            Dataset::Map(m) => {
                let len = m.len();
                let start = crate::checked::epoch_start("ignore_errors", epoch, len)?;
                Box::new(IndexIter {
                    ds: m.clone(),
                    hints: m.prefetch_useful(),
                    start,
                    pos: start,
                    end: start.saturating_add(len),
                    skip,
                })
            }
            Dataset::Iter(_) => Box::new(StreamIter {
                inner: self.parent.iter(epoch)?,
                stuck_at: None,
                seen: 0,
                skip,
            }),
        })
    }

    fn name(&self) -> String {
        "ignore_errors()".into()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn error_log(&self) -> Option<Arc<ErrorLog>> {
        Some(self.log.clone())
    }
}

struct Skipper {
    log: Arc<ErrorLog>,
    log_warning: bool,
}

impl Skipper {
    /// Logs `e` for element `index` when it is skippable; gives it back otherwise.
    fn absorb(&self, index: u64, e: Error) -> Result<()> {
        if !skippable(&e) {
            return Err(e);
        }
        if self.log_warning {
            eprintln!("stokehold: ignore_errors() skipped element {index}: {e}");
        }
        self.log.push(SkippedElement::new(index, &e));
        Ok(())
    }
}

/// Over a random-access input: indices `start..end`, failures skipped exactly.
struct IndexIter {
    ds: Arc<dyn MapDataset>,
    hints: bool,
    start: u64,
    pos: u64,
    end: u64,
    skip: Skipper,
}

impl DatasetIter for IndexIter {
    fn next(&mut self) -> Result<Option<Example>> {
        while self.pos < self.end {
            if self.hints {
                hint_ahead(&*self.ds, self.pos, self.end);
            }
            let at = self.pos;
            self.pos += 1;
            match self.ds.get(at) {
                Ok(e) => return Ok(Some(e)),
                Err(e) => self.skip.absorb(at - self.start, e)?,
            }
        }
        Ok(None)
    }

    fn state(&self) -> Json {
        json!({ "pos": self.pos - self.start })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let pos = state_u64(state, "pos")?;
        if pos > self.end - self.start {
            return Err(Error::State(format!(
                "ignore_errors: position {pos} past the end ({})",
                self.end - self.start
            )));
        }
        self.pos = self.start + pos;
        Ok(())
    }
}

/// Over a stream: the input is asked again after a failure.
struct StreamIter {
    inner: Box<dyn DatasetIter>,
    /// The input's state after the last failure, while no element came since.
    stuck_at: Option<Json>,
    /// Elements and failures seen from the input since this iterator started (or was restored):
    /// the index a stream's failure is logged under.
    seen: u64,
    skip: Skipper,
}

impl DatasetIter for StreamIter {
    fn next(&mut self) -> Result<Option<Example>> {
        loop {
            match self.inner.next() {
                Ok(item) => {
                    self.stuck_at = None;
                    self.seen += u64::from(item.is_some());
                    return Ok(item);
                }
                Err(e) => {
                    let now = self.inner.state();
                    if self.stuck_at.as_ref() == Some(&now) {
                        return Err(e);
                    }
                    self.stuck_at = Some(now);
                    self.seen += 1;
                    self.skip.absorb(self.seen - 1, e)?;
                }
            }
        }
    }

    fn state(&self) -> Json {
        self.inner.state()
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        self.stuck_at = None;
        self.inner.set_state(state)
    }
}

//! `on_error`: what a loader or decoder does when it fails on one element. `Raise` (the default)
//! is a plain map: the error reaches the consumer naming the op, the element and the file.
//! `Skip` leaves the element out, counts it in an [`ErrorLog`] and keeps the first
//! [`KEEP_FIRST`] in detail, as TFRecord's `on_corrupt="skip"` does for records.
//!
//! Only failures of the element itself are skipped (a missing or unreadable file, corrupt bytes,
//! a schema mismatch, a user function's error); an interrupt, a cancelled pipeline, a refused
//! thread, a panic or a bad argument still stop the iterator.
//!
//! How: the function runs under a wrapper that turns a skippable error into a *tombstone*
//! element (one reserved feature holding the index and the message), so the map keeps random
//! access and can run on parallel workers; a filter after it drops the tombstones in order and
//! logs them there. Logging on the consumer's side counts each skipped element once, even when
//! a restored iterator recomputes work that was in flight. Skipping changes the length, so the
//! result is a stream.
//!
//! ```
//! use std::sync::Arc;
//! use stokehold_core::{map_fn, Dataset, Error, Tensor};
//! use stokehold_core::ops::on_error::{ErrorLog, OnError};
//! let log = Arc::new(ErrorLog::default());
//! let f = map_fn(|mut e, ctx| {
//!     if ctx.index % 3 == 0 {
//!         return Err(Error::schema(ctx.op, "no good"));
//!     }
//!     e.insert("y", Tensor::scalar(1i64));
//!     Ok(e)
//! });
//! let ds = Dataset::range(10).map_with_policy("check", f, OnError::Skip, log.clone(), None);
//! let got = ds.iter(0).unwrap().collect_all().unwrap();
//! assert_eq!(got.len(), 6);
//! assert_eq!(log.count(), 4);
//! ```

use std::sync::Arc;

use serde_json::Value as Json;

use crate::dataset::{Dataset, DatasetIter, IterDataset};
use crate::error::Result;
use crate::example::Example;
use crate::exec::Parallelism;
use crate::ops::map::{Ctx, MapFn};
use crate::tensor::Tensor;

pub use crate::skip::{skippable, ErrorLog, OnError, SkippedElement, KEEP_FIRST};

/// The reserved feature of a tombstone. Its leading NUL keeps it apart from any feature a user
/// can name (names arrive as Python identifiers, dict keys from files or proto field names).
const TOMBSTONE: &str = "\0stokehold:skipped";

impl Dataset {
    /// Applies `f` as [`Dataset::map`] does (or on `par` worker threads, as
    /// [`Dataset::map_parallel`] with `(parallelism, deterministic)`), with `on_error` deciding
    /// what a failing element does; skipped elements are counted in `log`.
    pub fn map_with_policy(
        &self,
        label: &str,
        f: MapFn,
        on_error: OnError,
        log: Arc<ErrorLog>,
        par: Option<(Parallelism, bool)>,
    ) -> Dataset {
        let run = |f: MapFn| match par {
            None => self.map(label, f),
            Some((p, deterministic)) => self.map_parallel(label, f, p, deterministic),
        };
        match on_error {
            OnError::Raise => run(f),
            OnError::Skip => Dataset::from_iter(DropTombstones {
                parent: run(tombstone_on_error(f)),
                label: format!("skip[{label}]"),
                log,
            }),
        }
    }
}

fn tombstone_on_error(f: MapFn) -> MapFn {
    Arc::new(move |e: Example, ctx: &Ctx| match f(e, ctx) {
        Err(err) if skippable(&err) => Ok(Example::new().with(
            TOMBSTONE,
            Tensor::strings(&[ctx.index.to_string(), err.to_string()]),
        )),
        other => other,
    })
}

/// Drops the tombstones of its input in order, logging each; reports its log through
/// [`IterDataset::error_log`] so that `error_logs(ds)` finds it from the pipeline.
struct DropTombstones {
    parent: Dataset,
    label: String,
    log: Arc<ErrorLog>,
}

impl IterDataset for DropTombstones {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(DropIter {
            inner: self.parent.iter(epoch)?,
            log: self.log.clone(),
        }))
    }

    fn name(&self) -> String {
        self.label.clone()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn error_log(&self) -> Option<Arc<ErrorLog>> {
        Some(self.log.clone())
    }
}

struct DropIter {
    inner: Box<dyn DatasetIter>,
    log: Arc<ErrorLog>,
}

impl DatasetIter for DropIter {
    fn next(&mut self) -> Result<Option<Example>> {
        while let Some(e) = self.inner.next()? {
            let Some(crate::Value::Tensor(t)) = e.get(TOMBSTONE) else {
                return Ok(Some(e));
            };
            let text = |i| String::from_utf8_lossy(t.string(i).unwrap_or_default()).into_owned();
            self.log.push(SkippedElement {
                index: text(0).parse().unwrap_or(u64::MAX),
                error: text(1),
                at: None,
            });
        }
        Ok(None)
    }

    fn state(&self) -> Json {
        self.inner.state()
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        self.inner.set_state(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map_fn;
    use crate::Error;

    fn every_third_fails() -> MapFn {
        map_fn(|e, ctx| {
            if ctx.index % 3 == 0 {
                Err(Error::corrupt("f.bin", ctx.index, "bad"))
            } else {
                Ok(e)
            }
        })
    }

    fn xs(ds: &Dataset) -> Vec<i64> {
        let all = ds.iter(0).unwrap().collect_all().unwrap();
        all.iter()
            .map(|e| e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0])
            .collect()
    }

    #[test]
    fn skip_leaves_out_and_logs_in_order_on_any_thread_count() {
        for par in [
            None,
            Some((Parallelism::Fixed(1), true)),
            Some((Parallelism::Fixed(4), true)),
        ] {
            let log = Arc::new(ErrorLog::default());
            let ds = Dataset::range(10).map_with_policy(
                "f",
                every_third_fails(),
                OnError::Skip,
                log.clone(),
                par,
            );
            assert_eq!(xs(&ds), vec![1, 2, 4, 5, 7, 8], "{par:?}");
            assert_eq!(log.count(), 4);
            let first = log.first();
            assert_eq!(
                first.iter().map(|s| s.index).collect::<Vec<_>>(),
                vec![0, 3, 6, 9]
            );
            assert!(first[1].error.contains("f.bin"), "{}", first[1].error);
        }
    }

    #[test]
    fn raise_is_a_plain_map_and_keeps_random_access() {
        let log = Arc::new(ErrorLog::default());
        let ds = Dataset::range(10).map_with_policy(
            "f",
            every_third_fails(),
            OnError::Raise,
            log.clone(),
            None,
        );
        assert!(ds.is_random_access());
        assert!(ds.get(3).is_err());
        assert!(ds.get(4).is_ok());
        assert_eq!(log.count(), 0);
    }

    #[test]
    fn interrupts_and_bad_arguments_are_never_skipped() {
        let f = map_fn(|_, _| Err(Error::invalid("nope")));
        let log = Arc::new(ErrorLog::default());
        let ds = Dataset::range(3).map_with_policy("f", f, OnError::Skip, log.clone(), None);
        assert!(ds.iter(0).unwrap().collect_all().is_err());
        assert_eq!(log.count(), 0);
        assert!(crate::choice::Choice::parse("load_npy", "ignore")
            .map(|p: OnError| p)
            .is_err());
    }
}

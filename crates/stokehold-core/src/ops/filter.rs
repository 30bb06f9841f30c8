//! `filter`: keeps the elements a predicate accepts. The output is a stream (its length is not
//! known without running the predicate); its state is the input's state plus a counter.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{state_field, state_u64, Dataset, DatasetIter, IterDataset};
use crate::error::Result;
use crate::example::Example;
use crate::ops::map::Ctx;

/// A predicate on elements.
pub type FilterFn = Arc<dyn Fn(&Example, &Ctx) -> Result<bool> + Send + Sync>;

/// `filter` over any dataset.
pub struct Filter {
    parent: Dataset,
    f: FilterFn,
    label: String,
}

impl Filter {
    /// Keeps the elements of `parent` for which `f` returns true.
    pub fn new(parent: Dataset, f: FilterFn, label: &str) -> Self {
        Filter {
            parent,
            f,
            label: format!("filter[{label}]"),
        }
    }
}

impl IterDataset for Filter {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(FilterIter {
            inner: self.parent.iter(epoch)?,
            f: self.f.clone(),
            label: self.label.clone(),
            epoch,
            seen: 0,
        }))
    }

    fn name(&self) -> String {
        self.label.clone()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }
}

struct FilterIter {
    inner: Box<dyn DatasetIter>,
    f: FilterFn,
    label: String,
    epoch: u64,
    seen: u64,
}

impl DatasetIter for FilterIter {
    fn next(&mut self) -> Result<Option<Example>> {
        while let Some(e) = self.inner.next()? {
            let ctx = Ctx {
                op: &self.label,
                index: self.seen,
                epoch: self.epoch,
            };
            self.seen += 1;
            if (self.f)(&e, &ctx)? {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    fn state(&self) -> Json {
        json!({ "seen": self.seen, "inner": self.inner.state() })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        self.seen = state_u64(state, "seen")?;
        self.inner.set_state(state_field(state, "inner")?)
    }
}

//! `repeat(n)` / `repeat()`: later epochs follow earlier ones with nothing rebuilt.
//!
//! Over a random-access dataset this is free: indices past the parent's length already mean later
//! epochs. Over a stream, each repetition opens an iterator for the next epoch; a repetition that
//! yields nothing ends the stream (an empty input never spins).

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{
    state_field, state_u64, Dataset, DatasetIter, IterDataset, MapDataset, INFINITE,
};
use crate::error::Result;
use crate::example::Example;
use crate::ops::remap::IndexMap;

/// Repeat over a random-access dataset.
pub struct MapRepeat {
    parent: Arc<dyn MapDataset>,
    count: Option<u64>,
}

impl MapRepeat {
    /// Repeats `count` times, or forever for `None`.
    pub fn new(parent: Arc<dyn MapDataset>, count: Option<u64>) -> Self {
        MapRepeat { parent, count }
    }
}

impl IndexMap for MapRepeat {
    fn input(&self) -> &Arc<dyn MapDataset> {
        &self.parent
    }

    fn len(&self) -> u64 {
        let n = self.parent.len();
        match self.count {
            _ if n == 0 => 0,
            None => INFINITE,
            Some(c) => n.saturating_mul(c),
        }
    }

    /// Index `e * n + i` is already element `i` of the input's epoch `e`: the identity.
    fn source_index(&self, index: u64) -> Result<u64> {
        Ok(index)
    }

    /// Endless: a new epoch of the input every `n` indices (an endless input's own period).
    fn pass_len(&self) -> Option<u64> {
        match (self.count, self.parent.len()) {
            (_, INFINITE) => self.parent.pass_len(),
            (None, n) if n > 0 => Some(n),
            _ => None,
        }
    }

    fn name(&self) -> String {
        match self.count {
            Some(c) => format!("repeat({c})"),
            None => "repeat()".into(),
        }
    }
}

/// Repeat over a stream.
pub struct IterRepeat {
    parent: Dataset,
    count: Option<u64>,
}

impl IterRepeat {
    /// Repeats `count` times, or forever for `None`.
    pub fn new(parent: Dataset, count: Option<u64>) -> Self {
        IterRepeat { parent, count }
    }
}

impl IterDataset for IterRepeat {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        let reps = self.count.unwrap_or(u64::MAX);
        let base = crate::checked::mul(
            "repeat",
            "the input's first epoch",
            epoch,
            reps.min(1 << 32),
        )?;
        Ok(Box::new(RepeatIter {
            parent: self.parent.clone(),
            inner: self.parent.iter(base)?,
            base,
            rep: 0,
            reps,
            yielded_this_rep: false,
        }))
    }

    fn name(&self) -> String {
        match self.count {
            Some(c) => format!("repeat({c})"),
            None => "repeat()".into(),
        }
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn len(&self) -> Option<u64> {
        let n = self.parent.len()?;
        Some(match self.count {
            _ if n == 0 => 0,
            None => INFINITE,
            Some(c) => n.saturating_mul(c),
        })
    }
}

struct RepeatIter {
    parent: Dataset,
    inner: Box<dyn DatasetIter>,
    base: u64,
    rep: u64,
    reps: u64,
    yielded_this_rep: bool,
}

impl DatasetIter for RepeatIter {
    fn next(&mut self) -> Result<Option<Example>> {
        loop {
            if self.rep >= self.reps {
                return Ok(None);
            }
            if let Some(e) = self.inner.next()? {
                self.yielded_this_rep = true;
                return Ok(Some(e));
            }
            if !self.yielded_this_rep {
                // An empty repetition: stop instead of spinning forever.
                self.rep = self.reps;
                return Ok(None);
            }
            self.rep += 1;
            self.yielded_this_rep = false;
            if self.rep < self.reps {
                self.inner = self.parent.iter(self.base + self.rep)?;
            }
        }
    }

    fn state(&self) -> Json {
        json!({ "rep": self.rep, "yielded": self.yielded_this_rep, "inner": self.inner.state() })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        self.rep = state_u64(state, "rep")?;
        self.yielded_this_rep = state_field(state, "yielded")?.as_bool().unwrap_or(true);
        if self.rep < self.reps {
            self.inner = self.parent.iter(self.base + self.rep)?;
            self.inner.set_state(state_field(state, "inner")?)?;
        }
        Ok(())
    }
}

//! `take(n)` and `skip(n)`. Over a random-access dataset they act within each epoch: epoch `e` of
//! `take(k)` is the first `k` elements of the parent's epoch `e` (so `shuffle(s).take(k)` draws a
//! new subset each epoch).
//!
//! Over an endless parent (`repeat()`), each epoch of `take(k)` starts the parent over, as
//! tf.data restarts the inner iterator on each pass of an outer `repeat` and on each new
//! iterator: `range(3).repeat().take(4).repeat(2)` is `[0, 1, 2, 0, 0, 1, 2, 0]`. Epoch `e` reads
//! the parent from `e * stride`, where `stride` is the first multiple of the parent's period
//! ([`MapDataset::pass_len`]) that covers `offset + k`, so it starts a fresh epoch of what is
//! repeated (a shuffle under the repeat draws a new order each pass, as tf.data's reshuffles).
//! Without a known period every epoch reads the same `offset .. offset + k`.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{
    state_field, state_u64, Dataset, DatasetIter, IterDataset, MapDataset, INFINITE,
};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::ops::remap::IndexMap;

/// take / skip over a random-access dataset: a window `offset..offset+len` of each epoch.
pub struct MapSlice {
    parent: Arc<dyn MapDataset>,
    offset: u64,
    len: u64,
    label: String,
}

impl MapSlice {
    /// The first `n` elements of each epoch.
    pub fn take(parent: Arc<dyn MapDataset>, n: u64) -> Self {
        let len = parent.len().min(n);
        MapSlice {
            parent,
            offset: 0,
            len,
            label: format!("take({n})"),
        }
    }

    /// All but the first `n` elements of each epoch.
    pub fn skip(parent: Arc<dyn MapDataset>, n: u64) -> Self {
        let plen = parent.len();
        let len = if plen == INFINITE {
            INFINITE
        } else {
            plen.saturating_sub(n)
        };
        MapSlice {
            parent,
            offset: n.min(plen),
            len,
            label: format!("skip({n})"),
        }
    }
}

impl IndexMap for MapSlice {
    fn input(&self) -> &Arc<dyn MapDataset> {
        &self.parent
    }

    fn len(&self) -> u64 {
        self.len
    }

    /// The window `offset..offset+len` of the same epoch.
    fn source_index(&self, index: u64) -> Result<u64> {
        if self.len == 0 {
            return Err(Error::OutOfRange {
                index,
                len: 0,
                what: self.name(),
            });
        }
        let plen = self.parent.len();
        if self.len == INFINITE {
            // skip(n) of an endless parent: one endless epoch.
            return crate::checked::add(&self.label, "the index", self.offset, index);
        }
        let (epoch, i) = (index / self.len, index % self.len);
        if plen == INFINITE {
            let start = crate::checked::add(&self.label, "the index", self.offset, i)?;
            let Some(period) = self.parent.pass_len().filter(|&p| p > 0) else {
                return Ok(start);
            };
            let stride = crate::checked::mul(
                &self.label,
                "the parent's period",
                (self.offset + self.len).div_ceil(period),
                period,
            )?;
            return crate::checked::global_index(&self.label, epoch, stride, start);
        }
        crate::checked::global_index(&self.label, epoch, plen, self.offset + i)
    }

    fn name(&self) -> String {
        self.label.clone()
    }
}

/// take / skip over a stream.
pub struct IterSlice {
    parent: Dataset,
    skip: u64,
    take: Option<u64>,
}

impl IterSlice {
    /// The first `n` elements.
    pub fn take(parent: Dataset, n: u64) -> Self {
        IterSlice {
            parent,
            skip: 0,
            take: Some(n),
        }
    }

    /// All but the first `n` elements.
    pub fn skip(parent: Dataset, n: u64) -> Self {
        IterSlice {
            parent,
            skip: n,
            take: None,
        }
    }
}

impl IterDataset for IterSlice {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(SliceIter {
            inner: self.parent.iter(epoch)?,
            to_skip: self.skip,
            left: self.take,
        }))
    }

    fn name(&self) -> String {
        match self.take {
            Some(n) => format!("take({n})"),
            None => format!("skip({})", self.skip),
        }
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn len(&self) -> Option<u64> {
        let n = self.parent.len()?;
        Some(match self.take {
            Some(t) => n.min(t),
            None if n == INFINITE => INFINITE,
            None => n.saturating_sub(self.skip),
        })
    }
}

struct SliceIter {
    inner: Box<dyn DatasetIter>,
    to_skip: u64,
    left: Option<u64>,
}

impl DatasetIter for SliceIter {
    fn next(&mut self) -> Result<Option<Example>> {
        while self.to_skip > 0 {
            if self.inner.next()?.is_none() {
                self.to_skip = 0;
                return Ok(None);
            }
            self.to_skip -= 1;
        }
        match self.left {
            Some(0) => Ok(None),
            Some(ref mut n) => {
                *n -= 1;
                self.inner.next()
            }
            None => self.inner.next(),
        }
    }

    fn state(&self) -> Json {
        json!({ "to_skip": self.to_skip, "left": self.left, "inner": self.inner.state() })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        self.to_skip = state_u64(state, "to_skip")?;
        self.left = state_field(state, "left")?.as_u64();
        self.inner.set_state(state_field(state, "inner")?)
    }
}

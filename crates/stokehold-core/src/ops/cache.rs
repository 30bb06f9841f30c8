//! `cache()`: keeps the first pass over a pipeline in memory; later epochs read it from there.
//!
//! Over a random-access input the cache is filled by whatever elements are read, in any order and
//! from any thread; once every element is in, they are stacked into one arena per feature
//! ([`InMemory`]: dense columns, ragged columns where lengths differ) and the per-element copies
//! are dropped. Over a stream, the first iterator that runs the input from its start to its end
//! fills it. Every epoch yields the input's epoch 0, whether from the input or from the cache, so
//! random ops before `cache()` are frozen once (as in tf.data) and outputs and checkpoints do not
//! depend on whether the cache was full yet. State: `{"pos": n}` (random access), or
//! `{"pos": n, "inner": <input state or null>}` (streams).

use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Value as Json};

use crate::dataset::{
    state_field, state_u64, Dataset, DatasetIter, IterDataset, MapDataset, INFINITE,
};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::ops::source::{from_examples, InMemory};

/// The filled cache: one arena per feature, or the elements themselves when they do not stack
/// (features that differ beyond axis 0).
enum Arena {
    Columns(InMemory),
    Rows(Vec<Example>),
}

impl Arena {
    fn build(rows: Vec<Example>) -> Arena {
        match from_examples(&rows) {
            Ok(columns) => Arena::Columns(columns),
            Err(_) => Arena::Rows(rows),
        }
    }

    fn get(&self, i: u64) -> Result<Example> {
        match self {
            Arena::Columns(c) => c.get(i),
            Arena::Rows(r) => Ok(r[i as usize].clone()),
        }
    }
}

/// `cache()` over a random-access dataset.
pub struct MemCache {
    parent: Arc<dyn MapDataset>,
    arena: OnceLock<Arena>,
    pending: Mutex<(Vec<Option<Example>>, u64)>,
}

impl MapDataset for MemCache {
    fn len(&self) -> u64 {
        self.parent.len()
    }

    fn get(&self, index: u64) -> Result<Example> {
        let n = self.parent.len();
        if n == 0 {
            return Err(Error::OutOfRange {
                index,
                len: 0,
                what: self.name(),
            });
        }
        let i = index % n;
        if let Some(a) = self.arena.get() {
            return a.get(i);
        }
        let e = self.parent.get(i)?;
        let mut p = self
            .pending
            .lock()
            .map_err(|_| Error::invalid("cache lock poisoned"))?;
        if p.0.is_empty() && self.arena.get().is_none() {
            p.0 = vec![None; n as usize];
        }
        if let Some(slot) = p.0.get_mut(i as usize) {
            if slot.is_none() {
                *slot = Some(e.clone());
                p.1 += 1;
                if p.1 == n {
                    let rows = std::mem::take(&mut p.0)
                        .into_iter()
                        .map(|r| r.expect("full"))
                        .collect();
                    let _ = self.arena.set(Arena::build(rows));
                }
            }
        }
        Ok(e)
    }

    fn name(&self) -> String {
        "cache(memory)".into()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![Dataset::Map(self.parent.clone())]
    }
}

/// `cache()` over a stream.
pub struct IterCache {
    parent: Dataset,
    shared: Arc<Mutex<(Option<Arc<Arena>>, bool)>>,
}

impl IterDataset for IterCache {
    fn iter(&self, _epoch: u64) -> Result<Box<dyn DatasetIter>> {
        let mut sh = self
            .shared
            .lock()
            .map_err(|_| Error::invalid("cache lock poisoned"))?;
        let cached = sh.0.clone();
        // Only one iterator fills the cache at a time; the others just read the input.
        let filling = cached.is_none() && !sh.1;
        sh.1 |= filling;
        drop(sh);
        let inner = if cached.is_none() {
            Some(self.parent.iter(0)?)
        } else {
            None
        };
        Ok(Box::new(IterCacheIter {
            parent: self.parent.clone(),
            shared: self.shared.clone(),
            cached,
            inner,
            rows: filling.then(Vec::new),
            pos: 0,
        }))
    }

    fn name(&self) -> String {
        "cache(memory)".into()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn len(&self) -> Option<u64> {
        self.parent.len()
    }
}

struct IterCacheIter {
    parent: Dataset,
    shared: Arc<Mutex<(Option<Arc<Arena>>, bool)>>,
    cached: Option<Arc<Arena>>,
    inner: Option<Box<dyn DatasetIter>>,
    /// `Some` while this iterator fills the cache.
    rows: Option<Vec<Example>>,
    pos: u64,
}

impl IterCacheIter {
    /// Gives up filling (dropped or restored mid-way): the cache stays empty.
    fn stop_filling(&mut self) {
        if self.rows.take().is_some() {
            if let Ok(mut sh) = self.shared.lock() {
                sh.1 = false;
            }
        }
    }
}

impl DatasetIter for IterCacheIter {
    fn next(&mut self) -> Result<Option<Example>> {
        if let Some(c) = &self.cached {
            let n = match &**c {
                Arena::Columns(m) => m.len(),
                Arena::Rows(r) => r.len() as u64,
            };
            if self.pos >= n {
                return Ok(None);
            }
            self.pos += 1;
            return c.get(self.pos - 1).map(Some);
        }
        match self.inner.as_mut().expect("reading the input").next()? {
            Some(e) => {
                if let Some(rows) = &mut self.rows {
                    rows.push(e.clone());
                }
                self.pos += 1;
                Ok(Some(e))
            }
            None => {
                if let Some(rows) = self.rows.take() {
                    let arena = Arc::new(Arena::build(rows));
                    if let Ok(mut sh) = self.shared.lock() {
                        (sh.0, sh.1) = (Some(arena), false);
                    }
                }
                Ok(None)
            }
        }
    }

    fn state(&self) -> Json {
        json!({ "pos": self.pos, "inner": self.inner.as_ref().map(|i| i.state()) })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let pos = state_u64(state, "pos")?;
        self.stop_filling(); // a restored iterator has not seen the start: it never fills
        self.pos = pos;
        if self.cached.is_some() {
            return Ok(());
        }
        let mut inner = self.parent.iter(0)?;
        match state_field(state, "inner")? {
            Json::Null => {
                for _ in 0..pos {
                    inner.next()?;
                }
            }
            s => inner.set_state(s)?,
        }
        self.inner = Some(inner);
        Ok(())
    }
}

impl Drop for IterCacheIter {
    fn drop(&mut self) {
        self.stop_filling();
    }
}

impl Dataset {
    /// Caches the first pass in memory (see the module docs); later epochs read the cache.
    pub fn cache(&self) -> Result<Dataset> {
        if self.len() == Some(INFINITE) {
            return Err(Error::invalid(
                "cannot cache an endless dataset; cache before repeat()",
            ));
        }
        Ok(match self {
            Dataset::Map(m) => Dataset::from_map(MemCache {
                parent: m.clone(),
                arena: OnceLock::new(),
                pending: Mutex::new((Vec::new(), 0)),
            }),
            Dataset::Iter(_) => Dataset::from_iter(IterCache {
                parent: self.clone(),
                shared: Arc::new(Mutex::new((None, false))),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_cache_fills_in_any_order_and_freezes_epoch_zero() {
        let ds = Dataset::range(20).shuffle(3).cache().unwrap();
        let m = ds.as_map().unwrap();
        let first: Vec<Example> = (0..20).rev().map(|i| m.get(i).unwrap()).collect();
        let later: Vec<Example> = (20..40).rev().map(|i| m.get(i).unwrap()).collect();
        assert_eq!(first, later);
        assert_eq!(
            first,
            (0..20)
                .rev()
                .map(|i| Dataset::range(20).shuffle(3).get(i).unwrap())
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn stream_cache_only_fills_from_a_full_pass() {
        let base = Dataset::range(10).filter(
            "odd",
            crate::filter_fn(|e, _| Ok(e.tensor("f", "x")?.to_vec::<i64>()?[0] % 2 == 1)),
        );
        let ds = base.cache().unwrap();
        let mut it = ds.iter(0).unwrap();
        it.next().unwrap();
        drop(it); // abandoned: no cache
        let a = ds.iter(0).unwrap().collect_all().unwrap();
        let b = ds.iter(1).unwrap().collect_all().unwrap();
        assert_eq!(a.len(), 5);
        assert_eq!(a, b);
    }
}

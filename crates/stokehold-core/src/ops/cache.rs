//! `cache()`: keeps the first pass over a pipeline in memory; later epochs read it from there.
//!
//! Over a random-access input the cache is filled by whatever elements are read, in any order and
//! from any thread; over a stream, by the first iterator that runs the input from its start to its
//! end. Each element is copied once, when it is read, into one arena that grows in place
//! ([`cache_arena`](crate::ops::cache_arena)): the cache never holds its data twice, and the
//! element's own buffers can go as soon as it has been handed on. Every epoch yields the input's epoch 0, whether from the input or from the cache, so
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
use crate::ops::cache_arena::{Filler, Packed};

/// `cache()` over a random-access dataset.
pub struct MemCache {
    parent: Arc<dyn MapDataset>,
    arena: OnceLock<Packed>,
    /// The arena being filled (`None` before the first element and once it is full).
    filling: Mutex<Option<Filler>>,
}

impl MemCache {
    /// Copies element `i` (just read from the input) into the arena unless it is there already;
    /// the copy itself runs outside the lock.
    fn fill(&self, i: u64, n: u64, e: &Example) -> Result<()> {
        let lock = || {
            self.filling
                .lock()
                .map_err(|_| Error::invalid("cache lock poisoned"))
        };
        let claim = {
            let mut f = lock()?;
            if self.arena.get().is_some() {
                return Ok(());
            }
            match f.get_or_insert_with(|| Filler::new(Some(n))).claim(i, e)? {
                Some(c) => c,
                None => return Ok(()),
            }
        };
        claim.copy(e);
        let mut f = lock()?;
        let filler = f.as_mut().expect("filling until full");
        filler.record(claim, e);
        if filler.recorded() == n {
            let full = f.take().expect("filling").finish()?;
            let _ = self.arena.set(full);
        }
        Ok(())
    }
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
        self.fill(i, n, &e)?;
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
    shared: Arc<Mutex<(Option<Arc<Packed>>, bool)>>,
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
            filler: filling.then(|| Filler::new(None)),
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
    shared: Arc<Mutex<(Option<Arc<Packed>>, bool)>>,
    cached: Option<Arc<Packed>>,
    inner: Option<Box<dyn DatasetIter>>,
    /// `Some` while this iterator fills the cache.
    filler: Option<Filler>,
    pos: u64,
}

impl IterCacheIter {
    /// Gives up filling (dropped or restored mid-way): the cache stays empty.
    fn stop_filling(&mut self) {
        if self.filler.take().is_some() {
            if let Ok(mut sh) = self.shared.lock() {
                sh.1 = false;
            }
        }
    }
}

impl DatasetIter for IterCacheIter {
    fn next(&mut self) -> Result<Option<Example>> {
        if let Some(c) = &self.cached {
            if self.pos >= c.len() {
                return Ok(None);
            }
            self.pos += 1;
            return c.get(self.pos - 1).map(Some);
        }
        match self.inner.as_mut().expect("reading the input").next()? {
            Some(e) => {
                if let Some(f) = &mut self.filler {
                    if let Some(claim) = f.claim(self.pos, &e)? {
                        claim.copy(&e);
                        f.record(claim, &e);
                    }
                }
                self.pos += 1;
                Ok(Some(e))
            }
            None => {
                if let Some(f) = self.filler.take() {
                    let arena = Arc::new(f.finish()?);
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
        Ok(self.on_base(|ds| match ds {
            Dataset::Map(m) => Dataset::from_map(MemCache {
                parent: m.clone(),
                arena: OnceLock::new(),
                filling: Mutex::new(None),
            }),
            Dataset::Iter(_) => Dataset::from_iter(IterCache {
                parent: ds.clone(),
                shared: Arc::new(Mutex::new((None, false))),
            }),
        }))
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

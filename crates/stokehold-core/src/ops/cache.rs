//! `cache()`: keeps the first pass over a pipeline in memory; later epochs read it from there.
//!
//! Over a random-access input the cache is filled by whatever elements are read, in any order and
//! from any thread; over a stream, by the first iterator that runs the input from its start to its
//! end. Each element is copied once, when it is read, into one arena that grows in place
//! ([`cache_arena`](crate::ops::cache_arena)): the cache never holds its data twice, and the
//! element handed on is read from the arena, so its own buffers go as soon as it is copied.
//! Every epoch yields the input's epoch 0, whether from the input or from the cache, so
//! random ops before `cache()` are frozen once (as in tf.data) and outputs and checkpoints do not
//! depend on whether the cache was full yet. State: `{"pos": n}` (random access), or
//! `{"pos": n, "inner": <input state or null>}` (streams).

use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Value as Json};

use crate::alloc::release_freed;
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
    /// Copies element `i` (just read from the input) into the arena unless it is there already,
    /// and returns it as read from the arena (its own buffers freed here); the copy itself runs
    /// outside the lock.
    fn fill(&self, i: u64, n: u64, e: Example) -> Result<Example> {
        let lock = || {
            self.filling
                .lock()
                .map_err(|_| Error::invalid("cache lock poisoned"))
        };
        let claim = {
            let mut f = lock()?;
            if self.arena.get().is_some() {
                return Ok(e);
            }
            match f.get_or_insert_with(|| Filler::new(Some(n))).claim(i, &e)? {
                Some(c) => c,
                None => return Ok(e),
            }
        };
        let copied = claim.copy(&e)?;
        drop(e);
        let last = {
            let mut f = lock()?;
            let filler = f.as_mut().expect("filling until full");
            filler.record(claim, &copied);
            let last = filler.all_claimed();
            if filler.recorded() == n {
                let full = f.take().expect("filling").finish()?;
                let _ = self.arena.set(full);
            }
            last
        };
        if last {
            // Every element is claimed: this thread fills no more of this cache, so what it freed
            // filling it goes back now (cache_arena's module docs); threads whose last element
            // came earlier do so as they end (`exec/pool.rs`).
            release_freed();
        }
        Ok(copied)
    }
}

impl MapDataset for MemCache {
    fn len(&self) -> u64 {
        self.parent.len()
    }

    fn get(&self, index: u64) -> Result<Example> {
        let n = self.parent.len();
        let (_, i) = crate::checked::wrap_index(index, n, || self.name())?;
        if let Some(a) = self.arena.get() {
            return a.get(i);
        }
        self.fill(i, n, self.parent.get(i)?)
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
            Some(mut e) => {
                if let Some(f) = &mut self.filler {
                    if let Some(claim) = f.claim(self.pos, &e)? {
                        // Handed on as read from the arena: the input's buffers go here.
                        e = claim.copy(&e)?;
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
                    release_freed();
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

    /// A map making a fresh clip of 1000 + 37 i samples per element (a decoder's buffer).
    fn clips(n: u64) -> Dataset {
        Dataset::range(n).map(
            "clip",
            crate::map_fn(|e, _| {
                let i = e.tensor("t", "x")?.to_vec::<i64>()?[0];
                let clip: Vec<i16> = (0..1000 + 37 * i).map(|k| (k * i) as i16).collect();
                Ok(e.with("clip", crate::Tensor::from_vec(vec![clip.len()], clip)?))
            }),
        )
    }

    static RELEASES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn count_release() {
        RELEASES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    #[test]
    fn a_fill_hands_on_the_arena_copy_and_releases_once_every_element_is_claimed() {
        crate::alloc::set_release_hook(count_release);
        let ds = clips(12).cache().unwrap();
        let m = ds.as_map().unwrap();
        let ptr = |e: &Example| e.tensor("t", "clip").unwrap().data().as_ptr();
        let before = RELEASES.load(std::sync::atomic::Ordering::SeqCst);
        // The first pass's elements already read from the arena: the decoder's buffer is gone
        // as soon as the element is copied, not when the consumer lets it go.
        let first: Vec<Example> = (0..12).map(|i| m.get(i).unwrap()).collect();
        assert!(RELEASES.load(std::sync::atomic::Ordering::SeqCst) > before);
        for (i, e) in first.iter().enumerate() {
            let again = m.get(12 + i as u64).unwrap();
            assert_eq!(&again, e);
            assert_eq!(ptr(&again), ptr(e), "element {i} is the arena's copy");
        }
        let from_input = clips(12).get(5).unwrap();
        assert_eq!(first[5], from_input);
    }

    #[test]
    fn a_stream_fill_hands_on_the_arena_copy() {
        let stream = clips(6).filter("all", crate::filter_fn(|_, _| Ok(true)));
        let ds = stream.cache().unwrap();
        assert!(ds.as_map().is_none(), "a stream's cache");
        let first = ds.iter(0).unwrap().collect_all().unwrap();
        let again = ds.iter(1).unwrap().collect_all().unwrap();
        assert_eq!(first, again);
        for (a, b) in first.iter().zip(&again) {
            let p = |e: &Example| e.tensor("t", "clip").unwrap().data().as_ptr();
            assert_eq!(p(a), p(b));
        }
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

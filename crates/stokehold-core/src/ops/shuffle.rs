//! Shuffles.
//!
//! * [`GlobalShuffle`] (random access): element `i` of epoch `e` is the parent's element
//!   `perm(seed, e)(i)`, where `perm` is a keyed bijection ([`Permutation`]): no buffer, no
//!   materialised index list, a new order each epoch.
//! * [`BufferShuffle`] (streams, tf.data's `shuffle(buffer_size)`): a buffer of `size` elements;
//!   each step emits a uniformly chosen buffered element and refills its slot. Its state holds the
//!   stream positions of the buffered elements, not their contents; restoring re-reads them
//!   (by index when the input is random-access, by replaying the input otherwise).
//!
//! Both draw a new order each epoch by default; with `reshuffle_each_iteration = false` (as in
//! tf.data) every epoch uses epoch 0's order (the key leaves the epoch out). The flag is in the
//! name only when false, so the fingerprints of existing pipelines do not change.

use std::cell::RefCell;
use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{
    state_field, state_u64, Dataset, DatasetIter, IterDataset, MapDataset, INFINITE,
};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::ops::remap::IndexMap;
use crate::rng::{Permutation, Rng};

/// `Permutation::cached(n, seed, key).apply(i)`, remembered per thread for the last few `i`: an
/// element-by-element iterator over shard records asks for each index three times (its prefetch
/// hints 16 and 8 ahead, then the read), and a value costs about 2.6 encryptions for n = 400k
/// (`Permutation::encrypt` was 5.7 % of `shard_read_bench`'s global-shuffle epochs).
fn permuted(n: u64, seed: u64, key: u64, i: u64) -> u64 {
    const SLOTS: usize = 32;
    // (n, seed, key, i, image); n = 0 (no permutation asks for it) marks an empty slot. Boxed:
    // the Python extension is loaded with dlopen, whose static TLS is small (a 1.3 KB array in
    // place failed the import: "cannot allocate memory in static TLS block").
    type Memo = [(u64, u64, u64, u64, u64); SLOTS];
    thread_local!(static MEMO: RefCell<Box<Memo>> = RefCell::new(Box::new([(0, 0, 0, 0, 0); SLOTS])));
    MEMO.with_borrow_mut(|memo| {
        let slot = &mut memo[(i % SLOTS as u64) as usize];
        if (slot.0, slot.1, slot.2, slot.3) == (n, seed, key, i) {
            return slot.4;
        }
        let j = Permutation::cached(n, seed, key).apply(i);
        *slot = (n, seed, key, i, j);
        j
    })
}

/// A seeded global permutation per epoch over a random-access dataset.
pub struct GlobalShuffle {
    parent: Arc<dyn MapDataset>,
    seed: u64,
    reshuffle: bool,
}

impl GlobalShuffle {
    /// Shuffles `parent` with `seed`; fails for an endless parent.
    pub fn new(parent: Arc<dyn MapDataset>, seed: u64) -> Result<Self> {
        if parent.len() == INFINITE {
            return Err(Error::invalid(
                "shuffle needs a finite dataset; shuffle before repeat()",
            ));
        }
        Ok(GlobalShuffle {
            parent,
            seed,
            reshuffle: true,
        })
    }

    /// `false`: the same order every epoch (tf.data's `reshuffle_each_iteration=False`).
    pub fn reshuffle_each_iteration(mut self, reshuffle: bool) -> Self {
        self.reshuffle = reshuffle;
        self
    }
}

impl IndexMap for GlobalShuffle {
    fn input(&self) -> &Arc<dyn MapDataset> {
        &self.parent
    }

    fn len(&self) -> u64 {
        self.parent.len()
    }

    /// Element `i` of epoch `e` is `e * n + perm(seed, e)(i)` (`perm(seed, 0)` every epoch
    /// without reshuffling).
    fn source_index(&self, index: u64) -> Result<u64> {
        let n = self.parent.len();
        if n == 0 {
            return Err(Error::OutOfRange {
                index,
                len: 0,
                what: self.name(),
            });
        }
        let (epoch, i) = (index / n, index % n);
        let key = if self.reshuffle { epoch } else { 0 };
        let j = permuted(n, self.seed, key, i);
        crate::checked::global_index("shuffle", epoch, n, j)
    }

    /// A batch's indices: each run within one epoch through [`Permutation::apply_many`].
    fn source_indices(&self, indices: &[u64]) -> Result<Vec<u64>> {
        let n = self.parent.len();
        if n == 0 {
            return indices.iter().map(|&i| self.source_index(i)).collect();
        }
        let mut out = Vec::with_capacity(indices.len());
        let mut rest = indices;
        let mut within = Vec::with_capacity(indices.len().min(1024));
        // One division a run, none an element: the epoch's indices are `lo..=hi`.
        while let Some(&first) = rest.first() {
            let epoch = first / n;
            let lo = epoch * n; // <= first
            let hi = lo.saturating_add(n - 1);
            let run = rest.iter().take_while(|&&i| (lo..=hi).contains(&i)).count();
            let key = if self.reshuffle { epoch } else { 0 };
            within.clear();
            within.extend(rest[..run].iter().map(|&i| i - lo));
            let from = out.len();
            Permutation::cached(n, self.seed, key).apply_many(&within, &mut out);
            for j in &mut out[from..] {
                *j = match lo.checked_add(*j) {
                    Some(g) => g,
                    None => crate::checked::global_index("shuffle", epoch, n, *j)?,
                };
            }
            rest = &rest[run..];
        }
        Ok(out)
    }

    fn name(&self) -> String {
        match self.reshuffle {
            true => format!("shuffle(seed={})", self.seed),
            false => format!(
                "shuffle(seed={}, reshuffle_each_iteration=false)",
                self.seed
            ),
        }
    }
}

/// A shuffle buffer over a stream.
pub struct BufferShuffle {
    parent: Dataset,
    size: usize,
    seed: u64,
    reshuffle: bool,
}

impl BufferShuffle {
    /// A buffer of `size` (> 0) elements seeded with `seed`.
    pub fn new(parent: Dataset, size: usize, seed: u64) -> Result<Self> {
        if size == 0 {
            return Err(Error::invalid("shuffle buffer_size must be > 0"));
        }
        Ok(BufferShuffle {
            parent,
            size,
            seed,
            reshuffle: true,
        })
    }

    /// `false`: the same draws every epoch (tf.data's `reshuffle_each_iteration=False`; the
    /// order is the same when the input's is).
    pub fn reshuffle_each_iteration(mut self, reshuffle: bool) -> Self {
        self.reshuffle = reshuffle;
        self
    }
}

impl IterDataset for BufferShuffle {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(BufferShuffleIter {
            parent: self.parent.clone(),
            epoch,
            inner: self.parent.iter(epoch)?,
            size: self.size,
            rng: Rng::keyed(self.seed, &[if self.reshuffle { epoch } else { 0 }, 0x5b]),
            buffer: Vec::with_capacity(self.size.min(super::PREALLOC_MAX)),
            pulled: 0,
            exhausted: false,
        }))
    }

    fn name(&self) -> String {
        let flag = if self.reshuffle {
            ""
        } else {
            ", reshuffle_each_iteration=false"
        };
        format!(
            "shuffle(buffer_size={}, seed={}{flag})",
            self.size, self.seed
        )
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn len(&self) -> Option<u64> {
        self.parent.len()
    }
}

struct BufferShuffleIter {
    parent: Dataset,
    epoch: u64,
    inner: Box<dyn DatasetIter>,
    size: usize,
    rng: Rng,
    /// (position in the input stream, element)
    buffer: Vec<(u64, Example)>,
    pulled: u64,
    exhausted: bool,
}

impl BufferShuffleIter {
    fn pull(&mut self) -> Result<Option<(u64, Example)>> {
        if self.exhausted {
            return Ok(None);
        }
        match self.inner.next()? {
            Some(e) => {
                self.pulled += 1;
                Ok(Some((self.pulled - 1, e)))
            }
            None => {
                self.exhausted = true;
                Ok(None)
            }
        }
    }
}

impl DatasetIter for BufferShuffleIter {
    fn next(&mut self) -> Result<Option<Example>> {
        while self.buffer.len() < self.size {
            match self.pull()? {
                Some(item) => self.buffer.push(item),
                None => break,
            }
        }
        if self.buffer.is_empty() {
            return Ok(None);
        }
        let j = self.rng.below(self.buffer.len() as u64) as usize;
        let out = match self.pull()? {
            Some(item) => std::mem::replace(&mut self.buffer[j], item),
            None => self.buffer.swap_remove(j),
        };
        Ok(Some(out.1))
    }

    fn state(&self) -> Json {
        let positions: Vec<u64> = self.buffer.iter().map(|(p, _)| *p).collect();
        json!({
            "rng": self.rng.state().to_string(),
            "pulled": self.pulled,
            "exhausted": self.exhausted,
            "buffer": positions,
            "inner": self.inner.state(),
        })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let rng = state_field(state, "rng")?
            .as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| Error::State("shuffle: bad rng field".into()))?;
        let pulled = state_u64(state, "pulled")?;
        let positions: Vec<u64> = serde_json::from_value(state_field(state, "buffer")?.clone())
            .map_err(|e| Error::State(format!("shuffle: bad buffer field: {e}")))?;
        let mut buffer = Vec::with_capacity(positions.len());
        if let Dataset::Map(m) = &self.parent {
            // Random-access input: fetch the buffered elements directly.
            let base = crate::checked::epoch_start("shuffle_buffer", self.epoch, m.len())?;
            for p in &positions {
                buffer.push((*p, m.get(base + p)?));
            }
            self.inner.set_state(state_field(state, "inner")?)?;
        } else {
            // A stream: replay it from the epoch start, keeping the buffered positions.
            let mut fresh = self.parent.iter(self.epoch)?;
            let mut want: std::collections::HashMap<u64, usize> =
                positions.iter().enumerate().map(|(i, p)| (*p, i)).collect();
            let mut slots: Vec<Option<(u64, Example)>> = vec![None; positions.len()];
            for pos in 0..pulled {
                let e = fresh.next()?.ok_or_else(|| {
                    Error::State(format!(
                        "shuffle: input ended at {pos} while replaying to {pulled}"
                    ))
                })?;
                if let Some(slot) = want.remove(&pos) {
                    slots[slot] = Some((pos, e));
                }
            }
            buffer = slots
                .into_iter()
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    Error::State("shuffle: buffered positions not found in the input".into())
                })?;
            self.inner = fresh;
        }
        self.buffer = buffer;
        self.pulled = pulled;
        self.exhausted = state_field(state, "exhausted")?.as_bool().unwrap_or(false);
        self.rng = Rng::from_state(rng);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::source::Range;

    #[test]
    fn a_batch_of_indices_maps_as_each_index_does_across_epochs() {
        for reshuffle in [true, false] {
            let s = GlobalShuffle::new(Arc::new(Range::new(1000)), 5)
                .unwrap()
                .reshuffle_each_iteration(reshuffle);
            // Runs within an epoch, across two boundaries, and out of order.
            let indices: Vec<u64> = (990..2013).chain([7, 2500, 3, 1999]).collect();
            let want: Vec<u64> = indices
                .iter()
                .map(|&i| s.source_index(i).unwrap())
                .collect();
            assert_eq!(s.source_indices(&indices).unwrap(), want);
        }
    }

    #[test]
    fn a_batch_in_the_last_partial_epoch_of_u64_is_an_error_naming_the_op() {
        let s = GlobalShuffle::new(Arc::new(Range::new(10)), 1).unwrap();
        // The last epoch of the u64 range is partial: some of its elements map past u64::MAX.
        let last: Vec<u64> = (u64::MAX - 5..u64::MAX).collect();
        assert!(last.iter().any(|&i| s.source_index(i).is_err()));
        let err = s.source_indices(&last).unwrap_err().to_string();
        assert!(err.contains("shuffle") && err.contains("64-bit"), "{err}");
    }
}

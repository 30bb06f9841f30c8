//! Shuffles.
//!
//! * [`GlobalShuffle`] (random access): element `i` of epoch `e` is the parent's element
//!   `perm(seed, e)(i)`, where `perm` is a keyed bijection ([`Permutation`]): no buffer, no
//!   materialised index list, a new order each epoch.
//! * [`BufferShuffle`] (streams, tf.data's `shuffle(buffer_size)`): a buffer of `size` elements;
//!   each step emits a uniformly chosen buffered element and refills its slot. Its state is a
//!   few integers: how many elements it has emitted and pulled this epoch. The buffer's
//!   positions follow from them (the draws are the epoch's seeded generator's), so restoring
//!   replays the draws over positions alone, then re-reads the buffered elements (by index when
//!   the input is random-access, by replaying the input otherwise). Holding the positions
//!   instead made every state O(size) (90 KB of JSON for a buffer of 10000), and a prefetch
//!   keeps the state after each element it hands over: `range(n).shuffle(10000).prefetch(64)`
//!   cost 33 us an element, 1.5 with the counts (`bench/micro/stream_state.py`). The replay
//!   costs a draw per element emitted this epoch, about 5 ns: 15 ms to restore after 3
//!   million; an endless epoch (`repeat()` before the buffer) restored after a billion
//!   elements replays for about 5 s.
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
use crate::exec::Reservation;
use crate::ops::remap::IndexMap;
use crate::rng::{stream_key, Permutation, Rng, Stream};

/// The permutation of epoch `key` (the epoch, or 0 without reshuffling) under `seed`.
fn epoch_permutation(n: u64, seed: u64, key: u64) -> Permutation {
    Permutation::cached(n, stream_key(seed, Stream::Shuffle, &[key]))
}

/// `epoch_permutation(n, seed, key).apply(i)`, remembered per thread for the last few `i`: an
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
        let j = epoch_permutation(n, seed, key).apply(i);
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
        let (epoch, i) = crate::checked::wrap_index(index, n, || self.name())?;
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
            epoch_permutation(n, self.seed, key).apply_many(&within, &mut out);
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

    /// The iterator of epoch `epoch`.
    fn open(&self, epoch: u64) -> Result<BufferShuffleIter> {
        let rng = Rng::for_stream(
            self.seed,
            Stream::ShuffleBuffer,
            &[if self.reshuffle { epoch } else { 0 }],
        );
        Ok(BufferShuffleIter {
            parent: self.parent.clone(),
            epoch,
            inner: self.parent.iter(epoch)?,
            size: self.size,
            first: rng.clone(),
            legacy: false,
            rng,
            buffer: Vec::with_capacity(self.size.min(super::PREALLOC_MAX)),
            held: crate::exec::buffer_reservation(&self.parent),
            pulled: 0,
            failed: Vec::new(),
            exhausted: false,
        })
    }
}

impl IterDataset for BufferShuffle {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(self.open(epoch)?))
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
    /// The epoch's generator before its first draw, which the state's counts replay from.
    first: Rng,
    /// Restored from a state that held the generator and the buffered positions (written before
    /// states held only counts): its states hold them too, since its draws may not be
    /// `first`'s.
    legacy: bool,
    rng: Rng,
    /// (position in the input stream, element)
    buffer: Vec<(u64, Example)>,
    /// The buffer's bytes in the pipeline's memory budget.
    held: Reservation,
    /// Input positions this epoch has pulled: the elements emitted, those in the buffer, and
    /// those that failed.
    pulled: u64,
    /// The positions whose pull failed (an error the input moved on from, which an
    /// `ignore_errors()` above skips): no element, no draw. Counted in the positions, so that a
    /// position is the input's index (the state's buffered elements are fetched by it).
    failed: Vec<u64>,
    exhausted: bool,
}

impl BufferShuffleIter {
    fn pull(&mut self) -> Result<Option<(u64, Example)>> {
        if self.exhausted {
            return Ok(None);
        }
        match self.inner.next() {
            Ok(Some(e)) => {
                self.pulled += 1;
                Ok(Some((self.pulled - 1, e)))
            }
            Ok(None) => {
                self.exhausted = true;
                Ok(None)
            }
            // An interrupt leaves the element to come on the next call.
            Err(e) if matches!(e, Error::Interrupted(_)) => Err(e),
            Err(e) => {
                self.failed.push(self.pulled);
                self.pulled += 1;
                Err(e)
            }
        }
    }
}

impl DatasetIter for BufferShuffleIter {
    fn next(&mut self) -> Result<Option<Example>> {
        while self.buffer.len() < self.size {
            match self.pull()? {
                Some(item) => {
                    self.held.hold(item.1.nbytes());
                    self.buffer.push(item)
                }
                None => break,
            }
        }
        if self.buffer.is_empty() {
            return Ok(None);
        }
        // The replacement is pulled before the draw, so that an error or an interrupt while
        // pulling leaves the generator as it was (the state after it replays the same draws).
        let next = self.pull()?;
        let j = self.rng.below(self.buffer.len() as u64) as usize;
        let out = match next {
            Some(item) => {
                self.held.hold(item.1.nbytes());
                std::mem::replace(&mut self.buffer[j], item)
            }
            None => self.buffer.swap_remove(j),
        };
        self.held.release(out.1.nbytes());
        Ok(Some(out.1))
    }

    fn state(&self) -> Json {
        let held = (self.buffer.len() + self.failed.len()) as u64;
        let mut state = json!({
            "emitted": self.pulled - held,
            "pulled": self.pulled,
            "exhausted": self.exhausted,
            "inner": self.inner.state(),
        });
        if !self.failed.is_empty() {
            state["failed"] = self.failed.clone().into();
        }
        if self.legacy {
            let positions: Vec<u64> = self.buffer.iter().map(|(p, _)| *p).collect();
            state["rng"] = self.rng.state().to_string().into();
            state["buffer"] = positions.into();
        }
        state
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let pulled = state_u64(state, "pulled")?;
        let exhausted = state_field(state, "exhausted")?.as_bool().unwrap_or(false);
        let legacy = state.get("buffer").is_some();
        let failed: Vec<u64> = match state.get("failed") {
            None => Vec::new(),
            Some(f) => serde_json::from_value(f.clone())
                .map_err(|e| Error::State(format!("shuffle: bad failed field: {e}")))?,
        };
        if failed.windows(2).any(|w| w[0] >= w[1]) || failed.last().is_some_and(|&f| f >= pulled) {
            return Err(Error::State(format!(
                "shuffle: failed positions {failed:?} not rising below {pulled}"
            )));
        }
        let (rng, buffer) = if legacy {
            // A state that holds the generator and the positions (written before states held
            // only counts, or by an iterator restored from one).
            let rng = state_field(state, "rng")?
                .as_str()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| Error::State("shuffle: bad rng field".into()))?;
            let positions: Vec<u64> = serde_json::from_value(state_field(state, "buffer")?.clone())
                .map_err(|e| Error::State(format!("shuffle: bad buffer field: {e}")))?;
            if positions.len() > self.size || positions.iter().any(|p| *p >= pulled) {
                return Err(Error::State(format!(
                    "shuffle: {} buffered positions (a buffer of {}) of {pulled} pulled elements",
                    positions.len(),
                    self.size
                )));
            }
            (Rng::from_state(rng), self.fetch(&positions, pulled, state)?)
        } else if let Dataset::Map(m) = &self.parent {
            // Random access: the draws over positions alone, then the buffered elements by index.
            let emitted = state_u64(state, "emitted")?;
            if pulled > m.len() {
                return Err(Error::State(format!(
                    "shuffle: a state of {pulled} pulled elements from an input of {}",
                    m.len()
                )));
            }
            let (rng, slots) = self.replay(emitted, pulled, exhausted, &failed, |_, failed| {
                Ok((!failed).then_some(()))
            })?;
            let positions: Vec<u64> = slots.into_iter().map(|(p, ())| p).collect();
            (rng, self.fetch(&positions, pulled, state)?)
        } else {
            // A stream: its epoch read again from the start through the same draws.
            let emitted = state_u64(state, "emitted")?;
            let mut fresh = self.parent.iter(self.epoch)?;
            let ended = |pos| {
                Error::State(format!(
                    "shuffle: input ended at {pos} while replaying to {pulled}"
                ))
            };
            let replayed = self.replay(emitted, pulled, exhausted, &failed, |pos, failed| {
                if failed {
                    // Whatever it gives now, the run left it out.
                    return match fresh.next() {
                        Ok(None) => Err(ended(pos)),
                        _ => Ok(None),
                    };
                }
                Ok(Some(fresh.next()?.ok_or_else(|| ended(pos))?))
            })?;
            self.inner = fresh;
            replayed
        };
        self.held.release_all();
        self.held.hold(buffer.iter().map(|(_, e)| e.nbytes()).sum());
        self.buffer = buffer;
        self.pulled = pulled;
        self.failed = failed;
        self.exhausted = exhausted;
        self.rng = rng;
        self.legacy = legacy;
        Ok(())
    }
}

impl BufferShuffleIter {
    /// The elements at `positions` of this epoch's input, with the input moved to the state's
    /// `inner` (by index when the input is random-access, by replaying it otherwise).
    fn fetch(
        &mut self,
        positions: &[u64],
        pulled: u64,
        state: &Json,
    ) -> Result<Vec<(u64, Example)>> {
        if let Dataset::Map(m) = &self.parent {
            let base = crate::checked::epoch_start("shuffle_buffer", self.epoch, m.len())?;
            let buffer = positions
                .iter()
                .map(|p| Ok((*p, m.get(base + p)?)))
                .collect::<Result<_>>()?;
            self.inner.set_state(state_field(state, "inner")?)?;
            return Ok(buffer);
        }
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
        self.inner = fresh;
        slots
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                Error::State("shuffle: buffered positions not found in the input".into())
            })
    }

    /// The generator and the buffer after `emitted` draws of this epoch, the input having
    /// given `pulled` positions (and ended, when `exhausted`), those in `failed` without an
    /// element: [`DatasetIter::next`]'s steps again, `item(position, failed)` standing for each
    /// element pulled (the element itself when replaying a stream, nothing when only the
    /// positions are wanted; `None` for a failed position, which the run skipped). A state
    /// whose counts no run could reach is refused.
    fn replay<T>(
        &self,
        emitted: u64,
        pulled: u64,
        exhausted: bool,
        failed: &[u64],
        mut item: impl FnMut(u64, bool) -> Result<Option<T>>,
    ) -> Result<(Rng, Vec<(u64, T)>)> {
        let bad = |why: &str| {
            Error::State(format!(
                "shuffle: a state of {emitted} emitted and {pulled} pulled elements{}: {why}",
                if exhausted { " (input ended)" } else { "" }
            ))
        };
        if emitted + failed.len() as u64 > pulled {
            return Err(bad("more emitted than pulled"));
        }
        let mut rng = self.first.clone();
        let mut buffer = Vec::with_capacity(self.size.min(super::PREALLOC_MAX));
        let mut next = 0u64;
        // The next element pulled (past the positions that failed): `None` where the input
        // ended, or past the state's last pull (`why` = `None`, the tail); an error (`why`)
        // where the run had not pulled it yet.
        let mut pull = |why: Option<&str>| -> Result<Option<(u64, T)>> {
            while next < pulled {
                next += 1;
                let pos = next - 1;
                if let Some(e) = item(pos, failed.binary_search(&pos).is_ok())? {
                    return Ok(Some((pos, e)));
                }
            }
            match why {
                Some(why) if !exhausted => Err(bad(why)),
                _ => Ok(None),
            }
        };
        for k in 0..emitted {
            // An endless epoch (`repeat()` before the buffer) may replay billions of draws:
            // Ctrl-C gets through.
            if k % (1 << 20) == (1 << 20) - 1 {
                crate::exec::interrupt::check()?;
            }
            while buffer.len() < self.size {
                match pull(Some("the buffer cannot have filled"))? {
                    Some(e) => buffer.push(e),
                    None => break,
                }
            }
            if buffer.is_empty() {
                return Err(bad("nothing left to emit"));
            }
            let replacement = pull(Some("the buffer cannot have refilled"))?;
            let j = rng.below(buffer.len() as u64) as usize;
            match replacement {
                Some(e) => buffer[j] = e,
                None => {
                    buffer.swap_remove(j);
                }
            }
        }
        // Elements pulled after the last draw (a fill that an error or an interrupt cut short)
        // wait in the buffer.
        while let Some(e) = pull(None)? {
            if buffer.len() == self.size {
                return Err(bad("more buffered than the buffer holds"));
            }
            buffer.push(e);
        }
        Ok((rng, buffer))
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

    /// The first `n` values of `it` (range elements: `x`).
    fn take(it: &mut dyn DatasetIter, n: usize) -> Vec<i64> {
        std::iter::from_fn(|| it.next().unwrap())
            .take(n)
            .map(|e| e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0])
            .collect()
    }

    /// A buffer of `size` over range(n), random access or (`stream`) behind a filter.
    fn buffered(n: u64, size: usize, stream: bool) -> BufferShuffle {
        let input = Dataset::Map(Arc::new(Range::new(n)));
        let input = if stream {
            input.filter("all", crate::filter_fn(|_, _| Ok(true)))
        } else {
            input
        };
        BufferShuffle::new(input, size, 7).unwrap()
    }

    /// A new iterator of epoch 0 of `b`, moved to `state`.
    fn restored(b: &BufferShuffle, state: &Json) -> BufferShuffleIter {
        let mut it = b.open(0).unwrap();
        it.set_state(state).unwrap();
        it
    }

    #[test]
    fn a_buffer_state_is_a_few_counts_whatever_the_buffer_size() {
        for stream in [false, true] {
            let b = buffered(30_000, 10_000, stream);
            let mut it = b.open(0).unwrap();
            take(&mut it, 12_345);
            let state = it.state();
            let text = state.to_string();
            assert!(text.len() < 200, "{text}");
            let mut again = restored(&b, &state);
            assert_eq!(
                take(&mut again, 30_000),
                take(&mut it, 30_000),
                "stream {stream}"
            );
        }
    }

    #[test]
    fn a_state_that_holds_the_buffered_positions_still_restores() {
        for stream in [false, true] {
            let b = buffered(100, 8, stream);
            let mut it = b.open(0).unwrap();
            take(&mut it, 30);
            // The state as it was written before states held only counts.
            let mut old = it.state();
            old["rng"] = it.rng.state().to_string().into();
            old["buffer"] = it.buffer.iter().map(|(p, _)| *p).collect::<Vec<_>>().into();
            old.as_object_mut().unwrap().remove("emitted");
            let mut again = restored(&b, &old);
            assert_eq!(take(&mut again, 20), take(&mut it, 20), "stream {stream}");
            // Its own states hold the positions too, and restore.
            let state = again.state();
            assert!(state.get("buffer").is_some(), "{state}");
            let mut third = restored(&b, &state);
            assert_eq!(
                take(&mut third, 100),
                take(&mut again, 100),
                "stream {stream}"
            );
        }
    }

    #[test]
    fn a_state_after_failed_elements_restores_the_same_elements() {
        // Elements 5 and 17 of 60 fail; the caller goes on past each error (as ignore_errors
        // does). A state taken at any point, right after an error too, restores the rest.
        let fails = crate::map_fn(|e: Example, _| {
            let x = e.tensor("fails", "x")?.to_vec::<i64>()?[0];
            if x == 5 || x == 17 {
                return Err(Error::invalid(format!("element {x} fails")));
            }
            Ok(e)
        });
        let values = |it: &mut BufferShuffleIter| -> Vec<Option<i64>> {
            std::iter::from_fn(|| match it.next() {
                Ok(Some(e)) => Some(Some(
                    e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0],
                )),
                Ok(None) => None,
                Err(_) => Some(None),
            })
            .collect()
        };
        for stream in [false, true] {
            let input = Dataset::Map(Arc::new(Range::new(60))).map("fails", fails.clone());
            let input = if stream {
                input.filter("all", crate::filter_fn(|_, _| Ok(true)))
            } else {
                input
            };
            let b = BufferShuffle::new(input, 8, 3).unwrap();
            let all = values(&mut b.open(0).unwrap());
            assert_eq!(all.iter().filter(|v| v.is_none()).count(), 2);
            for cut in [1, 4, 9, 10, 20, 40] {
                let mut it = b.open(0).unwrap();
                for _ in 0..cut {
                    let _ = it.next();
                }
                let mut again = restored(&b, &it.state());
                assert_eq!(values(&mut again), all[cut..], "stream {stream}, cut {cut}");
            }
        }
    }

    #[test]
    fn a_state_no_run_could_reach_is_refused_at_once() {
        let refused = |stream: bool, counts: Json, says: &str| {
            let b = buffered(100, 8, stream);
            let mut state = b.open(0).unwrap().state();
            for (k, v) in counts.as_object().unwrap() {
                state[k] = v.clone();
            }
            let err = b
                .open(0)
                .unwrap()
                .set_state(&state)
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{state}: {err}");
        };
        let st = |emitted: u64, pulled: u64, exhausted: bool| {
            json!({
                "emitted": emitted,
                "pulled": pulled,
                "exhausted": exhausted,
            })
        };
        for stream in [false, true] {
            refused(stream, st(11, 10, false), "more emitted than pulled");
            refused(
                stream,
                st(2, 40, false),
                "more buffered than the buffer holds",
            );
            refused(stream, st(40, 40, false), "cannot have");
            refused(stream, st(100, 99, true), "more emitted than pulled");
            // Counts far past the input end quickly (no replay of 2^60 draws).
            refused(
                stream,
                st(1 << 60, 1 << 60, true),
                if stream {
                    "input ended"
                } else {
                    "pulled elements from an input of 100"
                },
            );
            let mut failed = st(0, 10, false);
            failed["failed"] = json!([3, 3]);
            refused(stream, failed, "not rising");
            let mut old = st(0, 10, false);
            old["rng"] = "1".into();
            old["buffer"] = json!([3, 4, 10]);
            refused(stream, old, "buffered positions");
        }
    }
}

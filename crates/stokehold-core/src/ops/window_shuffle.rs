//! `window_shuffle(window, seed)`: a cheaper, local shuffle for random-access inputs.
//!
//! The epoch is cut into windows of `window` consecutive positions (the last one shorter); each
//! epoch visits the windows in a keyed random order and each window's positions in a keyed random
//! order of their own. Over a shard folder written in order, a window of about one shard's
//! records keeps reads inside one or two shards at a time (so readahead and the page cache work,
//! and a remote reader fetches whole shards), at the cost of a weaker shuffle than the global
//! one: neighbours in the output come from the same window (see bench/shard/ for the figures).
//! Like every random-access op it is stateless: element `i` of epoch `e` is a pure function of
//! (seed, e, i), so its checkpoint is the position alone. O(1) memory and time per element.

use std::sync::Arc;

use crate::dataset::{Dataset, MapDataset, INFINITE};
use crate::error::{Error, Result};
use crate::ops::remap::{IndexMap, Remap};
use crate::rng::{stream_key, Permutation, Rng, Stream};

/// A windowed shuffle over a random-access dataset.
pub struct WindowShuffle {
    parent: Arc<dyn MapDataset>,
    window: u64,
    seed: u64,
}

impl WindowShuffle {
    /// Shuffles `parent` in windows of `window` (> 0) elements with `seed`.
    pub fn new(parent: Arc<dyn MapDataset>, window: u64, seed: u64) -> Result<Self> {
        if window == 0 {
            return Err(Error::invalid("window_shuffle window must be > 0"));
        }
        if parent.len() == INFINITE {
            return Err(Error::invalid(
                "window_shuffle needs a finite dataset; shuffle before repeat()",
            ));
        }
        Ok(WindowShuffle {
            parent,
            window,
            seed,
        })
    }

    /// The input position that output position `i` of epoch `epoch` reads.
    pub fn source(&self, epoch: u64, i: u64) -> u64 {
        let (n, w) = (self.parent.len(), self.window);
        let full = n / w;
        let tail = n - full * w;
        // The short window goes to a random slot among the full ones, so the epoch's last
        // positions are not always the input's last ones.
        let t = if tail > 0 {
            Rng::for_stream(self.seed, Stream::ShortWindow, &[epoch]).below(full + 1)
        } else {
            full
        };
        let (slot, j) = if i < t * w {
            (i / w, i % w)
        } else if i < t * w + tail {
            let inner = Permutation::cached(
                tail,
                stream_key(self.seed, Stream::WithinWindow, &[epoch, full]),
            );
            return full * w + inner.apply(i - t * w);
        } else {
            ((i - tail) / w, (i - tail) % w)
        };
        let win = Permutation::cached(full, stream_key(self.seed, Stream::WindowOrder, &[epoch]))
            .apply(slot);
        win * w
            + Permutation::cached(
                w,
                stream_key(self.seed, Stream::WithinWindow, &[epoch, win]),
            )
            .apply(j)
    }
}

impl IndexMap for WindowShuffle {
    fn input(&self) -> &Arc<dyn MapDataset> {
        &self.parent
    }

    fn len(&self) -> u64 {
        self.parent.len()
    }

    /// The parent's global index that global element `index` reads.
    fn source_index(&self, index: u64) -> Result<u64> {
        let n = self.parent.len();
        let (epoch, i) = crate::checked::wrap_index(index, n, || self.name())?;
        crate::checked::global_index("window_shuffle", epoch, n, self.source(epoch, i))
    }

    fn name(&self) -> String {
        format!("window_shuffle(window={}, seed={})", self.window, self.seed)
    }
}

impl Dataset {
    /// A windowed shuffle (random-access input only; see [`WindowShuffle`]).
    pub fn window_shuffle(&self, window: u64, seed: u64) -> Result<Dataset> {
        self.try_on_base(|ds| {
            let m = ds.as_map().ok_or_else(|| {
                Error::invalid(super::stream_shuffle_advice(
                    ds,
                    &format!("window_shuffle(window={window}, seed={seed})"),
                    "use shuffle_buffer for streams",
                ))
            })?;
            Ok(Dataset::from_map(Remap(WindowShuffle::new(
                m.clone(),
                window,
                seed,
            )?)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::source::Range;
    use crate::{Example, Tensor};

    #[test]
    fn is_a_permutation_that_stays_in_windows() {
        for (n, w) in [(10u64, 3u64), (12, 4), (7, 10), (1, 1), (100, 7)] {
            let s = WindowShuffle::new(Arc::new(Range::new(n)), w, 9).unwrap();
            for epoch in 0..3 {
                let src: Vec<u64> = (0..n).map(|i| s.source(epoch, i)).collect();
                let mut sorted = src.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n={n} w={w}");
            }
            let a: Vec<u64> = (0..n).map(|i| s.source(0, i)).collect();
            let b: Vec<u64> = (0..n).map(|i| s.source(1, i)).collect();
            assert!(n < 4 || a != b, "epochs differ");
        }
    }

    #[test]
    fn batch_fast_path_matches_element_reads() {
        let x = Tensor::from_vec(vec![30], (0..30i64).collect()).unwrap();
        let base = Dataset::from_columns(crate::ops::source::column("x", x)).unwrap();
        for d in [
            base.window_shuffle(7, 2).unwrap(),
            base.shard(4, 3, crate::ShardPolicy::Pad).unwrap(),
        ] {
            let m = d.as_map().unwrap();
            let idx: Vec<u64> = (0..m.len() * 2).collect();
            let fast = m
                .get_batch(&idx)
                .unwrap()
                .expect("in-memory columns have a fast path");
            let slow: Vec<Example> = idx.iter().map(|i| m.get(*i).unwrap()).collect();
            assert_eq!(
                fast,
                crate::stack_examples("t", &slow).unwrap(),
                "{}",
                d.name()
            );
        }
    }

    #[test]
    fn windows_are_contiguous_in_the_output() {
        let s = WindowShuffle::new(Arc::new(Range::new(40)), 8, 3).unwrap();
        for k in 0..5 {
            let wins: Vec<u64> = (k * 8..(k + 1) * 8).map(|i| s.source(0, i) / 8).collect();
            assert!(wins.iter().all(|w| *w == wins[0]), "{wins:?}");
        }
    }
}

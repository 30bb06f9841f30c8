//! Ops that only remap indices: element `i` of the output is element `source_index(i)` of the
//! input. Global shuffle, window shuffle, take / skip / slice, repeat and rank sharding are each
//! an [`IndexMap`] (their length, the map, their name); [`Remap`] is the one `MapDataset` over any
//! of them, so `get`, the batch path (`get_batch` on the remapped indices), the prefetch hints and
//! `rows_per_element` are forwarded in one place and cannot drift apart (the hints through
//! `shard()` and `window_shuffle()` once were lost that way).
//!
//! A new index-remapping op implements [`IndexMap`] and builds `Dataset::from_map(Remap(op))`.

use std::sync::Arc;

use crate::dataset::{Dataset, Hint, MapDataset};
use crate::error::Result;
use crate::example::Example;

/// An op whose elements are its input's, at other indices.
#[allow(clippy::len_without_is_empty)] // `Remap` is the dataset; this only describes the map
pub trait IndexMap: Send + Sync + 'static {
    /// The input.
    fn input(&self) -> &Arc<dyn MapDataset>;
    /// Elements per epoch of the output.
    fn len(&self) -> u64;
    /// The input's global index that global output index `index` (< `len` per epoch) reads.
    fn source_index(&self, index: u64) -> Result<u64>;
    /// [`IndexMap::source_index`] of each of `indices` (a batch's), for ops that map many at
    /// once cheaper than one by one. Default: one by one.
    fn source_indices(&self, indices: &[u64]) -> Result<Vec<u64>> {
        indices.iter().map(|&i| self.source_index(i)).collect()
    }
    /// The op and its arguments, as in `describe()` (part of checkpoint fingerprints).
    fn name(&self) -> String;
    /// [`MapDataset::pass_len`] of the output. Default: unknown.
    fn pass_len(&self) -> Option<u64> {
        None
    }
}

/// The random-access dataset of an [`IndexMap`] op.
pub struct Remap<M>(pub M);

impl<M: IndexMap> MapDataset for Remap<M> {
    fn len(&self) -> u64 {
        self.0.len()
    }

    fn get(&self, index: u64) -> Result<Example> {
        self.0.input().get(self.0.source_index(index)?)
    }

    fn get_batch(&self, indices: &[u64]) -> Result<Option<Example>> {
        self.0.input().get_batch(&self.0.source_indices(indices)?)
    }

    /// The run's indices mapped at once (a shuffle's in vector passes), then the input's own
    /// run (a Python map under the shuffle holds the GIL across it). Where mapping fails, one by
    /// one, so that each element's error is its own.
    fn get_many(&self, indices: &[u64]) -> Vec<Result<Example>> {
        match self.0.source_indices(indices) {
            Ok(src) => self.0.input().get_many(&src),
            Err(_) => indices.iter().map(|&i| self.get(i)).collect(),
        }
    }

    fn rows_per_element(&self) -> Option<u64> {
        self.0.input().rows_per_element()
    }

    fn prefetch_useful(&self) -> bool {
        self.0.input().prefetch_useful()
    }

    fn batch_pads(&self) -> bool {
        self.0.input().batch_pads()
    }

    fn pass_len(&self) -> Option<u64> {
        self.0.pass_len()
    }

    fn prefetch(&self, index: u64, hint: Hint) {
        if let Ok(i) = self.0.source_index(index) {
            self.0.input().prefetch(i, hint);
        }
    }

    fn name(&self) -> String {
        self.0.name()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![Dataset::Map(self.0.input().clone())]
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::ShardPolicy;

    /// A dataset that wants hints and records them.
    struct Recorder {
        n: u64,
        hints: Mutex<Vec<(u64, Hint)>>,
    }

    impl MapDataset for Recorder {
        fn len(&self) -> u64 {
            self.n
        }
        fn get(&self, index: u64) -> Result<Example> {
            Ok(Example::new().with("x", crate::Tensor::scalar(index as i64)))
        }
        fn name(&self) -> String {
            "recorder".into()
        }
        fn prefetch_useful(&self) -> bool {
            true
        }
        fn prefetch(&self, index: u64, hint: Hint) {
            self.hints.lock().unwrap().push((index, hint));
        }
    }

    /// Every index-remapping op forwards hints to the element it will read. Element reads
    /// through `shard()` and `window_shuffle()` once lost them (each op forwarded by hand).
    #[test]
    fn every_remap_forwards_hints_to_the_source_index() {
        let rec = Arc::new(Recorder {
            n: 40,
            hints: Mutex::new(Vec::new()),
        });
        let base = Dataset::Map(rec.clone());
        let ops = [
            base.shuffle(3),
            base.window_shuffle(8, 1).unwrap(),
            base.shard(3, 1, ShardPolicy::Even).unwrap(),
            base.worker_split(2, 1).unwrap(),
            base.slice(5, 30),
            base.repeat(Some(2)),
        ];
        for ds in ops {
            let m = ds.as_map().unwrap();
            assert!(m.prefetch_useful(), "{}", m.name());
            rec.hints.lock().unwrap().clear();
            m.prefetch(7, Hint::Read);
            let want = m.get(7).unwrap();
            let got = rec.hints.lock().unwrap().clone();
            let source = want.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0] as u64;
            assert_eq!(got, vec![(source, Hint::Read)], "{}", m.name());
        }
    }

    /// A run through every index-remapping op gives what reading its elements one by one
    /// gives, errors included (each naming its own element).
    #[test]
    fn every_remap_reads_a_run_as_its_elements() {
        let base = Dataset::range(40);
        let ops = [
            base.shuffle(3),
            base.window_shuffle(8, 1).unwrap(),
            base.shard(3, 1, ShardPolicy::Even).unwrap(),
            base.slice(5, 30),
            base.repeat(Some(2)),
            // Past u64::MAX in its last, partial epoch: some of these fail.
            Dataset::range(10).shuffle(1).repeat(None),
        ];
        for ds in ops {
            let m = ds.as_map().unwrap();
            let n = m.len();
            let indices: Vec<u64> = if n == crate::dataset::INFINITE {
                (u64::MAX - 12..u64::MAX).collect()
            } else {
                (0..n).rev().chain([3, 3, 0]).collect()
            };
            let got: Vec<String> = m
                .get_many(&indices)
                .into_iter()
                .map(|r| format!("{r:?}"))
                .collect();
            let want: Vec<String> = indices.iter().map(|&i| format!("{:?}", m.get(i))).collect();
            assert_eq!(got, want, "{}", m.name());
        }
    }
}

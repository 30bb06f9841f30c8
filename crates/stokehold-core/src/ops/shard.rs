//! Splitting an epoch over ranks and workers: `shard`, `worker_split`, `slice`, `elastic_shard`.
//!
//! All of them are strided: part `r` of `w` gets the input's positions `r, r + w, r + 2w, ...` of
//! each epoch. Strided parts compose (`shard(W, r).worker_split(K, k)` is part `r + kW` of `WK`),
//! and after every part has taken `j` elements the parts together have taken exactly the first
//! `j * w` positions of the epoch, which is what makes [`ElasticShard`] able to resume on another
//! world size. When `w` does not divide the epoch length `n`, a [`ShardPolicy`] decides:
//!
//! * `Drop`: every part gets `n / w` elements; the last `n % w` positions are skipped this epoch
//!   (with a global shuffle upstream, different ones each epoch).
//! * `Pad`: every part gets `ceil(n / w)`; the parts past the end wrap to the epoch's first
//!   positions, so `w - n % w` elements are seen twice (torch's `DistributedSampler`).
//! * `Even`: an exact partition; parts `r < n % w` get one element more than the others.
//!
//! Over a stream, `shard` and `worker_split` keep positions `r, r + w, ...` as they arrive
//! (tf.data's `shard` of any dataset): every element is still computed, once per part, and the
//! checkpoint is the count of positions read plus the input's state. Only `Even` applies there
//! (the others need the epoch's length up front).

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::choice::Choice;
use crate::dataset::{state_u64, Dataset, DatasetIter, IterDataset, MapDataset, INFINITE};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::ops::elastic_stream::ElasticStream;
use crate::ops::remap::{IndexMap, Remap};

/// What to do when the number of parts does not divide the epoch (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShardPolicy {
    /// Equal parts of `n / w`; the remainder is skipped.
    Drop,
    /// Equal parts of `ceil(n / w)`; short parts wrap around to the epoch's start.
    Pad,
    /// An exact partition; parts differ in length by at most one.
    Even,
}

impl crate::choice::Choice for ShardPolicy {
    const ARG: &'static str = "policy";
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("drop", ShardPolicy::Drop),
        ("pad", ShardPolicy::Pad),
        ("even", ShardPolicy::Even),
    ];
}

impl ShardPolicy {
    /// How many of `remaining` positions part `index` of `parts` takes.
    fn count(self, remaining: u64, parts: u64, index: u64) -> u64 {
        match self {
            ShardPolicy::Drop => remaining / parts,
            ShardPolicy::Pad => remaining.div_ceil(parts),
            ShardPolicy::Even => remaining.saturating_sub(index).div_ceil(parts),
        }
    }
}

fn check_parts(parts: u64, index: u64) -> Result<()> {
    if parts == 0 || index >= parts {
        return Err(Error::invalid(format!(
            "part index {index} must be < number of parts {parts}"
        )));
    }
    Ok(())
}

/// Part `index` of `parts` of a random-access dataset, strided, per epoch.
pub struct RankShard {
    parent: Arc<dyn MapDataset>,
    parts: u64,
    index: u64,
    policy: ShardPolicy,
    label: &'static str,
}

impl IndexMap for RankShard {
    fn input(&self) -> &Arc<dyn MapDataset> {
        &self.parent
    }

    fn len(&self) -> u64 {
        match self.parent.len() {
            INFINITE => INFINITE,
            n => self.policy.count(n, self.parts, self.index),
        }
    }

    fn source_index(&self, index: u64) -> Result<u64> {
        self.source(index)
    }

    fn name(&self) -> String {
        format!(
            "{}({}, {}, {})",
            self.label,
            self.parts,
            self.index,
            self.policy.name()
        )
    }
}

impl RankShard {
    /// The parent's global index that element `index` of this part reads.
    fn source(&self, index: u64) -> Result<u64> {
        let (n, len) = (self.parent.len(), self.len());
        if len == 0 {
            return Err(Error::OutOfRange {
                index,
                len: 0,
                what: self.name(),
            });
        }
        if n == INFINITE {
            let j = crate::checked::mul("shard", "the index", index, self.parts)?;
            return crate::checked::add("shard", "the index", self.index, j);
        }
        let (epoch, j) = (index / len, index % len);
        // Only Pad reaches past n, by less than `parts`: wrap to the epoch's start.
        crate::checked::global_index("shard", epoch, n, (self.index + j * self.parts) % n)
    }
}

fn need_map<'a>(ds: &'a Dataset, op: &str) -> Result<&'a Arc<dyn MapDataset>> {
    ds.as_map().ok_or_else(|| {
        Error::invalid(format!(
            "{op} with this policy needs a random-access input; {} is a stream (policy \
             \"even\" shards a stream by position, or shard the source before stream ops)",
            ds.name()
        ))
    })
}

/// Part `index` of `parts` of a stream: positions `index, index + parts, ...` as they arrive.
struct IterShard {
    parent: Dataset,
    parts: u64,
    index: u64,
    label: &'static str,
}

impl IterDataset for IterShard {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(IterShardIter {
            inner: self.parent.iter(epoch)?,
            parts: self.parts,
            index: self.index,
            read: 0,
        }))
    }

    fn name(&self) -> String {
        format!("{}({}, {}, even)", self.label, self.parts, self.index)
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn len(&self) -> Option<u64> {
        let n = self.parent.len()?;
        Some(match n {
            INFINITE => INFINITE,
            n => ShardPolicy::Even.count(n, self.parts, self.index),
        })
    }
}

struct IterShardIter {
    inner: Box<dyn DatasetIter>,
    parts: u64,
    index: u64,
    /// Positions of the input read so far.
    read: u64,
}

impl DatasetIter for IterShardIter {
    fn next(&mut self) -> Result<Option<Example>> {
        loop {
            let Some(e) = self.inner.next()? else {
                return Ok(None);
            };
            self.read += 1;
            if (self.read - 1) % self.parts == self.index {
                return Ok(Some(e));
            }
        }
    }

    fn state(&self) -> Json {
        json!({ "read": self.read, "inner": self.inner.state() })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        self.read = state_u64(state, "read")?;
        self.inner
            .set_state(crate::dataset::state_field(state, "inner")?)
    }
}

impl Dataset {
    /// Part `index` of `num_shards` (one rank's share), strided, with `policy` for the remainder.
    pub fn shard(&self, num_shards: u64, index: u64, policy: ShardPolicy) -> Result<Dataset> {
        self.split("shard", num_shards, index, policy)
    }

    /// Worker `worker` of `num_workers` inside one process (an exact partition: `Even`).
    pub fn worker_split(&self, num_workers: u64, worker: u64) -> Result<Dataset> {
        self.split("worker_split", num_workers, worker, ShardPolicy::Even)
    }

    fn split(
        &self,
        label: &'static str,
        parts: u64,
        index: u64,
        policy: ShardPolicy,
    ) -> Result<Dataset> {
        check_parts(parts, index)?;
        self.try_on_base(|ds| {
            if ds.as_map().is_none() && policy == ShardPolicy::Even {
                return Ok(Dataset::from_iter(IterShard {
                    parent: ds.clone(),
                    parts,
                    index,
                    label,
                }));
            }
            let parent = need_map(ds, label)?.clone();
            Ok(Dataset::from_map(Remap(RankShard {
                parent,
                parts,
                index,
                policy,
                label,
            })))
        })
    }

    /// Elements `start..stop` of each epoch (clamped to the length); keeps random access.
    pub fn slice(&self, start: u64, stop: u64) -> Dataset {
        self.skip(start).take(stop.saturating_sub(start))
    }

    /// Rank `rank` of `world`, resumable on another world size (see [`ElasticShard`]; over a
    /// stream, [`crate::ops::elastic_stream`]: every rank runs the stream).
    pub fn elastic_shard(&self, world: u64, rank: u64, policy: ShardPolicy) -> Result<Dataset> {
        check_parts(world, rank)?;
        let Some(parent) = self.as_map().cloned() else {
            if policy == ShardPolicy::Pad {
                return Err(Error::invalid(format!(
                    "elastic_shard(policy=\"pad\") needs a random-access input; {} is a stream \
                     (policy \"even\" or \"drop\" shards a stream)",
                    self.name()
                )));
            }
            let drop = policy == ShardPolicy::Drop;
            let s = ElasticStream {
                parent: self.clone(),
                world,
                rank,
                drop,
            };
            return Ok(Dataset::from_iter(s));
        };
        if parent.len() == INFINITE {
            return Err(Error::invalid(
                "elastic_shard needs a finite epoch; repeat() after it",
            ));
        }
        Ok(Dataset::from_iter(ElasticShard {
            parent,
            world,
            rank,
            policy,
        }))
    }
}

/// One rank's share of each epoch, whose checkpoint restores on any world size.
///
/// Rank `r` of `W` reads positions `start + r + jW` of the epoch (`start` is 0 unless the
/// iterator was restored from another world size). Its state is
/// `{"start", "taken", "world", "rank", "exhausted", "position"}` where `position` is the global
/// prefix of the epoch consumed when every rank has taken as many elements as this one:
/// `min(n, start + taken * W)`, or `n` once exhausted. Restored on the same rank of the same world,
/// the iterator continues exactly; restored on another world size or rank, it starts a new
/// strided split at `position` (Grain's elastic iterator, MosaicML's sample-space resumption).
/// Nothing of the epoch is lost or repeated provided all ranks saved at the same step, which
/// synchronous data-parallel training guarantees (same batch size on every rank).
pub struct ElasticShard {
    parent: Arc<dyn MapDataset>,
    world: u64,
    rank: u64,
    policy: ShardPolicy,
}

impl IterDataset for ElasticShard {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(ElasticIter {
            parent: self.parent.clone(),
            epoch,
            world: self.world,
            rank: self.rank,
            policy: self.policy,
            start: 0,
            taken: 0,
            exhausted: false,
        }))
    }

    /// Leaves out world and rank so that a checkpoint's fingerprint matches on any world size.
    fn name(&self) -> String {
        format!("elastic_shard({})", self.policy.name())
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![Dataset::Map(self.parent.clone())]
    }

    fn len(&self) -> Option<u64> {
        Some(self.policy.count(self.parent.len(), self.world, self.rank))
    }
}

struct ElasticIter {
    parent: Arc<dyn MapDataset>,
    epoch: u64,
    world: u64,
    rank: u64,
    policy: ShardPolicy,
    start: u64,
    taken: u64,
    exhausted: bool,
}

impl ElasticIter {
    fn position(&self) -> u64 {
        let n = self.parent.len();
        if self.exhausted {
            return n;
        }
        n.min(self.start + self.taken * self.world)
    }
}

impl DatasetIter for ElasticIter {
    fn next(&mut self) -> Result<Option<Example>> {
        let n = self.parent.len();
        let count = self
            .policy
            .count(n.saturating_sub(self.start), self.world, self.rank);
        if self.exhausted || self.taken >= count {
            self.exhausted = true;
            return Ok(None);
        }
        let p = (self.start + self.rank + self.taken * self.world) % n;
        let e = self.parent.get(crate::checked::global_index(
            "elastic_shard",
            self.epoch,
            n,
            p,
        )?)?;
        self.taken += 1;
        Ok(Some(e))
    }

    fn state(&self) -> Json {
        json!({
            "start": self.start, "taken": self.taken, "world": self.world, "rank": self.rank,
            "exhausted": self.exhausted, "position": self.position(),
        })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let (world, rank) = (state_u64(state, "world")?, state_u64(state, "rank")?);
        let start = state_u64(state, "start")?;
        let taken = state_u64(state, "taken")?;
        let exhausted = state
            .get("exhausted")
            .and_then(Json::as_bool)
            .unwrap_or(false);
        let n = self.parent.len();
        if world == 0 || rank >= world || start > n {
            return Err(Error::State(format!(
                "elastic_shard: inconsistent state {state}"
            )));
        }
        if world == self.world && rank == self.rank {
            (self.start, self.taken, self.exhausted) = (start, taken, exhausted);
        } else {
            let saved = ElasticIter {
                world,
                rank,
                start,
                taken,
                exhausted,
                ..self.clone_base()
            };
            (self.start, self.taken, self.exhausted) = (saved.position(), 0, false);
        }
        Ok(())
    }
}

impl ElasticIter {
    fn clone_base(&self) -> ElasticIter {
        ElasticIter {
            parent: self.parent.clone(),
            ..*self
        }
    }
}

/// The global position (consumed prefix of the epoch) recorded in an elastic shard's state.
pub fn elastic_position(state: &Json) -> Result<u64> {
    state_u64(state, "position")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xs(ds: &Dataset, epoch: u64) -> Vec<i64> {
        let mut it = ds.iter(epoch).unwrap();
        let mut out = Vec::new();
        while let Some(e) = it.next().unwrap() {
            out.push(e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0]);
        }
        out
    }

    #[test]
    fn policies_on_uneven_split() {
        let ds = Dataset::range(10);
        let parts = |p| {
            (0..4)
                .map(|r| xs(&ds.shard(4, r, p).unwrap(), 0))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            parts(ShardPolicy::Even),
            vec![vec![0, 4, 8], vec![1, 5, 9], vec![2, 6], vec![3, 7]]
        );
        assert_eq!(
            parts(ShardPolicy::Drop),
            vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
        );
        assert_eq!(parts(ShardPolicy::Pad)[3], vec![3, 7, 1]);
        assert!(Dataset::range(3).shard(2, 2, ShardPolicy::Even).is_err());
    }

    #[test]
    fn elastic_shard_of_a_stream_runs_it_whole_and_refuses_pad() {
        let stream = Dataset::range(10).filter("all", crate::filter_fn(|_, _| Ok(true)));
        let got = xs(&stream.elastic_shard(4, 1, ShardPolicy::Drop).unwrap(), 0);
        assert_eq!(got, vec![1, 5]);
        let err = stream
            .elastic_shard(4, 0, ShardPolicy::Pad)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("policy \"even\" or \"drop\" shards a stream"),
            "{err}"
        );
        let name = stream
            .elastic_shard(4, 0, ShardPolicy::Even)
            .unwrap()
            .name();
        assert_eq!(
            name,
            stream
                .elastic_shard(3, 2, ShardPolicy::Even)
                .unwrap()
                .name()
        );
    }

    #[test]
    fn elastic_resume_on_fewer_ranks_covers_the_epoch_once() {
        let ds = Dataset::range(23).shuffle(5);
        let mut seen = Vec::new();
        let mut states = Vec::new();
        for r in 0..4 {
            let mut it = ds
                .elastic_shard(4, r, ShardPolicy::Even)
                .unwrap()
                .iter(0)
                .unwrap();
            for _ in 0..3 {
                seen.push(it.next().unwrap().unwrap());
            }
            states.push(it.state());
        }
        for r in 0..3 {
            let mut it = ds
                .elastic_shard(3, r, ShardPolicy::Even)
                .unwrap()
                .iter(0)
                .unwrap();
            it.set_state(&states[0]).unwrap();
            seen.extend(it.collect_all().unwrap());
        }
        let mut got: Vec<i64> = seen
            .iter()
            .map(|e| e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0])
            .collect();
        got.sort();
        assert_eq!(got, (0..23).collect::<Vec<_>>());
    }
}

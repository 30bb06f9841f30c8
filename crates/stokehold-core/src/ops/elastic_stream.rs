//! `elastic_shard` over a stream: every rank runs the whole stream and keeps its strided part,
//! so that a checkpoint restores on another world size (the random-access form, which reads
//! only its own positions, is [`crate::ops::shard::ElasticShard`]).
//!
//! A stream (a `pack`, a `sample_from_datasets`, anything past a filter) has no positions to
//! read at random: element `p` of the epoch is known only after elements `0..p`, and what comes
//! next depends on state (a packer's open rows, a mix's token counts). So the stream is made
//! once, the same on every rank (it is deterministic: keyed draws, no thread-dependent order),
//! and cut into rounds of `W` consecutive elements: rank `r` of `W` takes element `r` of each
//! round (positions `start + r + jW`, as the random-access form). A rank reads its whole round
//! before handing its element over, so after every rank has taken `j` elements each rank's
//! input stands at the same place: the prefix `[0, start + jW)` of the epoch. The state is that
//! input state, the position and the rank's counters; restored on any world size or rank, the
//! input continues from the prefix and a new strided split starts there. Nothing of the global
//! stream is lost or repeated, including a packer's carry-over and a mix's token counts, which
//! are part of the input state. All ranks must save at the same step (see `ElasticShard`).
//!
//! The price: each rank computes the whole stream (`W` times the work of one pass; reading
//! pre-tokenized windows from a memory map is cheap, tokenizing text is not). Policies: `even`
//! (a short last round goes to its first ranks) and `drop` (a short last round is dropped, so
//! every rank takes the same count); `pad` needs the epoch's length and is refused.

use serde_json::{json, Value as Json};

use crate::dataset::{state_field, state_u64, Dataset, DatasetIter, IterDataset};
use crate::error::Result;
use crate::example::Example;

/// Rank `rank` of `world` of a stream, resumable on any world size (see the module docs).
/// `Dataset::elastic_shard` makes it (and checks world, rank and the policy).
pub struct ElasticStream {
    /// The stream every rank runs.
    pub parent: Dataset,
    /// Ranks.
    pub world: u64,
    /// This rank, `< world`.
    pub rank: u64,
    /// `drop` (a short last round goes to nobody) rather than `even`.
    pub drop: bool,
}

impl IterDataset for ElasticStream {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(ElasticStreamIter {
            inner: self.parent.iter(epoch)?,
            world: self.world,
            rank: self.rank,
            drop: self.drop,
            start: 0,
            taken: 0,
            exhausted: false,
        }))
    }

    /// The random-access form's name: world and rank left out, so a checkpoint's fingerprint
    /// matches on any world size.
    fn name(&self) -> String {
        format!("elastic_shard({})", if self.drop { "drop" } else { "even" })
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }
}

struct ElasticStreamIter {
    inner: Box<dyn DatasetIter>,
    world: u64,
    rank: u64,
    drop: bool,
    /// The global position this rank's split started at (0, or a restored prefix).
    start: u64,
    taken: u64,
    exhausted: bool,
}

impl DatasetIter for ElasticStreamIter {
    fn next(&mut self) -> Result<Option<Example>> {
        if self.exhausted {
            return Ok(None);
        }
        let mut mine = None;
        for i in 0..self.world {
            match self.inner.next()? {
                Some(e) if i == self.rank => mine = Some(e),
                Some(_) => {}
                None => {
                    // A short last round: `even` gives its elements to the first ranks, `drop`
                    // to nobody. Either way the epoch ends here for this rank.
                    self.exhausted = true;
                    return Ok(if self.drop { None } else { mine });
                }
            }
        }
        self.taken += 1;
        Ok(mine)
    }

    fn state(&self) -> Json {
        json!({
            "start": self.start, "taken": self.taken, "world": self.world, "rank": self.rank,
            "exhausted": self.exhausted, "position": self.start + self.taken * self.world,
            "inner": self.inner.state(),
        })
    }

    /// Any rank of any world: the input continues from the saved prefix, where this rank's new
    /// strided split starts.
    fn set_state(&mut self, state: &Json) -> Result<()> {
        let position = state_u64(state, "position")?;
        let exhausted = state
            .get("exhausted")
            .and_then(Json::as_bool)
            .unwrap_or(false);
        self.inner.set_state(state_field(state, "inner")?)?;
        (self.start, self.taken, self.exhausted) = (position, 0, exhausted);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter_fn;

    fn stream(n: u64) -> Dataset {
        Dataset::range(n).filter("all", filter_fn(|_, _| Ok(true)))
    }

    fn split(ds: &Dataset, world: u64, rank: u64, drop: bool) -> Dataset {
        Dataset::from_iter(ElasticStream {
            parent: ds.clone(),
            world,
            rank,
            drop,
        })
    }

    fn xs(it: &mut dyn DatasetIter, k: usize) -> Vec<i64> {
        (0..k)
            .map_while(|_| it.next().unwrap())
            .map(|e| e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0])
            .collect()
    }

    /// `world` ranks each take `steps` elements; returns the global stream they took (round by
    /// round, rank by rank) and the last rank's state.
    fn leg(ds: &Dataset, world: u64, steps: usize, state: Option<&Json>) -> (Vec<i64>, Json) {
        let mut its: Vec<_> = (0..world)
            .map(|r| {
                let mut it = split(ds, world, r, false).iter(0).unwrap();
                if let Some(s) = state {
                    it.set_state(s).unwrap();
                }
                it
            })
            .collect();
        let per_rank: Vec<Vec<i64>> = its.iter_mut().map(|it| xs(it.as_mut(), steps)).collect();
        let mut global = Vec::new();
        for j in 0..steps {
            global.extend(per_rank.iter().filter_map(|p| p.get(j)));
        }
        (global, its[world as usize - 1].state())
    }

    #[test]
    fn a_stream_resumes_on_another_world_size_with_nothing_lost_or_repeated() {
        let ds = stream(103);
        for (w1, s1, w2) in [(4, 5, 3), (4, 7, 6), (3, 1, 1), (2, 30, 5), (1, 9, 4)] {
            let (a, st) = leg(&ds, w1, s1, None);
            let (b, _) = leg(&ds, w2, 1000, Some(&st));
            let got: Vec<i64> = a.into_iter().chain(b).collect();
            assert_eq!(got, (0..103).collect::<Vec<_>>(), "{w1} x {s1} then {w2}");
        }
    }

    #[test]
    fn drop_gives_every_rank_the_same_count_even_the_first_ranks_one_more() {
        let ds = stream(10);
        let count = |r, drop| {
            split(&ds, 4, r, drop)
                .iter(0)
                .unwrap()
                .collect_all()
                .unwrap()
                .len()
        };
        assert_eq!(
            (0..4).map(|r| count(r, true)).collect::<Vec<_>>(),
            vec![2, 2, 2, 2]
        );
        assert_eq!(
            (0..4).map(|r| count(r, false)).collect::<Vec<_>>(),
            vec![3, 3, 2, 2]
        );
        crate::testing::check("elastic_shard(stream)", &split(&ds, 3, 2, false), 30);
    }
}

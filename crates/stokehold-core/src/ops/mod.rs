//! Dataset ops, one file each, and the chaining methods on [`Dataset`].
//!
//! Each method keeps random access when the op allows it and its input has it; otherwise it
//! returns a stream. The conformance suite (`tests/it/conformance.rs`) runs every op. An op whose
//! method needs more than a line defines it in its own file, as `interleave.rs` does.

pub mod batch;
pub mod bucket;
pub mod cache;
pub mod cache_arena;
pub mod concatenate;
pub mod elastic_stream;
pub mod element;
pub mod enumerate;
pub mod filter;
pub mod gather;
pub mod generator;
pub mod group_by_window;
pub mod ignore_errors;
pub mod interleave;
pub mod map;
pub mod mix;
pub mod on_error;
pub mod pack;
pub mod parallel_map;
pub mod plan;
pub mod remap;
pub mod repeat;
pub mod shard;
pub mod shuffle;
pub mod slice;
pub mod source;
pub mod unbatch;
pub mod window;
pub mod window_shuffle;
pub mod zip;

use std::sync::Arc;

// Defined in `exec/budget.rs`, below the ops: the op files name it as `super::PREALLOC_MAX`
// and this file imports theirs, so a definition here made an import cycle.
pub(crate) use crate::exec::budget::PREALLOC_MAX;

use crate::dataset::Dataset;
use crate::error::Result;
use crate::exec::prefetch::Prefetch;
use batch::{BatchOptions, IterBatch, MapBatch};
use filter::{Filter, FilterFn};
use map::{BatchMapFn, IterMap, MapFn, MapMap, ScopeFn};
use remap::Remap;
use repeat::{IterRepeat, MapRepeat};
use shuffle::{BufferShuffle, GlobalShuffle};
use slice::{IterSlice, MapSlice};

impl Dataset {
    /// The integers `0..n` as feature `"x"`.
    pub fn range(n: u64) -> Dataset {
        Dataset::from_map(source::Range::new(n))
    }

    /// An in-memory dataset from columns (see [`source::InMemory`]).
    pub fn from_columns(columns: crate::Example) -> Result<Dataset> {
        Ok(Dataset::from_map(source::InMemory::new(columns)?))
    }

    /// Applies `f` to every element; `label` names it in op paths and errors.
    pub fn map(&self, label: &str, f: MapFn) -> Dataset {
        self.on_base(|ds| match ds {
            Dataset::Map(m) => Dataset::from_map(MapMap::new(m.clone(), f.clone(), label)),
            Dataset::Iter(_) => Dataset::from_iter(IterMap::new(ds.clone(), f.clone(), label)),
        })
    }

    /// [`Dataset::map`] with a batch form of `f` ([`BatchMapFn`]), which `batch` over a
    /// random-access input uses: the same elements, the batch made in one pass.
    pub fn map_batched(&self, label: &str, f: MapFn, batch_f: BatchMapFn) -> Dataset {
        self.on_base(|ds| match ds {
            Dataset::Map(m) => Dataset::from_map(
                MapMap::new(m.clone(), f.clone(), label).with_batch_fn(batch_f.clone()),
            ),
            Dataset::Iter(_) => Dataset::from_iter(IterMap::new(ds.clone(), f.clone(), label)),
        })
    }

    /// [`Dataset::map`] whose runs of calls (a batch's elements, a worker's run) are made inside
    /// `scope` ([`ScopeFn`]: a Python function's GIL, held once per run). Over a stream, the
    /// elements come one at a time and `scope` is not used.
    pub fn map_scoped(&self, label: &str, f: MapFn, scope: ScopeFn) -> Dataset {
        self.on_base(|ds| match ds {
            Dataset::Map(m) => Dataset::from_map(
                MapMap::new(m.clone(), f.clone(), label).with_scope(scope.clone()),
            ),
            Dataset::Iter(_) => Dataset::from_iter(IterMap::new(ds.clone(), f.clone(), label)),
        })
    }

    /// Keeps the elements for which `f` is true (a stream).
    pub fn filter(&self, label: &str, f: FilterFn) -> Dataset {
        Dataset::from_iter(Filter::new(self.clone(), f, label))
    }

    /// A seeded global permutation per epoch (random-access input only).
    pub fn shuffle(&self, seed: u64) -> Dataset {
        self.try_shuffle(seed)
            .expect("shuffle needs a finite random-access dataset")
    }

    /// Like [`Dataset::shuffle`], with an error for streams and endless inputs.
    pub fn try_shuffle(&self, seed: u64) -> Result<Dataset> {
        self.shuffle_with(seed, true)
    }

    /// A seeded global permutation, a new one each epoch, or with `reshuffle_each_iteration =
    /// false` the same one every epoch (tf.data's flag); an error for streams and endless inputs.
    pub fn shuffle_with(&self, seed: u64, reshuffle_each_iteration: bool) -> Result<Dataset> {
        self.try_on_base(|ds| match ds {
            Dataset::Map(m) => Ok(Dataset::from_map(Remap(
                GlobalShuffle::new(m.clone(), seed)?
                    .reshuffle_each_iteration(reshuffle_each_iteration),
            ))),
            Dataset::Iter(_) => Err(crate::Error::invalid(stream_shuffle_advice(
                ds,
                &format!("shuffle(seed={seed})"),
                "use shuffle(buffer_size=...) for streams",
            ))),
        })
    }

    /// A shuffle buffer of `size` elements (any input; the result is a stream).
    pub fn shuffle_buffer(&self, size: usize, seed: u64) -> Result<Dataset> {
        self.shuffle_buffer_with(size, seed, true)
    }

    /// [`Dataset::shuffle_buffer`], with new draws each epoch or (`reshuffle_each_iteration =
    /// false`) the same draws every epoch.
    pub fn shuffle_buffer_with(
        &self,
        size: usize,
        seed: u64,
        reshuffle_each_iteration: bool,
    ) -> Result<Dataset> {
        Ok(Dataset::from_iter(
            BufferShuffle::new(self.clone(), size, seed)?
                .reshuffle_each_iteration(reshuffle_each_iteration),
        ))
    }

    /// Repeats `count` times, or forever for `None`. Built under trailing execution stages, as
    /// every op that keeps random access ([`Dataset::try_on_base`]): `ds.prefetch(n).repeat(k)`
    /// is `ds.repeat(k).prefetch(n)`, the same elements, with one prefetch thread flowing
    /// through every repetition (see [`plan`]).
    pub fn repeat(&self, count: Option<u64>) -> Dataset {
        self.on_base(|ds| match ds {
            Dataset::Map(m) => Dataset::from_map(Remap(MapRepeat::new(m.clone(), count))),
            Dataset::Iter(_) => Dataset::from_iter(IterRepeat::new(ds.clone(), count)),
        })
    }

    /// The first `n` elements (of each epoch, for random access).
    pub fn take(&self, n: u64) -> Dataset {
        self.on_base(|ds| match ds {
            Dataset::Map(m) => Dataset::from_map(Remap(MapSlice::take(m.clone(), n))),
            Dataset::Iter(_) => Dataset::from_iter(IterSlice::take(ds.clone(), n)),
        })
    }

    /// All but the first `n` elements (of each epoch, for random access).
    pub fn skip(&self, n: u64) -> Dataset {
        self.on_base(|ds| match ds {
            Dataset::Map(m) => Dataset::from_map(Remap(MapSlice::skip(m.clone(), n))),
            Dataset::Iter(_) => Dataset::from_iter(IterSlice::skip(ds.clone(), n)),
        })
    }

    /// Adds the position within the epoch as int64 feature `name`.
    pub fn enumerate(&self, name: &str) -> Dataset {
        // The map is built over the random-access base under any execution stages, where
        // indices count on across epochs.
        let len = self
            .peel_stages()
            .and_then(|(base, _)| base.as_map().map(|m| m.len()));
        self.map(
            &format!("enumerate:{name}"),
            enumerate::enumerate_fn(name, len),
        )
    }

    /// Stacks `size` elements per batch (ragged where shapes differ on axis 0).
    pub fn batch(&self, size: usize, drop_remainder: bool) -> Result<Dataset> {
        self.batch_with(BatchOptions::new(size, drop_remainder))
    }

    /// `batch` or `padded_batch`, as `opts` says.
    pub fn batch_with(&self, opts: BatchOptions) -> Result<Dataset> {
        self.try_on_base(|ds| {
            Ok(match ds {
                Dataset::Map(m) => Dataset::from_map(MapBatch::new(m.clone(), opts.clone())?),
                Dataset::Iter(_) => Dataset::from_iter(IterBatch::new(ds.clone(), opts.clone())?),
            })
        })
    }

    /// Runs the pipeline `depth` elements ahead on a background thread.
    pub fn prefetch(&self, depth: usize) -> Result<Dataset> {
        Ok(Dataset::from_iter(Prefetch::new(self.clone(), depth)?))
    }

    /// Runs the pipeline ahead on a background thread with an autotuned depth (tf.data's
    /// `prefetch(AUTOTUNE)`; the depth it picks: [`Prefetch::autotune`]).
    pub fn prefetch_autotune(&self) -> Dataset {
        Dataset::from_iter(Prefetch::autotune(self.clone()))
    }

    /// `prefetch` with a depth decoded by [`crate::Parallelism::from_arg`]: `Fixed(n)` is
    /// [`Dataset::prefetch`]`(n)`, `Autotune` is [`Dataset::prefetch_autotune`]. Bindings call
    /// `ds.prefetch_with(Parallelism::from_arg("prefetch", "buffer_size", v)?)`.
    pub fn prefetch_with(&self, depth: crate::Parallelism) -> Result<Dataset> {
        match depth {
            crate::Parallelism::Fixed(n) => self.prefetch(n),
            crate::Parallelism::Autotune => Ok(self.prefetch_autotune()),
        }
    }

    /// A native random crop (see [`element::random_crop`]); a negative `axis` counts from the
    /// end.
    pub fn random_crop(
        &self,
        feature: &str,
        axis: isize,
        size: usize,
        seed: u64,
        pad: bool,
    ) -> Dataset {
        self.map(
            &format!("random_crop:{feature}:{size}"),
            element::random_crop(feature, axis, size, seed, pad),
        )
    }
}

/// The error text of a shuffle that needs random access (`op`, e.g. `"shuffle(seed=...)"`) over
/// the stream `ds`. The common way into it is a parallel map before `cache()`
/// (`ds.map(fn, num_parallel_calls=8).cache().shuffle(seed=0)`): the parallel map is a stream, so
/// is the cache of it, and a shuffle buffer (the `fallback` advice for other streams) would only
/// shuffle within its buffer. The better fix keeps random access: map sequentially before the
/// cache and run the pipeline in parallel after the shuffle.
pub(crate) fn stream_shuffle_advice(ds: &Dataset, op: &str, fallback: &str) -> String {
    fn parallel_map_under_cache(ds: &Dataset, under_cache: bool) -> Option<String> {
        let name = ds.name();
        let parallel = name.starts_with("map[") || name.starts_with("parallelize[");
        if under_cache && parallel && name.contains("(parallel") {
            return Some(name);
        }
        let under = under_cache || name.starts_with("cache");
        match ds {
            Dataset::Map(_) => None,
            Dataset::Iter(_) => ds
                .parents()
                .iter()
                .find_map(|p| parallel_map_under_cache(p, under)),
        }
    }
    match parallel_map_under_cache(ds, false) {
        Some(map) => format!(
            "{op} needs random access, and {} is a stream: cache() keeps what {map} yields, a \
             stream. Run the map sequentially before cache() (`map(fn)` without \
             num_parallel_calls keeps random access) and parallelize() after the shuffle, e.g. \
             `ds.map(fn).cache().shuffle(seed=0).batch(32).parallelize()`",
            ds.describe()
        ),
        None => format!("{} is a stream: {fallback}", ds.name()),
    }
}

/// Builds a [`MapFn`] from a closure.
pub fn map_fn(
    f: impl Fn(crate::Example, &map::Ctx) -> Result<crate::Example> + Send + Sync + 'static,
) -> MapFn {
    Arc::new(f)
}

/// Builds a [`FilterFn`] from a closure.
pub fn filter_fn(
    f: impl Fn(&crate::Example, &map::Ctx) -> Result<bool> + Send + Sync + 'static,
) -> FilterFn {
    Arc::new(f)
}

//! `map_parallel` and `parallelize`: a stage that runs on worker threads.
//!
//! [`Dataset::map_parallel`] plans itself: over a random-access input (or execution stages over
//! one) it is `map(f).parallelize(par)`, so it keeps random access; over a stream it is the
//! streaming parallel map. Over a random-access input, workers fetch by index:
//! `files.map(load).padded_batch(64).parallelize(Autotune, true)` loads and pads whole batches
//! on the workers. Over a stream, workers take elements from the input in order and map them in
//! parallel. Output is in input
//! order by default (`deterministic = true`), or as completed. In order, the stage is left out
//! of the checkpoint fingerprint and its state is the sequential pipeline's
//! ([`IterDataset::data_name`]): a state saved with 1 thread restores with 8, or with none.

use crate::dataset::{Dataset, DatasetIter, IterDataset};
use crate::dataset::{Stage, StageKind};
use crate::error::Result;
use crate::exec::parallel::{ParallelIter, StageSpec};
use crate::exec::DefaultExecutor;
use crate::exec::{Executor, Parallelism};
use crate::ops::map::{MapFn, ScopeFn};

/// A parallel stage over `parent`, mapping with `f` when given.
pub struct ParallelMap {
    parent: Dataset,
    f: Option<MapFn>,
    spec: StageSpec,
    /// The sequential op yielding the same elements in order (`map[label]`), for the data
    /// fingerprint.
    map_name: String,
    /// The default executor its iterators last made (when none was installed), for stats.
    default_exec: DefaultExecutor,
}

impl ParallelMap {
    /// A stage applying `f` (named `label`) to `parent` with `par` workers.
    pub fn new(
        parent: Dataset,
        f: Option<MapFn>,
        label: &str,
        par: Parallelism,
        deterministic: bool,
    ) -> Self {
        let kind = if f.is_some() { "map" } else { "parallelize" };
        let map_name = format!("map[{label}]");
        let label = format!("{kind}[{label}](parallel, deterministic={deterministic})");
        let scoped = parent.calls_in_scope();
        ParallelMap {
            parent,
            f,
            spec: StageSpec {
                label,
                par,
                ordered: deterministic,
                scoped,
            },
            map_name,
            default_exec: DefaultExecutor::default(),
        }
    }

    /// The same stage reporting its default executor into `slot` (a re-applied stage shares
    /// the slot of the op it copies).
    pub(crate) fn sharing(mut self, slot: DefaultExecutor) -> Self {
        self.default_exec = slot;
        self
    }
}

impl IterDataset for ParallelMap {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        let exec = self.default_exec.current_or_new();
        let it = exec.enter(|| {
            ParallelIter::new(
                self.spec.clone(),
                self.parent.clone(),
                self.f.clone(),
                epoch,
            )
        })?;
        Ok(Box::new(it))
    }

    fn name(&self) -> String {
        self.spec.label.clone()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn len(&self) -> Option<u64> {
        self.parent.len()
    }

    /// A deterministic `parallelize` (no map function) yields what its input yields: a stage.
    fn stage(&self) -> Option<Stage> {
        (self.f.is_none() && self.spec.ordered).then(|| Stage {
            parent: self.parent.clone(),
            kind: StageKind::Parallelize {
                par: self.spec.par,
                slot: self.default_exec.clone(),
            },
        })
    }

    fn executor(&self) -> Option<Executor> {
        self.default_exec.get()
    }

    /// In input order the elements are the sequential map's (or, with no function, the
    /// input's): the parallelism stays out of the fingerprint. As completed, the order is
    /// part of the data.
    fn data_name(&self) -> Option<String> {
        match (&self.f, self.spec.ordered) {
            (_, false) => Some(self.name()),
            (None, true) => None,
            (Some(_), true) => Some(self.map_name.clone()),
        }
    }
}

impl Dataset {
    /// Applies `f` on `par` worker threads; `deterministic` keeps the input order (the default of
    /// tf.data), otherwise elements come as they complete.
    ///
    /// This is the one plan rule for a parallel map: over a random-access input, or execution
    /// stages over one ([`Dataset::peel_stages`]), the result is `map(f).parallelize(par,
    /// deterministic)`: the workers compute whole elements by index, the map keeps random access
    /// (`len`, `get`, `epochs()`, ops built under the stages) and its state is the sequential
    /// map's. Over a stream it is a stream: workers take elements from the input in order and
    /// map them in parallel.
    pub fn map_parallel(
        &self,
        label: &str,
        f: MapFn,
        par: Parallelism,
        deterministic: bool,
    ) -> Dataset {
        self.plan_map_parallel(label, f, None, par, deterministic)
    }

    /// [`Dataset::map_parallel`] whose runs of calls are made inside `scope` (as
    /// [`Dataset::map_scoped`]: a Python function's GIL, held once per run). Over a stream the
    /// elements come one at a time and `scope` is not used.
    pub fn map_parallel_scoped(
        &self,
        label: &str,
        f: MapFn,
        scope: ScopeFn,
        par: Parallelism,
        deterministic: bool,
    ) -> Dataset {
        self.plan_map_parallel(label, f, Some(scope), par, deterministic)
    }

    /// The rule of [`Dataset::map_parallel`]. `parallelize` never calls back into it (it builds
    /// its [`ParallelMap`] directly), so the rule cannot recurse.
    fn plan_map_parallel(
        &self,
        label: &str,
        f: MapFn,
        scope: Option<ScopeFn>,
        par: Parallelism,
        deterministic: bool,
    ) -> Dataset {
        if self.peel_stages().is_some() {
            let mapped = match scope {
                Some(scope) => self.map_scoped(label, f, scope),
                None => self.map(label, f),
            };
            return mapped.parallelize(par, deterministic);
        }
        Dataset::from_iter(ParallelMap::new(
            self.clone(),
            Some(f),
            label,
            par,
            deterministic,
        ))
    }

    /// Runs this pipeline on `par` worker threads: over a random-access dataset every worker
    /// computes whole elements by index (fetch, map, batch), the fastest path; over a stream,
    /// workers pull elements in turn.
    pub fn parallelize(&self, par: Parallelism, deterministic: bool) -> Dataset {
        Dataset::from_iter(ParallelMap::new(
            self.clone(),
            None,
            "input",
            par,
            deterministic,
        ))
    }
}

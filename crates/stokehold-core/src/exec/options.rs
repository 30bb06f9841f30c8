//! `with_options`: a pipeline that owns its [`Executor`] — one pool, budget and set of stats for
//! every iterator and epoch of the dataset — and [`executor_of`], which finds the executor a
//! pipeline runs on from the dataset itself.
//!
//! The dataset answers through [`IterDataset::executor`]: `with_options` returns its own
//! executor; a thread-owning op (a parallel map or `parallelize`, a parallel interleave) that made
//! a default executor for its iterator because none was installed remembers the last one in a
//! [`DefaultExecutor`] slot and returns it. [`executor_of`] walks the plan outermost op first, so
//! the executor it finds is the one the pipeline's outermost thread-owning op ran on. Bindings use
//! it for `ds.stats()`.

use std::sync::Arc;

use serde_json::Value as Json;

use super::executor::{Executor, Reservation};
use super::stats::StatsReport;
use super::ExecOptions;
use crate::dataset::{Dataset, DatasetIter, IterDataset};
use crate::dataset::{Stage, StageKind};
use crate::error::Result;
use crate::example::Example;

/// A dataset whose iterators run on one executor.
pub struct WithOptions {
    parent: Dataset,
    exec: Executor,
}

impl WithOptions {
    /// `parent` run on `exec`.
    pub(crate) fn on(parent: &Dataset, exec: Executor) -> Dataset {
        Dataset::Iter(Arc::new(WithOptions {
            parent: parent.clone(),
            exec,
        }))
    }
}

/// A [`Reservation`] for a buffer of elements an op over `input` keeps (a shuffle buffer, a
/// window of `group_by_window`, `pack`'s open rows), in the budget of the executor the op runs
/// on: the one installed on this thread (a stage's worker, a prefetch thread, `with_options`),
/// else the one its input runs on.
pub fn buffer_reservation(input: &Dataset) -> Reservation {
    Reservation::new(Executor::current().or_else(|| executor_of(input)))
}

/// The executor `ds` runs on, found through its plan: the nearest `with_options` op, or the
/// default executor the outermost thread-owning op last ran on (outermost op first, then its
/// inputs in order). `None` for a pipeline with no parallel op, or one not yet iterated.
pub fn executor_of(ds: &Dataset) -> Option<Executor> {
    if let Dataset::Iter(i) = ds {
        if let Some(exec) = i.executor() {
            return Some(exec);
        }
    }
    ds.parents().iter().find_map(executor_of)
}

impl Dataset {
    /// Runs this pipeline on its own executor with `opts` (memory budget, cores, trace, warm start).
    pub fn with_options(&self, opts: ExecOptions) -> Dataset {
        WithOptions::on(self, Executor::new(opts))
    }
}

impl IterDataset for WithOptions {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(self.exec.iter(&self.parent, epoch)?))
    }

    fn name(&self) -> String {
        let o = self.exec.options();
        let cold = if o.warm_start {
            ""
        } else {
            ", warm_start=false"
        };
        format!(
            "with_options(memory_budget={}, cores={}{cold})",
            o.memory_budget, o.cores
        )
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn len(&self) -> Option<u64> {
        self.parent.len()
    }

    fn executor(&self) -> Option<Executor> {
        Some(self.exec.clone())
    }

    /// Options change how the input runs, never what it yields: an execution stage.
    fn stage(&self) -> Option<Stage> {
        Some(Stage {
            parent: self.parent.clone(),
            kind: StageKind::Options {
                exec: self.exec.clone(),
            },
        })
    }
}

/// An iterator that keeps its [`Executor`] (and so the pipeline's threads) alive, and exposes
/// its stats and trace.
pub struct ExecIter {
    exec: Executor,
    inner: Box<dyn DatasetIter>,
}

impl ExecIter {
    /// The executor (stats, trace, budget).
    pub fn executor(&self) -> &Executor {
        &self.exec
    }

    /// Shorthand for `executor().stats()`.
    pub fn stats(&self) -> StatsReport {
        self.exec.stats()
    }
}

impl DatasetIter for ExecIter {
    fn next(&mut self) -> Result<Option<Example>> {
        let inner = &mut self.inner;
        self.exec.enter(|| inner.next())
    }

    fn state(&self) -> Json {
        self.inner.state()
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let inner = &mut self.inner;
        self.exec.enter(|| inner.set_state(state))
    }
}

impl Executor {
    /// An iterator over epoch `epoch` of `ds` whose parallel ops run on this executor.
    pub fn iter(&self, ds: &Dataset, epoch: u64) -> Result<ExecIter> {
        let inner = self.enter(|| ds.iter(epoch))?;
        Ok(ExecIter {
            exec: self.clone(),
            inner,
        })
    }
}

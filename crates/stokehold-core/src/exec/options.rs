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

use std::sync::{Arc, Mutex};

use super::executor::Executor;
use super::ExecOptions;
use crate::dataset::{Dataset, DatasetIter, IterDataset};
use crate::error::Result;
use crate::ops::plan::{Stage, StageKind};

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

/// The default executor of a thread-owning op: made by its first iterator and used by every later
/// one (each epoch's `iter()`), so that the op's threads, its statistics and what AUTOTUNE learnt
/// carry from one epoch to the next. Without it every epoch of a plain `for batch in ds` started
/// on a fresh executor: new threads, AUTOTUNE starting over from one worker every epoch, and
/// `ds.stats()` showing the last epoch alone. Cloning shares the slot: a stage re-applied by
/// `repeat` / `epochs` (see [`crate::ops::plan`]) reports into the slot of the op it copies, so
/// `ds.stats()` covers `ds.epochs()` too. A forked child makes its own (the parent's threads and
/// the memory its buffers held are not the child's).
///
/// A strong reference: stats stay readable after the loop. The executor's idle threads still exit
/// on their own (see [`super::pool`]), so it holds memory, not threads.
#[derive(Clone, Default)]
pub struct DefaultExecutor(Arc<Mutex<Option<(Executor, u32)>>>);

impl DefaultExecutor {
    /// The executor installed on this thread, or else this op's default one (made on first use).
    pub fn current_or_new(&self) -> Executor {
        Executor::current().unwrap_or_else(|| {
            let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let pid = super::pid();
            match &*slot {
                Some((exec, p)) if *p == pid => exec.clone(),
                _ => {
                    let exec = Executor::new(ExecOptions::default());
                    *slot = Some((exec.clone(), pid));
                    exec
                }
            }
        })
    }

    /// The default executor of this op, if one was made.
    pub fn get(&self) -> Option<Executor> {
        let slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slot.as_ref().map(|(exec, _)| exec.clone())
    }
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
    /// Runs this pipeline on its own executor with `opts` (memory budget, cores, trace).
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
        format!(
            "with_options(memory_budget={}, cores={})",
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

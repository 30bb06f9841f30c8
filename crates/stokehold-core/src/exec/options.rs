//! `with_options`: a pipeline that owns its [`Executor`] — one pool, budget and set of stats for
//! every iterator and epoch of the dataset — and a way to find it again from the dataset
//! ([`executor_of`]) or, for pipelines without one, the executor made most recently by default
//! ([`last_default`]). Bindings use these for `ds.stats()`.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::executor::{Executor, Inner};
use super::ExecOptions;
use crate::dataset::{Dataset, DatasetIter, IterDataset};
use crate::error::Result;

/// A dataset whose iterators run on one executor.
pub struct WithOptions {
    parent: Dataset,
    exec: Executor,
}

type Registry = Mutex<Vec<(usize, Weak<Inner>)>>;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Vec::new()))
}

/// A strong reference: stats stay readable after the loop that used the executor ended. Its
/// idle threads still exit on their own (see [`super::pool`]), so it holds memory, not threads.
fn last() -> &'static Mutex<Option<Executor>> {
    static L: OnceLock<Mutex<Option<Executor>>> = OnceLock::new();
    L.get_or_init(|| Mutex::new(None))
}

/// Records `exec` as the executor most recently made by default.
pub(crate) fn note_default(exec: &Executor) {
    *last().lock().unwrap_or_else(|e| e.into_inner()) = Some(exec.clone());
}

/// The executor made most recently for a pipeline without `with_options`.
pub fn last_default() -> Option<Executor> {
    last().lock().unwrap_or_else(|e| e.into_inner()).clone()
}

fn key(ds: &Dataset) -> usize {
    match ds {
        Dataset::Map(m) => Arc::as_ptr(m) as *const () as usize,
        Dataset::Iter(i) => Arc::as_ptr(i) as *const () as usize,
    }
}

/// The executor of the nearest `with_options` op in `ds`'s plan (itself or an input).
pub fn executor_of(ds: &Dataset) -> Option<Executor> {
    let k = key(ds);
    let found = {
        let reg = registry().lock().unwrap_or_else(|e| e.into_inner());
        reg.iter()
            .find(|(p, _)| *p == k)
            .and_then(|(_, w)| w.upgrade())
    };
    match found {
        Some(inner) => Some(Executor { inner }),
        None => ds.parents().iter().find_map(executor_of),
    }
}

impl Dataset {
    /// Runs this pipeline on its own executor with `opts` (memory budget, cores, trace).
    pub fn with_options(&self, opts: ExecOptions) -> Dataset {
        let exec = Executor::new(opts);
        let ds = Dataset::Iter(Arc::new(WithOptions {
            parent: self.clone(),
            exec: exec.clone(),
        }));
        let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
        reg.retain(|(_, w)| w.strong_count() > 0);
        reg.push((key(&ds), Arc::downgrade(&exec.inner)));
        ds
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
}

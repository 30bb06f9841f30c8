//! Checkpoints of a whole pipeline: a versioned JSON object naming the pipeline it belongs to.
//!
//! ```json
//! {"format": "stokehold-state", "version": 1, "fingerprint": "…", "epoch": 0, "iter": {…}}
//! ```
//! `fingerprint` hashes the description of the data (ops and their arguments, execution stages
//! left out: [`Dataset::describe_data`]), so a state is never applied to another pipeline, and
//! restores the same pipeline run with another prefetch depth, parallelism, core count or memory
//! budget; `iter` is the op tree's own state (`{"pos": n}` for a random-access pipeline: a
//! checkpoint of a few integers), in which execution stages show their input's state.
//!
//! **After an element's error the iterator goes on** (tf.data's rule, one rule for every op): an
//! error of one element ([`crate::skip::skippable`]: a schema, I/O or corrupt-data error, or the
//! user function's exception) is returned once and the next `next()` goes on with the elements
//! after it, the failed one left out, whatever op failed and however the pipeline runs (a
//! random-access map, a parallel map, a prefetch thread); the state stays exact. An iterator that
//! fails again without moving (its state unchanged since the last error: a stream that cannot get
//! past its failure) is done, as it is after any other error (a bad argument, a worker panic):
//! every later `next()` returns `Ok(None)`. The one exception is [`Error::Interrupted`] (Ctrl-C
//! while waiting): the awaited element still comes on the next call, and so do the elements a
//! batch, a zip or a `next_many` had taken before it. To leave failing elements out without
//! seeing their errors, a pipeline says so: `ignore_errors()` after the op, or the loader's
//! `on_error="skip"`, which count what they leave out. `set_state` makes the iterator live
//! again at the restored position.

use serde_json::{json, Value as Json};

use crate::dataset::{state_field, state_u64, Dataset, DatasetIter};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::exec::steps::StepClock;
use crate::exec::{executor_of, Executor};

/// Version of the state format this build writes and reads.
/// 2: the data fingerprint (execution stages left out), execution stages' states transparent,
/// and the keyed draws of `rng::stream_key` (version 1's orders and draws differ).
pub const STATE_VERSION: u64 = 2;

/// An iterator over a pipeline that can save and restore a versioned, fingerprinted state.
pub struct PipelineIter {
    ds: Dataset,
    epoch: u64,
    inner: Box<dyn DatasetIter>,
    /// An error that ends the iterator was returned (see the module docs).
    failed: bool,
    /// The op tree's state after the last element error, while no element came since: failing
    /// again there means the iterator cannot move past the failure.
    stuck_at: Option<Json>,
    /// An error met by [`PipelineIter::next_many`] after it had elements to return: raised by
    /// the next call, so that the elements before it are not lost.
    deferred: Option<Error>,
    /// Where the consumer's calls are recorded (the stats' step view): the executor the
    /// pipeline runs on, if it has a parallel stage.
    exec: Option<Executor>,
    clock: StepClock,
}

impl PipelineIter {
    /// Iterates epoch `epoch` of `ds`.
    pub fn new(ds: Dataset, epoch: u64) -> Result<Self> {
        let inner = ds.iter(epoch)?;
        Ok(PipelineIter {
            exec: executor_of(&ds),
            ds,
            epoch,
            inner,
            failed: false,
            stuck_at: None,
            deferred: None,
            clock: StepClock::default(),
        })
    }

    /// Runs `call` as one call of the consumer, timed for the stats' step view.
    fn timed<T>(&mut self, call: impl FnOnce(&mut Self) -> T) -> T {
        let Some(exec) = self.exec.take() else {
            return call(self);
        };
        let mut clock = std::mem::take(&mut self.clock);
        let out = clock.time(exec.steps(), || call(self));
        self.clock = clock;
        self.exec = Some(exec);
        out
    }

    /// The next element; `Ok(None)` at the end and after an error that ends the iterator (see the
    /// module docs).
    #[allow(clippy::should_implement_trait)] // fallible; mirrors DatasetIter::next
    pub fn next(&mut self) -> Result<Option<Example>> {
        self.timed(Self::step)
    }

    fn step(&mut self) -> Result<Option<Example>> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        if self.failed {
            return Ok(None);
        }
        let r = self.inner.next();
        match &r {
            Ok(_) => self.stuck_at = None,
            Err(Error::Interrupted(_)) => {}
            Err(e) if crate::skip::skippable(e) => {
                let now = self.inner.state();
                self.failed = self.stuck_at.as_ref() == Some(&now);
                self.stuck_at = Some(now);
            }
            Err(_) => self.failed = true,
        }
        r
    }

    /// Up to `n` elements, fewer at the end. An error after some elements is kept for the next
    /// call, which raises it: the elements before it are returned, not lost with it. An
    /// interrupt (Ctrl-C while waiting) is raised at once, and the iterator goes back to where
    /// the call started, so the elements it had taken come again. Reserves at most 1024 slots
    /// up front (`n` comes from the caller).
    pub fn next_many(&mut self, n: usize) -> Result<Vec<Example>> {
        self.timed(|it| it.take_many(n))
    }

    fn take_many(&mut self, n: usize) -> Result<Vec<Example>> {
        let before = self.position();
        let mut deferred = None;
        let r = take_deferring(n, &mut deferred, || self.step());
        self.deferred = deferred;
        match r {
            Err(Taken { error, taken }) if taken > 0 => {
                self.rewind(&before)?;
                Err(error)
            }
            r => r.map_err(|t| t.error),
        }
    }

    /// The op tree's own state (the `iter` of [`PipelineIter::state`]).
    pub(crate) fn position(&self) -> Json {
        self.inner.state()
    }

    /// Goes back to `position` (from [`PipelineIter::position`] of this iterator).
    pub(crate) fn rewind(&mut self, position: &Json) -> Result<()> {
        let mut state = self.state();
        state["iter"] = position.clone();
        self.set_state(&state)
    }

    /// True once an error ended the iterator.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The epoch this iterator runs.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The full, versioned state.
    pub fn state(&self) -> Json {
        json!({
            "format": "stokehold-state",
            "version": STATE_VERSION,
            "fingerprint": format!("{:016x}", self.ds.fingerprint()),
            "epoch": self.epoch,
            "iter": self.inner.state(),
        })
    }

    /// Restores a state from [`PipelineIter::state`] of the same pipeline (refusing others).
    pub fn set_state(&mut self, state: &Json) -> Result<()> {
        if state.get("format").and_then(Json::as_str) != Some("stokehold-state") {
            return Err(Error::State("not a stokehold iterator state".into()));
        }
        let version = state_u64(state, "version")?;
        if version == 1 {
            return Err(Error::State(
                "state version 1 was written by an older stokehold, whose shuffle orders and \
                 random draws differ from this build's (version 2): it cannot resume here; \
                 start the run again, or resume it with the stokehold release that wrote it"
                    .into(),
            ));
        }
        if version != STATE_VERSION {
            return Err(Error::State(format!(
                "state version {version} is not supported by this build (version {STATE_VERSION})"
            )));
        }
        let want = format!("{:016x}", self.ds.fingerprint());
        let got = state_field(state, "fingerprint")?.as_str().unwrap_or("");
        if got != want {
            return Err(Error::State(format!(
                "state belongs to another pipeline (fingerprint {got}, this one is {want}: {})",
                self.ds.describe_data()
            )));
        }
        let epoch = state_u64(state, "epoch")?;
        let mut inner = self.ds.iter(epoch)?;
        inner.set_state(state_field(state, "iter")?)?;
        self.inner = inner;
        self.exec = executor_of(&self.ds);
        self.epoch = epoch;
        self.failed = false;
        self.stuck_at = None;
        self.deferred = None;
        Ok(())
    }
}

/// An error [`take_deferring`] returned, and how many elements it had taken (and dropped)
/// before it: none, unless the error is an interrupt.
pub(crate) struct Taken {
    pub error: Error,
    pub taken: usize,
}

/// Up to `n` elements from `next`; an error after at least one element goes into `deferred`
/// (for the caller's next call) instead of dropping the elements taken. An interrupt is
/// returned at once (the host is waiting for it) with the count of elements taken, which the
/// caller takes back by going back to where it started.
pub(crate) fn take_deferring(
    n: usize,
    deferred: &mut Option<Error>,
    mut next: impl FnMut() -> Result<Option<Example>>,
) -> std::result::Result<Vec<Example>, Taken> {
    let mut v = Vec::with_capacity(n.min(1024));
    while v.len() < n {
        match next() {
            Ok(Some(e)) => v.push(e),
            Ok(None) => break,
            Err(error) if v.is_empty() || matches!(error, Error::Interrupted(_)) => {
                return Err(Taken {
                    error,
                    taken: v.len(),
                })
            }
            Err(e) => {
                *deferred = Some(e);
                break;
            }
        }
    }
    Ok(v)
}

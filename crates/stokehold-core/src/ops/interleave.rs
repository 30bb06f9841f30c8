//! `interleave` and `flat_map`: each input element opens a dataset; outputs are interleaved.
//!
//! The order is tf.data's documented one (checked against fixtures made by TensorFlow, see
//! `testdata/interleave`): `cycle_length` inputs are open at once; the op takes `block_length`
//! elements from one, then moves to the next in the cycle. An exhausted input's slot is refilled
//! with the next input element the next time the cycle reaches it; once the input is exhausted,
//! empty slots are skipped. `flat_map` is `cycle_length = block_length = 1`.
//!
//! With `num_parallel_calls`, every open input runs ahead on a pool thread (at most
//! `num_parallel_calls` of them reading at once, queues of at least `block_length`, about a
//! millisecond of reading for small elements (see `exec::background`), bounded by the
//! memory budget): the order is unchanged when `deterministic`; otherwise, when the current input
//! has nothing ready, the cycle moves on to one that does. The state is the number of input
//! elements consumed, the cycle position, and each open input's index and own state; restoring
//! re-reads the input up to that point and reopens the open inputs at their positions.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::dataset::{state_field, state_u64, Dataset, DatasetIter, IterDataset};
use crate::error::{Error, Result};
use crate::example::Example;
use crate::exec::background::{Background, Permits};
use crate::exec::stats::OpStats;
use crate::exec::DefaultExecutor;
use crate::exec::{Executor, Parallelism};
use crate::ops::ignore_errors::error_logs;
use crate::ops::map::Ctx;
use crate::skip::ErrorLog;

/// A function from an element to the dataset it opens.
pub type InterleaveFn = Arc<dyn Fn(Example, &Ctx) -> Result<Dataset> + Send + Sync>;

/// Builds an [`InterleaveFn`] from a closure.
pub fn interleave_fn(
    f: impl Fn(Example, &Ctx) -> Result<Dataset> + Send + Sync + 'static,
) -> InterleaveFn {
    Arc::new(f)
}

/// `interleave` over any input.
pub struct Interleave {
    parent: Dataset,
    f: InterleaveFn,
    label: String,
    cycle_length: Parallelism,
    block_length: usize,
    par: Option<Parallelism>,
    deterministic: bool,
    /// The default executor its iterators last made (when none was installed), for stats.
    default_exec: DefaultExecutor,
    /// Adopts the skip logs of the datasets `f` opens, so `error_logs` of the pipeline (Python:
    /// `ds.skipped()`) counts what they leave out.
    log: Arc<ErrorLog>,
}

impl Interleave {
    /// Interleaves the datasets `f` opens for each element of `parent`.
    pub fn new(
        parent: Dataset,
        f: InterleaveFn,
        label: &str,
        cycle_length: usize,
        block_length: usize,
        par: Option<Parallelism>,
        deterministic: bool,
    ) -> Result<Self> {
        Self::with_cycle(
            parent,
            f,
            label,
            Parallelism::Fixed(cycle_length),
            block_length,
            par,
            deterministic,
        )
    }

    /// As [`Interleave::new`], with a cycle length that may be [`Parallelism::Autotune`]
    /// (tf.data's `cycle_length=AUTOTUNE`): the executor's core count, resolved when an iterator
    /// starts. The op's name says `cycle_length=autotune` whatever the machine, and the iterator's
    /// state holds the cycle length it ran with, so a checkpoint restores on a machine with
    /// another core count: the restored iterator finishes its epoch with the saved cycle length
    /// (the order is a function of it), and later epochs resolve it again.
    pub fn with_cycle(
        parent: Dataset,
        f: InterleaveFn,
        label: &str,
        cycle_length: Parallelism,
        block_length: usize,
        par: Option<Parallelism>,
        deterministic: bool,
    ) -> Result<Self> {
        if cycle_length == Parallelism::Fixed(0) || block_length == 0 {
            return Err(Error::invalid(
                "interleave: cycle_length and block_length must be > 0",
            ));
        }
        if par == Some(Parallelism::Fixed(0)) {
            return Err(Error::invalid("interleave: num_parallel_calls must be > 0"));
        }
        let label = if cycle_length == Parallelism::Fixed(1) && block_length == 1 && par.is_none() {
            format!("flat_map[{label}]")
        } else {
            format!("interleave[{label}](cycle_length={cycle_length}, block_length={block_length})")
        };
        Ok(Interleave {
            parent,
            f,
            label,
            cycle_length,
            block_length,
            par,
            deterministic,
            default_exec: DefaultExecutor::default(),
            log: Arc::new(ErrorLog::default()),
        })
    }
}

impl IterDataset for Interleave {
    fn iter(&self, epoch: u64) -> Result<Box<dyn DatasetIter>> {
        let exec = self.default_exec.current_or_new();
        let cycle_length = self.cycle_length.resolve(exec.options().cores);
        let stats = match self.par {
            Some(_) => exec.op_stats(&self.label),
            // Sequential: not a stage of its own (its work counts to whoever runs it).
            None => Arc::new(OpStats::new(self.label.clone())),
        };
        let permits = self.par.map(|p| {
            let n = match p {
                Parallelism::Fixed(n) => n,
                // Readers block on I/O as often as they compute: one per core keeps the cores busy
                // without oversubscribing them.
                Parallelism::Autotune => {
                    let n = exec.options().cores;
                    stats.set_note(format!("readers in next() at once: {n} (= cores)"));
                    n
                }
            };
            stats.set_shape(n, self.block_length.max(2) * cycle_length);
            Permits::new(n)
        });
        Ok(Box::new(InterleaveIter {
            input: exec.enter(|| self.parent.iter(epoch))?,
            parent: self.parent.clone(),
            f: self.f.clone(),
            label: self.label.clone(),
            epoch,
            cycle_length,
            autotuned_cycle: self.cycle_length == Parallelism::Autotune,
            block_length: self.block_length,
            permits,
            deterministic: self.deterministic,
            exec,
            stats,
            slots: (0..cycle_length).map(|_| None).collect(),
            cycle: 0,
            block: 0,
            input_pos: 0,
            end_of_input: false,
            num_open: 0,
            marked: false,
            log: self.log.clone(),
        }))
    }

    fn name(&self) -> String {
        self.label.clone()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn error_log(&self) -> Option<Arc<ErrorLog>> {
        Some(self.log.clone())
    }

    fn executor(&self) -> Option<Executor> {
        self.default_exec.get()
    }
}

enum Reader {
    Direct(Box<dyn DatasetIter>),
    Ahead(Background),
}

struct Slot {
    input: u64,
    reader: Reader,
    /// State of the inner iterator after the elements taken from it (for `Ahead` readers; a
    /// direct reader is asked).
    state: Json,
}

impl Slot {
    fn next(&mut self) -> Result<Option<Example>> {
        match &mut self.reader {
            Reader::Direct(it) => it.next(),
            Reader::Ahead(bg) => {
                let (e, state) = bg.take_next()?;
                self.state = state;
                Ok(e)
            }
        }
    }

    fn ready(&self) -> bool {
        match &self.reader {
            Reader::Direct(_) => true,
            Reader::Ahead(bg) => bg.ready(),
        }
    }

    fn state(&self) -> Json {
        match &self.reader {
            Reader::Direct(it) => it.state(),
            Reader::Ahead(_) => self.state.clone(),
        }
    }
}

struct InterleaveIter {
    input: Box<dyn DatasetIter>,
    parent: Dataset,
    f: InterleaveFn,
    label: String,
    epoch: u64,
    /// The cycle length this iterator runs with (an autotuned one resolved or restored).
    cycle_length: usize,
    /// The cycle length was AUTOTUNE: a restore adopts the saved one.
    autotuned_cycle: bool,
    block_length: usize,
    permits: Option<Arc<Permits>>,
    deterministic: bool,
    exec: Executor,
    stats: Arc<OpStats>,
    slots: Vec<Option<Slot>>,
    cycle: usize,
    block: usize,
    input_pos: u64,
    end_of_input: bool,
    num_open: usize,
    /// Whether the first element taken marked the op's row ([`OpStats::taken`]).
    marked: bool,
    /// The op's log, which adopts each opened dataset's (see [`Interleave`]).
    log: Arc<ErrorLog>,
}

impl InterleaveIter {
    fn advance(&mut self) {
        self.block = 0;
        self.cycle = (self.cycle + 1) % self.cycle_length;
    }

    /// Opens the dataset of input element number `index`, positioned at `state` if given.
    fn open(&self, element: Example, index: u64, state: Option<&Json>) -> Result<Slot> {
        let ctx = Ctx {
            op: &self.label,
            index,
            epoch: self.epoch,
        };
        let ds = (self.f)(element, &ctx)?;
        for l in error_logs(&ds) {
            self.log.adopt(l);
        }
        let mut it = self.exec.enter(|| ds.iter(self.epoch))?;
        if let Some(s) = state {
            self.exec.enter(|| it.set_state(s))?;
        }
        let state = it.state();
        let reader = match &self.permits {
            None => Reader::Direct(it),
            Some(p) => Reader::Ahead(Background::start(
                it,
                self.block_length.max(2),
                Some(p.clone()),
                &self.exec,
                self.stats.clone(),
                self.label.clone(),
            )?),
        };
        Ok(Slot {
            input: index,
            reader,
            state,
        })
    }

    /// As-completed mode: when the current input has nothing ready, move to one that has.
    fn skip_to_ready(&mut self) {
        let current_ready = self.slots[self.cycle].as_ref().is_none_or(Slot::ready);
        if self.deterministic || current_ready {
            return;
        }
        for k in 1..self.cycle_length {
            let j = (self.cycle + k) % self.cycle_length;
            if self.slots[j].as_ref().is_some_and(Slot::ready) {
                self.cycle = j;
                self.block = 0;
                return;
            }
        }
    }
}

impl DatasetIter for InterleaveIter {
    fn next(&mut self) -> Result<Option<Example>> {
        // Its readers count the consumer's waits (`Background::take_next`); which consumer is
        // the pipeline's is marked here.
        if !self.marked && self.permits.is_some() {
            self.marked = true;
            self.stats.taken();
        }
        while !self.end_of_input || self.num_open > 0 {
            self.skip_to_ready();
            if let Some(slot) = self.slots[self.cycle].as_mut() {
                match slot.next()? {
                    Some(e) => {
                        self.block += 1;
                        if self.block == self.block_length {
                            self.advance();
                        }
                        return Ok(Some(e));
                    }
                    None => {
                        self.slots[self.cycle] = None;
                        self.num_open -= 1;
                        self.advance();
                    }
                }
            } else if !self.end_of_input {
                let input = &mut self.input;
                match self.exec.enter(|| input.next())? {
                    None => self.end_of_input = true,
                    Some(x) => {
                        let slot = self.open(x, self.input_pos, None)?;
                        self.input_pos += 1;
                        self.slots[self.cycle] = Some(slot);
                        self.num_open += 1;
                    }
                }
            } else {
                self.advance();
            }
        }
        Ok(None)
    }

    fn state(&self) -> Json {
        let slots: Vec<Json> = self
            .slots
            .iter()
            .map(|s| {
                s.as_ref().map_or(
                    Json::Null,
                    |s| json!({"input": s.input, "inner": s.state()}),
                )
            })
            .collect();
        json!({
            "cycle_length": self.cycle_length,
            "input_pos": self.input_pos,
            "end_of_input": self.end_of_input,
            "cycle": self.cycle,
            "block": self.block,
            "slots": slots,
        })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let input_pos = state_u64(state, "input_pos")?;
        let saved = state_field(state, "slots")?
            .as_array()
            .ok_or_else(|| Error::State(format!("{}: bad slots field", self.label)))?
            .clone();
        // States written before the field existed have one slot per cycle position.
        let saved_len = state
            .get("cycle_length")
            .and_then(Json::as_u64)
            .map_or(saved.len(), |n| n as usize);
        if saved_len != saved.len() || saved_len == 0 {
            return Err(Error::State(format!("{}: bad slots field", self.label)));
        }
        if self.autotuned_cycle {
            // Maybe saved on a machine with another core count: finish the epoch with the cycle
            // length the order so far was made with.
            self.cycle_length = saved_len;
            self.slots.resize_with(saved_len, || None);
        } else if saved_len != self.cycle_length {
            return Err(Error::State(format!(
                "{}: the state was saved with cycle_length={saved_len}",
                self.label
            )));
        }
        let wanted: Vec<Option<u64>> = saved
            .iter()
            .map(|s| s.get("input").and_then(Json::as_u64))
            .collect();
        // Re-read the input up to where it was, keeping the elements of the open slots.
        let mut input = self.exec.enter(|| self.parent.iter(self.epoch))?;
        let mut elements: Vec<Option<Example>> = vec![None; self.cycle_length];
        for pos in 0..input_pos {
            let e = self.exec.enter(|| input.next())?.ok_or_else(|| {
                Error::State(format!(
                    "{}: input ended at {pos} while restoring to {input_pos}",
                    self.label
                ))
            })?;
            for (k, w) in wanted.iter().enumerate() {
                if *w == Some(pos) {
                    elements[k] = Some(e.clone());
                }
            }
        }
        let mut slots = Vec::with_capacity(self.cycle_length.min(super::PREALLOC_MAX));
        for (k, s) in saved.iter().enumerate() {
            slots.push(match (wanted[k], elements[k].take()) {
                (Some(idx), Some(e)) => Some(self.open(e, idx, Some(state_field(s, "inner")?))?),
                (None, _) => None,
                (Some(idx), None) => {
                    return Err(Error::State(format!(
                        "{}: open input {idx} not found",
                        self.label
                    )))
                }
            });
        }
        self.num_open = slots.iter().filter(|s| s.is_some()).count();
        self.slots = slots;
        self.input = input;
        self.input_pos = input_pos;
        self.end_of_input = state_field(state, "end_of_input")?
            .as_bool()
            .unwrap_or(false);
        self.cycle = state_u64(state, "cycle")? as usize % self.cycle_length;
        self.block = crate::checked::to_usize(
            "interleave",
            "the state's block",
            state_u64(state, "block")?,
        )?;
        Ok(())
    }
}

impl Dataset {
    /// tf.data's `interleave`: opens `f(element)` for each input element and interleaves their
    /// outputs, `cycle_length` at a time, `block_length` consecutive elements from each.
    /// `num_parallel_calls` (`None`: sequential) reads the open inputs ahead on worker threads.
    pub fn interleave(
        &self,
        label: &str,
        f: InterleaveFn,
        cycle_length: usize,
        block_length: usize,
        num_parallel_calls: Option<Parallelism>,
        deterministic: bool,
    ) -> Result<Dataset> {
        self.interleave_with(
            label,
            f,
            Parallelism::Fixed(cycle_length),
            block_length,
            num_parallel_calls,
            deterministic,
        )
    }

    /// [`Dataset::interleave`] with a cycle length that may be [`Parallelism::Autotune`]: one
    /// open input per core of the executor (tf.data's `cycle_length=AUTOTUNE`); see
    /// [`Interleave::with_cycle`] for how its checkpoints move between machines.
    pub fn interleave_with(
        &self,
        label: &str,
        f: InterleaveFn,
        cycle_length: Parallelism,
        block_length: usize,
        num_parallel_calls: Option<Parallelism>,
        deterministic: bool,
    ) -> Result<Dataset> {
        Ok(Dataset::from_iter(Interleave::with_cycle(
            self.clone(),
            f,
            label,
            cycle_length,
            block_length,
            num_parallel_calls,
            deterministic,
        )?))
    }

    /// tf.data's `flat_map`: the datasets `f` opens, one after the other.
    pub fn flat_map(&self, label: &str, f: InterleaveFn) -> Dataset {
        Dataset::from_iter(
            Interleave::new(self.clone(), f, label, 1, 1, None, true)
                .expect("valid constant arguments"),
        )
    }
}

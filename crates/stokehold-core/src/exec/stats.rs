//! Per-op statistics and the pipeline verdict.
//!
//! Each parallel op owns an [`OpStats`] of atomic counters, registered with its pipeline's
//! [`Executor`](super::Executor). Sequential ops (map, batch, ...) running inside a parallel op's
//! workers count as that op's busy time: the table shows where threads spend their time, by the
//! stage that owns the threads.
//!
//! Verdict: if the consumer rarely waits for the stage it takes from, the pipeline is
//! *consumer-bound* (faster than needed). Otherwise the stage whose workers are busiest per
//! thread is the bottleneck ("bound in op X"; a batch's row, built inside a stage, is not a
//! stage); if that stage's workers mostly wait for their own input, the pipeline is
//! *input-bound*.

use super::histogram::{Histogram, Percentiles};
use super::period::Trial;
pub use super::sampler::BusyTimes;
use super::sampler::{OpCounters, ProcSampler, Sampler};
use super::steps::StepReport;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Entries an op keeps of AUTOTUNE's decision trace ([`OpReport::autotune_trace`]): the latest,
/// older ones counted as dropped. A settled op tries one worker fewer every 30 periods (3 s), so
/// a run's first steps stay in it for about three minutes.
pub const TRACE_DECISIONS: usize = 64;

/// One entry of AUTOTUNE's decision trace: what it did (or, once per kind in a row, what it
/// saw and why it did nothing) and when.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Decision {
    /// Seconds after the op started.
    pub at_s: f64,
    /// The note, as [`OpReport::autotune`] showed it then.
    pub note: String,
}

/// The note an op shows now and the trace of the ones before it.
#[derive(Debug, Default)]
struct Notes {
    now: String,
    /// The kind of status the last traced entry was ([`OpStats::set_status`]); `None` after a
    /// decision.
    status: Option<&'static str>,
    trace: VecDeque<Decision>,
    dropped: u64,
}

/// Stores `now` in `at` (as ns, at least 1: 0 is never).
fn mark(at: &AtomicU64, now: Duration) {
    at.store(now.as_nanos().max(1) as u64, Ordering::Relaxed);
}

/// How long before `now` the time [`mark`]ed in `at` was (`None`: never).
fn since(at: &AtomicU64, now: Duration) -> Option<Duration> {
    match at.load(Ordering::Relaxed) {
        0 => None,
        ns => Some(now.saturating_sub(Duration::from_nanos(ns))),
    }
}

/// Live counters of one op.
#[derive(Debug)]
pub struct OpStats {
    /// The op's description.
    pub name: String,
    created: Instant,
    elements: AtomicU64,
    bytes: AtomicU64,
    busy_ns: AtomicU64,
    /// Workers' busy time whose thread CPU time was measured, and that CPU time: how much of
    /// its busy time a worker ran, rather than waited for a read or for a core.
    timed_busy_ns: AtomicU64,
    busy_cpu_ns: AtomicU64,
    /// Workers' busy time whose wait for a core was measured too, and that wait.
    queue_timed_busy_ns: AtomicU64,
    busy_queued_ns: AtomicU64,
    consumer_wait_ns: AtomicU64,
    input_wait_ns: AtomicU64,
    /// Worker time per element (a run of elements timed together counts its mean for each).
    element_ns: Histogram,
    /// The consumer's waits for this op, one per element it waited for (the elements it did not
    /// wait for are the zeros of the distribution: `elements` less this count).
    wait_ns: Histogram,
    /// The buffer's fill after each element was taken, as millionths of its capacity then,
    /// summed (its mean is over `elements`): a stage's bound moves with its runs and AUTOTUNE.
    fill_ppm: AtomicU64,
    capacity: AtomicUsize,
    /// Threads that build the op's elements when it has none of its own (a batch built on a
    /// stage's workers, whose busy time is theirs summed): the last count one of them gave.
    threads: AtomicUsize,
    parallelism: AtomicUsize,
    /// One more than the parallelism AUTOTUNE settled on last (0: none yet, as 0 is the inline
    /// setting); a new iterator starts there.
    tuned: AtomicUsize,
    /// When AUTOTUNE last reverted a step up, in ns on the op's sampler's clock (0: never; see
    /// [`Sampler::now`]): a new iterator of the op (the next epoch) waits out the cooldown
    /// instead of repeating the trial.
    reverted_up_ns: AtomicU64,
    /// When AUTOTUNE last reverted a step to inline, as `reverted_up_ns`.
    reverted_inline_ns: AtomicU64,
    /// What AUTOTUNE reads the op's periods with (`None`: a [`ProcSampler`]).
    sampler: Mutex<Option<Arc<dyn Sampler>>>,
    /// AUTOTUNE's steady periods since it last tried fewer workers (or, inline, one), counted
    /// across iterators: epochs shorter than the 30 periods between such trials still reach one.
    pub(crate) periods_since_down: AtomicU32,
    /// A step up an iterator left on trial when it ended, for the next iterator to judge.
    trial: Mutex<Option<Trial>>,
    notes: Mutex<Notes>,
    /// Whether the pipeline's consumer (a thread stokehold did not start) has taken this op's
    /// elements: the op the verdict reads the consumer's waiting from.
    feeds_consumer: AtomicBool,
}

impl OpStats {
    /// Counters for the op `name`.
    pub fn new(name: String) -> Self {
        OpStats {
            name,
            created: Instant::now(),
            elements: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            timed_busy_ns: AtomicU64::new(0),
            busy_cpu_ns: AtomicU64::new(0),
            queue_timed_busy_ns: AtomicU64::new(0),
            busy_queued_ns: AtomicU64::new(0),
            consumer_wait_ns: AtomicU64::new(0),
            input_wait_ns: AtomicU64::new(0),
            element_ns: Histogram::default(),
            wait_ns: Histogram::default(),
            fill_ppm: AtomicU64::new(0),
            capacity: AtomicUsize::new(0),
            threads: AtomicUsize::new(1),
            parallelism: AtomicUsize::new(0),
            tuned: AtomicUsize::new(0),
            reverted_up_ns: AtomicU64::new(0),
            reverted_inline_ns: AtomicU64::new(0),
            periods_since_down: AtomicU32::new(0),
            sampler: Mutex::new(None),
            trial: Mutex::new(None),
            notes: Mutex::new(Notes::default()),
            feeds_consumer: AtomicBool::new(false),
        }
    }

    /// One element of `bytes` handed downstream, with `buffered` elements left in the buffer.
    pub fn produced(&self, bytes: usize, buffered: usize) {
        self.produced_many(1, bytes, buffered);
    }

    /// `n` elements of `bytes` in all handed downstream at once, `buffered` being the sum over
    /// them of the elements left in the buffer after each.
    pub fn produced_many(&self, n: usize, bytes: usize, buffered: usize) {
        self.elements.fetch_add(n as u64, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        let cap = self.capacity.load(Ordering::Relaxed) as u64;
        if cap > 0 && buffered > 0 {
            self.fill_ppm
                .fetch_add(buffered as u64 * 1_000_000 / cap, Ordering::Relaxed);
        }
    }

    /// Worker time spent producing one element, on a thread of the stage that runs the op (see
    /// [`super::stage_threads`]).
    pub fn add_busy(&self, since: Instant) {
        let ns = self.add_busy_time(since);
        self.element_ns.record(ns);
    }

    /// Worker time spent producing a run of `n` elements, measured as wall time (`since`) and,
    /// when `at` is the thread's times at `since` ([`super::thread_times`]), as CPU time and
    /// time waiting for a core too.
    pub(crate) fn add_busy_run(&self, since: Instant, at: Option<super::ThreadTimes>, n: usize) {
        let wall = since.elapsed().as_nanos() as u64;
        self.busy_ns.fetch_add(wall, Ordering::Relaxed);
        self.element_ns.record_n(wall / n.max(1) as u64, n as u64);
        let Some((a, b)) = at.zip(super::thread_times()) else {
            return;
        };
        self.timed_busy_ns.fetch_add(wall, Ordering::Relaxed);
        self.busy_cpu_ns
            .fetch_add(b.cpu.saturating_sub(a.cpu), Ordering::Relaxed);
        if let (Some(qa), Some(qb)) = (a.queued, b.queued) {
            self.queue_timed_busy_ns.fetch_add(wall, Ordering::Relaxed);
            self.busy_queued_ns
                .fetch_add(qb.saturating_sub(qa), Ordering::Relaxed);
        }
    }

    /// The workers' timed busy time so far (see [`BusyTimes`]).
    pub(crate) fn busy_times(&self) -> BusyTimes {
        BusyTimes {
            wall: self.timed_busy_ns.load(Ordering::Relaxed),
            cpu: self.busy_cpu_ns.load(Ordering::Relaxed),
            queue_wall: self.queue_timed_busy_ns.load(Ordering::Relaxed),
            queued: self.busy_queued_ns.load(Ordering::Relaxed),
        }
    }

    /// One element's worker time, in a burst the caller timed element by element (busy time
    /// is added for the burst: [`OpStats::add_busy_time`]).
    #[inline]
    pub(crate) fn element_time(&self, ns: u64) {
        self.element_ns.record(ns);
    }

    /// Worker time spent on a burst of elements each recorded by [`OpStats::element_time`]
    /// (returned, in ns), on a thread of the stage that runs the op.
    pub(crate) fn add_busy_time(&self, since: Instant) -> u64 {
        let ns = since.elapsed().as_nanos() as u64;
        self.busy_ns.fetch_add(ns, Ordering::Relaxed);
        let n = super::stage_threads();
        if self.threads.load(Ordering::Relaxed) != n {
            self.threads.store(n, Ordering::Relaxed);
        }
        ns
    }

    /// Consumer time spent waiting for this op (one wait: one element).
    pub fn add_consumer_wait(&self, since: Instant) {
        let ns = since.elapsed().as_nanos() as u64;
        self.consumer_wait_ns.fetch_add(ns, Ordering::Relaxed);
        self.wait_ns.record(ns);
    }

    /// Worker time spent waiting for this op's input.
    pub fn add_input_wait(&self, since: Instant) {
        self.input_wait_ns
            .fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// The current parallelism and buffer capacity.
    pub fn set_shape(&self, parallelism: usize, capacity: usize) {
        self.parallelism.store(parallelism, Ordering::Relaxed);
        self.set_capacity(capacity);
    }

    /// The current buffer capacity (the most elements the op may hold).
    pub fn set_capacity(&self, capacity: usize) {
        if self.capacity.load(Ordering::Relaxed) != capacity {
            self.capacity.store(capacity, Ordering::Relaxed);
        }
    }

    /// Called by the op's consumer as it takes its first element (once an iterator: the row is
    /// shared with the threads that fill it): notes whether that consumer is the pipeline's (a
    /// thread stokehold did not start), the op outermost in the pipeline.
    #[inline]
    pub(crate) fn taken(&self) {
        if !self.feeds_consumer.load(Ordering::Relaxed) && !super::on_stage_thread() {
            self.feeds_consumer.store(true, Ordering::Relaxed);
        }
    }

    /// Sets the autotuner's explanation of a decision (a step tried, kept or reverted; where
    /// it started), shown now and kept in the trace.
    pub fn set_note(&self, note: String) {
        self.note_as(None, note);
    }

    /// Sets the autotuner's explanation of why it took no step; traced only when the entry
    /// before is not a status of the same `kind`, so that a note repeated every period (with
    /// its figures of that period) does not push the decisions out of the trace.
    pub(crate) fn set_status(&self, kind: &'static str, note: String) {
        self.note_as(Some(kind), note);
    }

    fn note_as(&self, kind: Option<&'static str>, note: String) {
        let at_s = self.created.elapsed().as_secs_f64();
        let mut n = self.notes();
        if kind.is_none() || n.status != kind {
            if n.trace.len() == TRACE_DECISIONS {
                n.trace.pop_front();
                n.dropped += 1;
            }
            n.trace.push_back(Decision {
                at_s,
                note: note.clone(),
            });
            n.status = kind;
        }
        n.now = note;
    }

    /// The note shown now.
    pub(crate) fn note(&self) -> String {
        self.notes().now.clone()
    }

    fn notes(&self) -> MutexGuard<'_, Notes> {
        self.notes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Elements produced so far.
    pub fn elements(&self) -> u64 {
        self.elements.load(Ordering::Relaxed)
    }

    /// The mean bytes and worker nanoseconds of the elements produced so far (by every
    /// iterator of the op), or `None` before the first: a new iterator's first estimates.
    pub(crate) fn means(&self) -> Option<(usize, u64)> {
        let n = self.elements();
        (n > 0).then(|| {
            let bytes = self.bytes.load(Ordering::Relaxed) / n;
            let ns = self.busy_ns.load(Ordering::Relaxed) / n;
            (bytes.max(1) as usize, ns)
        })
    }

    /// The parallelism AUTOTUNE settled on last, if it has.
    pub(crate) fn tuned(&self) -> Option<usize> {
        self.tuned.load(Ordering::Relaxed).checked_sub(1)
    }

    /// Records the parallelism AUTOTUNE settled on.
    pub(crate) fn set_tuned(&self, p: usize) {
        self.tuned.store(p + 1, Ordering::Relaxed);
    }

    /// Makes AUTOTUNE read this op's periods with `sampler` instead of a [`ProcSampler`]: a
    /// test describes the machine, so that what it checks of AUTOTUNE's decisions holds however
    /// busy the machine that runs it is. For the op's iterators started after it; install it
    /// before the first, as the cooldowns are kept on the sampler's clock.
    pub fn set_sampler(&self, sampler: Arc<dyn Sampler>) {
        *self.sampler.lock().unwrap_or_else(|e| e.into_inner()) = Some(sampler);
    }

    /// What AUTOTUNE reads this op's periods with (see [`OpStats::set_sampler`]).
    pub(crate) fn sampler(&self) -> Arc<dyn Sampler> {
        let installed = self.sampler.lock().unwrap_or_else(|e| e.into_inner());
        installed.clone().unwrap_or_else(|| Arc::new(ProcSampler))
    }

    /// Records that AUTOTUNE reverted a step up at `now` (on the op's sampler's clock, as every
    /// time below).
    pub(crate) fn mark_reverted_up(&self, now: Duration) {
        mark(&self.reverted_up_ns, now);
    }

    /// How long before `now` AUTOTUNE last reverted a step up (by any iterator of this op).
    pub(crate) fn since_reverted_up(&self, now: Duration) -> Option<Duration> {
        since(&self.reverted_up_ns, now)
    }

    /// Records that AUTOTUNE reverted a step to inline at `now`.
    pub(crate) fn mark_reverted_inline(&self, now: Duration) {
        mark(&self.reverted_inline_ns, now);
    }

    /// How long before `now` AUTOTUNE last reverted a step to inline (by any iterator of this
    /// op).
    pub(crate) fn since_reverted_inline(&self, now: Duration) -> Option<Duration> {
        since(&self.reverted_inline_ns, now)
    }

    /// Leaves an unjudged AUTOTUNE trial for the op's next iterator.
    pub(crate) fn put_trial(&self, trial: Trial) {
        *self.trial.lock().unwrap_or_else(|e| e.into_inner()) = Some(trial);
    }

    /// Takes the trial an earlier iterator left, if any.
    pub(crate) fn take_trial(&self) -> Option<Trial> {
        self.trial.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Consumer wait so far, in nanoseconds.
    pub fn consumer_wait_ns(&self) -> u64 {
        self.consumer_wait_ns.load(Ordering::Relaxed)
    }

    /// The op's own counters so far, as its threads recorded them: what its tuner hands its
    /// [`Sampler`] at the end of each period ([`Sampler::read`]).
    pub fn counters(&self) -> OpCounters {
        OpCounters {
            consumer_wait_ns: self.consumer_wait_ns(),
            workers: self.busy_times(),
        }
    }

    /// A snapshot.
    pub fn report(&self) -> OpReport {
        let secs = self.created.elapsed().as_secs_f64().max(1e-9);
        let n = self.elements.load(Ordering::Relaxed);
        let samples = n.max(1);
        let cap = self.capacity.load(Ordering::Relaxed);
        let p = self.parallelism.load(Ordering::Relaxed);
        let busy = self.busy_ns.load(Ordering::Relaxed) as f64 / 1e9;
        // An op with threads of its own is run by them; one without, by its stage's.
        let threads = match p {
            0 => self.threads.load(Ordering::Relaxed).max(1),
            p => p,
        };
        let notes = self.notes();
        OpReport {
            op: self.name.clone(),
            elements: n,
            elements_per_s: n as f64 / secs,
            bytes_per_s: self.bytes.load(Ordering::Relaxed) as f64 / secs,
            busy_s: busy,
            busy_per_thread: busy / (secs * threads as f64),
            consumer_wait_s: self.consumer_wait_ns.load(Ordering::Relaxed) as f64 / 1e9,
            input_wait_s: self.input_wait_ns.load(Ordering::Relaxed) as f64 / 1e9,
            element_time: self.element_ns.percentiles(0),
            consumer_wait: self
                .wait_ns
                .percentiles(n.saturating_sub(self.wait_ns.count())),
            queue_fill: self.fill_ppm.load(Ordering::Relaxed) as f64 / samples as f64 / 1e6,
            capacity: cap,
            parallelism: p,
            wall_s: secs,
            feeds_consumer: self.feeds_consumer.load(Ordering::Relaxed),
            autotune: notes.now.clone(),
            autotune_trace: notes.trace.iter().cloned().collect(),
            autotune_trace_dropped: notes.dropped,
        }
    }
}

/// A snapshot of one op's counters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OpReport {
    /// The op.
    pub op: String,
    /// Elements handed downstream.
    pub elements: u64,
    /// Elements per second since the op started.
    pub elements_per_s: f64,
    /// Bytes per second handed downstream.
    pub bytes_per_s: f64,
    /// Worker seconds spent producing elements.
    pub busy_s: f64,
    /// Busy fraction per worker thread (1.0: every thread busy all the time; inline, the
    /// consumer's share of time computing the op's elements; an op without threads of its own,
    /// per thread of the stage that builds its elements).
    pub busy_per_thread: f64,
    /// Seconds the consumer of this op waited for it.
    pub consumer_wait_s: f64,
    /// Seconds this op's workers waited for its input.
    pub input_wait_s: f64,
    /// Worker time per element: its quantiles (a batch's row: per batch).
    pub element_time: Percentiles,
    /// The consumer's wait per element taken (0 for each it did not wait for): its quantiles.
    pub consumer_wait: Percentiles,
    /// Mean buffer fill as a fraction of the capacity at each element (a parallel stage's
    /// capacity: the claimed-but-not-taken elements it may hold, widened by its runs).
    pub queue_fill: f64,
    /// Buffer capacity (elements; a parallel stage's: the claimed-but-not-taken elements it may
    /// hold, widened by its runs).
    pub capacity: usize,
    /// Worker threads now (0: none, inline: the consumer computes the elements).
    pub parallelism: usize,
    /// Seconds since the op started.
    pub wall_s: f64,
    /// Whether the pipeline's consumer takes this op's elements (the outermost stage; the
    /// verdict's); false for a stage that feeds another, and for a batch's row.
    pub feeds_consumer: bool,
    /// What AUTOTUNE chose and why (empty for fixed settings).
    pub autotune: String,
    /// How AUTOTUNE got there: its decisions in order, the latest [`TRACE_DECISIONS`].
    pub autotune_trace: Vec<Decision>,
    /// Older decisions dropped from the trace.
    pub autotune_trace_dropped: u64,
}

/// Stats of a whole pipeline.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StatsReport {
    /// One row per parallel op, outermost last.
    pub ops: Vec<OpReport>,
    /// Memory budget in bytes.
    pub memory_budget: usize,
    /// Bytes held by buffers now.
    pub memory_used: usize,
    /// Most bytes held at once.
    pub memory_peak: usize,
    /// Cores the autotuner may use.
    pub cores: usize,
    /// What the training loop saw: its time in `next()` and between calls (`None` before its
    /// second call, or when no iterator of the pipeline's recorded them).
    pub steps: Option<StepReport>,
    /// What limits throughput, and what to change.
    pub verdict: String,
    /// The stage the verdict names as the bottleneck (`None`: the consumer, or no stage).
    pub bottleneck: Option<String>,
}

impl StatsReport {
    /// Builds the report and its verdict from op snapshots (in creation order: inner ops first).
    pub fn new(ops: Vec<OpReport>, budget: &super::Budget, cores: usize) -> Self {
        let (verdict, bottleneck) = verdict(&ops, None, cores);
        StatsReport {
            ops,
            memory_budget: budget.limit(),
            memory_used: budget.used(),
            memory_peak: budget.peak(),
            cores,
            steps: None,
            verdict,
            bottleneck,
        }
    }

    /// The report with the training loop's steps, its verdict read with them.
    pub fn with_steps(mut self, steps: Option<StepReport>) -> Self {
        self.steps = steps;
        (self.verdict, self.bottleneck) = verdict(&self.ops, steps.as_ref(), self.cores);
        self
    }

    /// A fixed-width table for terminals.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<44} {:>9} {:>10} {:>9} {:>6} {:>8} {:>8} {:>5} {:>4} {:>9} {:>9}\n",
            "op",
            "elems",
            "elem/s",
            "MB/s",
            "busy",
            "c.wait",
            "in.wait",
            "fill",
            "par",
            "el.p50",
            "el.p99"
        );
        for o in &self.ops {
            let name: String = o.op.chars().take(44).collect();
            s += &format!(
                "{:<44} {:>9} {:>10.1} {:>9.1} {:>5.0}% {:>7.2}s {:>7.2}s {:>4.0}% {:>4} {:>9} {:>9}\n",
                name,
                o.elements,
                o.elements_per_s,
                o.bytes_per_s / 1e6,
                o.busy_per_thread * 100.0,
                o.consumer_wait_s,
                o.input_wait_s,
                o.queue_fill * 100.0,
                o.parallelism,
                human_secs(o.element_time.p50_s),
                human_secs(o.element_time.p99_s),
            );
            if !o.autotune.is_empty() {
                s += &format!("    autotune: {}\n", o.autotune);
            }
        }
        if let Some(st) = &self.steps {
            s += &format!(
                "steps: {}; next() p50 {}, p90 {}, p99 {}; between calls p50 {}; waiting in \
                 next() {:.0}% of the loop's time\n",
                st.steps,
                human_secs(st.next.p50_s),
                human_secs(st.next.p90_s),
                human_secs(st.next.p99_s),
                human_secs(st.between.p50_s),
                100.0 * st.input_share
            );
        }
        s += &format!(
            "memory: {:.1} MiB used, {:.1} MiB peak, budget {:.1} MiB; cores {}\nverdict: {}\n",
            self.memory_used as f64 / 1048576.0,
            self.memory_peak as f64 / 1048576.0,
            self.memory_budget as f64 / 1048576.0,
            self.cores,
            self.verdict
        );
        s
    }
}

/// A duration for people: `12 us`, `3.1 ms`, `1.25 s`.
pub fn human_secs(s: f64) -> String {
    match s {
        s if s < 1e-3 => format!("{:.0} us", s * 1e6),
        s if s < 1.0 => format!("{:.1} ms", s * 1e3),
        s => format!("{s:.2} s"),
    }
}

/// The verdict: the training loop's view first (tf.data's rule), then the stage that limits the
/// pipeline and what to change about it; and that stage.
fn verdict(ops: &[OpReport], steps: Option<&StepReport>, cores: usize) -> (String, Option<String>) {
    let (stage, bottleneck) = stage_verdict(ops, cores);
    let Some(st) = steps else {
        return (stage, bottleneck);
    };
    let seen = format!(
        "the training loop waits in next() {:.0}% of its time (median next() {})",
        100.0 * st.input_share,
        human_secs(st.next.p50_s)
    );
    if !st.input_bound {
        let v = format!(
            "not input-bound: {seen}, within tf.data's rule of 50 us; to go faster, speed up \
             the training step"
        );
        return (v, None);
    }
    if bottleneck.is_none() {
        // The stages keep up, yet next() is slow: the time is in handing elements over.
        let v = format!(
            "input-bound: {seen}, over tf.data's rule of 50 us, but the stages keep up ({stage}): \
             the time goes to handing elements over; take fewer, larger elements (batch \
             earlier) or several at once (next_many)"
        );
        return (v, None);
    }
    let v = format!("input-bound: {seen}, over tf.data's rule of 50 us; {stage}");
    (v, bottleneck)
}

/// What limits the pipeline's stages, and what to change.
fn stage_verdict(ops: &[OpReport], cores: usize) -> (String, Option<String>) {
    // The stage the consumer takes from; by creation order when none has handed it an element
    // yet. A batch built inside a stage registers its row when it first builds one, after the
    // stages around it: read as the outermost, it said "consumer-bound" whatever the consumer
    // waited, since a batch row has no consumer of its own.
    let Some(last) = ops.iter().rev().find(|o| o.feeds_consumer).or(ops.last()) else {
        return ("no parallel stage ran (sequential pipeline)".into(), None);
    };
    if last.elements == 0 {
        return ("no elements yet".into(), None);
    }
    if last.consumer_wait_s < 0.1 * last.wall_s {
        let v = format!(
            "consumer-bound: the consumer waited {:.0}% of the time for {}: input is not the \
             bottleneck",
            100.0 * last.consumer_wait_s / last.wall_s,
            last.op
        );
        return (v, None);
    }
    // The busiest stage (a row with a buffer: parallel, prefetch, interleave). A batch built
    // inside a stage's workers has a row of its own, as busy as they are: named "bound", it
    // hid the stage whose threads could be added.
    let by_busy = |a: &&OpReport, b: &&OpReport| a.busy_per_thread.total_cmp(&b.busy_per_thread);
    let worst = ops
        .iter()
        .filter(|o| o.capacity > 0)
        .max_by(by_busy)
        .or_else(|| ops.iter().max_by(by_busy))
        .expect("non-empty");
    if worst.input_wait_s > worst.busy_s {
        let v = format!(
            "input-bound: {} waits for its input more than it works: speed up what feeds it \
             (read files in parallel: interleave(num_parallel_calls=...); a slow source or \
             generator: more of them, or prefetch() under it)",
            worst.op
        );
        return (v, Some(worst.op.clone()));
    }
    let change = if worst.parallelism < cores {
        "give it more threads: num_parallel_calls=AUTOTUNE (or a larger number)"
    } else {
        "it has a thread for every core it may use: raise with_options(cores=...) if the \
         machine has more, or make each element cheaper (cache() what repeats, decode less)"
    };
    let v = format!(
        "bound in op {}: its threads are busy {:.0}% of the time (parallelism {}); {change}",
        worst.op,
        worst.busy_per_thread * 100.0,
        worst.parallelism
    );
    (v, Some(worst.op.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_keeps_every_decision_and_one_status_of_a_kind_in_a_row() {
        let s = OpStats::new("op".into());
        let notes = |s: &OpStats| -> Vec<String> {
            s.report()
                .autotune_trace
                .into_iter()
                .map(|d| d.note)
                .collect()
        };
        s.set_note("start at 2".into());
        for wait in [40, 38, 41] {
            s.set_status("core limit", format!("at the core limit, waits {wait}%"));
        }
        // Shown: the latest; traced: the first of the run.
        assert_eq!(s.report().autotune, "at the core limit, waits 41%");
        s.set_status("slots held", "slots held".into());
        s.set_status("core limit", "at the core limit, waits 12%".into());
        s.set_note("tried 2 -> 1, kept".into());
        s.set_note("tried 2 -> 1, kept".into()); // a decision is traced each time
        assert_eq!(
            notes(&s),
            [
                "start at 2",
                "at the core limit, waits 40%",
                "slots held",
                "at the core limit, waits 12%",
                "tried 2 -> 1, kept",
                "tried 2 -> 1, kept",
            ]
        );
        let r = s.report();
        assert!(r.autotune_trace.windows(2).all(|w| w[0].at_s <= w[1].at_s));
        assert_eq!(r.autotune_trace_dropped, 0);
        // Bounded: the latest TRACE_DECISIONS, the older ones counted.
        for k in 0..TRACE_DECISIONS {
            s.set_note(format!("step {k}"));
        }
        let r = s.report();
        assert_eq!(r.autotune_trace.len(), TRACE_DECISIONS);
        assert_eq!(r.autotune_trace_dropped, 6);
        assert_eq!(r.autotune_trace[0].note, "step 0");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["autotune_trace"][1]["note"], "step 1");
        assert!(json["autotune_trace"][1]["at_s"].as_f64().unwrap() >= 0.0);
    }
}

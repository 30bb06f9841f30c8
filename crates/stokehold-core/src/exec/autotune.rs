//! AUTOTUNE for one parallel op: online hill climbing on measured throughput.
//!
//! A new op starts with a worker per free core, as tf.data starts an autotuned op at its thread
//! pool's size; an op whose functions share a lock (a Python map) starts inline (see below).
//! Started at one worker, the lazy file map of `bench/parallel` (runs of four short epochs in a
//! fresh process) ran at 52 % of two workers on an idle machine, 55k against 106k files/s: the
//! climb took two periods a step, most of such a run. Too many workers are shed by the periodic
//! trial of one fewer.
//!
//! Every period (at least 100 ms and 8 elements, or 300 ms and 2 elements for slow elements) the
//! tuner looks at the consumer's waiting time. If the consumer waited more than 5% of the period,
//! this op is on the critical path: the tuner asks the executor for one more CPU slot and tries one
//! more worker. After a period to settle, it measures one full period: the step stays if
//! throughput rose by at least 10%, or if the consumer's waiting fell by a third without a loss
//! of throughput (the signal that survives a machine shared with other work, see `keeps`);
//! otherwise it is reverted (slot returned) and no iterator of the op tries a step up again for 20
//! periods' time (2 s; the op's stats remember it, so the next epoch's iterator does not repeat
//! a losing trial). A step up still on trial when its iterator ends (an epoch shorter than the
//! two periods a trial takes) is judged on its last period if that is long enough, else handed
//! to the op's next iterator, which starts at the trial's parallelism, settles and judges it:
//! otherwise every short epoch started over at the old setting and spent itself on a trial it
//! never finished.
//! Every 30 periods at more than one worker, while the consumer is not waiting, it also tries one
//! worker fewer and keeps that if throughput stays within 5% and the consumer still does not wait
//! (on a busy machine more threads can be slower).
//! **Inline** (parallelism 0, `INLINE`): no worker; the consumer computes the elements (a run
//! of them) when it asks. It is tried when the consumer waits and no further worker can be
//! tried (at once from one worker whose step up was just reverted; every 30 periods at the core
//! limit), and kept when the process spends a fifth less CPU time per element at the same pace:
//! what a Python function holding the GIL gains, where a worker only adds GIL hand-offs between
//! itself and the consumer (`bench/pymap`). CPU time, not throughput, because on a loaded
//! machine throughput swings more than any gain between two periods. Inline, the consumer's
//! waiting is all of the op's time and says nothing, so one worker is tried again every 30
//! periods and kept if it holds the pace without a quarter more CPU per element; a reverted
//! inline trial is not repeated for 10 s. A stage whose functions share a scope (Python's GIL)
//! starts inline and tries one worker after its first period (`Tuner::scoped`). The first
//! period of an op's first iterator only warms up (it holds the start, and a step measured
//! against it read as a gain whatever it did).
//! Workers stay within the executor's cores, summed over every autotuned op of the pipeline,
//! so AUTOTUNE does not oversubscribe, with two exceptions at the core limit while the consumer
//! waits, each up to `OVER_CORES` (4) times the cores, holding no core slot and judged as any
//! other step:
//! - workers blocked for more than `BLOCKED` (25 %) of their busy time (wall time less their
//!   thread CPU time and their wait for a core, the kernel's schedstat run delay) were waiting
//!   for reads or page faults: AUTOTUNE tries as many more as fill the cores at the fraction
//!   they ran (`past_the_cores`);
//! - workers that waited for a core for more than `QUEUED` (15 %) of it while other processes
//!   kept `OTHERS` (half a core) busy (`/proc/stat` less the process's own CPU time) shared the
//!   cores with those processes' threads. The kernel shares the cores per runnable thread, so
//!   more workers win a larger share for the op the consumer waits on: AUTOTUNE tries as many
//!   more as fill the cores at the fraction they ran, as for blocked workers. The other
//!   processes get less; a fixed parallelism leaves them theirs.
//!
//! The buffer depth follows the parallelism (2p + 2:
//! room for each worker to finish one element while the consumer takes another) and is capped by
//! the memory budget. What it chose and why is the op's `autotune` note in the stats, and how it
//! got there its `autotune_trace`: every step and start (`set_note`), and each reason for no
//! step once per run of periods that gave it (`set_status`).
//!
//! What the tuner knows of the world it reads through a [`Sampler`]: a clock (when a period
//! ends, the cooldowns) and, at the end of each period, the counters its figures are the
//! differences of ([`Reading`]). [`ProcSampler`], every op's unless [`OpStats::set_sampler`]
//! installs another, reads this process's and the machine's clocks and passes on the times the
//! op's workers and consumer recorded, which the tuner reads from the op's [`OpStats`] and hands
//! it ([`OpCounters`]). A test installs one that describes a machine as busy as it likes: the
//! decisions then do not depend on how busy the machine that runs the test is. The sampler
//! (`sampler.rs`) and a period's figures and a step on trial (`period.rs`, which the op's stats
//! keep between iterators) sit below both this file and `stats.rs`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::executor::Executor;
use super::parallelism::INLINE;
use super::period::{Sample, Trial};
pub use super::sampler::{BusyTimes, OpCounters, ProcSampler, Reading, Sampler};
use super::stats::OpStats;

const MIN_PERIOD: Duration = Duration::from_millis(100);
const MIN_ELEMENTS: u64 = 8;
/// Slow elements (a whole batch of files each): a period may also end after this long and 2
/// elements, so the tuner reacts within a second or so.
const LONG_PERIOD: Duration = Duration::from_millis(300);
const WAIT_TRIGGER: f64 = 0.05;
const GAIN_UP: f64 = 1.10;
/// Inline stays when the process's CPU time per element falls to this fraction (see `keeps`).
const INLINE_CPU: f64 = 0.8;
const KEEP_DOWN: f64 = 0.95;
const COOLDOWN: u32 = 20;
/// Workers blocked (neither running nor waiting for a core) for more than this fraction of their
/// busy time wait for reads or page faults, and more of them than cores can add throughput: see
/// [`Tuner::steady`]. CPU-bound workers on an idle machine ran 91-99 % of their busy time
/// (`bench/parallel/runner cpu`, about 60 periods); the lazy file map's two workers were blocked
/// 52 % on an idle machine, and 0-3 % beside two spinning processes (0.17 in one first period,
/// which holds the start).
const BLOCKED: f64 = 0.25;
/// Workers that waited, runnable, for a core for more than this fraction of their busy time
/// while other processes kept at least [`OTHERS`] cores busy are tried past the cores too: see
/// [`Tuner::steady`].
const QUEUED: f64 = 0.15;
/// Cores' worth of CPU time other processes took in a period for the workers' wait for a core to
/// count as theirs. Waits for a core that the pipeline's own threads hold (another stage, more
/// threads than cores set by hand) are no reason for more workers: each would take from the
/// pipeline itself. Other processes on an idle machine took 0.01-0.03 cores here; two spinning
/// processes took 0.9-1.2 of the two cores beside the lazy file map.
const OTHERS: f64 = 0.5;
/// How far past the cores AUTOTUNE may go for workers that wait, as a multiple of the cores.
const OVER_CORES: usize = 4;
const DOWN_EVERY: u32 = 30;
/// How long after a reverted step up no iterator of the op tries one again (the cooldown in
/// periods, as time, so that it outlives the iterator that reverted).
const UP_COOLDOWN: Duration =
    Duration::from_millis(MIN_PERIOD.as_millis() as u64 * COOLDOWN as u64);
/// How long after a reverted step to inline no iterator of the op tries inline again.
const INLINE_COOLDOWN: Duration = Duration::from_secs(10);

/// The step past the cores from `p` workers that ran on a core for the fraction `active` of
/// their busy time (blocked or waiting for a core the rest): as many as it takes for that time
/// to fill `p` cores again (`p / active`), at least one more and at most `most`. One worker a
/// step took two periods each (settle, probe): a run of half a second beside two spinning
/// processes ended before it could try four (`bench/parallel`'s contended rows).
fn past_the_cores(p: usize, active: f64, most: usize) -> usize {
    let want = if active > 0.0 {
        (p as f64 / active).ceil() as usize
    } else {
        most
    };
    want.clamp(p + 1, most.max(p + 1))
}

/// How the workers spent their busy time in `s`, as the notes show it.
fn workers_time(s: Sample) -> String {
    let mut out = format!("the workers ran {:.0}% of their busy time", s.ran * 100.0);
    if !s.queued.is_nan() {
        out += &format!(
            ", waited {:.0}% for a core and were blocked {:.0}%",
            s.queued * 100.0,
            s.blocked() * 100.0
        );
    }
    if !s.others.is_nan() {
        out += &format!("; other processes kept {:.1} cores busy", s.others);
    }
    out
}

/// The note of an op that has taken no step yet (replaced by the first thing the tuner sees).
const START_NOTE: &str = "where a new op starts";

/// CPU slots a parallelism holds: every worker beyond the first (inline holds none).
fn slots(p: usize) -> usize {
    p.saturating_sub(1)
}

/// A parallelism as the notes show it.
fn shown(p: usize) -> String {
    if p == INLINE {
        "inline".into()
    } else {
        p.to_string()
    }
}

enum Phase {
    Steady,
    /// Just changed parallelism `from -> to`: the next period only lets the pipeline settle.
    Settling {
        from: usize,
        to: usize,
        base: Sample,
    },
    Probing {
        from: usize,
        to: usize,
        base: Sample,
    },
}

/// Whether a trial step from `from` to `to` workers stays, given the period before the step
/// (`base`) and the trial period (`now`).
///
/// Up: throughput rose by [`GAIN_UP`]; or the consumer's waiting fell by at least a third while
/// throughput did not fall. On a machine shared with other work, throughput swings with the other
/// load from one period to the next and a real gain can read as noise, while the consumer's
/// waiting is this pipeline's own signal.
/// Down: throughput held within [`KEEP_DOWN`] and the consumer still waits less than
/// [`WAIT_TRIGGER`]. Fewer threads that make the consumer wait are not keeping pace, however the
/// noisy throughput compares; without that check a busy machine walked AUTOTUNE down to one
/// worker, one accepted trial at a time.
fn keeps(from: usize, to: usize, base: Sample, now: Sample) -> bool {
    // Inline computes on the consumer, so its waiting is all of the op's time and says nothing.
    // What inline saves is CPU: the hand-offs between workers and consumer (for a Python
    // function, GIL hand-offs). So it stays only if the process spends a fifth less CPU per
    // element and throughput holds; a worker replaces it if throughput holds without a quarter
    // more CPU per element. CPU time is the process's own, so another load on the machine (which
    // swung throughput by 1.8x between periods and kept inline for a native map) does not
    // move it.
    if to == INLINE {
        return now.cpu <= base.cpu * INLINE_CPU && now.rate >= base.rate * KEEP_DOWN;
    }
    if from == INLINE {
        let unknown = now.cpu.is_nan() || base.cpu.is_nan();
        return now.rate >= base.rate * KEEP_DOWN && (unknown || now.cpu * INLINE_CPU <= base.cpu);
    }
    if to > from {
        now.rate >= base.rate * GAIN_UP
            || (base.wait >= WAIT_TRIGGER
                && now.wait <= base.wait * 2.0 / 3.0
                && now.rate >= base.rate)
    } else {
        now.rate >= base.rate * KEEP_DOWN && now.wait < WAIT_TRIGGER
    }
}

/// The tuner of one op.
pub(crate) struct Tuner {
    max: usize,
    /// CPU slots taken from the executor (parallelism - 1).
    held: usize,
    /// What it reads the world with (the op's, [`OpStats::sampler`]).
    sampler: Arc<dyn Sampler>,
    /// When the period began, on the sampler's clock.
    last: Duration,
    last_elems: u64,
    /// The counters when the period began.
    last_reading: Reading,
    /// Elements of the period when [`Tuner::tick`] last read the clock.
    checked: u64,
    phase: Phase,
    cooldown: u32,
    /// False for the first iterator of an op until its first period has passed: that period
    /// holds the start (threads, caches, page faults), and a step measured against it looked
    /// like a gain whatever it did.
    warmed: bool,
    /// The stage's functions run in a scope their calls share (Python's GIL): a new op starts
    /// inline and tries one worker after its first period (see [`Tuner::scoped`]).
    scoped: bool,
    /// Where a new op starts (see [`Tuner::new`]).
    first: usize,
}

impl Tuner {
    /// A tuner for the op whose counters are `stats`. They are the op's own, kept across its
    /// iterators (epochs), so the first period is measured from their values now: counted from
    /// zero, a new epoch's first sample held every earlier epoch's elements and waiting (a
    /// consumer "waiting 792%" of the period, a rate of thousands of batches a second), and the
    /// trial it started could only be reverted.
    pub(crate) fn new(exec: &Executor, stats: &OpStats) -> Self {
        let sampler = stats.sampler();
        Tuner {
            max: exec.options().cores.max(1),
            held: 0,
            last: sampler.now(),
            last_elems: stats.elements(),
            last_reading: sampler.read(stats.counters()),
            sampler,
            checked: 0,
            phase: Phase::Steady,
            cooldown: 0,
            warmed: stats.elements() > 0,
            scoped: false,
            first: exec.options().cores.max(1),
        }
    }

    /// The tuner of [`Tuner::new`] starting a new op at `p` (a test of the steps from there).
    #[cfg(test)]
    fn starting_at(mut self, p: usize) -> Self {
        self.first = p;
        self
    }

    /// The tuner of a stage whose functions run in a scope their calls share (Python's GIL,
    /// [`crate::ops::map::ScopeFn`]). Such a function runs no faster on workers than inline
    /// unless it releases the lock, and on one or two workers it pays a hand-off of the lock
    /// for every run between each worker and the consumer (a Python map of a constant: about
    /// 3 us an element on one worker or two, 0.9 inline, `bench/pymap`). So a new op starts
    /// inline and tries one worker after its first period, kept if it holds the pace without a
    /// quarter more CPU per element (a function that releases the lock, or a consumer with work
    /// of its own to overlap); from one worker the usual steps up follow. Started at one worker
    /// instead, finding inline took a reverted step to two first: six periods, which a short
    /// pipeline spent entirely on trials.
    pub(crate) fn scoped(mut self, scoped: bool) -> Self {
        self.scoped = scoped;
        if scoped {
            self.first = INLINE;
        }
        self
    }

    /// The parallelism a new iterator starts with: the step up an earlier iterator of the op left
    /// on trial (judged in this iterator's first period), else where the last one settled, as
    /// far as free core slots allow.
    pub(crate) fn start(&mut self, exec: &Executor, stats: &OpStats) -> usize {
        let trial = stats.take_trial();
        self.warmed |= trial.is_some() || stats.tuned().is_some();
        let want = trial.map_or(stats.tuned().unwrap_or(self.first), |t| t.to);
        let p = if want == INLINE {
            INLINE
        } else {
            let extra = exec.take_slots(slots(want).min(self.max - 1));
            self.held += extra;
            if want > self.max && extra == self.max - 1 {
                // Settled past the cores (workers that wait, see `steady`): every core slot is
                // ours again, so the workers past them are too.
                want.min(self.max * OVER_CORES)
            } else {
                1 + extra
            }
        };
        if let Some(Trial {
            from,
            to,
            base,
            settled,
        }) = trial.filter(|t| t.to == p)
        {
            stats.set_note(format!(
                "parallelism {}: on trial from {} (carried over from the last iterator)",
                shown(to),
                shown(from)
            ));
            self.phase = if settled {
                Phase::Probing { from, to, base }
            } else {
                Phase::Settling { from, to, base }
            };
        } else if trial.is_none() && stats.tuned().is_none() {
            // Once per op, not per iterator: over epochs shorter than a period every epoch's
            // start replaced what the one before saw (the lazy file map beside two spinning
            // processes showed "where a new op starts" for good, not "at the core limit").
            let note = format!(
                "parallelism {}: {START_NOTE} ({})",
                shown(p),
                if self.scoped {
                    "inline: its function holds a lock the workers share"
                } else {
                    "a worker per free core"
                }
            );
            let now = stats.note();
            if now.is_empty() || (now.contains(START_NOTE) && now != note) {
                stats.set_note(note);
            }
        }
        p
    }

    /// Called when the iterator is dropped. A period cut short by the end still counts when it
    /// is long enough (half a period, [`MIN_ELEMENTS`] elements): a probing step up is judged on
    /// it, a settling one is handed on as settled. Otherwise the trial is handed on as it
    /// stands: the op's next iterator ([`Tuner::start`]) starts at its parallelism and goes on
    /// with it, so epochs shorter than a period still finish a trial within two. Then the
    /// core slots go back.
    pub(crate) fn finish(&mut self, exec: &Executor, stats: &OpStats) {
        let (n, dt) = self.period(stats);
        let counts = n >= MIN_ELEMENTS && dt >= MIN_PERIOD / 2;
        match std::mem::replace(&mut self.phase, Phase::Steady) {
            Phase::Probing { from, to, base } if counts => {
                let now = self.sample(stats, n, dt);
                self.judge(exec, stats, from, to, base, now);
            }
            Phase::Probing { from, to, base } if to > from || to == INLINE => {
                stats.put_trial(Trial {
                    from,
                    to,
                    base,
                    settled: true,
                });
            }
            Phase::Settling { from, to, base } if to > from || to == INLINE => {
                stats.put_trial(Trial {
                    from,
                    to,
                    base,
                    settled: counts,
                });
            }
            _ => {}
        }
        self.release(exec);
    }

    /// Returns slots on drop of the op.
    pub(crate) fn release(&mut self, exec: &Executor) {
        exec.give_slots(self.held);
        self.held = 0;
    }

    /// Gives back the slots a step down from `from` to `to` workers frees (workers past the
    /// cores hold none).
    fn set(&mut self, exec: &Executor, from: usize, to: usize) {
        if to < from {
            let keep = slots(to).min(self.held);
            exec.give_slots(self.held - keep);
            self.held = keep;
        }
    }

    /// Called by the consumer after each element; returns a new parallelism when it changes.
    pub(crate) fn tick(&mut self, exec: &Executor, stats: &OpStats, p: usize) -> Option<usize> {
        // Once a period has its elements, the clock is read again only after MIN_ELEMENTS more:
        // a read per element was 1 % of an inline Python map's samples, and the period ends at
        // most that many elements late.
        let n = stats.elements() - self.last_elems;
        if n >= MIN_ELEMENTS && n < self.checked + MIN_ELEMENTS {
            return None;
        }
        self.checked = n;
        let (n, dt) = self.period(stats);
        let due = (dt >= MIN_PERIOD && n >= MIN_ELEMENTS) || (dt >= LONG_PERIOD && n >= 2);
        if !due {
            return None;
        }
        let now = self.sample(stats, n, dt);
        if !std::mem::replace(&mut self.warmed, true) {
            return None;
        }
        match std::mem::replace(&mut self.phase, Phase::Steady) {
            Phase::Settling { from, to, base } => {
                self.phase = Phase::Probing { from, to, base };
                None
            }
            Phase::Probing { from, to, base } => self.judge(exec, stats, from, to, base, now),
            Phase::Steady => self.steady(exec, stats, p, now),
        }
    }

    /// Elements and time since the period began.
    fn period(&self, stats: &OpStats) -> (u64, Duration) {
        let dt = self.sampler.now().saturating_sub(self.last);
        (stats.elements() - self.last_elems, dt)
    }

    /// Ends the period of `n` elements over `dt`: its sample; the next period starts now.
    fn sample(&mut self, stats: &OpStats, n: u64, dt: Duration) -> Sample {
        let reading = self.sampler.read(stats.counters());
        let now = Sample::between(n, dt, &self.last_reading, &reading);
        self.last_reading = reading;
        self.checked = 0;
        self.last = self.sampler.now();
        self.last_elems += n;
        now
    }

    fn judge(
        &mut self,
        exec: &Executor,
        stats: &OpStats,
        from: usize,
        to: usize,
        base: Sample,
        now: Sample,
    ) -> Option<usize> {
        let keep = keeps(from, to, base, now);
        let (p_now, verb) = if keep {
            (to, "kept")
        } else {
            (from, "reverted")
        };
        stats.set_tuned(p_now);
        stats.set_note(format!(
            "parallelism {} (max {}): tried {} -> {}: throughput {:.2}x ({:.1} -> \
             {:.1} elem/s), consumer waiting {:.0}% -> {:.0}%, process CPU per element {:.1} -> \
             {:.1} us, {verb}",
            shown(p_now),
            self.max,
            shown(from),
            shown(to),
            now.rate / base.rate,
            base.rate,
            now.rate,
            base.wait * 100.0,
            now.wait * 100.0,
            base.cpu / 1e3,
            now.cpu / 1e3
        ));
        if keep {
            return None;
        }
        self.cooldown = COOLDOWN;
        if to == INLINE {
            stats.mark_reverted_inline(self.sampler.now());
        } else if to > from {
            stats.mark_reverted_up(self.sampler.now());
        }
        if from > to {
            // Going back up: take the slots again (they may have been taken meanwhile; workers
            // past the cores need none).
            let need = slots(from.min(self.max)) - slots(to.min(self.max));
            let got = exec.take_slots(need);
            self.held += got;
            return Some(from - (need - got));
        }
        self.set(exec, to, from);
        if from == 1 && to > from && self.may_go_inline(stats) {
            // A second worker did not help: the op may be one a worker cannot run in parallel
            // with its consumer (a Python function holding the GIL); try none.
            self.cooldown = 0;
            return Some(self.go_inline(exec, stats, 1, base));
        }
        Some(from)
    }

    /// Whether a step to inline may be tried: not within [`INLINE_COOLDOWN`] of one reverted.
    fn may_go_inline(&self, stats: &OpStats) -> bool {
        stats
            .since_reverted_inline(self.sampler.now())
            .is_none_or(|d| d >= INLINE_COOLDOWN)
    }

    /// Starts a trial of inline from `p` workers, measured against `base` (a period at `p`).
    fn go_inline(&mut self, exec: &Executor, stats: &OpStats, p: usize, base: Sample) -> usize {
        self.set(exec, p, INLINE);
        stats.set_note(format!(
            "parallelism {p}: on trial inline (the consumer computing each element itself)"
        ));
        self.phase = Phase::Settling {
            from: p,
            to: INLINE,
            base,
        };
        INLINE
    }

    fn steady(&mut self, exec: &Executor, stats: &OpStats, p: usize, now: Sample) -> Option<usize> {
        let wait_frac = now.wait;
        let since_down = stats.periods_since_down.fetch_add(1, Ordering::Relaxed) + 1;
        let reset_down = || stats.periods_since_down.store(0, Ordering::Relaxed);
        if self.cooldown > 0 {
            self.cooldown -= 1;
            return None;
        }
        // Inline, the consumer computes every element, so its waiting says nothing: one worker is
        // tried again every DOWN_EVERY periods (the load may have changed), and at once by a
        // scoped op that started inline and has judged no step yet.
        if p == INLINE {
            let first_try = self.scoped && stats.tuned().is_none();
            if since_down < DOWN_EVERY && !first_try {
                return None;
            }
            reset_down();
            stats.set_note("parallelism inline: on trial at 1 (does a worker help now?)".into());
            self.phase = Phase::Settling {
                from: INLINE,
                to: 1,
                base: now,
            };
            return Some(1);
        }
        // Fewer threads are tried only while the consumer is not waiting: when it waits, this op
        // is short of threads already.
        if p > 1 && since_down >= DOWN_EVERY && wait_frac < WAIT_TRIGGER {
            reset_down();
            self.set(exec, p, p - 1);
            stats.set_note(format!(
                "parallelism {p}: on trial at {} (do fewer threads keep the pace?)",
                p - 1
            ));
            self.phase = Phase::Settling {
                from: p,
                to: p - 1,
                base: now,
            };
            return Some(p - 1);
        }
        if wait_frac < WAIT_TRIGGER {
            let note = stats.note();
            if note.is_empty() || note.contains(START_NOTE) {
                let why = format!(
                    "parallelism {p} (max {}): the consumer waits {:.0}% of the time, no need \
                     for more",
                    self.max,
                    wait_frac * 100.0
                );
                stats.set_status("no need", why);
            }
            return None;
        }
        let reverted_up_lately = stats
            .since_reverted_up(self.sampler.now())
            .is_some_and(|d| d < UP_COOLDOWN);
        // At the core limit, workers that spent part of their busy time off a core leave room
        // for more of them: blocked for more than BLOCKED of it (a read, a page fault), their
        // cores idle meanwhile; or waiting for more than QUEUED of it for a core while other
        // processes kept OTHERS cores busy: the kernel shares the cores among runnable threads,
        // so more workers get a larger share while this op is what the consumer waits for.
        // Beside two spinning processes the lazy file map's two workers waited for a core 20-30 %
        // of their busy time, and four workers made 0.90-1.35x the files of two in the last four
        // full `make bench` runs. Twice as many workers a step, instead of as many as fill the
        // cores, did worse there (AUTOTUNE at 0.80-1.03x of the best fixed setting in four
        // runs, against 0.89-1.02x). Such a step takes no core slot and is judged as any other,
        // so a share that buys nothing goes back. Not for a scoped op, whose workers block on
        // the lock their calls share, which more workers only contend.
        let blocked = now.blocked();
        let shared = now.queued > QUEUED && now.others >= OTHERS;
        if p >= self.max
            && p < self.max * OVER_CORES
            && !self.scoped
            && !reverted_up_lately
            && (blocked > BLOCKED || shared)
        {
            let to = past_the_cores(p, now.ran, self.max * OVER_CORES);
            stats.set_note(format!(
                "parallelism {p}: on trial at {to} past the {} cores (the consumer waited {:.0}%, \
                 {})",
                self.max,
                wait_frac * 100.0,
                workers_time(now)
            ));
            self.phase = Phase::Settling {
                from: p,
                to,
                base: now,
            };
            return Some(to);
        }
        // No further worker to try (one reverted lately, or no core for it) and the consumer
        // still waits: the hand-off itself may cost more than the workers gain (a Python
        // function holding the GIL runs no faster on two workers than on one): try inline, at
        // once from one worker, every DOWN_EVERY periods from more (workers that were kept
        // for a gain are not disturbed at every period).
        let no_more = p >= self.max || reverted_up_lately;
        if no_more && self.may_go_inline(stats) && (p == 1 || since_down >= DOWN_EVERY) {
            reset_down();
            return Some(self.go_inline(exec, stats, p, now));
        }
        // A step up that an earlier iterator of this op (the previous epoch) just reverted is not
        // tried again before the cooldown has passed: over short epochs a fresh tuner per
        // epoch otherwise re-ran the losing trial every epoch (a Python map holding the GIL ran
        // at 0.57x its P=1 throughput under AUTOTUNE, always "on trial at 2").
        if reverted_up_lately {
            return None;
        }
        if p >= self.max {
            stats.set_status(
                "core limit",
                format!(
                    "parallelism {p}: at the core limit ({}); consumer waits {:.0}%, {}",
                    self.max,
                    wait_frac * 100.0,
                    workers_time(now)
                ),
            );
            return None;
        }
        if exec.take_slots(1) == 0 {
            self.cooldown = COOLDOWN;
            let why = format!(
                "parallelism {p}: consumer waits {:.0}% but every core slot is held by other ops",
                wait_frac * 100.0
            );
            stats.set_status("slots held", why);
            return None;
        }
        self.held += 1;
        stats.set_note(format!(
            "parallelism {p}: on trial at {} (the consumer waited {:.0}% of the last period)",
            p + 1,
            wait_frac * 100.0
        ));
        self.phase = Phase::Settling {
            from: p,
            to: p + 1,
            base: now,
        };
        Some(p + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(rate: f64, wait: f64) -> Sample {
        Sample {
            rate,
            wait,
            cpu: 1000.0,
            ran: 1.0,
            queued: 0.0,
            others: 0.0,
        }
    }

    /// A period whose workers ran on a core for the fraction `ran` of their busy time and were
    /// blocked the rest.
    fn r(rate: f64, wait: f64, ran: f64) -> Sample {
        Sample {
            ran,
            ..s(rate, wait)
        }
    }

    fn c(rate: f64, cpu: f64) -> Sample {
        Sample {
            rate,
            wait: 0.5,
            cpu,
            ran: 1.0,
            queued: 0.0,
            others: 0.0,
        }
    }

    #[test]
    fn a_step_up_stays_on_a_clear_gain_or_on_less_waiting() {
        assert!(keeps(1, 2, s(100.0, 0.4), s(115.0, 0.4)));
        // Contended: throughput flat within noise, but the consumer waits far less.
        assert!(keeps(1, 2, s(100.0, 0.4), s(101.0, 0.2)));
        assert!(!keeps(1, 2, s(100.0, 0.4), s(101.0, 0.35)));
        assert!(!keeps(1, 2, s(100.0, 0.4), s(95.0, 0.1)));
        // A consumer that hardly waited cannot show less waiting: throughput decides.
        assert!(!keeps(1, 2, s(100.0, 0.03), s(101.0, 0.0)));
    }

    /// A machine whose clock stands still until the test moves it, and whose counters the test
    /// sets: what a tuner decides on it does not depend on the machine that runs the test.
    #[derive(Debug, Default)]
    struct Script(std::sync::Mutex<(Duration, Reading)>);

    impl Script {
        /// Moves the clock on by `dt`, and the counters as `f` says.
        fn pass(&self, dt: Duration, f: impl FnOnce(&mut Reading)) {
            let mut now = self.0.lock().unwrap();
            now.0 += dt;
            f(&mut now.1);
        }
    }

    impl Sampler for Script {
        fn now(&self) -> Duration {
            self.0.lock().unwrap().0
        }

        fn read(&self, _: OpCounters) -> Reading {
            self.0.lock().unwrap().1
        }
    }

    /// An executor of `cores` cores and an op whose tuners read the [`Script`] returned.
    fn scripted(cores: usize) -> (Executor, OpStats, Arc<Script>) {
        let exec = Executor::new(crate::ExecOptions {
            cores,
            ..Default::default()
        });
        let (stats, script) = (OpStats::new("op".into()), Arc::new(Script::default()));
        stats.set_sampler(script.clone());
        (exec, stats, script)
    }

    /// [`scripted`] whose clock stands still: cooldowns never pass.
    fn cores_and_an_op(cores: usize) -> (Executor, OpStats) {
        let (exec, stats, _) = scripted(cores);
        (exec, stats)
    }

    #[test]
    fn a_step_past_the_cores_takes_as_many_workers_as_fill_them() {
        assert_eq!(past_the_cores(2, 0.5, 8), 4);
        assert_eq!(past_the_cores(2, 0.7, 8), 3);
        // At least one more, at most the cap.
        assert_eq!(past_the_cores(2, 0.84, 8), 3);
        assert_eq!(past_the_cores(2, 0.1, 8), 8);
        assert_eq!(past_the_cores(7, 0.5, 8), 8);
        assert_eq!(past_the_cores(2, 0.0, 8), 8);
    }

    #[test]
    fn a_new_op_starts_at_a_worker_per_free_core_and_a_scoped_one_inline() {
        let (exec, stats) = cores_and_an_op(4);
        let mut t = Tuner::new(&exec, &stats);
        assert_eq!(t.start(&exec, &stats), 4);
        let note = stats.report().autotune;
        assert!(note.contains("a worker per free core"), "{note}");
        // A second op of the pipeline gets what is left: one worker.
        let other = OpStats::new("other".into());
        let mut second = Tuner::new(&exec, &other);
        assert_eq!(second.start(&exec, &other), 1);
        second.finish(&exec, &other);
        let py = OpStats::new("python".into());
        let mut scoped = Tuner::new(&exec, &py).scoped(true);
        assert_eq!(scoped.start(&exec, &py), INLINE);
        scoped.finish(&exec, &py);
        t.finish(&exec, &stats);
        assert_eq!(exec.take_slots(4), 3, "finish returns every slot");
    }

    #[test]
    fn a_later_iterator_keeps_what_an_earlier_one_saw_and_traces_the_start_once() {
        let (exec, stats) = cores_and_an_op(4);
        let mut first = Tuner::new(&exec, &stats);
        assert_eq!(first.start(&exec, &stats), 4);
        // At the core limit, its consumer waiting: a reason for no step.
        assert_eq!(first.steady(&exec, &stats, 4, s(100.0, 0.5)), None);
        first.finish(&exec, &stats);
        let seen = stats.note();
        assert!(seen.contains("at the core limit"), "{seen}");
        // The next epoch's iterator starts at the same place without a word.
        let mut next = Tuner::new(&exec, &stats);
        assert_eq!(next.start(&exec, &stats), 4);
        assert_eq!(stats.note(), seen);
        next.finish(&exec, &stats);
        let trace: Vec<String> = stats
            .report()
            .autotune_trace
            .into_iter()
            .map(|d| d.note)
            .collect();
        assert_eq!(trace.len(), 2, "{trace:?}");
        assert!(
            trace[0].contains(START_NOTE) && trace[1] == seen,
            "{trace:?}"
        );
        // Starting elsewhere (another op holds three of the slots now) is said.
        let fresh = OpStats::new("fresh".into());
        let other = exec.take_slots(3);
        let mut squeezed = Tuner::new(&exec, &fresh);
        assert_eq!(squeezed.start(&exec, &fresh), 1);
        let mut again = Tuner::new(&exec, &fresh);
        exec.give_slots(other);
        squeezed.finish(&exec, &fresh);
        assert_eq!(again.start(&exec, &fresh), 4);
        assert!(
            fresh.note().starts_with("parallelism 4:"),
            "{}",
            fresh.note()
        );
        again.finish(&exec, &fresh);
    }

    #[test]
    fn a_step_up_reverted_by_one_iterator_is_not_retried_by_the_next() {
        let (exec, stats, script) = scripted(4);
        let waiting = s(100.0, 0.5);
        // A fresh tuner whose consumer waits tries one more worker.
        let mut first = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(first.steady(&exec, &stats, 1, waiting), Some(2));
        // The trial loses: reverted, and recorded in the op's stats (inline is tried next).
        first.phase = Phase::Steady;
        assert_eq!(
            first.judge(&exec, &stats, 1, 2, waiting, s(80.0, 0.5)),
            Some(INLINE)
        );
        first.phase = Phase::Steady;
        first.release(&exec);
        // The next epoch's tuner starts fresh but does not repeat it within the cooldown (it
        // tries inline, as the first would have: that trial was dropped above).
        let mut next = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(next.steady(&exec, &stats, 1, waiting), Some(INLINE));
        assert_eq!(
            stats.since_reverted_up(next.sampler.now()),
            Some(Duration::ZERO)
        );
        // An op with no reverted trial steps up as before.
        let other = OpStats::new("other".into());
        assert_eq!(next.steady(&exec, &other, 1, waiting), Some(2));
        // Once the cooldown has passed on the op's clock, the step up is tried again.
        script.pass(UP_COOLDOWN + MIN_PERIOD, |_| ());
        next.phase = Phase::Steady;
        assert_eq!(next.steady(&exec, &stats, 1, waiting), Some(2));
    }

    #[test]
    fn a_step_up_left_on_trial_is_judged_by_the_next_iterator() {
        let (exec, stats, script) = scripted(4);
        let waiting = s(100.0, 0.5);
        let mut first = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(first.start(&exec, &stats), 1);
        assert_eq!(first.steady(&exec, &stats, 1, waiting), Some(2));
        // The epoch ends before the trial is judged.
        first.finish(&exec, &stats);
        assert_eq!(exec.take_slots(4), 3, "finish returns the trial's slot");
        exec.give_slots(3);
        // The next iterator starts at the trial's parallelism, settles, then judges it.
        let mut next = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(next.start(&exec, &stats), 2);
        assert!(matches!(next.phase, Phase::Settling { from: 1, to: 2, .. }));
        let period = |t: &mut Tuner| {
            script.pass(MIN_PERIOD + Duration::from_millis(10), |_| ());
            for _ in 0..1000 {
                stats.produced(1, 0);
            }
            t.tick(&exec, &stats, 2)
        };
        assert_eq!(period(&mut next), None);
        assert!(matches!(next.phase, Phase::Probing { from: 1, to: 2, .. }));
        // A clear gain keeps 2 for the iterators after it.
        assert_eq!(period(&mut next), None);
        assert_eq!(stats.tuned(), Some(2));
        next.finish(&exec, &stats);
        assert_eq!(stats.take_trial(), None, "a judged trial is not handed on");
        let mut third = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(third.start(&exec, &stats), 2);
        assert!(matches!(third.phase, Phase::Steady));
        third.finish(&exec, &stats);
    }

    #[test]
    fn a_trial_whose_iterator_ends_after_a_long_enough_probe_is_judged_there() {
        let (exec, stats, script) = scripted(4);
        let mut t = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(t.start(&exec, &stats), 1);
        assert_eq!(t.steady(&exec, &stats, 1, s(100.0, 0.5)), Some(2));
        t.phase = Phase::Probing {
            from: 1,
            to: 2,
            base: s(100.0, 0.5),
        };
        // Most of a period at a clear gain, then the epoch ends.
        script.pass(MIN_PERIOD * 3 / 4, |_| ());
        for _ in 0..1000 {
            stats.produced(1, 0);
        }
        t.finish(&exec, &stats);
        assert_eq!(stats.tuned(), Some(2));
        assert_eq!(stats.take_trial(), None);
        assert_eq!(exec.take_slots(4), 3, "finish returns every slot");
        exec.give_slots(3);
    }

    #[test]
    fn epochs_shorter_than_a_period_still_finish_a_trial_within_two() {
        let (exec, stats, script) = scripted(4);
        let most_of_a_period = || {
            script.pass(MIN_PERIOD * 3 / 4, |_| ());
            for _ in 0..1000 {
                stats.produced(1, 0);
            }
        };
        let mut first = Tuner::new(&exec, &stats).starting_at(1);
        first.start(&exec, &stats);
        assert_eq!(first.steady(&exec, &stats, 1, s(100.0, 0.5)), Some(2));
        // Epoch 1 ends most of a period into the settling: handed on as settled.
        most_of_a_period();
        first.finish(&exec, &stats);
        let mut second = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(second.start(&exec, &stats), 2);
        assert!(matches!(second.phase, Phase::Probing { .. }));
        // Epoch 2 probes for most of a period and is judged when it ends.
        most_of_a_period();
        second.finish(&exec, &stats);
        assert_eq!(stats.tuned(), Some(2));
        assert_eq!(stats.take_trial(), None);
    }

    #[test]
    fn a_new_iterators_first_period_counts_only_its_own_elements_and_waiting() {
        let (exec, stats, script) = scripted(4);
        // An earlier epoch: many elements, and a consumer that waited for seconds in all.
        for _ in 0..1000 {
            stats.produced(1, 0);
        }
        script.pass(Duration::from_secs(10), |r| {
            r.consumer_wait_ns += 5_000_000_000
        });
        // This epoch: a period in which the pipeline keeps up (the consumer never waits).
        let mut t = Tuner::new(&exec, &stats).starting_at(1);
        script.pass(MIN_PERIOD + Duration::from_millis(10), |_| ());
        for _ in 0..MIN_ELEMENTS {
            stats.produced(1, 0);
        }
        // Nothing to tune: no trial started on the earlier epoch's waiting.
        assert_eq!(t.tick(&exec, &stats, 1), None);
        assert!(matches!(t.phase, Phase::Steady));
        t.release(&exec);
    }

    #[test]
    fn a_step_down_stays_only_while_the_consumer_keeps_its_pace() {
        assert!(keeps(2, 1, s(100.0, 0.0), s(97.0, 0.01)));
        // Throughput "held" (noise on a busy machine), but the consumer now waits: revert.
        assert!(!keeps(2, 1, s(100.0, 0.0), s(99.0, 0.2)));
        assert!(!keeps(2, 1, s(100.0, 0.0), s(90.0, 0.0)));
    }

    #[test]
    fn inline_is_kept_on_a_clear_gain_and_left_when_a_worker_keeps_the_pace() {
        // Inline stays when it saves CPU per element at the same pace (GIL hand-offs gone) ...
        assert!(keeps(1, INLINE, c(100.0, 5000.0), c(150.0, 2500.0)));
        assert!(keeps(1, INLINE, c(100.0, 5000.0), c(97.0, 3900.0)));
        // ... not on throughput alone (a native map on a loaded machine read 1.76x) ...
        assert!(!keeps(1, INLINE, c(100.0, 5000.0), c(176.0, 4800.0)));
        // ... nor when it saves CPU but loses the pace.
        assert!(!keeps(1, INLINE, c(100.0, 5000.0), c(80.0, 2500.0)));
        // Unknown CPU time (no such clock): never inline.
        assert!(!keeps(1, INLINE, c(100.0, f64::NAN), c(150.0, f64::NAN)));
        // A worker replaces inline when it keeps the pace without much more CPU per element.
        assert!(keeps(INLINE, 1, c(100.0, 3000.0), c(96.0, 3300.0)));
        assert!(!keeps(INLINE, 1, c(100.0, 3000.0), c(110.0, 6000.0)));
        assert!(!keeps(INLINE, 1, c(100.0, 3000.0), c(90.0, 3000.0)));
    }

    #[test]
    fn a_second_worker_that_did_not_help_leads_to_a_trial_of_inline() {
        let (exec, stats) = cores_and_an_op(4);
        let waiting = s(100.0, 0.5);
        let mut t = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(t.start(&exec, &stats), 1);
        assert_eq!(t.steady(&exec, &stats, 1, waiting), Some(2));
        // Two workers lose (a function holding the GIL): reverted, and inline tried at once.
        assert_eq!(
            t.judge(&exec, &stats, 1, 2, waiting, s(60.0, 0.5)),
            Some(INLINE)
        );
        assert!(matches!(
            t.phase,
            Phase::Settling {
                from: 1,
                to: INLINE,
                ..
            }
        ));
        assert_eq!(exec.take_slots(4), 3, "the second worker's slot went back");
        exec.give_slots(3);
        // Inline doubles the rate: kept, and the next iterator starts inline holding no slot.
        t.phase = Phase::Steady;
        assert_eq!(
            t.judge(&exec, &stats, 1, INLINE, waiting, c(200.0, 400.0)),
            None
        );
        assert_eq!(stats.tuned(), Some(INLINE));
        t.finish(&exec, &stats);
        let mut next = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(next.start(&exec, &stats), INLINE);
        assert_eq!(exec.take_slots(4), 3);
        exec.give_slots(3);
        // Inline, waiting is no signal; one worker is tried again every DOWN_EVERY periods
        // (counted in the op's stats, across iterators: the first tuner's period counts too).
        stats.periods_since_down.store(1, Ordering::Relaxed);
        for _ in 2..DOWN_EVERY {
            assert_eq!(next.steady(&exec, &stats, INLINE, s(200.0, 1.0)), None);
        }
        assert_eq!(next.steady(&exec, &stats, INLINE, s(200.0, 1.0)), Some(1));
        next.finish(&exec, &stats);
    }

    #[test]
    fn a_reverted_inline_trial_is_not_retried_within_its_cooldown() {
        let (exec, stats) = cores_and_an_op(4);
        let waiting = s(100.0, 0.5);
        let mut t = Tuner::new(&exec, &stats).starting_at(1);
        t.start(&exec, &stats);
        assert_eq!(t.steady(&exec, &stats, 1, waiting), Some(2));
        assert_eq!(
            t.judge(&exec, &stats, 1, 2, waiting, s(90.0, 0.5)),
            Some(INLINE)
        );
        // Inline is slower (a native map that overlapped with its consumer): back to one.
        t.phase = Phase::Steady;
        assert_eq!(
            t.judge(&exec, &stats, 1, INLINE, waiting, s(70.0, 1.0)),
            Some(1)
        );
        assert_eq!(stats.tuned(), Some(1));
        t.finish(&exec, &stats);
        // The next iterator, still waiting at one worker, tries neither two nor inline.
        let mut next = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(next.start(&exec, &stats), 1);
        assert_eq!(next.steady(&exec, &stats, 1, waiting), None);
        next.finish(&exec, &stats);
        assert_eq!(exec.take_slots(4), 3, "no slot leaked");
    }

    #[test]
    fn at_the_core_limit_a_waiting_consumer_leads_to_a_trial_of_inline_and_back() {
        let (exec, stats) = cores_and_an_op(2);
        let mut t = Tuner::new(&exec, &stats).starting_at(1);
        t.start(&exec, &stats);
        let waiting = s(100.0, 0.5);
        assert_eq!(t.steady(&exec, &stats, 1, waiting), Some(2));
        t.phase = Phase::Steady;
        assert_eq!(t.judge(&exec, &stats, 1, 2, waiting, s(150.0, 0.3)), None);
        // Two workers, the most there are, and the consumer still waits: after DOWN_EVERY
        // periods inline is tried, and the second worker's slot goes back meanwhile.
        stats.periods_since_down.store(0, Ordering::Relaxed);
        for _ in 1..DOWN_EVERY {
            assert_eq!(t.steady(&exec, &stats, 2, s(150.0, 0.3)), None);
        }
        assert_eq!(t.steady(&exec, &stats, 2, s(150.0, 0.3)), Some(INLINE));
        assert_eq!(exec.free_slots(), 1);
        // Slower inline: back to two workers, the slot taken again.
        t.phase = Phase::Steady;
        assert_eq!(
            t.judge(&exec, &stats, 2, INLINE, s(150.0, 0.3), s(80.0, 1.0)),
            Some(2)
        );
        assert_eq!(exec.free_slots(), 0);
        // Not retried within its cooldown.
        t.cooldown = 0;
        stats
            .periods_since_down
            .store(DOWN_EVERY, Ordering::Relaxed);
        assert_eq!(t.steady(&exec, &stats, 2, s(150.0, 0.3)), None);
        t.finish(&exec, &stats);
        assert_eq!(exec.free_slots(), 1);
    }

    #[test]
    fn workers_that_wait_are_tried_past_the_cores_kept_on_a_gain_and_resumed() {
        let (exec, stats) = cores_and_an_op(2);
        let mut t = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(t.start(&exec, &stats), 1);
        assert_eq!(t.steady(&exec, &stats, 1, s(100.0, 0.5)), Some(2));
        t.phase = Phase::Steady;
        assert_eq!(
            t.judge(&exec, &stats, 1, 2, s(100.0, 0.5), s(150.0, 0.3)),
            None
        );
        assert_eq!(exec.free_slots(), 0);
        // At the core limit, workers that ran on a core all their busy time: no step past it.
        assert_eq!(t.steady(&exec, &stats, 2, r(150.0, 0.3, 0.95)), None);
        // Workers that ran 90 % of it and waited 10 % for a core: no step, and the note says
        // where the time went.
        let little = Sample {
            queued: 0.1,
            ..r(150.0, 0.3, 0.9)
        };
        assert_eq!(t.steady(&exec, &stats, 2, little), None);
        let note = stats.report().autotune;
        assert!(
            note.contains("at the core limit") && note.contains("waited 10% for a core"),
            "{note}"
        );
        // Where the wait for a core is unknown, all that they did not run counts as blocked.
        let unknown = Sample {
            queued: f64::NAN,
            ..r(150.0, 0.3, 0.7)
        };
        assert!((unknown.blocked() - 0.3).abs() < 1e-9);
        // Workers that ran 70 % of it and were blocked the rest (waiting for reads): a trial at
        // 3 (2 / 0.7 workers fill two cores), which takes no core slot, kept on a
        // gain.
        assert_eq!(t.steady(&exec, &stats, 2, r(150.0, 0.3, 0.7)), Some(3));
        assert_eq!(exec.free_slots(), 0);
        t.phase = Phase::Steady;
        let at3 = r(200.0, 0.2, 0.7);
        assert_eq!(t.judge(&exec, &stats, 2, 3, r(150.0, 0.3, 0.7), at3), None);
        assert_eq!(stats.tuned(), Some(3));
        // A step without a gain goes back, and gives back no slot it never took.
        assert_eq!(t.steady(&exec, &stats, 3, at3), Some(5));
        t.phase = Phase::Steady;
        assert_eq!(t.judge(&exec, &stats, 3, 5, at3, at3), Some(3));
        assert_eq!((exec.free_slots(), t.held), (0, 1));
        // The op's next iterator starts where this one settled, past the cores.
        t.finish(&exec, &stats);
        assert_eq!(exec.free_slots(), 1);
        let mut next = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(next.start(&exec, &stats), 3);
        // Down from past the cores: the one slot it holds goes back only below two workers.
        next.set(&exec, 3, 2);
        assert_eq!(exec.free_slots(), 0);
        next.set(&exec, 2, 1);
        assert_eq!(exec.free_slots(), 1);
        // Never past OVER_CORES times the cores, and never for a scoped op (fresh ops: no
        // reverted step holds them back).
        let (cap, fresh) = (2 * OVER_CORES, OpStats::new("fresh".into()));
        let mut t = Tuner::new(&exec, &fresh).starting_at(1);
        assert_eq!(
            t.steady(&exec, &fresh, cap - 1, r(150.0, 0.3, 0.5)),
            Some(cap)
        );
        t.phase = Phase::Steady;
        assert_eq!(t.steady(&exec, &fresh, cap, r(150.0, 0.3, 0.5)), None);
        let py = OpStats::new("py".into());
        let mut scoped = Tuner::new(&exec, &py).scoped(true);
        assert_eq!(scoped.steady(&exec, &py, 2, r(150.0, 0.3, 0.2)), None);
    }

    #[test]
    fn workers_that_wait_for_cores_other_processes_hold_are_tried_past_them() {
        let (exec, stats) = cores_and_an_op(2);
        let mut t = Tuner::new(&exec, &stats);
        assert_eq!(t.start(&exec, &stats), 2);
        // Workers that ran 70 % of their busy time and waited for cores another process holds
        // the rest: the kernel shares the cores per runnable thread, so a trial at 3 (2 / 0.7
        // workers fill two cores), which takes no core slot.
        let queued = Sample {
            queued: 0.25,
            others: 1.0,
            ..r(150.0, 0.3, 0.7)
        };
        assert!((queued.blocked() - 0.05).abs() < 1e-9);
        // The same wait with no other process busy: the pipeline's own threads held the cores
        // (another stage, threads set by hand), and more workers would take from them.
        let own = Sample {
            others: 0.02,
            ..queued
        };
        assert_eq!(t.steady(&exec, &stats, 2, own), None);
        assert!(stats.report().autotune.contains("kept 0.0 cores busy"));
        assert_eq!(t.steady(&exec, &stats, 2, queued), Some(3));
        assert_eq!(exec.free_slots(), 0);
        let note = stats.report().autotune;
        assert!(note.contains("on trial at 3 past the 2 cores"), "{note}");
        assert!(note.contains("waited 25% for a core"), "{note}");
        assert!(
            note.contains("other processes kept 1.0 cores busy"),
            "{note}"
        );
        // Without a gain it goes back, and is not tried again within the cooldown.
        t.phase = Phase::Steady;
        assert_eq!(t.judge(&exec, &stats, 2, 3, queued, queued), Some(2));
        assert_eq!((exec.free_slots(), stats.tuned()), (0, Some(2)));
        t.cooldown = 0;
        assert_eq!(t.steady(&exec, &stats, 2, queued), None);
        // With a gain it stays, and from 3 workers that ran half their busy time the next trial
        // is at 6; never while the consumer does not wait, nor for a scoped op.
        t.finish(&exec, &stats);
        let fresh = OpStats::new("fresh".into());
        let mut t = Tuner::new(&exec, &fresh);
        assert_eq!(t.start(&exec, &fresh), 2);
        assert_eq!(t.steady(&exec, &fresh, 2, queued), Some(3));
        t.phase = Phase::Steady;
        let at3 = Sample {
            queued: 0.5,
            others: 1.0,
            ..r(200.0, 0.2, 0.5)
        };
        assert_eq!(t.judge(&exec, &fresh, 2, 3, queued, at3), None);
        assert_eq!(fresh.tuned(), Some(3));
        assert_eq!(t.steady(&exec, &fresh, 3, at3), Some(6));
        t.phase = Phase::Steady;
        let calm = Sample {
            queued: 0.5,
            others: 1.0,
            ..r(200.0, 0.01, 0.5)
        };
        assert_eq!(t.steady(&exec, &fresh, 3, calm), None);
        let py = OpStats::new("py".into());
        let mut scoped = Tuner::new(&exec, &py).scoped(true);
        assert_eq!(scoped.steady(&exec, &py, 2, queued), None);
    }

    #[test]
    fn a_scoped_op_starts_inline_and_tries_one_worker_after_its_first_period() {
        let (exec, stats) = cores_and_an_op(4);
        let mut t = Tuner::new(&exec, &stats).scoped(true);
        assert_eq!(t.start(&exec, &stats), INLINE);
        assert_eq!(exec.free_slots(), 3, "inline holds no slot");
        // The first steady period tries one worker, without waiting DOWN_EVERY periods.
        assert_eq!(t.steady(&exec, &stats, INLINE, s(200.0, 1.0)), Some(1));
        // One worker at a third of the pace (a function holding the GIL): back inline.
        t.phase = Phase::Steady;
        assert_eq!(
            t.judge(&exec, &stats, INLINE, 1, c(200.0, 900.0), c(70.0, 2500.0)),
            Some(INLINE)
        );
        assert_eq!(stats.tuned(), Some(INLINE));
        // Judged once: inline stays, a worker is tried again only every DOWN_EVERY periods.
        t.cooldown = 0;
        stats.periods_since_down.store(0, Ordering::Relaxed);
        assert_eq!(t.steady(&exec, &stats, INLINE, s(200.0, 1.0)), None);
        t.finish(&exec, &stats);
        // A scoped function that keeps the pace on a worker (it releases the GIL): kept, and
        // from one worker a waiting consumer leads to a second.
        let stats = OpStats::new("releases".into());
        let mut t = Tuner::new(&exec, &stats).scoped(true);
        assert_eq!(t.start(&exec, &stats), INLINE);
        assert_eq!(t.steady(&exec, &stats, INLINE, s(200.0, 1.0)), Some(1));
        t.phase = Phase::Steady;
        assert_eq!(
            t.judge(&exec, &stats, INLINE, 1, c(200.0, 900.0), c(205.0, 950.0)),
            None
        );
        assert_eq!(stats.tuned(), Some(1));
        assert_eq!(t.steady(&exec, &stats, 1, s(205.0, 0.5)), Some(2));
        t.finish(&exec, &stats);
        assert_eq!(exec.free_slots(), 3, "no slot leaked");
    }

    #[test]
    fn the_first_period_of_a_new_op_only_warms_up() {
        let (exec, stats, script) = scripted(4);
        let mut t = Tuner::new(&exec, &stats).starting_at(1);
        assert_eq!(t.start(&exec, &stats), 1);
        let waiting_period = |t: &mut Tuner| {
            let period = MIN_PERIOD + Duration::from_millis(10);
            script.pass(period, |r| r.consumer_wait_ns += period.as_nanos() as u64);
            for _ in 0..100 {
                stats.produced(1, 0);
            }
            t.tick(&exec, &stats, 1)
        };
        // The consumer waited all of the first period, which holds the start: no step on it.
        assert_eq!(waiting_period(&mut t), None);
        assert!(matches!(t.phase, Phase::Steady));
        // Waiting as much in the next one: a second worker is tried.
        assert_eq!(waiting_period(&mut t), Some(2));
        t.finish(&exec, &stats);
    }
}

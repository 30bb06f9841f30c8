//! AUTOTUNE for one parallel op: online hill climbing on measured throughput.
//!
//! Every period (at least 100 ms and 8 elements, or 300 ms and 2 elements for slow elements) the
//! tuner looks at the consumer's waiting time. If the consumer waited more than 5% of the period,
//! this op is on the critical path: the tuner asks the executor for one more CPU slot and tries one
//! more worker. After a period to settle, it measures one full period: the step stays if
//! throughput rose by at least 10%, otherwise it is reverted (slot returned) and the tuner waits 20
//! periods before trying again. Every 30 periods at more than one worker it also tries one worker
//! fewer and keeps that if throughput stays within 5% (on a busy machine more threads can be
//! slower). Workers never exceed the executor's cores, summed over every autotuned op of the
//! pipeline, so AUTOTUNE does not oversubscribe. The buffer depth follows the parallelism (2p + 2:
//! room for each worker to finish one element while the consumer takes another) and is capped by
//! the memory budget. What it chose and why is the op's `autotune` note in the stats.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::executor::Executor;
use super::stats::OpStats;

const MIN_PERIOD: Duration = Duration::from_millis(100);
const MIN_ELEMENTS: u64 = 8;
/// Slow elements (a whole batch of files each): a period may also end after this long and 2
/// elements, so the tuner reacts within a second or so.
const LONG_PERIOD: Duration = Duration::from_millis(300);
const WAIT_TRIGGER: f64 = 0.05;
const GAIN_UP: f64 = 1.10;
const KEEP_DOWN: f64 = 0.95;
const COOLDOWN: u32 = 20;
const DOWN_EVERY: u32 = 30;

enum Phase {
    Steady,
    /// Just changed parallelism `from -> to`: the next period only lets the pipeline settle.
    Settling {
        from: usize,
        to: usize,
        base_rate: f64,
    },
    Probing {
        from: usize,
        to: usize,
        base_rate: f64,
    },
}

/// The tuner of one op.
pub(crate) struct Tuner {
    max: usize,
    /// CPU slots taken from the executor (parallelism - 1).
    held: usize,
    last: Instant,
    last_elems: u64,
    last_wait_ns: u64,
    phase: Phase,
    cooldown: u32,
    since_down: u32,
}

impl Tuner {
    pub(crate) fn new(exec: &Executor) -> Self {
        Tuner {
            max: exec.options().cores.max(1),
            held: 0,
            last: Instant::now(),
            last_elems: 0,
            last_wait_ns: 0,
            phase: Phase::Steady,
            cooldown: 0,
            since_down: 0,
        }
    }

    /// Starts where an earlier iterator of the same op settled (`want` workers), as far as free
    /// core slots allow; returns the parallelism to start with.
    pub(crate) fn resume(&mut self, exec: &Executor, want: usize) -> usize {
        let extra = exec.take_slots(want.saturating_sub(1).min(self.max - 1));
        self.held += extra;
        1 + extra
    }

    /// Returns slots on drop of the op.
    pub(crate) fn release(&mut self, exec: &Executor) {
        exec.give_slots(self.held);
        self.held = 0;
    }

    fn set(&mut self, exec: &Executor, from: usize, to: usize) {
        if to < from {
            exec.give_slots(from - to);
            self.held -= from - to;
        }
    }

    /// Called by the consumer after each element; returns a new parallelism when it changes.
    pub(crate) fn tick(&mut self, exec: &Executor, stats: &OpStats, p: usize) -> Option<usize> {
        let elems = stats.elements();
        let dt = self.last.elapsed();
        let n = elems - self.last_elems;
        let due = (dt >= MIN_PERIOD && n >= MIN_ELEMENTS) || (dt >= LONG_PERIOD && n >= 2);
        if !due {
            return None;
        }
        let wait = stats.consumer_wait_ns();
        let rate = n as f64 / dt.as_secs_f64();
        let wait_frac = (wait - self.last_wait_ns) as f64 / dt.as_nanos() as f64;
        self.last = Instant::now();
        self.last_elems = elems;
        self.last_wait_ns = wait;
        match std::mem::replace(&mut self.phase, Phase::Steady) {
            Phase::Settling {
                from,
                to,
                base_rate,
            } => {
                self.phase = Phase::Probing {
                    from,
                    to,
                    base_rate,
                };
                None
            }
            Phase::Probing {
                from,
                to,
                base_rate,
            } => self.judge(exec, stats, from, to, base_rate, rate),
            Phase::Steady => self.steady(exec, stats, p, rate, wait_frac),
        }
    }

    fn judge(
        &mut self,
        exec: &Executor,
        stats: &OpStats,
        from: usize,
        to: usize,
        base: f64,
        rate: f64,
    ) -> Option<usize> {
        let keep = if to > from {
            rate >= base * GAIN_UP
        } else {
            rate >= base * KEEP_DOWN
        };
        let (now, verb) = if keep {
            (to, "kept")
        } else {
            (from, "reverted")
        };
        stats.tuned.store(now, Ordering::Relaxed);
        stats.set_note(format!(
            "parallelism {now} (max {}): tried {from} -> {to}: throughput {:.2}x ({base:.1} -> \
             {rate:.1} elem/s), {verb}",
            self.max,
            rate / base
        ));
        if keep {
            return None;
        }
        self.cooldown = COOLDOWN;
        if from > to {
            // Going back up: take the slot again (it may have been taken meanwhile).
            let got = exec.take_slots(from - to);
            self.held += got;
            return Some(to + got);
        }
        self.set(exec, to, from);
        Some(from)
    }

    fn steady(
        &mut self,
        exec: &Executor,
        stats: &OpStats,
        p: usize,
        rate: f64,
        wait_frac: f64,
    ) -> Option<usize> {
        self.since_down += 1;
        if self.cooldown > 0 {
            self.cooldown -= 1;
            return None;
        }
        if p > 1 && self.since_down >= DOWN_EVERY {
            self.since_down = 0;
            self.set(exec, p, p - 1);
            stats.set_note(format!(
                "parallelism {p}: on trial at {} (do fewer threads keep the pace?)",
                p - 1
            ));
            self.phase = Phase::Settling {
                from: p,
                to: p - 1,
                base_rate: rate,
            };
            return Some(p - 1);
        }
        if wait_frac < WAIT_TRIGGER {
            if stats.report().autotune.is_empty() {
                stats.set_note(format!(
                    "parallelism {p} (max {}): the consumer waits {:.0}% of the time, no need for more",
                    self.max,
                    wait_frac * 100.0
                ));
            }
            return None;
        }
        if p >= self.max {
            stats.set_note(format!(
                "parallelism {p}: at the core limit ({}); consumer waits {:.0}%",
                self.max,
                wait_frac * 100.0
            ));
            return None;
        }
        if exec.take_slots(1) == 0 {
            self.cooldown = COOLDOWN;
            stats.set_note(format!(
                "parallelism {p}: consumer waits {:.0}% but every core slot is held by other ops",
                wait_frac * 100.0
            ));
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
            base_rate: rate,
        };
        Some(p + 1)
    }
}

//! AUTOTUNE for one parallel op: online hill climbing on measured throughput.
//!
//! Every period (at least 50 ms and 8 elements) the tuner looks at the consumer's waiting time. If
//! the consumer waited more than 5% of the period, this op is on the critical path: the tuner asks
//! the executor for one more CPU slot and tries one more worker. If throughput over the next full
//! period rose by at least 10%, the step stays; otherwise the tuner reverts it, returns the slot,
//! and waits 20 periods before trying again (the machine may have changed). Workers never exceed the
//! executor's cores, summed over every autotuned op of the pipeline, so AUTOTUNE does not
//! oversubscribe. The buffer depth follows the parallelism (2p + 2: room for each worker to finish
//! one element while the consumer takes another) and is capped by the memory budget.

use std::time::{Duration, Instant};

use super::executor::Executor;
use super::stats::OpStats;

const MIN_PERIOD: Duration = Duration::from_millis(50);
const MIN_ELEMENTS: u64 = 8;
/// Slow elements (a whole batch of files each): a period may also end after this long and 2
/// elements, so the tuner reacts within a second or so.
const LONG_PERIOD: Duration = Duration::from_millis(250);
const WAIT_TRIGGER: f64 = 0.05;
const GAIN_KEEP: f64 = 1.10;
const COOLDOWN: u32 = 20;

enum Phase {
    Steady,
    /// Just changed parallelism: the next period only resets the baseline.
    Settling {
        from: usize,
        base_rate: f64,
    },
    Probing {
        from: usize,
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
        let rate = (elems - self.last_elems) as f64 / dt.as_secs_f64();
        let wait_frac = (wait - self.last_wait_ns) as f64 / dt.as_nanos() as f64;
        self.last = Instant::now();
        self.last_elems = elems;
        self.last_wait_ns = wait;
        match std::mem::replace(&mut self.phase, Phase::Steady) {
            Phase::Settling { from, base_rate } => {
                self.phase = Phase::Probing { from, base_rate };
                None
            }
            Phase::Probing { from, base_rate } => {
                if rate >= base_rate * GAIN_KEEP {
                    stats.tuned.store(p, std::sync::atomic::Ordering::Relaxed);
                    stats.set_note(format!(
                        "parallelism {p} (max {}): the step {from} -> {p} raised throughput {:.2}x \
                         ({base_rate:.1} -> {rate:.1} elem/s)",
                        self.max,
                        rate / base_rate
                    ));
                    None
                } else {
                    exec.give_slots(p - from);
                    self.held -= p - from;
                    self.cooldown = COOLDOWN;
                    stats
                        .tuned
                        .store(from, std::sync::atomic::Ordering::Relaxed);
                    stats.set_note(format!(
                        "parallelism {from} (max {}): tried {p}, throughput {:.2}x \
                         ({base_rate:.1} -> {rate:.1} elem/s), less than {GAIN_KEEP}x: reverted",
                        self.max,
                        rate / base_rate
                    ));
                    Some(from)
                }
            }
            Phase::Steady => self.steady(exec, stats, p, rate, wait_frac),
        }
    }

    fn steady(
        &mut self,
        exec: &Executor,
        stats: &OpStats,
        p: usize,
        rate: f64,
        wait_frac: f64,
    ) -> Option<usize> {
        if self.cooldown > 0 {
            self.cooldown -= 1;
            return None;
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
        self.phase = Phase::Settling {
            from: p,
            base_rate: rate,
        };
        Some(p + 1)
    }
}

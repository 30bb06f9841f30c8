//! What AUTOTUNE reads of the world: a clock and, at the end of each period, the counters its
//! figures are the differences of. Below the statistics and the tuner: an op's [`OpStats`] keeps
//! the [`Sampler`] its tuner reads and hands it the op's own counters ([`OpCounters`]), so this
//! file knows neither.
//!
//! [`ProcSampler`] reads the real machine; a test installs one that describes a machine as busy
//! as it likes (`OpStats::set_sampler`), so that AUTOTUNE's decisions do not depend on the load
//! of the machine that runs the test.
//!
//! [`OpStats`]: super::OpStats

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{machine_cpu_ns, process_cpu_ns};

/// What AUTOTUNE reads of the world (see the module docs): [`ProcSampler`] on a real machine,
/// a script in tests.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use stokehold_core::exec::autotune::{OpCounters, Reading, Sampler};
/// use stokehold_core::exec::OpStats;
///
/// /// A machine whose clock stands still and whose consumer never waited.
/// #[derive(Debug)]
/// struct Still;
///
/// impl Sampler for Still {
///     fn now(&self) -> Duration {
///         Duration::ZERO
///     }
///     fn read(&self, _: OpCounters) -> Reading {
///         Reading::default()
///     }
/// }
///
/// let stats = OpStats::new("map[f]".into());
/// stats.set_sampler(Arc::new(Still));
/// ```
pub trait Sampler: Send + Sync + std::fmt::Debug {
    /// Time since an origin of the sampler's own, never going back: when a period ends, and
    /// how long ago a step was reverted. Read often (every few elements), so it should be cheap.
    fn now(&self) -> Duration;

    /// The counters of the op, whose own are `op` (what its threads recorded in its
    /// `OpStats`, read by the caller), and of the process and the machine, read once at the end
    /// of each period. A real machine's reading passes `op` on ([`ProcSampler`]); a described
    /// one may ignore it.
    fn read(&self, op: OpCounters) -> Reading;
}

/// An op's own counters, as its threads recorded them (each a total so far): what a
/// [`Sampler`] is handed to read the op with.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OpCounters {
    /// Time the op's consumer waited for it (ns).
    pub consumer_wait_ns: u64,
    /// The op's workers' busy time: how much of it they ran, and waited for a core.
    pub workers: BusyTimes,
}

/// The counters a period's figures are computed from, each a total so far: a period's figures
/// are the differences between the readings at its two ends (see [`Sampler::read`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reading {
    /// Time the op's consumer waited for it (ns).
    pub consumer_wait_ns: u64,
    /// The op's workers' busy time: how much of it they ran, and waited for a core.
    pub workers: BusyTimes,
    /// CPU time of this process (ns; `None` where the platform does not say).
    pub process_cpu_ns: Option<u64>,
    /// CPU time of every process on the machine (ns; `None` where the platform does not say):
    /// less this process's, what other processes took of the cores.
    pub machine_cpu_ns: Option<u64>,
}

/// The [`Sampler`] of a real machine: the monotonic clock, this process's CPU clock,
/// `/proc/stat`'s CPU time of every process, and the consumer's waits and workers' busy times
/// that the op's threads recorded (the [`OpCounters`] it is handed).
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcSampler;

impl Sampler for ProcSampler {
    fn now(&self) -> Duration {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed()
    }

    fn read(&self, op: OpCounters) -> Reading {
        Reading {
            consumer_wait_ns: op.consumer_wait_ns,
            workers: op.workers,
            process_cpu_ns: process_cpu_ns(),
            machine_cpu_ns: machine_cpu_ns(),
        }
    }
}

/// Workers' busy time (ns) whose CPU time was measured (`wall`) and that CPU time; of it, the
/// busy time whose wait for a core was measured too (`queue_wall`) and that wait. What is left
/// of busy time after running and waiting for a core was spent blocked.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BusyTimes {
    /// Busy time whose CPU time was measured (ns).
    pub wall: u64,
    /// The CPU time the workers ran in it (ns).
    pub cpu: u64,
    /// Of `wall`, the busy time whose wait for a core was measured too (ns).
    pub queue_wall: u64,
    /// The time the workers waited, runnable, for a core in it (ns).
    pub queued: u64,
}

impl BusyTimes {
    /// The times between `earlier` and `self`.
    pub(crate) fn since(self, earlier: BusyTimes) -> BusyTimes {
        BusyTimes {
            wall: self.wall.saturating_sub(earlier.wall),
            cpu: self.cpu.saturating_sub(earlier.cpu),
            queue_wall: self.queue_wall.saturating_sub(earlier.queue_wall),
            queued: self.queued.saturating_sub(earlier.queued),
        }
    }

    /// The fraction of the timed busy time that the workers ran on a core (NaN: none timed).
    pub(crate) fn ran(&self) -> f64 {
        fraction(self.cpu, self.wall)
    }

    /// The fraction of the timed busy time that the workers waited, runnable, for a core (NaN:
    /// none timed). The kernel's run delay can exceed what the workers did not run (they ran
    /// 84 % and waited 123 % of a period of the lazy file map beside two spinning processes,
    /// kernel 6.18), so it is taken as at most that.
    pub(crate) fn queued(&self) -> f64 {
        let q = fraction(self.queued, self.queue_wall);
        if q.is_nan() {
            return q;
        }
        q.min(1.0 - self.ran().min(1.0))
    }
}

/// `part / of`, NaN when `of` is 0.
fn fraction(part: u64, of: u64) -> f64 {
    if of > 0 {
        part as f64 / of as f64
    } else {
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_splits_into_running_waiting_for_a_core_and_the_rest() {
        let t = BusyTimes {
            wall: 1000,
            cpu: 500,
            queue_wall: 1000,
            queued: 300,
        };
        assert_eq!((t.ran(), t.queued()), (0.5, 0.3));
        // A run delay past what was not run counts as all of it.
        let over = BusyTimes { queued: 900, ..t };
        assert_eq!(over.queued(), 0.5);
        // Nothing timed, or no wait measured: unknown.
        assert!(BusyTimes::default().ran().is_nan());
        assert!(BusyTimes { queue_wall: 0, ..t }.queued().is_nan());
        let later = BusyTimes {
            wall: 3000,
            cpu: 1500,
            queue_wall: 3000,
            queued: 700,
        };
        assert_eq!(
            later.since(t),
            BusyTimes {
                wall: 2000,
                cpu: 1000,
                queue_wall: 2000,
                queued: 400
            }
        );
    }

    #[test]
    fn a_real_machines_reading_passes_the_ops_counters_on() {
        let op = OpCounters {
            consumer_wait_ns: 7,
            workers: BusyTimes {
                wall: 4,
                cpu: 3,
                queue_wall: 2,
                queued: 1,
            },
        };
        let r = ProcSampler.read(op);
        assert_eq!((r.consumer_wait_ns, r.workers), (7, op.workers));
        if cfg!(target_os = "linux") {
            assert!(r.process_cpu_ns.is_some() && r.machine_cpu_ns.is_some());
        }
    }
}

//! A period's figures ([`Sample`]: what the tuner decides on) and a step up on trial
//! ([`Trial`]), which an op's [`OpStats`](super::OpStats) keeps between its iterators. Below
//! both the statistics and the tuner (`autotune.rs`), so neither names the other's file for
//! them.

use std::time::Duration;

use super::sampler::Reading;

/// One period as the consumer saw it: elements per second, the fraction of the period it
/// spent waiting for this op, the process's CPU time per element (ns; NaN where the platform
/// does not say), and the fractions of the workers' busy time that they ran on a core and that
/// they waited, runnable, for a core (NaN where unknown or no worker ran), and the cores that
/// other processes kept busy over it (CPU seconds a second; NaN where unknown).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sample {
    pub(super) rate: f64,
    pub(super) wait: f64,
    pub(super) cpu: f64,
    pub(super) ran: f64,
    pub(super) queued: f64,
    pub(super) others: f64,
}

impl Sample {
    /// The fraction of the workers' busy time that they were blocked (a read, a page fault, a
    /// lock): neither running nor waiting for a core. Where the wait for a core is unknown, all
    /// that they did not run.
    pub(super) fn blocked(&self) -> f64 {
        let queued = if self.queued.is_nan() {
            0.0
        } else {
            self.queued
        };
        (1.0 - self.ran - queued).max(0.0)
    }

    /// The period of `n` elements over `dt` that began at the reading `start` and ended at
    /// `end`: the one place where readings become figures.
    pub(super) fn between(n: u64, dt: Duration, start: &Reading, end: &Reading) -> Sample {
        let dt_ns = dt.as_nanos().max(1) as f64;
        let since = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| a.saturating_sub(b));
        let cpu_ns = since(end.process_cpu_ns, start.process_cpu_ns);
        let machine_ns = since(end.machine_cpu_ns, start.machine_cpu_ns);
        let workers = end.workers.since(start.workers);
        Sample {
            rate: n as f64 / dt.as_secs_f64().max(1e-9),
            wait: end.consumer_wait_ns.saturating_sub(start.consumer_wait_ns) as f64 / dt_ns,
            cpu: match cpu_ns {
                Some(c) if n > 0 => c as f64 / n as f64,
                _ => f64::NAN,
            },
            ran: workers.ran(),
            queued: workers.queued(),
            others: match (machine_ns, cpu_ns) {
                (Some(m), Some(c)) => m.saturating_sub(c) as f64 / dt_ns,
                _ => f64::NAN,
            },
        }
    }
}

/// A step up from `from` to `to` workers that an iterator left unjudged, measured against `base`;
/// `settled` once a period at `to` has passed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Trial {
    pub(super) from: usize,
    pub(super) to: usize,
    pub(super) base: Sample,
    pub(super) settled: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::sampler::BusyTimes;

    #[test]
    fn a_periods_figures_are_the_differences_of_its_readings() {
        let start = Reading {
            consumer_wait_ns: 1_000,
            workers: BusyTimes {
                wall: 10,
                cpu: 5,
                queue_wall: 10,
                queued: 1,
            },
            process_cpu_ns: Some(1_000_000),
            machine_cpu_ns: Some(5_000_000),
        };
        // 50 elements in 100 ms: the consumer waited 25 ms; the workers were busy 200 ms, ran
        // 100 ms of it and waited 60 ms for a core; the process took 120 ms of CPU time and
        // the machine 220 ms, so other processes kept one core busy.
        let end = Reading {
            consumer_wait_ns: 1_000 + 25_000_000,
            workers: BusyTimes {
                wall: 10 + 200_000_000,
                cpu: 5 + 100_000_000,
                queue_wall: 10 + 200_000_000,
                queued: 1 + 60_000_000,
            },
            process_cpu_ns: Some(121_000_000),
            machine_cpu_ns: Some(225_000_000),
        };
        let s = Sample::between(50, Duration::from_millis(100), &start, &end);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(close(s.rate, 500.0) && close(s.wait, 0.25), "{s:?}");
        assert!(close(s.cpu, 2_400_000.0), "{s:?}");
        assert!(close(s.ran, 0.5) && close(s.queued, 0.3), "{s:?}");
        assert!(close(s.blocked(), 0.2) && close(s.others, 1.0), "{s:?}");
        // Where the platform does not say: unknown, not zero.
        let blind = Reading {
            process_cpu_ns: None,
            machine_cpu_ns: None,
            workers: BusyTimes::default(),
            ..end
        };
        let s = Sample::between(50, Duration::from_millis(100), &start, &blind);
        assert!(
            s.cpu.is_nan() && s.others.is_nan() && s.ran.is_nan(),
            "{s:?}"
        );
    }
}

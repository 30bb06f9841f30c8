//! The training loop's side of a pipeline: how long each `next()` took and how long the loop
//! ran between calls (its step), so stats say what share of each step waited on input.
//!
//! tf.data's rule (TensorBoard's Input Pipeline Analyzer): if `next()` returns in 50 us or less,
//! input is not the bottleneck. The median of `next()` is read against it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::histogram::{Histogram, Percentiles};

/// tf.data's threshold: a `next()` this fast means the loop did not wait on input.
pub const INPUT_BOUND_NEXT: Duration = Duration::from_micros(50);

/// Calls of `next()` by the pipeline's consumer, recorded by its iterator
/// ([`crate::state::PipelineIter`]) on the executor the pipeline runs on.
#[derive(Debug, Default)]
pub struct StepStats {
    next_ns: Histogram,
    between_ns: Histogram,
    next_total_ns: AtomicU64,
    /// Time in `next()` of the calls that had a time between before them (not an iterator's
    /// first): the input share's numerator, over the same steps as its denominator.
    paired_next_ns: AtomicU64,
    between_total_ns: AtomicU64,
}

impl StepStats {
    /// One call of `next()` that took `in_next`; `between` is the time since the call before
    /// returned (`None` for an iterator's first call).
    pub fn record(&self, in_next: Duration, between: Option<Duration>) {
        let ns = in_next.as_nanos() as u64;
        self.next_ns.record(ns);
        self.next_total_ns.fetch_add(ns, Ordering::Relaxed);
        if let Some(b) = between {
            let b = b.as_nanos() as u64;
            self.between_ns.record(b);
            self.between_total_ns.fetch_add(b, Ordering::Relaxed);
            self.paired_next_ns.fetch_add(ns, Ordering::Relaxed);
        }
    }

    /// A snapshot (`None` before the loop's second call: no step yet).
    pub fn report(&self) -> Option<StepReport> {
        let between = self.between_ns.percentiles(0);
        if between.count == 0 {
            return None;
        }
        let next = self.next_ns.percentiles(0);
        let waited = self.paired_next_ns.load(Ordering::Relaxed) as f64;
        let ran = self.between_total_ns.load(Ordering::Relaxed) as f64;
        Some(StepReport {
            steps: between.count,
            next,
            between,
            next_total_s: self.next_total_ns.load(Ordering::Relaxed) as f64 / 1e9,
            input_share: waited / (waited + ran).max(1.0),
            input_bound: next.p50_s > INPUT_BOUND_NEXT.as_secs_f64(),
        })
    }
}

/// The clock of one consumer: where its last `next()` returned.
#[derive(Debug, Default)]
pub struct StepClock {
    returned: Option<Instant>,
}

impl StepClock {
    /// Times `next` as one call of the loop, recorded on `steps`.
    pub fn time<T>(&mut self, steps: &StepStats, next: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let between = self.returned.map(|r| start.duration_since(r));
        let out = next();
        let end = Instant::now();
        steps.record(end.duration_since(start), between);
        self.returned = Some(end);
        out
    }
}

/// What the training loop saw of the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// Calls of `next()` with a step before them.
    pub steps: u64,
    /// Time per `next()`: its quantiles.
    pub next: Percentiles,
    /// The loop's time between calls (its step): its quantiles.
    pub between: Percentiles,
    /// Seconds spent in `next()`.
    pub next_total_s: f64,
    /// The share of the loop's time spent waiting in `next()`.
    pub input_share: f64,
    /// tf.data's rule: the median `next()` took more than 50 us.
    pub input_bound: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_input_share_and_tf_data_rule_follow_from_the_recorded_calls() {
        let s = StepStats::default();
        assert_eq!(s.report(), None);
        s.record(Duration::from_millis(30), None); // the first call: no step before it
        assert_eq!(s.report(), None);
        for _ in 0..99 {
            s.record(Duration::from_micros(10), Some(Duration::from_millis(9)));
        }
        let r = s.report().unwrap();
        assert_eq!(r.steps, 99);
        assert!(!r.input_bound, "{r:?}");
        assert!((r.input_share - 10.0 / 9010.0).abs() < 1e-9, "{r:?}");
        assert!((r.next_total_s - (0.030 + 99.0 * 10e-6)).abs() < 1e-9);
        // A loop that waits 3 ms of every 12 ms step.
        let s = StepStats::default();
        for _ in 0..50 {
            s.record(Duration::from_millis(3), Some(Duration::from_millis(9)));
        }
        let r = s.report().unwrap();
        assert!(r.input_bound);
        assert!((r.input_share - 0.25).abs() < 1e-9);
        assert!((r.next.p50_s - 3e-3).abs() <= 3e-3 * 0.0625);
    }
}

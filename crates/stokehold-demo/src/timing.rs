//! Batch timings of a training loop, and the figures the demo derives from them.
//!
//! The consumer records, for every batch, when it asked for it, when it arrived and when its
//! (simulated) training step ended. From those:
//!
//! * the *wait* of a batch is `arrived - requested`: time the accelerator would sit idle;
//! * the *steady wait* is the median wait over batches that are neither the very first nor the
//!   first of an epoch;
//! * the *gap* at the boundary after epoch `k` is the time from the last batch of epoch `k` to the
//!   first of epoch `k + 1`; it holds the consumer's own step (`requested - arrived` of the
//!   previous batch) plus the first batch's wait;
//! * the *stall* at that boundary is the gap minus one steady batch time (the step as measured
//!   plus the steady wait), i.e. what the boundary costs beyond an ordinary batch. It can be
//!   slightly negative when the boundary batch happened to arrive faster than the median.

use std::time::Duration;

/// When one batch was asked for, when it arrived and when the consumer finished with it, all
/// measured from one start instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchTiming {
    /// The consumer called `next()`.
    pub requested: Duration,
    /// `next()` returned the batch.
    pub arrived: Duration,
    /// The consumer's (simulated) step on the batch ended.
    pub done: Duration,
}

impl BatchTiming {
    /// Time spent waiting for this batch.
    pub fn wait(&self) -> Duration {
        self.arrived.saturating_sub(self.requested)
    }
}

/// One epoch boundary, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Boundary {
    /// Epoch that ends at this boundary (0-based).
    pub after_epoch: usize,
    /// From the last batch of the epoch to the first of the next.
    pub gap_ms: f64,
    /// Of the gap, the consumer's own step on the last batch.
    pub step_ms: f64,
    /// Of the gap, the wait for the first batch of the next epoch.
    pub wait_ms: f64,
    /// The gap minus one steady batch time (step as measured + steady wait); `None` when there
    /// is no steady batch to compare with (one batch per epoch).
    pub stall_ms: Option<f64>,
}

/// The median of `values` (mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Median wait in ms over batches that start no epoch (`per_epoch` batches per epoch); `None`
/// when every batch starts one.
pub fn steady_wait_ms(timings: &[BatchTiming], per_epoch: usize) -> Option<f64> {
    let waits: Vec<f64> = timings
        .iter()
        .enumerate()
        .filter(|(j, _)| per_epoch > 0 && j % per_epoch != 0)
        .map(|(_, t)| ms(t.wait()))
        .collect();
    median(&waits)
}

/// Median arrival-to-arrival interval in ms over batches that start no epoch.
pub fn steady_interval_ms(timings: &[BatchTiming], per_epoch: usize) -> Option<f64> {
    let gaps: Vec<f64> = (1..timings.len())
        .filter(|j| per_epoch > 0 && j % per_epoch != 0)
        .map(|j| ms(timings[j].arrived.saturating_sub(timings[j - 1].arrived)))
        .collect();
    median(&gaps)
}

/// Every epoch boundary of a run of `per_epoch` batches per epoch, with its stall measured
/// against `steady_wait_ms` (`None`: no stall figures).
pub fn boundaries(
    timings: &[BatchTiming],
    per_epoch: usize,
    steady_wait_ms: Option<f64>,
) -> Vec<Boundary> {
    if per_epoch == 0 {
        return Vec::new();
    }
    (per_epoch..timings.len())
        .step_by(per_epoch)
        .map(|first| {
            let (last, next) = (&timings[first - 1], &timings[first]);
            let gap_ms = ms(next.arrived.saturating_sub(last.arrived));
            let step_ms = ms(next.requested.saturating_sub(last.arrived));
            let wait_ms = ms(next.wait());
            Boundary {
                after_epoch: first / per_epoch - 1,
                gap_ms,
                step_ms,
                wait_ms,
                stall_ms: steady_wait_ms.map(|s| gap_ms - step_ms - s),
            }
        })
        .collect()
}

/// Wall time of each epoch in seconds: from the end of the previous epoch's last step (or the
/// start, for the first epoch) to the end of this epoch's last step. A last, partial epoch counts.
pub fn epoch_seconds(timings: &[BatchTiming], per_epoch: usize) -> Vec<f64> {
    if per_epoch == 0 {
        return Vec::new();
    }
    let mut start = Duration::ZERO;
    timings
        .chunks(per_epoch)
        .map(|c| {
            let end = c.last().expect("chunks are not empty").done;
            let s = end.saturating_sub(start).as_secs_f64();
            start = end;
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Duration {
        Duration::from_micros(ms * 1000)
    }

    /// A run with `per_epoch` batches per epoch, a 10 ms step, 1 ms steady waits, and the given
    /// extra wait at the first batch of each epoch after the first.
    fn run(per_epoch: usize, epochs: usize, boundary_wait_ms: &[u64]) -> Vec<BatchTiming> {
        let mut now = 0;
        let mut out = Vec::new();
        for j in 0..per_epoch * epochs {
            let wait = if j == 0 {
                7
            } else if j % per_epoch == 0 {
                boundary_wait_ms[j / per_epoch - 1]
            } else {
                1
            };
            let requested = now;
            let arrived = requested + wait;
            now = arrived + 10;
            out.push(BatchTiming {
                requested: t(requested),
                arrived: t(arrived),
                done: t(now),
            });
        }
        out
    }

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn stall_is_gap_minus_step_minus_steady_wait() {
        let timings = run(4, 3, &[1, 31]);
        let steady = steady_wait_ms(&timings, 4).unwrap();
        assert!((steady - 1.0).abs() < 1e-9, "{steady}");
        assert!((steady_interval_ms(&timings, 4).unwrap() - 11.0).abs() < 1e-9);
        let b = boundaries(&timings, 4, Some(steady));
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].after_epoch, b[1].after_epoch), (0, 1));
        // First boundary costs nothing beyond a steady batch; the second 30 ms more.
        assert!(
            (b[0].gap_ms - 11.0).abs() < 1e-9 && b[0].stall_ms.unwrap().abs() < 1e-9,
            "{:?}",
            b[0]
        );
        assert!((b[1].gap_ms - 41.0).abs() < 1e-9, "{:?}", b[1]);
        assert!((b[1].step_ms - 10.0).abs() < 1e-9 && (b[1].wait_ms - 31.0).abs() < 1e-9);
        assert!((b[1].stall_ms.unwrap() - 30.0).abs() < 1e-9, "{:?}", b[1]);
    }

    #[test]
    fn first_batch_and_boundaries_are_not_steady() {
        // The very first wait (7 ms) and the boundary waits (50 ms) must not move the median.
        let timings = run(3, 4, &[50, 50, 50]);
        assert!((steady_wait_ms(&timings, 3).unwrap() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn epoch_times_follow_the_last_step_of_each_epoch() {
        let timings = run(2, 2, &[5]);
        // Epoch 0: wait 7 + step 10 + wait 1 + step 10; epoch 1: wait 5 + 10 + 1 + 10.
        let e = epoch_seconds(&timings, 2);
        assert_eq!(e.len(), 2);
        assert!(
            (e[0] - 0.028).abs() < 1e-9 && (e[1] - 0.026).abs() < 1e-9,
            "{e:?}"
        );
    }

    #[test]
    fn degenerate_inputs() {
        assert!(boundaries(&[], 4, Some(0.0)).is_empty());
        assert!(epoch_seconds(&[], 0).is_empty());
        // One batch per epoch: every batch starts an epoch, so there is no steady figure and no
        // stall, though the boundaries and their gaps are still there.
        let one = run(1, 3, &[1, 1]);
        assert_eq!(steady_wait_ms(&one, 1), None);
        let b = boundaries(&one, 1, None);
        assert_eq!(b.len(), 2);
        assert!(b.iter().all(|b| b.stall_ms.is_none() && b.gap_ms > 0.0));
    }
}

//! Latency histograms for stats: log-linear buckets of nanoseconds (HDR-style), one relaxed
//! atomic add per value, on the threads that already read the clock for the busy and wait
//! counters. Memory is fixed (496 counters, 4 KB), and a quantile is within 6.25 % of the true
//! value (8 buckets per power of two, each reported by its midpoint).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Buckets per power of two, as bits: 8.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Values below `SUB` have a bucket each; above, `SUB` buckets per power of two up to 2^64.
const BUCKETS: usize = SUB + (64 - SUB_BITS as usize) * SUB;

/// Counts of nanosecond values in log-linear buckets.
#[derive(Debug)]
pub struct Histogram {
    counts: Box<[AtomicU64]>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// The bucket of `v`.
fn bucket(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    let group = (shift + 1) as usize;
    group * SUB + ((v >> shift) as usize & (SUB - 1))
}

/// The midpoint of bucket `i`'s values.
fn midpoint(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let shift = (i / SUB - 1) as u32;
    let low = ((SUB + i % SUB) as u64) << shift;
    low + ((1u64 << shift) >> 1)
}

impl Histogram {
    /// Counts `n` values of `ns` each (a run of `n` elements timed together: their mean).
    #[inline]
    pub fn record_n(&self, ns: u64, n: u64) {
        if n > 0 {
            self.counts[bucket(ns)].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Counts one value.
    #[inline]
    pub fn record(&self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// Values counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// The quantiles of the values counted, with `zeros` more values of 0 (events that took no
    /// time and were not recorded: elements the consumer did not wait for).
    pub fn percentiles(&self, zeros: u64) -> Percentiles {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let count = zeros + counts.iter().sum::<u64>();
        let at = |q: f64| -> f64 {
            if count == 0 {
                return 0.0;
            }
            let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
            if rank <= zeros {
                return 0.0;
            }
            let mut seen = zeros;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return midpoint(i) as f64 / 1e9;
                }
            }
            unreachable!("rank is at most the count")
        };
        Percentiles {
            count,
            p50_s: at(0.50),
            p90_s: at(0.90),
            p99_s: at(0.99),
        }
    }
}

/// Quantiles of a latency, in seconds (within 6.25 %).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Values counted.
    pub count: u64,
    /// Median.
    pub p50_s: f64,
    /// 90th percentile.
    pub p90_s: f64,
    /// 99th percentile.
    pub p99_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order_and_midpoints_are_within_their_bucket() {
        let mut last = 0;
        for v in (0..4096u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let b = bucket(v);
            assert!(b >= last && b < BUCKETS, "{v} -> {b}");
            last = b;
            let m = midpoint(b) as f64;
            assert!((m - v as f64).abs() <= v as f64 * 0.0625 + 0.5, "{v}: {m}");
        }
        for shift in 0..61 {
            let v = 1u64 << (shift + 3);
            assert_eq!(midpoint(bucket(v)), v + ((1u64 << shift) >> 1));
        }
    }

    #[test]
    fn quantiles_are_within_the_stated_error_and_count_unrecorded_zeros() {
        let h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000); // 1 us .. 1 ms
        }
        let p = h.percentiles(0);
        assert_eq!(p.count, 1000);
        for (got, want) in [(p.p50_s, 500e-6), (p.p90_s, 900e-6), (p.p99_s, 990e-6)] {
            assert!((got - want).abs() <= want * 0.0625, "{got} vs {want}");
        }
        // 9,000 elements the consumer did not wait for: the median and p90 wait are 0.
        let p = h.percentiles(9000);
        assert_eq!((p.count, p.p50_s, p.p90_s), (10_000, 0.0, 0.0));
        assert!(p.p99_s > 0.0);
        h.record_n(5, 0);
        assert_eq!(h.percentiles(0).count, 1000);
        assert_eq!(Histogram::default().percentiles(0), Percentiles::default());
    }
}

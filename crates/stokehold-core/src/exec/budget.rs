//! The pipeline-wide memory budget: every buffer of the parallel ops accounts the bytes of the
//! elements it holds here, and admits new work only while the total stays under the limit.
//!
//! A buffer that is empty may always take one element (otherwise an element larger than the whole
//! budget would stall the pipeline forever): the budget bounds memory to `limit` plus one element
//! per buffer, which the stats and the memory-budget test state as the overhead.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The most slots a buffer sized by an argument (a shuffle buffer, a batch, a window, an
/// interleave cycle) allocates before it is used: beyond it the buffer grows with use, so
/// `shuffle(buffer_size=10**9)` on a small input takes what it holds, not 10**9 slots up front.
pub(crate) const PREALLOC_MAX: usize = 1024;

/// Bytes held by a pipeline's buffers, against a limit.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    used: AtomicUsize,
    peak: AtomicUsize,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Budget {
            limit,
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes accounted now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The most bytes ever accounted at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// True when `more` bytes fit under the limit now.
    pub fn fits(&self, more: usize) -> bool {
        self.used().saturating_add(more) <= self.limit
    }

    /// Accounts `n` bytes (already admitted by the caller).
    pub fn add(&self, n: usize) {
        let now = self.used.fetch_add(n, Ordering::Relaxed) + n;
        // Read first: `fetch_max` is a locked compare-and-swap even when the peak stands, and
        // this runs per element.
        if now > self.peak.load(Ordering::Relaxed) {
            self.peak.fetch_max(now, Ordering::Relaxed);
        }
    }

    /// Releases `n` bytes.
    pub fn sub(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_and_tracks_peak() {
        let b = Budget::new(100);
        assert!(b.fits(100));
        b.add(60);
        assert!(!b.fits(41));
        b.add(30);
        b.sub(80);
        assert_eq!((b.used(), b.peak()), (10, 90));
    }
}

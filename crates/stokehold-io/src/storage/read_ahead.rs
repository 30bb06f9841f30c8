//! Bounded read-ahead of whole objects: while a sequential reader works through object `i`,
//! objects `i+1 ..= i+depth` are fetched in the background, so a remote read's latency hides
//! behind the decoding of the one before.
//!
//! ```
//! use stokehold_io::storage::read_ahead::ReadAhead;
//!
//! let mut ahead = ReadAhead::new(5, 2, |i| Ok(vec![i as u8; 3]));
//! let got: Vec<Vec<u8>> = ahead.by_ref().map(|r| r.unwrap()).collect();
//! assert_eq!(got[4], vec![4, 4, 4]);
//! ```
//!
//! Items come back in index order whatever order the fetches finish in; an error is handed back
//! at its index, and reading goes on after it (the caller decides whether to stop). At most
//! `depth` fetches run at once, one thread each: objects are whole shards (MiBs), so a thread per
//! fetch costs nothing next to the transfer, and memory is bounded by `depth` objects (or by
//! nothing when `fetch` fills the local cache and hands back a file). Dropping the reader lets
//! running fetches finish in the background and discards their results; none new start.
//! [`ReadAhead::settle`] waits for them instead.

use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

use stokehold_core::{Error, Result};

type Fetch<T> = dyn Fn(usize) -> Result<T> + Send + Sync;

/// An in-order iterator over `fetch(0) .. fetch(n-1)` with up to `depth` fetched ahead.
pub struct ReadAhead<T> {
    fetch: Arc<Fetch<T>>,
    n: usize,
    depth: usize,
    next_start: usize,
    pending: VecDeque<Receiver<Result<T>>>,
}

impl<T: Send + 'static> ReadAhead<T> {
    /// Reads objects `0..n` by `fetch`, keeping up to `depth` (at least 1) in flight.
    pub fn new(
        n: usize,
        depth: usize,
        fetch: impl Fn(usize) -> Result<T> + Send + Sync + 'static,
    ) -> Self {
        ReadAhead {
            fetch: Arc::new(fetch),
            n,
            depth: depth.max(1),
            next_start: 0,
            pending: VecDeque::new(),
        }
    }

    fn top_up(&mut self) {
        while self.pending.len() < self.depth && self.next_start < self.n {
            let (tx, rx) = sync_channel(1);
            let (fetch, i) = (Arc::clone(&self.fetch), self.next_start);
            let spawned = std::thread::Builder::new()
                .name(format!("stokehold-read-ahead-{i}"))
                .spawn(move || {
                    let _ = tx.send(fetch(i));
                });
            if spawned.is_err() {
                // No thread to be had (limits): fetch on the caller's thread instead.
                let (tx, rx) = sync_channel(1);
                let _ = tx.send((self.fetch)(i));
                self.pending.push_back(rx);
            } else {
                self.pending.push_back(rx);
            }
            self.next_start += 1;
        }
    }

    /// Fetches currently running or finished but not yet taken.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Waits for the fetches in flight to end, discarding their results, and starts none: a
    /// caller that gives up (say, at a failed fetch) returns once nothing it started is still
    /// running.
    pub fn settle(&mut self) {
        self.next_start = self.n;
        for rx in self.pending.drain(..) {
            let _ = rx.recv();
        }
    }
}

impl<T: Send + 'static> Iterator for ReadAhead<T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        self.top_up();
        let rx = self.pending.pop_front()?;
        let got = rx.recv().unwrap_or_else(|_| {
            Err(Error::invalid(
                "a read-ahead fetch panicked (a bug: fetches return errors, never panic)",
            ))
        });
        self.top_up();
        Some(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn settle_waits_for_the_fetches_in_flight_and_starts_no_more() {
        let done = Arc::new(AtomicUsize::new(0));
        let d = Arc::clone(&done);
        let mut ahead = ReadAhead::new(10, 3, move |i| {
            std::thread::sleep(Duration::from_millis(30));
            d.fetch_add(1, Ordering::SeqCst);
            Ok(i)
        });
        assert_eq!(ahead.next().unwrap().unwrap(), 0);
        // Fetches 1, 2 and 3 are running now.
        ahead.settle();
        assert_eq!(done.load(Ordering::SeqCst), 4);
        assert!(ahead.next().is_none());
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(done.load(Ordering::SeqCst), 4, "none started after settle");
    }

    #[test]
    fn in_order_bounded_and_errors_in_place() {
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (r, p) = (Arc::clone(&running), Arc::clone(&peak));
        let ahead = ReadAhead::new(12, 3, move |i| {
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            // Later indices finish first, to check the order is restored.
            std::thread::sleep(Duration::from_millis(20 - i as u64));
            r.fetch_sub(1, Ordering::SeqCst);
            if i == 5 {
                Err(Error::invalid("object 5 is gone"))
            } else {
                Ok(i)
            }
        });
        let got: Vec<std::result::Result<usize, String>> =
            ahead.map(|r| r.map_err(|e| e.to_string())).collect();
        assert_eq!(got.len(), 12);
        for (i, g) in got.iter().enumerate() {
            match g {
                Ok(v) => assert_eq!(*v, i),
                Err(e) => assert!(i == 5 && e.contains("object 5"), "{i}: {e}"),
            }
        }
        let peak = peak.load(Ordering::SeqCst);
        assert!((2..=3).contains(&peak), "peak in flight {peak}");
    }

    #[test]
    fn empty_and_depth_zero() {
        assert_eq!(ReadAhead::new(0, 4, Ok).count(), 0);
        let v: Vec<usize> = ReadAhead::new(3, 0, Ok).map(|r| r.unwrap()).collect();
        assert_eq!(v, [0, 1, 2]);
    }
}

//! Hedged reads against the slow tail, and the counters of [`super::stats`]: a ranged read that
//! has not answered within a delay learnt from recent reads gets one second, identical request;
//! the first full answer wins and the other request is dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, ObjectStore};
use tokio::sync::Semaphore;

/// Requests in flight per process at most: enough to hide S3's ~20-50 ms first-byte latency at
/// several GB/s, few enough not to be throttled (S3 allows thousands per prefix per second).
pub const MAX_IN_FLIGHT: usize = 32;

/// One ranged `GET`'s answer: the ETag it came from and its bytes.
pub(super) type Answer = std::result::Result<(Option<String>, Bytes), object_store::Error>;

/// A read waits at least this long before it is hedged: S3's time to first byte is typically
/// 10-50 ms with a tail to a few hundred; below ~100 ms a hedge would often duplicate a request
/// that was merely ordinary, doubling the load for nothing.
const HEDGE_FLOOR: Duration = Duration::from_millis(100);

/// A read is hedged when it takes this many times the median of recent small reads (when that is
/// above the floor): a request several medians late is in the tail, where a fresh request to
/// another server (S3 spreads a bucket over many) usually answers first ("The Tail at Scale").
const HEDGE_FACTOR: u32 = 4;

/// Bytes per second a body is allowed on top of the delay before its read counts as late: a
/// 16 MiB merged request is not late for transferring at 50 MB/s on one connection.
const HEDGE_MIN_RATE: u64 = 32 << 20;

/// Reads up to this size make the latency sample (their time is the round trip, not the
/// transfer), over the last [`LATENCY_WINDOW`] of them.
const SMALL_READ: u64 = 1 << 20;
const LATENCY_WINDOW: usize = 64;

/// `GET` requests sent (hedges and resumed downloads included), hedges sent, hedges that answered
/// first, body bytes received: for [`stats`].
pub(super) static REQUESTS: AtomicU64 = AtomicU64::new(0);
static HEDGES: AtomicU64 = AtomicU64::new(0);
static HEDGE_WINS: AtomicU64 = AtomicU64::new(0);
pub(super) static BYTES: AtomicU64 = AtomicU64::new(0);

/// This process's object-store reads so far (counters since start; a forked child goes on from
/// its parent's figures).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// `GET` requests sent, hedges and resumed downloads included.
    pub requests: u64,
    /// Second requests sent for reads that had not answered within the hedge delay.
    pub hedges: u64,
    /// Hedges whose answer came first.
    pub hedge_wins: u64,
    /// Body bytes received (those of dropped requests not counted).
    pub bytes: u64,
    /// Keys left out of listings: a `..`, `.` or empty segment (`remote/listing.rs`).
    pub keys_left_out: u64,
}

/// The counters of [`Stats`].
pub fn stats() -> Stats {
    Stats {
        requests: REQUESTS.load(Ordering::Relaxed),
        hedges: HEDGES.load(Ordering::Relaxed),
        hedge_wins: HEDGE_WINS.load(Ordering::Relaxed),
        bytes: BYTES.load(Ordering::Relaxed),
        keys_left_out: super::listing::LEFT_OUT.load(Ordering::Relaxed),
    }
}

/// What the requests of one process share: the in-flight limit and the recent latencies the
/// hedge delay is computed from.
pub(super) struct Shared {
    pub(super) in_flight: Semaphore,
    /// The last [`LATENCY_WINDOW`] durations of small reads (oldest first).
    latencies: Mutex<VecDeque<Duration>>,
}

/// One ranged `GET` and its body (the caller holds an in-flight permit).
async fn get_once(s: &Arc<dyn ObjectStore>, path: &Path, opts: GetOptions) -> Answer {
    REQUESTS.fetch_add(1, Ordering::Relaxed);
    let g = s.get_opts(path, opts).await?;
    let e_tag = g.meta.e_tag.clone();
    let data = g.bytes().await?;
    BYTES.fetch_add(data.len() as u64, Ordering::Relaxed);
    Ok((e_tag, data))
}

/// A ranged `GET` of `len` bytes, hedged: if no full answer came within [`Shared::hedge_delay`],
/// a second identical request goes out (taking its own in-flight permit, so hedges count toward
/// [`MAX_IN_FLIGHT`]) and the first full answer wins; the other request is dropped, which closes
/// its connection. At most one hedge per read. An error from one waits for the other.
pub(super) async fn hedged_get(
    shared: &Shared,
    s: &Arc<dyn ObjectStore>,
    path: &Path,
    opts: GetOptions,
    len: u64,
) -> Answer {
    use futures_util::future::{select, Either};
    let permit = shared.in_flight.acquire().await.expect("never closed");
    let delay = shared.hedge_delay(len);
    let start = Instant::now();
    let again = opts.clone();
    let first = std::pin::pin!(async {
        let _permit = permit;
        get_once(s, path, opts).await
    });
    let timer = std::pin::pin!(tokio::time::sleep(delay));
    let first = match select(first, timer).await {
        Either::Left((r, _)) => {
            if r.is_ok() && len <= SMALL_READ {
                shared.record(start.elapsed());
            }
            return r;
        }
        Either::Right(((), first)) => first,
    };
    HEDGES.fetch_add(1, Ordering::Relaxed);
    let second = std::pin::pin!(async {
        let _permit = shared.in_flight.acquire().await.expect("never closed");
        get_once(s, path, again).await
    });
    match select(first, second).await {
        Either::Left((Ok(a), _)) => Ok(a),
        Either::Left((Err(_), second)) => second.await.inspect(|_| {
            HEDGE_WINS.fetch_add(1, Ordering::Relaxed);
        }),
        Either::Right((Ok(a), _)) => {
            HEDGE_WINS.fetch_add(1, Ordering::Relaxed);
            Ok(a)
        }
        Either::Right((Err(_), first)) => first.await,
    }
}

impl Shared {
    pub(super) fn new() -> Shared {
        Shared {
            in_flight: Semaphore::new(MAX_IN_FLIGHT),
            latencies: Mutex::new(VecDeque::with_capacity(LATENCY_WINDOW)),
        }
    }

    /// How long a read of `len` bytes waits for its answer before it is hedged:
    /// `max(HEDGE_FLOOR, HEDGE_FACTOR x the median of recent small reads)`, plus the time its
    /// body takes at [`HEDGE_MIN_RATE`].
    fn hedge_delay(&self, len: u64) -> Duration {
        let recent = self.latencies.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<Duration> = recent.iter().copied().collect();
        drop(recent);
        let median = if v.is_empty() {
            Duration::ZERO
        } else {
            let mid = v.len() / 2;
            *v.select_nth_unstable(mid).1
        };
        HEDGE_FLOOR.max(median * HEDGE_FACTOR)
            + Duration::from_secs_f64(len as f64 / HEDGE_MIN_RATE as f64)
    }

    /// Notes the duration of a small read that answered without a hedge.
    fn record(&self, d: Duration) {
        let mut recent = self.latencies.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() == LATENCY_WINDOW {
            recent.pop_front();
        }
        recent.push_back(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_is_the_floor_or_a_multiple_of_the_median_plus_the_transfer() {
        let sh = Shared::new();
        assert_eq!(sh.hedge_delay(0), HEDGE_FLOOR, "no sample yet: the floor");
        for ms in [1, 2, 3] {
            sh.record(Duration::from_millis(ms));
        }
        assert_eq!(
            sh.hedge_delay(0),
            HEDGE_FLOOR,
            "fast reads: still the floor"
        );
        for _ in 0..LATENCY_WINDOW {
            sh.record(Duration::from_millis(50));
        }
        // The window forgot the fast reads: 4 x 50 ms, plus 32 MiB at 32 MiB/s.
        assert_eq!(
            sh.hedge_delay(HEDGE_MIN_RATE),
            Duration::from_millis(200) + Duration::from_secs(1)
        );
    }
}

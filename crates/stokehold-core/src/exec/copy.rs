//! Copies of many rows into one buffer split across threads: the table gather's batch copy.
//!
//! One thread copying rows of a memory-mapped table out of the page cache does not reach the
//! memory bus's speed: every 4 KiB page of a row is a TLB miss and a restart of the hardware
//! prefetcher, and one core keeps only so many misses in flight. Two threads (each with its
//! own TLB and miss buffers) copying halves of a batch go further, and so does asking for the
//! pages of the next rows while the current one is copied ([`prefetch_row`]).
//!
//! [`copy_rows`] cuts the rows into chunks that the caller and helper threads claim from a
//! shared counter, so a helper that starts late (or not at all, on a busy machine) only takes
//! fewer chunks: the caller never waits for a thread that has not started, only for chunks a
//! helper already claimed. Helpers run on a process-wide [`Pool`] (threads reused, gone 40 ms
//! after the last copy). Results do not depend on which thread copied which row.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use bytes::Bytes;

use crate::alloc::prefetch_memory;
use crate::alloc::Filler;
use crate::exec::pool::Pool;

/// Below this many bytes a batch is copied by the caller alone: waking a helper (~10-50 us on a
/// loaded VM) costs more than it saves on a copy of a few hundred microseconds.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// Bytes per claimed chunk: large enough that claiming (one atomic add) is noise, small enough
/// that a late helper still finds work and the caller never waits long for the last chunk.
const CHUNK_BYTES: usize = 256 << 10;

/// Rows ahead of the one being copied whose pages are prefetched: far enough for the page walk
/// and the first lines to land before the copy reaches them (a 16 KiB row takes ~2 us to copy),
/// near enough to stay in cache.
const PREFETCH_AHEAD: usize = 2;

/// Page size the prefetches step by (4 KiB everywhere we build; a larger page only means
/// redundant prefetches).
const PAGE: usize = 4096;

/// The helpers' pool, shared by every copy in the process.
fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(Pool::new)
}

/// Threads besides the caller that may help one copy: one per other core, at most 3 (beyond
/// that the memory bus, not the cores, is the limit); `STOKEHOLD_COPY_HELPERS` overrides it.
fn helpers() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        // STOKEHOLD_COPY_HELPERS=0 turns the split off (to measure what it gains).
        if let Some(n) = std::env::var("STOKEHOLD_COPY_HELPERS")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            return n;
        }
        std::thread::available_parallelism()
            .map(|n| n.get().saturating_sub(1))
            .unwrap_or(0)
            .min(3)
    })
}

/// Asks for the first cache line of every page of `len` bytes at `ptr` (a TLB fill and a miss
/// started early: the copy then streams each page from a warm start).
#[inline]
pub fn prefetch_row(ptr: *const u8, len: usize) {
    let mut off = 0;
    while off < len {
        prefetch_memory(ptr.wrapping_add(off));
        off += PAGE;
    }
}

/// One copy in flight: pieces written back to back into `dst`, claimed a chunk (a run of
/// consecutive pieces) at a time. Addresses only: the caller keeps the memory alive, as it
/// returns only after every claimed chunk is done.
struct Task {
    dst: usize,
    /// (source address, length) of each piece, in destination order.
    pieces: Vec<(usize, usize)>,
    /// Destination offset of each piece, and the total at the end.
    offsets: Vec<usize>,
    /// Chunk `c` is pieces `bounds[c]..bounds[c + 1]`.
    bounds: Vec<usize>,
    next: AtomicUsize,
    done: AtomicUsize,
    caller: Thread,
}

impl Task {
    fn chunks(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Claims and copies chunks until none are left.
    fn work(&self) {
        let chunks = self.chunks();
        loop {
            let c = self.next.fetch_add(1, Ordering::Relaxed);
            if c >= chunks {
                return;
            }
            for k in self.bounds[c]..self.bounds[c + 1] {
                if let Some(&(ahead, len)) = self.pieces.get(k + PREFETCH_AHEAD) {
                    prefetch_row(ahead as *const u8, len);
                }
                let (src, len) = self.pieces[k];
                // SAFETY: the constructors' contract: every piece is `len` readable bytes,
                // `dst` has room for `offsets[last]` bytes, pieces land on disjoint ranges, and
                // all of it outlives this call because the caller waits until `done == chunks`
                // (this chunk counts once copied) before returning or freeing anything.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        src as *const u8,
                        (self.dst as *mut u8).add(self.offsets[k]),
                        len,
                    )
                };
            }
            if self.done.fetch_add(1, Ordering::Release) + 1 == chunks {
                self.caller.unpark();
            }
        }
    }
}

/// Copies `pieces` (address, length) back to back into a new buffer of `total` bytes, the
/// caller and helper threads sharing the work when it is large.
///
/// # Safety
/// Each piece must be `length` readable bytes that stay valid and unchanged for the call, and
/// the lengths must add up to `total`.
unsafe fn copy_pieces(pieces: Vec<(usize, usize)>, total: usize) -> Vec<u8> {
    let mut buf = crate::alloc::large_vec(total);
    let mut offsets = Vec::with_capacity(pieces.len() + 1);
    let mut bounds = vec![0];
    let (mut at, mut chunk) = (0usize, 0usize);
    for (k, &(_, len)) in pieces.iter().enumerate() {
        offsets.push(at);
        at += len;
        chunk += len;
        if chunk >= CHUNK_BYTES {
            bounds.push(k + 1);
            chunk = 0;
        }
    }
    offsets.push(at);
    debug_assert_eq!(at, total);
    if *bounds.last().expect("starts with 0") != pieces.len() {
        bounds.push(pieces.len());
    }
    let task = Arc::new(Task {
        dst: buf.as_mut_ptr() as usize,
        pieces,
        offsets,
        bounds,
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        caller: std::thread::current(),
    });
    let chunks = task.chunks();
    if total >= PARALLEL_MIN_BYTES {
        for _ in 0..helpers().min(chunks.saturating_sub(1)) {
            let t = task.clone();
            // A refused thread only means the caller copies more itself.
            let _ = pool().spawn(move || t.work());
        }
    }
    task.work();
    // Only chunks a helper claimed are left; they finish within microseconds unless the helper
    // was preempted, so spin briefly, then sleep until the last one unparks us.
    let mut spins = 0u32;
    while task.done.load(Ordering::Acquire) < chunks {
        if spins < 200 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::park_timeout(Duration::from_millis(1));
        }
    }
    // SAFETY: every chunk is done, so all `total` bytes were written.
    unsafe { buf.set_len(total) };
    buf
}

/// A new buffer whose row `k` is row `rows[k]` of `src` (rows of `row_bytes` bytes), copied
/// by the caller and helper threads for large copies. Panics on an index past `src` (callers
/// check indices first, to name the table and the row in their error).
///
/// The result is a plain `Vec` (malloc aligns it to 16 bytes on the platforms we build for), so
/// it stays uniquely owned and Python can hand it out as a writable array; it is not zeroed
/// first, every byte is written once by the copy.
pub fn copy_rows(src: &Bytes, row_bytes: usize, rows: &[usize]) -> Vec<u8> {
    assert!(
        rows.iter().all(|&r| (r + 1) * row_bytes <= src.len()),
        "copy_rows: row out of range"
    );
    let total = rows.len() * row_bytes;
    if total < PARALLEL_MIN_BYTES || helpers() == 0 {
        let mut buf = Filler::new(total);
        for (k, &r) in rows.iter().enumerate() {
            if let Some(&ahead) = rows.get(k + PREFETCH_AHEAD) {
                prefetch_row(src[ahead * row_bytes..].as_ptr(), row_bytes);
            }
            buf.push(&src[r * row_bytes..(r + 1) * row_bytes]);
        }
        return buf.into_vec();
    }
    let base = src.as_ptr() as usize;
    let pieces = rows
        .iter()
        .map(|&r| (base + r * row_bytes, row_bytes))
        .collect();
    // SAFETY: every row was checked to lie inside `src`, borrowed for the whole call.
    unsafe { copy_pieces(pieces, total) }
}

/// `parts` concatenated into a new buffer (the copy split across threads when large, each
/// part cut into chunk-sized pieces so that one long part is shared too).
pub fn concat(parts: &[&[u8]]) -> Vec<u8> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    if total < PARALLEL_MIN_BYTES || helpers() == 0 {
        // The batch path's common case (a few KiB per feature): no bookkeeping at all.
        let mut buf = Filler::new(total);
        for p in parts {
            buf.push(p);
        }
        return buf.into_vec();
    }
    let mut pieces = Vec::with_capacity(parts.len());
    for p in parts {
        for c in p.chunks(CHUNK_BYTES) {
            pieces.push((c.as_ptr() as usize, c.len()));
        }
    }
    // SAFETY: the pieces are sub-slices of `parts`, borrowed for the whole call.
    unsafe { copy_pieces(pieces, total) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(src: &[u8], rb: usize, rows: &[usize]) -> Vec<u8> {
        rows.iter()
            .flat_map(|&r| src[r * rb..(r + 1) * rb].iter().copied())
            .collect()
    }

    #[test]
    fn parallel_copy_equals_a_plain_copy() {
        let rb = 4096 + 12; // not a multiple of the page
        let n = 700;
        let src: Vec<u8> = (0..n * rb).map(|i| (i * 7 % 251) as u8).collect();
        let mut rng = crate::rng::Rng::keyed(3, &[1]);
        for len in [0usize, 1, 3, 255, 256, 1000] {
            let rows: Vec<usize> = (0..len).map(|_| rng.below(n as u64) as usize).collect();
            let dst = copy_rows(&Bytes::from(src.clone()), rb, &rows);
            assert_eq!(dst, reference(&src, rb, &rows), "{len} rows");
        }
    }

    #[test]
    fn concat_equals_a_plain_concatenation() {
        let parts: Vec<Vec<u8>> = [0usize, 5, 3 << 20, 100_000, 0, 1 << 18]
            .iter()
            .enumerate()
            .map(|(k, &n)| (0..n).map(|i| ((i * 13 + k) % 256) as u8).collect())
            .collect();
        let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
        assert_eq!(concat(&refs), parts.concat());
        assert!(concat(&[]).is_empty());
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn unchecked_rows_are_refused() {
        let src = vec![0u8; 64];
        copy_rows(&Bytes::from(src), 32, &[2]);
    }
}

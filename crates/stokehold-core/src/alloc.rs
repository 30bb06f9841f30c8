//! Large output buffers (a batch of images, a padded batch of clips) backed by transparent huge
//! pages where the kernel offers them on request (`/sys/kernel/mm/transparent_hugepage/enabled`
//! = `madvise`, the common default), as numpy does for its arrays of 4 MiB or more.
//!
//! Why: a buffer of 4 KiB pages costs one page fault per 4 KiB to fill and one page to unmap per
//! 4 KiB when freed. Dropping a 168 MB batch of 32 x 10x512x512 float16 took 37 ms in `munmap`
//! (strace) against numpy's 0.85 ms for an array of the same size, whose pages are 2 MiB; the
//! consumer pays that on its own thread each time it lets a batch go. Asking for huge pages before
//! the first write brings both costs to numpy's.
//!
//! Reuse: a large buffer that its last user lets go through [`reuse`] (the Python bindings do,
//! when numpy frees a batch it owned alone) waits in a small process-wide pool, and the next
//! [`large_vec`] / [`zeroed_vec`] of about its size takes it back instead of asking the kernel
//! for fresh pages. Fresh pages are zeroed by the kernel and faulted in one by one: for a
//! 38 MB batch of 64 normalised 224x224 images that was 5.5% of the pipeline's CPU time
//! (`clear_page_erms` under the batch copy). The pool holds at most [`POOL_BUFFERS`] buffers
//! and [`POOL_BYTES`] bytes, and frees any buffer that waited longer than [`POOL_IDLE`], so a
//! finished pipeline leaves at most that much behind, and only until the next large
//! allocation or release.

use std::cell::Cell;
use std::fmt::Display;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Buffers of at least this many bytes are advised (numpy's threshold: below it a huge page
/// would mostly be waste).
pub const HUGE_PAGE_MIN: usize = 4 << 20;

/// An empty vector with room for `capacity` bytes, its memory advised to use huge pages when
/// large enough. Fill it with `extend_from_slice` / `resize`.
pub fn large_vec(capacity: usize) -> Vec<u8> {
    if let Some(mut v) = take(capacity) {
        v.clear();
        return v;
    }
    let v = Vec::with_capacity(capacity);
    advise_huge(v.as_ptr(), v.capacity());
    v
}

/// `len` zero bytes (memory fresh from the allocator, so untouched until written), advised as
/// [`large_vec`] is.
pub fn zeroed_vec(len: usize) -> Vec<u8> {
    if let Some(mut v) = take(len) {
        v.clear();
        v.resize(len, 0);
        return v;
    }
    let v = vec![0u8; len];
    advise_huge(v.as_ptr(), v.capacity());
    v
}

// ---- Buffers sized by input data or an argument -------------------------------------------
//
// Every buffer whose size comes from input data (a header, a record's length) or an argument
// (a pad length, an output size, an FFT size) is sized through [`checked_bytes`] and allocated
// through the `try_` functions below: a size past the element ceiling, or an allocation the
// allocator refuses, is an `InvalidArgumentError` naming the op, what was being made and the
// bytes, never an abort of the process (which an `on_error="skip"` could not catch either).

thread_local! {
    /// The memory budget of the executor installed on this thread, when the pipeline was given
    /// one of its own ([`with_budget_ceiling`]).
    static BUDGET_CEILING: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The memory this process can have, read once: the machine's (`MemTotal`), or the process's
/// address-space limit (`RLIMIT_AS`) when smaller; `usize::MAX` where unknown.
fn machine_memory() -> usize {
    static TOTAL: OnceLock<usize> = OnceLock::new();
    *TOTAL.get_or_init(|| {
        let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        });
        let limit = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|l| {
                let line = l.lines().find(|l| l.starts_with("Max address space"))?;
                line.split_whitespace().nth(3)?.parse::<usize>().ok()
            });
        total.unwrap_or(usize::MAX).min(limit.unwrap_or(usize::MAX))
    })
}

/// The most bytes one buffer sized by data or an argument may take: the machine's memory, or
/// the memory budget the running pipeline was given (`with_options(memory_budget=...)`), the
/// smaller. (A pipeline on the default budget may still hold elements larger than it: the
/// budget bounds what is in flight, an element may always pass alone.)
pub fn element_ceiling() -> usize {
    let budget = BUDGET_CEILING.with(Cell::get).unwrap_or(usize::MAX);
    machine_memory().min(budget)
}

/// Runs `f` with `budget` (when given) as this thread's element ceiling: the executor does this
/// when it installs itself on a thread, for a pipeline given a memory budget of its own.
pub fn with_budget_ceiling<T>(budget: Option<usize>, f: impl FnOnce() -> T) -> T {
    let prev = BUDGET_CEILING.with(|c| c.replace(budget));
    struct Restore(Option<usize>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUDGET_CEILING.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(prev);
    f()
}

/// The bytes of `count` items of `item` bytes each, for `what` in op `op`: an error when the
/// product overflows or passes [`element_ceiling`]. The one size check of every buffer sized
/// by input data or an argument.
pub fn checked_bytes(op: &str, what: impl Display, count: usize, item: usize) -> Result<usize> {
    let ceiling = element_ceiling();
    match count.checked_mul(item) {
        Some(bytes) if bytes <= ceiling => Ok(bytes),
        Some(bytes) => Err(too_large(op, what, &format!("{bytes} bytes"), ceiling)),
        None => Err(too_large(
            op,
            what,
            &format!("{count} x {item} bytes"),
            ceiling,
        )),
    }
}

fn too_large(op: &str, what: impl Display, size: &str, ceiling: usize) -> Error {
    let limit = if ceiling == machine_memory() {
        format!("the memory this process can have ({ceiling} bytes)")
    } else {
        format!("the pipeline's memory budget ({ceiling} bytes)")
    };
    Error::invalid(format!("{op}: {what} would take {size}, more than {limit}"))
}

fn refused(op: &str, what: impl Display, bytes: usize) -> Error {
    Error::invalid(format!(
        "{op}: {what} would take {bytes} bytes, which the allocator refused"
    ))
}

/// An empty vector with room for `count` items, checked ([`checked_bytes`]) and asked for
/// fallibly: an error, never an abort.
pub fn try_vec<T>(op: &str, what: impl Display, count: usize) -> Result<Vec<T>> {
    let bytes = checked_bytes(op, &what, count, std::mem::size_of::<T>())?;
    let mut v = Vec::new();
    v.try_reserve_exact(count)
        .map_err(|_| refused(op, &what, bytes))?;
    Ok(v)
}

/// `count` copies of `value`, checked and fallible as [`try_vec`].
pub fn try_filled<T: Clone>(
    op: &str,
    what: impl Display,
    value: T,
    count: usize,
) -> Result<Vec<T>> {
    let mut v = try_vec(op, what, count)?;
    v.resize(count, value);
    Ok(v)
}

/// [`zeroed_vec`], checked and fallible as [`try_vec`] (zeroed pages straight from the
/// allocator, untouched until written).
pub fn try_zeroed_vec(op: &str, what: impl Display, len: usize) -> Result<Vec<u8>> {
    checked_bytes(op, &what, len, 1)?;
    if let Some(mut v) = take(len) {
        v.clear();
        v.resize(len, 0);
        return Ok(v);
    }
    if len == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(len).map_err(|_| refused(op, &what, len))?;
    // SAFETY: `layout` has a non-zero size; a null result is handled.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(refused(op, what, len));
    }
    // SAFETY: `ptr` was allocated by the global allocator for exactly `len` bytes of `u8`
    // (alignment 1), all initialised to zero.
    let v = unsafe { Vec::from_raw_parts(ptr, len, len) };
    advise_huge(v.as_ptr(), v.capacity());
    Ok(v)
}

/// [`large_vec`], checked and fallible as [`try_vec`].
pub fn try_large_vec(op: &str, what: impl Display, capacity: usize) -> Result<Vec<u8>> {
    checked_bytes(op, &what, capacity, 1)?;
    if let Some(mut v) = take(capacity) {
        v.clear();
        return Ok(v);
    }
    let v = try_vec::<u8>(op, what, capacity)?;
    advise_huge(v.as_ptr(), v.capacity());
    Ok(v)
}

/// How far ahead of its copy a [`Filler`] asks for the lines it will write: 4 KiB (four records
/// of 1 KiB) measured as well as 8 KiB and better than 16 KiB (`shard_read_bench`, the distance
/// as a temporary switch, two alternations).
pub const WRITE_AHEAD: usize = 4096;

/// The pieces a [`Filler`] asks ahead for: 1 to 4 KiB. `bench/shard/write_ahead.c` (the same
/// copies in C, into 48 rotating buffers of 256 KiB; four runs while other work ran) gave ratios
/// of 1.12-1.56 at 1 KiB, 0.98-1.76 at 2 KiB and 1.01-1.11 at 4 KiB against plain copies, but
/// 0.85-0.91 at 256 B (the asks cost more than the short copy waits), 0.88-1.06 at 512 B, and
/// 0.83-1.01 at 8 and 16 KiB (glibc's `memcpy` streams those itself).
const AHEAD_PIECES: std::ops::RangeInclusive<usize> = 1024..=4096;

/// A buffer of known final size filled front to back, which asks for the cache lines
/// [`WRITE_AHEAD`] bytes past each copy of 1 to 4 KiB before the copy gets there
/// ([`prefetch_write`]): a batch buffer is seldom in the core's cache, and such
/// a copy waits for each line it stores to. Other pieces are copied as `Vec` would.
pub struct Filler {
    buf: Vec<u8>,
    /// Bytes from the start whose lines were asked for (or need not be).
    asked: usize,
}

impl Filler {
    /// An empty [`large_vec`] of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Filler {
            buf: large_vec(capacity),
            asked: 0,
        }
    }

    /// Appends `src` (growing the buffer if it has no room, as `Vec` does).
    #[inline]
    pub fn push(&mut self, src: &[u8]) {
        let end = self.buf.len() + src.len();
        if AHEAD_PIECES.contains(&src.len()) {
            let want = (end + WRITE_AHEAD).min(self.buf.capacity());
            if want > self.asked {
                let from = self.buf.as_ptr().wrapping_add(self.asked);
                prefetch_write(from, want - self.asked);
                self.asked = want;
            }
        } else {
            self.asked = self.asked.max(end);
        }
        self.buf.extend_from_slice(src);
    }

    /// The filled buffer.
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
}

// ---- Handing freed memory back ---------------------------------------------------------------

/// What [`release_freed`] runs.
static RELEASE: OnceLock<fn()> = OnceLock::new();

/// Installs `hook` as what [`release_freed`] runs: the program's allocator handing what the
/// calling thread freed (and keeps for reuse) back to the system now. The Python extension,
/// which uses mimalloc, installs its `mi_collect(true)`; without a hook nothing runs (glibc's
/// malloc returns blocks of 128 KiB or more as they are freed). The first hook installed stays.
pub fn set_release_hook(hook: fn()) {
    let _ = RELEASE.set(hook);
}

/// Runs the release hook ([`set_release_hook`]), if any: where a thread has freed much that
/// nothing will reuse soon. An in-memory cache runs it on the thread whose element completes
/// the claims (`ops/cache.rs`), and a pool thread as it ends (`exec/pool.rs`), so that a cache
/// filled by decoders costs its raw bytes, not also what the decoders' threads kept.
pub fn release_freed() {
    if let Some(release) = RELEASE.get() {
        release();
    }
}

/// The most buffers the pool keeps (a prefetch buffer's worth of batches in flight).
pub const POOL_BUFFERS: usize = 2;
/// The most bytes the pool keeps, all buffers together.
pub const POOL_BYTES: usize = 256 << 20;
/// How long a buffer may wait in the pool before it is freed.
pub const POOL_IDLE: Duration = Duration::from_secs(2);

static POOL: Mutex<Vec<(Vec<u8>, Instant)>> = Mutex::new(Vec::new());

fn pool() -> std::sync::MutexGuard<'static, Vec<(Vec<u8>, Instant)>> {
    // A panic while holding the lock leaves nothing half-done: the list is always valid.
    let mut p = POOL.lock().unwrap_or_else(|e| e.into_inner());
    p.retain(|(_, at)| at.elapsed() < POOL_IDLE);
    p
}

/// A pooled buffer of at least `len` bytes and at most a quarter more, so that a large buffer
/// is not spent on a small batch.
fn take(len: usize) -> Option<Vec<u8>> {
    if len < HUGE_PAGE_MIN {
        return None;
    }
    let mut p = pool();
    let fits = |v: &Vec<u8>| v.capacity() >= len && v.capacity() - len <= len / 4;
    let i = p.iter().position(|(v, _)| fits(v))?;
    Some(p.swap_remove(i).0)
}

/// Gives a buffer that nothing refers to any more back for reuse by the next [`large_vec`] or
/// [`zeroed_vec`] of about its size; small buffers, and any the pool has no room for, are
/// simply freed.
pub fn reuse(v: Vec<u8>) {
    let cap = v.capacity();
    if !(HUGE_PAGE_MIN..=POOL_BYTES).contains(&cap) {
        return;
    }
    let mut p = pool();
    let held: usize = p.iter().map(|(b, _)| b.capacity()).sum();
    if p.len() < POOL_BUFFERS && held + cap <= POOL_BYTES {
        p.push((v, Instant::now()));
    }
}

/// `madvise(MADV_HUGEPAGE)` over the whole 4 KiB pages of `[ptr, ptr + len)`; a hint, so a
/// refusal (no THP in this kernel, a non-Linux system) changes nothing but speed.
fn advise_huge(ptr: *const u8, len: usize) {
    #[cfg(target_os = "linux")]
    if len >= HUGE_PAGE_MIN {
        const PAGE: usize = 4096;
        let start = (ptr as usize).div_ceil(PAGE) * PAGE;
        let end = (ptr as usize + len) / PAGE * PAGE;
        if end > start {
            // SAFETY: the range lies inside an allocation this process owns; MADV_HUGEPAGE only
            // changes how the kernel backs it, never its contents.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

/// Asks the CPU for the cache lines of `len` bytes at `ptr`, to be written (`prefetchw`; a
/// no-op on other architectures, and on x86-64 CPUs without it).
///
/// For copies into a buffer that is not in the core's cache (a batch buffer, whose last use was
/// one or many batches ago): each store to an absent line waits for the line to be read first,
/// and asking a few KiB ahead of the copy overlaps those reads (see `alloc::Filler`).
/// `shard_read_bench`'s rows of two threads each keeping their last 48 batches of 256 records of
/// 1 KiB alive, three alternations of builds without and with it: 5.35-5.76M -> 6.61-7.01M
/// records/s sequential, 3.52-3.84M -> 3.99-4.12M shuffled; with a hot buffer (the same threads
/// keeping none), no change.
#[inline]
pub fn prefetch_write(ptr: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        // From the start of `ptr`'s line, so that the line holding the last byte is asked for.
        let line = ptr.wrapping_sub(ptr as usize % 64);
        let end = len + ptr as usize % 64;
        let mut off = 0;
        while off < end {
            // SAFETY: a prefetch never faults, whatever the address.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_ET0 }>(
                    line.wrapping_add(off) as *const i8,
                )
            };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (ptr, len);
}

/// Asks the CPU to bring the cache line at `ptr` in (a no-op on other architectures).
#[inline]
pub fn prefetch_memory(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(ptr as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filler_holds_exactly_what_was_pushed() {
        // Pieces of odd sizes (the write-ahead crosses lines and the end of the capacity), and
        // more than the capacity asked for (the buffer grows as a Vec does).
        let parts: Vec<Vec<u8>> = [0usize, 1, 63, 64, 65, 1000, 4097, 9000]
            .iter()
            .enumerate()
            .map(|(k, &n)| (0..n).map(|i| (i * 31 + k) as u8).collect())
            .collect();
        let all = parts.concat();
        for cap in [all.len(), all.len() / 2, 0] {
            let mut f = Filler::new(cap);
            for p in &parts {
                f.push(p);
            }
            assert_eq!(f.into_vec(), all, "capacity {cap}");
        }
    }

    #[test]
    fn a_released_buffer_is_reused_by_the_next_one_of_about_its_size() {
        // The pool is process-wide and other tests run beside this one: sizes no other test
        // asks for, so that none takes these buffers meanwhile.
        let len = (24 << 20) + 12_345;
        let mut v = large_vec(len);
        v.extend(std::iter::repeat_n(9u8, len));
        let addr = v.as_ptr();
        reuse(v);
        // Much smaller: not spent on it.
        let small = large_vec(HUGE_PAGE_MIN);
        assert_ne!(small.as_ptr(), addr);
        // The same size: the same memory, empty again; zeroed when asked for zeros.
        let again = large_vec(len);
        assert_eq!((again.as_ptr(), again.len()), (addr, 0));
        reuse(again);
        let z = zeroed_vec(len - 100);
        assert_eq!(z.as_ptr(), addr);
        assert!(z.len() == len - 100 && z.iter().all(|&b| b == 0));
        // Bounded: more releases than the pool holds are freed.
        drop(z);
        let odd = (40 << 20) + 777;
        for _ in 0..POOL_BUFFERS + 2 {
            reuse(Vec::with_capacity(odd));
        }
        assert_eq!(pool().len(), POOL_BUFFERS);
        // Never more than POOL_BYTES, and nothing small.
        reuse(Vec::with_capacity(POOL_BYTES + 1));
        reuse(vec![0u8; 16]);
        assert!(pool().iter().all(|(b, _)| b.capacity() == odd));
        // Idle buffers are freed on the next use of the pool.
        pool().iter_mut().for_each(|(_, at)| *at -= POOL_IDLE);
        assert!(pool().is_empty());
        drop(small);
    }

    #[test]
    fn buffers_hold_what_is_written() {
        let mut v = large_vec(HUGE_PAGE_MIN + 3);
        v.extend_from_slice(&[7u8; 5]);
        v.resize(HUGE_PAGE_MIN + 3, 1);
        assert_eq!(&v[..6], &[7, 7, 7, 7, 7, 1]);
        let z = zeroed_vec(HUGE_PAGE_MIN * 2);
        assert!(z.iter().all(|&b| b == 0));
        assert!(large_vec(0).is_empty());
    }
}

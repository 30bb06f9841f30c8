//! Large output buffers (a batch of images, a padded batch of clips) backed by transparent huge
//! pages where the kernel offers them on request (`/sys/kernel/mm/transparent_hugepage/enabled`
//! = `madvise`, the common default), as numpy does for its arrays of 4 MiB or more.
//!
//! Why: a buffer of 4 KiB pages costs one page fault per 4 KiB to fill and one page to unmap per
//! 4 KiB when freed. Dropping a 168 MB batch of 32 x 10x512x512 float16 took 37 ms in `munmap`
//! (strace) against numpy's 0.85 ms for an array of the same size, whose pages are 2 MiB; the
//! consumer pays that on its own thread each time it lets a batch go. Asking for huge pages before
//! the first write brings both costs to numpy's.

/// Buffers of at least this many bytes are advised (numpy's threshold: below it a huge page
/// would mostly be waste).
pub const HUGE_PAGE_MIN: usize = 4 << 20;

/// An empty vector with room for `capacity` bytes, its memory advised to use huge pages when
/// large enough. Fill it with `extend_from_slice` / `resize`.
pub fn large_vec(capacity: usize) -> Vec<u8> {
    let v = Vec::with_capacity(capacity);
    advise_huge(v.as_ptr(), v.capacity());
    v
}

/// `len` zero bytes (memory fresh from the allocator, so untouched until written), advised as
/// [`large_vec`] is.
pub fn zeroed_vec(len: usize) -> Vec<u8> {
    let v = vec![0u8; len];
    advise_huge(v.as_ptr(), v.capacity());
    v
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

#[cfg(test)]
mod tests {
    use super::*;

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

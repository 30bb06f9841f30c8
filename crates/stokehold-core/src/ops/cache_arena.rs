//! The in-memory cache's arena: elements copied once, as they arrive, into one buffer that grows
//! in place, so that a cache never holds its data twice.
//!
//! The buffer is a range of address space reserved up front (no memory behind it) and made
//! writable as it fills: growing never moves or copies it, so threads copy their elements into
//! their own parts of it without a lock, and the filled buffer is the cache (its tail past the
//! last element is unmapped). An element's input buffers (a Python decoder's arrays, a batch
//! buffer) are free to go as soon as it is copied, which is what keeps the peak at the raw bytes
//! plus the elements in flight: the old cache held every element until the last one arrived, then
//! stacked them into columns, about 2x the raw bytes at its peak, and the allocator kept much of
//! the freed 1x until `malloc_trim`.
//!
//! The element a fill hands on is read from the arena too ([`Claim::copy`] returns it so): its
//! input buffers (a decoder's clip) are freed on the thread that made them, as soon as they are
//! copied, rather than wherever the consumer lets the element go. What the fill freed is then
//! handed back to the system by the allocator's release hook
//! ([`alloc::release_freed`](crate::alloc::release_freed)), run by the thread that records an
//! element once every element is claimed (`cache.rs`) and by each pool thread as it ends: an
//! allocator that keeps freed pages for reuse (mimalloc purges them a second later, and only
//! when a later allocation looks; each thread keeps pages of its own) would otherwise keep the
//! decoders' buffers resident beside the cache for as long as the pipeline only reads it:
//! 1.2-1.6x the raw bytes for WAV clips through `load_audio`, 2.2x under `parallelize`, growing
//! with the threads (`bench/suite/audio_native.py`).
//!
//! Elements are stored in arrival order (a random-access cache fills in whatever order it is
//! read: `cache().shuffle()` reads it shuffled); `slot_of` maps an index to its place. Every
//! fixed-size tensor lives in the arena; byte strings and ragged values are kept as they are,
//! and so is any element whose feature names or dtypes differ from the first element's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::example::{Example, Value};
use crate::tensor::Tensor;

/// Where the bytes of a slot's feature are: in the arena (`off`, shape at `dims[shape..]`), or
/// kept as the value itself.
const KEPT: u64 = u64::MAX;

/// Tensors of at least this many bytes start on a cache line (whole-line copies, and SIMD code
/// reading them later); smaller ones on their dtype's own alignment, so that a scalar label
/// costs its own bytes, not 64.
const LINE_ALIGN_MIN: usize = 4096;

/// One feature of the layout (the first element's feature names and dtypes).
struct Column {
    name: Arc<str>,
    dtype: DType,
    /// Per slot: byte offset in the arena, or [`KEPT`].
    offs: Vec<u64>,
    /// Per slot: where the slot's rank and dims start in `dims`.
    shape_at: Vec<usize>,
    dims: Vec<usize>,
    kept: HashMap<usize, Value>,
}

/// Builds the arena: [`Filler::claim`] (under the caller's lock) reserves an element's bytes,
/// [`Claim::copy`] (no lock) copies them, [`Filler::record`] (under the lock) files the element.
pub struct Filler {
    /// Known element count (a random-access input), or `None` (a stream: slots in order).
    len: Option<u64>,
    buf: Option<Reserve>,
    used: usize,
    /// Index -> slot + 1 (0: not claimed yet); empty for a stream.
    slot_of: Vec<u64>,
    slots: usize,
    recorded: u64,
    layout: Option<Vec<(Arc<str>, DType)>>,
    columns: Vec<Column>,
    odd: HashMap<usize, Example>,
}

/// An element's place in the arena, to be copied into without the lock.
pub struct Claim {
    slot: usize,
    /// (feature position, arena offset) of each tensor copied into the arena.
    places: Vec<(usize, u64)>,
    /// The reservation (`None` when nothing goes into the arena).
    region: Option<Arc<Region>>,
}

impl Filler {
    /// A filler for `len` elements by index (random access) or, with `None`, a stream's
    /// elements in order.
    pub fn new(len: Option<u64>) -> Filler {
        Filler {
            len,
            buf: None,
            used: 0,
            slot_of: Vec::new(),
            slots: 0,
            recorded: 0,
            layout: None,
            columns: Vec::new(),
            odd: HashMap::new(),
        }
    }

    /// Elements recorded so far.
    pub fn recorded(&self) -> u64 {
        self.recorded
    }

    /// True when the element at `index` is claimed (by this or another thread).
    pub fn claimed(&self, index: u64) -> bool {
        self.slot_of.get(index as usize).is_some_and(|&s| s != 0)
    }

    /// Reserves room for `e` (element `index` of a random-access input; ignored for a stream).
    /// `None` when another thread already claimed `index`.
    pub fn claim(&mut self, index: u64, e: &Example) -> Result<Option<Claim>> {
        if let Some(n) = self.len {
            if self.slot_of.is_empty() {
                // One word per element of the input: sized by its length, so checked (a cache
                // of `range(10**13)` is an error naming the op, not an abort). `vec!` of zeros
                // stays lazily zeroed pages, untouched until claimed.
                let n = crate::checked::to_usize("cache", "the input's length", n)?;
                let what = format_args!("the slot index of its {n} elements");
                crate::alloc::checked_bytes("cache", what, n, std::mem::size_of::<u64>())?;
                self.slot_of = vec![0; n];
            }
            if self.claimed(index) {
                return Ok(None);
            }
        }
        let slot = self.slots;
        self.slots += 1;
        if let Some(n) = self.len {
            self.slot_of[index as usize] = slot as u64 + 1;
            debug_assert!((slot as u64) < n);
        }
        let layout = self.layout.get_or_insert_with(|| {
            e.iter()
                .map(|(n, v)| (Arc::from(n), v.dtype()))
                .collect::<Vec<_>>()
        });
        if self.columns.is_empty() {
            self.columns = layout
                .iter()
                .map(|(name, dtype)| Column {
                    name: name.clone(),
                    dtype: *dtype,
                    offs: Vec::new(),
                    shape_at: Vec::new(),
                    dims: Vec::new(),
                    kept: HashMap::new(),
                })
                .collect();
        }
        let fits = e.len() == layout.len()
            && e.iter()
                .zip(layout.iter())
                .all(|((n, v), (ln, ld))| n == &**ln && v.dtype() == *ld);
        let mut places = Vec::new();
        if fits {
            for (k, (_, v)) in e.iter().enumerate() {
                if let Value::Tensor(t) = v {
                    if t.dtype() != DType::Bytes {
                        let len = t.data().len();
                        let align = if len >= LINE_ALIGN_MIN {
                            64
                        } else {
                            t.dtype().size().unwrap_or(1).max(1)
                        };
                        let off = self.used.next_multiple_of(align);
                        self.used = off + len;
                        places.push((k, off as u64));
                    }
                }
            }
        }
        let region = if places.is_empty() {
            None
        } else {
            let buf = match &mut self.buf {
                Some(b) => b,
                None => self.buf.insert(Reserve::new()?),
            };
            buf.commit(self.used)?;
            Some(buf.region.clone())
        };
        Ok(Some(Claim {
            slot,
            places,
            region,
        }))
    }

    /// Files a claimed element whose bytes [`Claim::copy`] wrote.
    pub fn record(&mut self, claim: Claim, e: &Example) {
        let slot = claim.slot;
        self.recorded += 1;
        if claim.places.is_empty() && !self.fits(e) {
            self.odd.insert(slot, e.clone());
            return;
        }
        let mut places = claim.places.iter().peekable();
        for (k, (_, v)) in e.iter().enumerate() {
            let col = &mut self.columns[k];
            if col.offs.len() <= slot {
                col.offs.resize(slot + 1, KEPT);
                col.shape_at.resize(slot + 1, 0);
            }
            match (places.peek(), v) {
                (Some(&&(pk, off)), Value::Tensor(t)) if pk == k => {
                    places.next();
                    col.offs[slot] = off;
                    col.shape_at[slot] = col.dims.len();
                    col.dims.push(t.shape().len());
                    col.dims.extend_from_slice(t.shape());
                }
                _ => {
                    col.kept.insert(slot, v.clone());
                }
            }
        }
    }

    fn fits(&self, e: &Example) -> bool {
        let Some(layout) = &self.layout else {
            return false;
        };
        e.len() == layout.len()
            && e.iter()
                .zip(layout.iter())
                .all(|((n, v), (ln, ld))| n == &**ln && v.dtype() == *ld)
    }

    /// True when every element of a random-access input is claimed: a thread that records
    /// an element then has no more to fill.
    pub fn all_claimed(&self) -> bool {
        self.len.is_some_and(|n| self.slots as u64 == n)
    }

    /// The filled arena (every slot recorded).
    pub fn finish(self) -> Result<Packed> {
        let bytes = match self.buf {
            Some(b) => b.freeze(self.used),
            None => Bytes::new(),
        };
        Ok(Packed {
            len: self.slots as u64,
            bytes,
            slot_of: self.slot_of,
            columns: self.columns,
            odd: self.odd,
        })
    }
}

impl Claim {
    /// Copies `e`'s tensors to the places claimed for them (no lock needed: the range is this
    /// claim's alone and the reservation never moves) and returns `e` with those tensors read
    /// from there, so that `e`'s own buffers can go now. Record the returned element.
    pub fn copy(&self, e: &Example) -> Result<Example> {
        // A clone shares `e`'s names and buffers; each tensor copied in is replaced in place.
        let mut out = e.clone();
        let Some(region) = &self.region else {
            return Ok(out);
        };
        let mut places = self.places.iter().peekable();
        for (k, (name, v)) in e.iter().enumerate() {
            let (Some(&&(pk, off)), Value::Tensor(t)) = (places.peek(), v) else {
                continue;
            };
            if pk != k {
                continue;
            }
            places.next();
            let src = t.data();
            let off = off as usize;
            // SAFETY: `claim` made `off..off + src.len()` writable and gave it to this claim
            // alone; `src` is the same tensor whose length it reserved.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), region.ptr.add(off), src.len()) };
            let view = Bytes::from_owner(View {
                region: region.clone(),
                off,
                len: src.len(),
            });
            out.insert(name, Tensor::new(t.dtype(), t.shape().to_vec(), view)?);
        }
        Ok(out)
    }
}

/// The filled cache: elements by slot (arrival order), tensors as views of one arena.
pub struct Packed {
    len: u64,
    bytes: Bytes,
    slot_of: Vec<u64>,
    columns: Vec<Column>,
    odd: HashMap<usize, Example>,
}

impl Packed {
    /// Number of elements.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the arena (tensors copied in; kept values not counted).
    pub fn arena_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Element `index` (by input index; for a stream, by position).
    pub fn get(&self, index: u64) -> Result<Example> {
        let slot = if self.slot_of.is_empty() {
            index as usize
        } else {
            match self.slot_of.get(index as usize) {
                Some(&s) if s > 0 => (s - 1) as usize,
                _ => {
                    return Err(Error::OutOfRange {
                        index,
                        len: self.len,
                        what: "cache(memory)".into(),
                    })
                }
            }
        };
        if let Some(e) = self.odd.get(&slot) {
            return Ok(e.clone());
        }
        let mut out = Example::new();
        for col in &self.columns {
            let off = col.offs.get(slot).copied().unwrap_or(KEPT);
            if off == KEPT {
                let v = col.kept.get(&slot).ok_or_else(|| Error::OutOfRange {
                    index,
                    len: self.len,
                    what: "cache(memory)".into(),
                })?;
                out.insert(&col.name, v.clone());
                continue;
            }
            let shape = shape_of(col, slot);
            let n = shape.iter().product::<usize>() * col.dtype.size().unwrap_or(0);
            let off = off as usize;
            out.insert(
                &col.name,
                Tensor::new(col.dtype, shape, self.bytes.slice(off..off + n))?,
            );
        }
        Ok(out)
    }
}

/// The shape of `slot` in `col`, stored as its rank then its dims.
fn shape_of(col: &Column, slot: usize) -> Vec<usize> {
    let start = col.shape_at[slot];
    let rank = col.dims[start];
    col.dims[start + 1..start + 1 + rank].to_vec()
}

/// The arena's mapping, shared by the filler and every view of it; unmapped when the last
/// goes.
struct Region {
    ptr: *mut u8,
    /// Bytes mapped from `ptr` (the reservation; its used part once frozen).
    mapped: AtomicUsize,
}

// SAFETY: the mapping is plain memory owned by this value; writes go through disjoint claims
// (see `Claim`), each finished before any view of its range exists, and nothing writes to a
// range once a view of it exists.
unsafe impl Send for Region {}
// SAFETY: as for Send.
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours, and no view remains (each holds the `Arc`).
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, *self.mapped.get_mut()) };
    }
}

/// A read-only view of `len` bytes at `off` in the arena, owned by `Bytes`.
struct View {
    region: Arc<Region>,
    off: usize,
    len: usize,
}

impl AsRef<[u8]> for View {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `off..off + len` is mapped (inside the used part, which stays mapped while
        // the region lives) and was written before this view was made (alignment gaps of a
        // frozen arena are zero pages from the kernel).
        unsafe { std::slice::from_raw_parts(self.region.ptr.add(self.off), self.len) }
    }
}

/// Address space reserved for the arena and made writable as it fills (never moved).
struct Reserve {
    region: Arc<Region>,
    reserved: usize,
    committed: usize,
}

/// First commit and the smallest growth step: 1 MiB keeps tiny caches tiny, and doubling from
/// there means few `mprotect` calls for a big one (a commit makes pages writable, not resident:
/// only what is written costs memory).
const COMMIT_MIN: usize = 1 << 20;

fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

impl Reserve {
    /// Reserves twice the physical memory (at least 1 GiB) of address space, halving on
    /// refusal (an address-space limit): reserving costs no memory, only a mapping.
    fn new() -> Result<Reserve> {
        // SAFETY: sysconf has no preconditions.
        let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
        let ram = if pages > 0 {
            pages as usize * page()
        } else {
            16 << 30
        };
        let mut size = (ram.saturating_mul(2)).max(1 << 30);
        loop {
            // SAFETY: a fresh anonymous mapping with no access; nothing else refers to it.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    size,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                return Ok(Reserve {
                    region: Arc::new(Region {
                        ptr: p as *mut u8,
                        mapped: AtomicUsize::new(size),
                    }),
                    reserved: size,
                    committed: 0,
                });
            }
            if size <= COMMIT_MIN * 64 {
                return Err(Error::invalid(format!(
                    "cache(): could not reserve {size} bytes of address space for the cache: {}",
                    std::io::Error::last_os_error()
                )));
            }
            size /= 2;
        }
    }

    /// Makes the first `need` bytes writable.
    fn commit(&mut self, need: usize) -> Result<()> {
        if need <= self.committed {
            return Ok(());
        }
        if need > self.reserved {
            return Err(Error::invalid(format!(
                "cache(): the cached elements need more than the {} bytes of address space \
                 reserved for them (twice the physical memory)",
                self.reserved
            )));
        }
        let want = need
            .max(self.committed.saturating_mul(2))
            .max(COMMIT_MIN)
            .next_multiple_of(page())
            .min(self.reserved);
        // SAFETY: `committed..want` lies inside our reservation.
        let rc = unsafe {
            libc::mprotect(
                self.region.ptr.add(self.committed) as *mut libc::c_void,
                want - self.committed,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if rc != 0 {
            return Err(Error::invalid(format!(
                "cache(): could not make {want} bytes writable for the cache: {}",
                std::io::Error::last_os_error()
            )));
        }
        self.committed = want;
        Ok(())
    }

    /// The first `used` bytes as read-only shared bytes; the rest of the reservation is given
    /// back.
    fn freeze(self, used: usize) -> Bytes {
        let keep = used.next_multiple_of(page());
        if keep < self.reserved {
            // SAFETY: the tail past `keep` is ours and no view reaches into it (views lie inside
            // the first `used` bytes); `mapped` is updated before anything else can unmap.
            unsafe {
                libc::munmap(
                    self.region.ptr.add(keep) as *mut libc::c_void,
                    self.reserved - keep,
                )
            };
            self.region.mapped.store(keep, Ordering::Release);
        }
        if used == 0 {
            return Bytes::new();
        }
        Bytes::from_owner(View {
            region: self.region,
            off: 0,
            len: used,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::example::Ragged;

    /// Element i: a ragged f32 clip of 3i+1 samples x 2 channels, an i64 label, a u8 image
    /// whose size changes, a string, and (for odd i) a ragged value.
    fn element(i: u64) -> Example {
        let n = (3 * i + 1) as usize;
        let clip: Vec<f32> = (0..n * 2).map(|k| i as f32 + k as f32 / 100.0).collect();
        let img: Vec<u8> = (0..(i as usize % 5) * 3)
            .map(|k| k as u8 ^ i as u8)
            .collect();
        let mut e = Example::new()
            .with("clip", Tensor::from_vec(vec![n, 2], clip).unwrap())
            .with("label", Tensor::scalar(i as i64 * -7))
            .with(
                "img",
                Tensor::from_vec(vec![i as usize % 5, 3], img).unwrap(),
            )
            .with("name", Tensor::strings(&[format!("clip-{i}")]));
        let r = Ragged::new(
            Tensor::from_vec(vec![3], vec![1u16, 2, 3]).unwrap(),
            vec![0u64, 1, 3].into(),
        )
        .unwrap();
        e.insert("r", r);
        e
    }

    fn fill(filler: &mut Filler, i: u64, e: &Example) {
        if let Some(c) = filler.claim(i, e).unwrap() {
            let copied = c.copy(e).unwrap();
            assert_eq!(&copied, e, "the element handed on equals its input");
            filler.record(c, &copied);
        }
    }

    #[test]
    fn any_arrival_order_gives_back_every_element_exactly() {
        let n = 40u64;
        let mut order: Vec<u64> = (0..n).collect();
        crate::rng::Rng::keyed(5, &[]).shuffle(&mut order);
        let mut f = Filler::new(Some(n));
        for &i in &order {
            fill(&mut f, i, &element(i));
            fill(&mut f, i, &element(i)); // a second read of the same index is not stored again
        }
        assert_eq!(f.recorded(), n);
        let p = f.finish().unwrap();
        assert_eq!(p.len(), n);
        for i in 0..n {
            let got = p.get(i).unwrap();
            assert_eq!(got, element(i), "element {i}");
            let clip = got.tensor("t", "clip").unwrap();
            assert!(clip.as_slice::<f32>().unwrap().is_some(), "aligned f32");
        }
        assert!(p.get(n).is_err());
    }

    #[test]
    fn a_stream_fills_in_order_and_odd_elements_are_kept_whole() {
        let mut f = Filler::new(None);
        let odd = Example::new().with("other", Tensor::scalar(1.5f64));
        for i in 0..10u64 {
            let e = if i == 4 { odd.clone() } else { element(i) };
            fill(&mut f, i, &e);
        }
        let p = f.finish().unwrap();
        for i in 0..10u64 {
            let want = if i == 4 { odd.clone() } else { element(i) };
            assert_eq!(p.get(i).unwrap(), want);
        }
    }

    #[test]
    fn empty_and_zero_byte_elements() {
        let p = Filler::new(None).finish().unwrap();
        assert!(p.is_empty());
        let mut f = Filler::new(Some(2));
        let e = Example::new().with("x", Tensor::from_vec(vec![0], Vec::<f32>::new()).unwrap());
        fill(&mut f, 1, &e);
        fill(&mut f, 0, &e);
        let p = f.finish().unwrap();
        assert_eq!(p.get(0).unwrap(), e);
        assert_eq!(p.arena_bytes(), 0);
    }
}

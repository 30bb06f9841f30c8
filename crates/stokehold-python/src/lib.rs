//! # stokehold-python
//!
//! PyO3 bindings of stokehold, built by maturin as the extension module `stokehold._native`.
//! The Python API (docstrings, defaults, argument checks) lives in `python/stokehold/`; this crate
//! stays thin: conversions ([`convert`]), error mapping in one place ([`errors`]), the native
//! `Dataset` / `Iterator` classes ([`dataset`]) and the epoch loader `Epochs` (`epochs.rs`, with a
//! second `#[pymethods]` block of `Dataset`: the crate uses pyo3's `multiple-pymethods`). The GIL
//! is released around all Rust work and taken only while Python code (a map function) runs.
//!
//! ## Exposing your own Rust datasets (for other bindings in this crate)
//! 1. Add `src/<name>.rs` with your `#[pyfunction]`s / `#[pyclass]`es and a
//!    `pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()>` that adds them. Return a dataset
//!    to Python as [`PyDataset::from_dataset`]`(ds)` (a `#[pyclass]`, so return it by value), and
//!    wrap entry points in [`errors::guard`]; map errors with [`errors::to_pyerr`] / [`errors::ok`].
//! 2. Add `mod <name>;` below and one line `<name>::register(m)?;` in `_native`.
//! 3. On the Python side, `stokehold.Dataset._wrap(native)` turns the native dataset into the
//!    public `Dataset` (e.g. in `python/stokehold/<name>.py`).
#![deny(missing_docs)]

mod audio;
mod callbacks;
mod cli;
mod combine;
pub mod convert;
pub mod dataset;
mod demo;
mod epochs;
pub mod errors;
mod execution;
mod files;
mod image;
mod jsonl;
mod malloc;
mod options;
mod parquet;
mod ray_io;
mod remote_cache;
mod sequence;
mod shard;
mod skips;
mod storage;
mod table;
mod tfrecord;
mod tokenize;
mod tokens;
mod turns;
mod webdataset;

pub use dataset::PyDataset;

use pyo3::prelude::*;

/// The extension's Rust allocations (tensors, batches, arenas) go through mimalloc, not glibc's
/// malloc: pipeline threads free buffers other threads allocated (a batch made by a worker, let
/// go by the consumer), which glibc's per-thread arenas answered by trimming and re-faulting
/// pages (docs/ARCHITECTURE.md, "Memory"). Python's and numpy's own memory is not affected.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    /// mimalloc's `mi_collect` (`mimalloc.h`), in the static library the `mimalloc` crate links:
    /// with `force`, it frees what the calling thread's heap keeps and purges every arena now,
    /// instead of after mimalloc's purge delay (1 s), which only a later allocation acts on.
    fn mi_collect(force: bool);
}

/// The release hook (`stokehold_core::alloc::release_freed`), run by the thread whose element
/// completes an in-memory cache's claims and by each pool thread as it ends: what the decoders
/// freed while filling a cache goes back to the system at once, so the cache costs its raw bytes
/// plus a fixed overhead (docs/CACHE.md), not each thread's high-water mark kept
/// resident beside it while the pipeline only reads the cache. A global `purge_delay=0` would
/// return it too, but purges every freed batch: decoding to int16 ran 1.4x and a
/// crop-batch-prefetch pipeline 4x slower with `MIMALLOC_PURGE_DELAY=0`; a forced collect
/// after every cached element cost 1.3-1.7x in decode time.
fn release_freed() {
    // SAFETY: mi_collect has no preconditions; it touches only mimalloc's own state.
    unsafe { mi_collect(true) };
}

/// The extension module.
///
/// `gil_used = false` (PyO3's default since 0.28, stated here because it is a claim): on a
/// free-threaded CPython (3.13t/3.14t) importing the module leaves the GIL off, so the thread
/// map runs Python functions on every core with no processes. Sound because every `#[pyclass]`
/// is `Send + Sync` (PyO3 checks it; `&mut self` methods are guarded by PyO3's runtime borrow
/// flag, which raises instead of racing), the module's statics are `PyOnceLock`s or atomics,
/// and the one `unsafe` (`convert::ArrayOwner`) reads a numpy buffer the GIL never protected
/// anyway (Rust reads it with the GIL released). PyO3 ignores the `abi3` feature when it builds
/// for a free-threaded interpreter (the limited API does not exist there) and builds a
/// version-specific extension instead.
#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    stokehold_core::alloc::set_release_hook(release_freed);
    malloc::register(m)?;
    errors::register(m)?;
    m.add_class::<convert::TensorBuf>()?;
    dataset::register(m)?;
    epochs::register(m)?;
    callbacks::register(m)?;
    demo::register(m)?;
    cli::register(m)?;
    table::register(m)?;
    tfrecord::register(m)?;
    // One line per module file, e.g. `tfrecord::register(m)?;`
    shard::register(m)?;
    sequence::register(m)?;
    audio::register(m)?;
    ray_io::register(m)?;
    image::register(m)?;
    storage::register(m)?;
    execution::register(m)?;
    Ok(())
}

//! glibc's malloc thresholds, on request: [`tune`] (Python: `stokehold.tune_malloc()`) starts
//! glibc's own rule for them at 4 / 8 MiB. Importing stokehold does nothing to them.
//!
//! Why one might: Python and numpy allocate through glibc's `malloc`. With glibc's defaults an
//! array of 128 KiB or more is either `mmap`ed and unmapped again at every allocation (above
//! `M_MMAP_THRESHOLD`, 128 KiB), or, just below it, taken from the heap whose top glibc gives
//! back to the kernel as soon as more than `M_TRIM_THRESHOLD` (128 KiB) of it is free. Either
//! way a function that makes and drops such arrays per element (decoding a 1 s, 16 kHz clip and
//! taking its FFT: a 128 KB spectrum) faults every page of them in afresh each time. That
//! function ran at 3.9-4.6k elements/s in a plain Python loop with glibc's defaults and 6.2-7.9k
//! with the tuning (eight epochs of 3000 each way); `bench/udf`'s wav + fft rows give the thread
//! map both ways (dataloader-rs's README has its users set larger thresholds for the same
//! reason).
//!
//! Why not on import: the cost is memory, and it is the whole process's. Freed blocks below the
//! thresholds stay in glibc's heap for reuse instead of going back to the kernel, for every
//! library's allocations (torch, PIL, the trainer's), not only stokehold's users' arrays: issue
//! 47 found a list of 400 clips of 5-180 s given to `from_arrays`, then dropped, leaving the
//! process 1.33-1.54x their raw bytes larger with the tuning started on import, 1.01x without
//! (a rerun of 400 int16 clips made directly: 1.015x against 1.007x; GUIDE has the figures). So
//! it is the user's call.
//!
//! What: glibc raises both thresholds itself when it frees a block it mapped (to that block's
//! size, and twice that for trimming), and again for each larger one later; the wav + fft map
//! never has one mapped (its largest array, the 128,016-byte spectrum, is just under 128 KiB),
//! so its thresholds stay at glibc's defaults for good. [`tune`] maps and frees one block of
//! [`MMAP_THRESHOLD`] (4 MiB: numpy asks for huge pages from that size, so larger arrays are
//! cheap to map), which starts glibc's rule at 4 MiB and 8 MiB ([`TRIM_THRESHOLD`]); a larger
//! block freed later raises them as it would have anyway. Not `mallopt`: it (and
//! `GLIBC_TUNABLES`) sets fixed values and turns glibc's rule off, so blocks above them are
//! mapped every time; a `cache()` of clips of up to 5.7 MB decoded in Python built in
//! 1.16-1.59 s that way against 1.02-1.04 s with glibc's rule (`bench/suite/audio_child.py
//! "stokehold/cache()"`, three alternating rounds). Rust's own memory is mimalloc's (see
//! `GLOBAL` in `lib.rs`) and not concerned.
//!
//! Left alone, even when asked: when the environment already says how glibc's malloc should
//! behave (`GLIBC_TUNABLES` naming a `glibc.malloc.` setting, or a `MALLOC_*_` variable glibc
//! reads; read when [`tune`] is called, never on import), and on anything but Linux with glibc.
//! [`malloc_tuning`] (Python: `stokehold.malloc_tuning()`) says which happened, or that nobody
//! asked.

use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Where glibc's mapping threshold starts: allocations above it are mapped on their own.
pub const MMAP_THRESHOLD: usize = 4 << 20;
/// Where glibc's trimming threshold starts (twice the other, as glibc's rule sets it): free
/// memory at the top of a heap beyond this goes back to the kernel.
pub const TRIM_THRESHOLD: usize = 2 * MMAP_THRESHOLD;

/// The glibc variables that set malloc's thresholds and behaviour (`mallopt(3)`).
const GLIBC_VARS: [&str; 5] = [
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
    "MALLOC_ARENA_MAX",
];

/// What [`tune`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// glibc's rule was started at the thresholds.
    Set,
    /// The environment sets malloc's behaviour itself.
    Environment,
    /// Not glibc, or no memory for the block.
    Unsupported,
}

/// Set by the first [`tune`]; empty until someone asks for the tuning.
static OUTCOME: OnceLock<Outcome> = OnceLock::new();

/// Whether the environment decides glibc's malloc behaviour itself.
fn decided_by_environment(var: impl Fn(&str) -> Option<String>) -> bool {
    var("GLIBC_TUNABLES").is_some_and(|t| t.contains("glibc.malloc."))
        || GLIBC_VARS.iter().any(|v| var(v).is_some())
}

/// Starts glibc's rule at the thresholds unless the environment decides; once per process, later
/// calls return the first one's outcome.
fn tune() -> Outcome {
    *OUTCOME.get_or_init(|| {
        if decided_by_environment(|v| std::env::var(v).ok()) {
            return Outcome::Environment;
        }
        start_glibc_rule()
    })
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn start_glibc_rule() -> Outcome {
    // SAFETY: a plain malloc and free of a block nothing touches. glibc maps it, unless its
    // threshold is already above MMAP_THRESHOLD: then the free leaves the thresholds as they are.
    unsafe {
        // black_box: LLVM drops a malloc whose block is never used, and its free with it.
        let p = std::hint::black_box(libc::malloc(MMAP_THRESHOLD));
        if p.is_null() {
            return Outcome::Unsupported;
        }
        libc::free(p);
    }
    Outcome::Set
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn start_glibc_rule() -> Outcome {
    Outcome::Unsupported
}

/// `{"by": ..., "mmap_threshold": ..., "trim_threshold": ...}` for an outcome, `None` when
/// [`tune`] was never called.
fn describe(py: Python<'_>, outcome: Option<Outcome>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    let by = match outcome {
        None => "not tuned",
        Some(Outcome::Set) => "stokehold",
        Some(Outcome::Environment) => "environment",
        Some(Outcome::Unsupported) => "unsupported",
    };
    d.set_item("by", by)?;
    let set = outcome == Some(Outcome::Set);
    d.set_item("mmap_threshold", set.then_some(MMAP_THRESHOLD))?;
    d.set_item("trim_threshold", set.then_some(TRIM_THRESHOLD))?;
    Ok(d)
}

/// Starts glibc's rule (see the module doc) unless the environment decides or this is not
/// glibc; idempotent. Returns what happened, as [`malloc_tuning`] describes it.
#[pyfunction]
#[pyo3(name = "_tune_malloc")]
fn tune_malloc(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    describe(py, Some(tune()))
}

/// `{"by": ..., "mmap_threshold": ..., "trim_threshold": ...}`: `by` is `"not tuned"` (nobody
/// called `tune_malloc`: glibc's defaults, or the environment's settings), `"stokehold"` (the
/// thresholds, in bytes, are where glibc's rule started), `"environment"` (`tune_malloc` found
/// the environment setting malloc's behaviour and left it) or `"unsupported"` (not glibc); the
/// thresholds are None unless stokehold set them.
#[pyfunction]
#[pyo3(name = "_malloc_tuning")]
fn malloc_tuning(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    describe(py, OUTCOME.get().copied())
}

/// Adds `_tune_malloc` and `_malloc_tuning`; tunes nothing.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tune_malloc, m)?)?;
    m.add_function(wrap_pyfunction!(malloc_tuning, m)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_environment_decides_when_it_names_a_malloc_setting() {
        assert!(!decided_by_environment(env(&[])));
        assert!(!decided_by_environment(env(&[(
            "GLIBC_TUNABLES",
            "glibc.rtld.optional_static_tls=1"
        )])));
        assert!(decided_by_environment(env(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.trim_threshold=67108864"
        )])));
        assert!(decided_by_environment(env(&[("MALLOC_ARENA_MAX", "2")])));
        assert!(decided_by_environment(env(&[(
            "MALLOC_MMAP_THRESHOLD_",
            "262144"
        )])));
    }
}

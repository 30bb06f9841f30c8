//! glibc's malloc thresholds for the process: its own rule for them, started at 4 / 8 MiB once,
//! when the module loads.
//!
//! Why: Python and numpy allocate through glibc's `malloc`. With glibc's defaults an array of
//! 128 KiB or more is either `mmap`ed and unmapped again at every allocation (above
//! `M_MMAP_THRESHOLD`, 128 KiB), or, just below it, taken from the heap whose top glibc gives
//! back to the kernel as soon as more than `M_TRIM_THRESHOLD` (128 KiB) of it is free. Either
//! way a function that makes and drops such arrays per element (decoding a 1 s, 16 kHz clip and
//! taking its FFT: a 128 KB spectrum) faults every page of them in afresh each time. That
//! function ran at 3.9-4.6k elements/s in a plain Python loop without what this module does and
//! 6.2-7.9k with it (eight epochs of 3000 each way); `bench/udf`'s wav + fft rows give the
//! thread map both ways (dataloader-rs's README has its users set larger thresholds for the
//! same reason).
//!
//! What: glibc raises both thresholds itself when it frees a block it mapped (to that block's
//! size, and twice that for trimming), and again for each larger one later; the wav + fft map
//! never has one mapped (its largest array, the 128,016-byte spectrum, is just under 128 KiB),
//! so its thresholds stay at glibc's defaults for good. On import stokehold maps and frees one
//! block of [`MMAP_THRESHOLD`] (4 MiB: numpy asks for huge pages from that size, so larger
//! arrays are cheap to map), which starts glibc's rule at 4 MiB and 8 MiB ([`TRIM_THRESHOLD`]);
//! a larger block freed later raises them as it would have anyway. Not `mallopt`: it (and
//! `GLIBC_TUNABLES`) sets fixed values and turns glibc's rule off, so blocks above them are
//! mapped every time; a `cache()` of clips of up to 5.7 MB decoded in Python built in
//! 1.16-1.59 s that way against 1.02-1.04 s with glibc's rule (`bench/suite/audio_child.py
//! "stokehold/cache()"`, three alternating rounds). The cost is free heap memory
//! kept for reuse: about [`TRIM_THRESHOLD`] at the top of each malloc arena (more once glibc
//! raises it). Rust's own memory is mimalloc's (see `GLOBAL` in `lib.rs`) and not concerned.
//!
//! Left alone: when the environment already says how glibc's malloc should behave
//! (`GLIBC_TUNABLES` naming a `glibc.malloc.` setting, or a `MALLOC_*_` variable glibc reads),
//! when `STOKEHOLD_MALLOC_TUNING=0`, and on anything but Linux with glibc.
//! [`malloc_tuning`] (Python: `stokehold.malloc_tuning()`) says which happened.

use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Where glibc's mapping threshold starts: allocations above it are mapped on their own.
pub const MMAP_THRESHOLD: usize = 4 << 20;
/// Where glibc's trimming threshold starts (twice the other, as glibc's rule sets it): free
/// memory at the top of a heap beyond this goes back to the kernel.
pub const TRIM_THRESHOLD: usize = 2 * MMAP_THRESHOLD;

/// The environment variable that keeps glibc's defaults when set to `0`.
pub const OPT_OUT: &str = "STOKEHOLD_MALLOC_TUNING";

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
    /// `STOKEHOLD_MALLOC_TUNING=0`.
    OptedOut,
    /// Not glibc, or no memory for the block.
    Unsupported,
}

static OUTCOME: OnceLock<Outcome> = OnceLock::new();

/// Who decides glibc's malloc behaviour, from the environment alone: `None` when stokehold may.
fn decided_elsewhere(var: impl Fn(&str) -> Option<String>) -> Option<Outcome> {
    if var(OPT_OUT).is_some_and(|v| v.trim() == "0") {
        return Some(Outcome::OptedOut);
    }
    let tunables = var("GLIBC_TUNABLES").is_some_and(|t| t.contains("glibc.malloc."));
    if tunables || GLIBC_VARS.iter().any(|v| var(v).is_some()) {
        return Some(Outcome::Environment);
    }
    None
}

/// Starts glibc's rule at the thresholds unless the environment decides (once per process).
fn tune() -> Outcome {
    *OUTCOME.get_or_init(|| {
        if let Some(o) = decided_elsewhere(|v| std::env::var(v).ok()) {
            return o;
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

/// `{"by": ..., "mmap_threshold": ..., "trim_threshold": ...}`: `by` is `"stokehold"` (the
/// thresholds, in bytes, are where glibc's rule started), `"environment"` (the process's environment set
/// malloc's behaviour; the thresholds are None), `"opted out"` (`STOKEHOLD_MALLOC_TUNING=0`) or
/// `"unsupported"` (not glibc).
#[pyfunction]
#[pyo3(name = "_malloc_tuning")]
fn malloc_tuning(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let outcome = tune();
    let d = PyDict::new(py);
    let by = match outcome {
        Outcome::Set => "stokehold",
        Outcome::Environment => "environment",
        Outcome::OptedOut => "opted out",
        Outcome::Unsupported => "unsupported",
    };
    d.set_item("by", by)?;
    let set = outcome == Outcome::Set;
    d.set_item("mmap_threshold", set.then_some(MMAP_THRESHOLD))?;
    d.set_item("trim_threshold", set.then_some(TRIM_THRESHOLD))?;
    Ok(d)
}

/// Starts glibc's rule (see the module doc) and adds `_malloc_tuning`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    tune();
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
    fn the_environment_decides_when_it_names_a_malloc_setting_or_opts_out() {
        assert_eq!(decided_elsewhere(env(&[])), None);
        assert_eq!(
            decided_elsewhere(env(&[(
                "GLIBC_TUNABLES",
                "glibc.rtld.optional_static_tls=1"
            )])),
            None
        );
        assert_eq!(
            decided_elsewhere(env(&[(
                "GLIBC_TUNABLES",
                "glibc.malloc.trim_threshold=67108864"
            )])),
            Some(Outcome::Environment)
        );
        assert_eq!(
            decided_elsewhere(env(&[("MALLOC_ARENA_MAX", "2")])),
            Some(Outcome::Environment)
        );
        assert_eq!(
            decided_elsewhere(env(&[(OPT_OUT, "0")])),
            Some(Outcome::OptedOut)
        );
        assert_eq!(decided_elsewhere(env(&[(OPT_OUT, "1")])), None);
    }
}

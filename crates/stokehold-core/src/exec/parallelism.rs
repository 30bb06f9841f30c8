//! [`Parallelism`]: how many worker threads an op uses, and tf.data's `AUTOTUNE` argument
//! decoded in one place. Below the dataset model (an execution stage names its parallelism).

use crate::error::{Error, Result};

/// The largest count [`Parallelism::from_arg`] takes: a thread count past it would only exhaust
/// the process's threads (and a prefetch depth past it buys nothing the memory budget allows).
pub const MAX_THREADS: usize = 1024;

/// How many worker threads an op uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parallelism {
    /// Exactly this many (> 0).
    Fixed(usize),
    /// Chosen online within the executor's cores and memory budget (see [`super::autotune`]).
    Autotune,
}

/// The parallelism at which a stage runs inline: no worker, the consumer computes each element
/// when it asks for it (what AUTOTUNE picks for a function that holds the GIL, see
/// [`super::autotune`]). Here, below both the parallel map (`parallel/`) and its tuner
/// (`autotune.rs`), as both name it.
pub(crate) const INLINE: usize = 0;

/// The integer tf.data uses for AUTOTUNE (`tf.data.AUTOTUNE == -1`), as bindings receive it.
pub const AUTOTUNE: i64 = -1;

impl Parallelism {
    /// Decodes an integer argument the way tf.data spells it: [`AUTOTUNE`] (`-1`) is
    /// [`Parallelism::Autotune`], `n > 0` is [`Parallelism::Fixed`]`(n)`; anything else is an
    /// [`Error::InvalidArgument`] naming the op and the argument, e.g.
    /// `"interleave(num_parallel_calls=0): must be > 0 or AUTOTUNE (-1)"`.
    ///
    /// ```
    /// use stokehold_core::Parallelism;
    /// assert_eq!(Parallelism::from_arg("map", "num_parallel_calls", -1).unwrap(), Parallelism::Autotune);
    /// assert_eq!(Parallelism::from_arg("map", "num_parallel_calls", 4).unwrap(), Parallelism::Fixed(4));
    /// assert!(Parallelism::from_arg("map", "num_parallel_calls", 0).is_err());
    /// ```
    pub fn from_arg(op: &str, arg: &str, value: i64) -> Result<Parallelism> {
        match value {
            AUTOTUNE => Ok(Parallelism::Autotune),
            n if n > MAX_THREADS as i64 => Err(Error::invalid(format!(
                "{op}({arg}={value}): at most {MAX_THREADS} (AUTOTUNE picks within the \
                 machine's cores)"
            ))),
            n if n > 0 => usize::try_from(n)
                .map(Parallelism::Fixed)
                .map_err(|_| Error::invalid(format!("{op}({arg}={value}): too large"))),
            _ => Err(Error::invalid(format!(
                "{op}({arg}={value}): must be > 0 or AUTOTUNE ({AUTOTUNE})"
            ))),
        }
    }

    /// A buffer depth as tf.data takes it (`prefetch(buffer_size)`): -1 is AUTOTUNE, `n > 0` a
    /// depth of any size (buffers grow with use, so no cap as for threads).
    pub fn depth_from_arg(op: &str, arg: &str, value: i64) -> Result<Parallelism> {
        match value {
            n if n > MAX_THREADS as i64 => usize::try_from(n)
                .map(Parallelism::Fixed)
                .map_err(|_| Error::invalid(format!("{op}({arg}={value}): too large"))),
            n => Parallelism::from_arg(op, arg, n),
        }
    }

    /// The inverse of [`Parallelism::from_arg`]: `Fixed(n)` is `n`, `Autotune` is [`AUTOTUNE`].
    pub fn to_arg(self) -> i64 {
        match self {
            Parallelism::Fixed(n) => n as i64,
            Parallelism::Autotune => AUTOTUNE,
        }
    }

    /// A count for ops whose AUTOTUNE means "one per core" rather than online tuning (tf.data's
    /// `interleave(cycle_length=AUTOTUNE)`): `Fixed(n)` is `n`, `Autotune` is `cores` (at least 1).
    pub fn resolve(self, cores: usize) -> usize {
        match self {
            Parallelism::Fixed(n) => n,
            Parallelism::Autotune => cores.max(1),
        }
    }
}

impl std::fmt::Display for Parallelism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Parallelism::Fixed(n) => write!(f, "{n}"),
            Parallelism::Autotune => write!(f, "autotune"),
        }
    }
}

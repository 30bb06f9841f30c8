//! Checked arithmetic for indices, offsets and sizes computed from input (an epoch number, a
//! repeat count, a length read from a file): every product and sum that could pass `u64` is an
//! error naming the op and the quantity, never a wrapped or saturated value. A wrapped global
//! index used to make an epoch past `u64::MAX / len` silently empty (its start and end both
//! saturated to `u64::MAX`).
//!
//! ```
//! use stokehold_core::checked;
//! assert_eq!(checked::global_index("shuffle", 3, 10, 4).unwrap(), 34);
//! let e = checked::epoch_start("iter", 1 << 62, 10).unwrap_err();
//! assert!(e.to_string().contains("iter"), "{e}");
//! ```

use std::fmt::Display;

use crate::error::{Error, Result};

/// Length of a dataset that repeats forever.
pub const INFINITE: u64 = u64::MAX;

fn past(op: &str, what: impl Display, expr: String) -> Error {
    Error::invalid(format!(
        "{op}: {what} ({expr}) is past the 64-bit index range"
    ))
}

/// `a * b`, or an error naming `op` and `what` (formatted only then: `format_args!` costs
/// nothing on the hot path, where a `format!` per index cost a shuffled read two allocations).
pub fn mul(op: &str, what: impl Display, a: u64, b: u64) -> Result<u64> {
    a.checked_mul(b)
        .ok_or_else(|| past(op, what, format!("{a} x {b}")))
}

/// `a + b`, or an error naming `op` and `what` (formatted only then).
pub fn add(op: &str, what: impl Display, a: u64, b: u64) -> Result<u64> {
    a.checked_add(b)
        .ok_or_else(|| past(op, what, format!("{a} + {b}")))
}

/// The first global index of epoch `epoch` of a dataset of `len` elements per epoch (`0` for an
/// endless one, whose indices are not split into epochs), checked so that the whole epoch
/// (`start + len`) is addressable.
pub fn epoch_start(op: &str, epoch: u64, len: u64) -> Result<u64> {
    if len == INFINITE {
        return Ok(0);
    }
    let start = mul(op, format_args!("the start of epoch {epoch}"), epoch, len)?;
    add(op, format_args!("the end of epoch {epoch}"), start, len)?;
    Ok(start)
}

/// Where global index `index` falls in a random-access dataset of `len` elements an epoch
/// (`get(index)` reads element `index % len` of epoch `index / len`): `(epoch, element)`, or,
/// for an empty dataset, the out-of-range error naming it (`what`, formatted only then).
pub fn wrap_index(index: u64, len: u64, what: impl FnOnce() -> String) -> Result<(u64, u64)> {
    if len == 0 {
        return Err(Error::OutOfRange {
            index,
            len: 0,
            what: what(),
        });
    }
    Ok((index / len, index % len))
}

/// The part a position falls in, among parts of cumulative sizes `starts` (`starts[k]`: the
/// first position of part `k`, ascending, `starts[0] == 0`; a last entry may close the range):
/// `(k, position within part k)`. `position` must be below the total.
pub fn locate(starts: &[u64], position: u64) -> (usize, u64) {
    let k = starts.partition_point(|&c| c <= position) - 1;
    (k, position - starts[k])
}

/// Global index `epoch * len + i`: element `i` of epoch `epoch`.
pub fn global_index(op: &str, epoch: u64, len: u64, i: u64) -> Result<u64> {
    let start = mul(op, format_args!("the start of epoch {epoch}"), epoch, len)?;
    add(op, format_args!("element {i} of epoch {epoch}"), start, i)
}

/// `v` as `usize` (a count or offset about to index memory), or an error naming `op`.
pub fn to_usize(op: &str, what: &str, v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::invalid(format!("{op}: {what} {v} does not fit usize")))
}

/// `v` as `i64` (an index stored in an int64 feature), or an error naming `op`.
pub fn to_i64(op: &str, what: &str, v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| Error::invalid(format!("{op}: {what} {v} does not fit int64")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_range_is_exact_and_past_it_names_the_op() {
        assert_eq!(epoch_start("iter", 5, 10).unwrap(), 50);
        assert_eq!(epoch_start("iter", u64::MAX, INFINITE).unwrap(), 0);
        assert!(epoch_start("iter", u64::MAX / 10, 10).is_err());
        assert!(global_index("shuffle", u64::MAX / 10, 10, 9).is_err());
        let e = mul("repeat", "the length", u64::MAX, 2).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid argument: repeat: the length"),
            "{e}"
        );
        assert!(to_i64("enumerate", "position", u64::MAX).is_err());
        assert_eq!(to_usize("x", "n", 7).unwrap(), 7);
    }
}

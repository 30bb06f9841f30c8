//! Native element ops: random crop, pad / trim to a length, cast. They run in Rust with no Python
//! on the hot path. A random crop draws its offset from (seed, epoch, index), never from a thread.

use std::sync::Arc;

use bytes::Bytes;

use crate::cast::{cast, fill_value, PadValue};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::example::Example;
use crate::ops::map::{Ctx, MapFn};
use crate::rng::{Rng, Stream};
use crate::tensor::Tensor;

/// Copies `len` positions starting at `start` along `axis` (zero-copy when `axis == 0`).
fn slice_axis(t: &Tensor, axis: usize, start: usize, len: usize) -> Result<Tensor> {
    if axis == 0 {
        return t.slice_rows(start, start + len);
    }
    let s = t.shape();
    let isz = t
        .dtype()
        .size()
        .ok_or_else(|| Error::invalid("cannot slice bytes on axis > 0"))?;
    let outer: usize = s[..axis].iter().product();
    let inner: usize = s[axis + 1..].iter().product::<usize>() * isz;
    let mut out = Vec::with_capacity(outer * len * inner);
    for o in 0..outer {
        let base = (o * s[axis] + start) * inner;
        out.extend_from_slice(&t.data()[base..base + len * inner]);
    }
    let mut shape = s.to_vec();
    shape[axis] = len;
    Tensor::new(t.dtype(), shape, Bytes::from(out))
}

/// Extends `t` along `axis` to `len` with `value`.
/// `t` zero-padded (with `value`) to `len` on `axis`, for feature `name` of op `op`: the output's
/// size comes from an argument, so it is checked before anything is allocated.
fn pad_axis(
    op: &str,
    name: &str,
    t: &Tensor,
    axis: usize,
    len: usize,
    value: &PadValue,
) -> Result<Tensor> {
    let s = t.shape();
    let isz = t
        .dtype()
        .size()
        .ok_or_else(|| Error::invalid("cannot pad bytes tensors"))?;
    let fill = fill_value(op, format_args!("feature {name:?}"), t.dtype(), Some(value))?;
    let outer: usize = s[..axis].iter().product();
    let inner: usize = s[axis + 1..].iter().product::<usize>() * isz;
    let what = format_args!("feature {name:?} of shape {s:?} padded to {len} on axis {axis}");
    let total = crate::alloc::checked_bytes(op, what, outer.saturating_mul(len), inner)?;
    let mut out = crate::alloc::try_vec::<u8>(op, what, total)?;
    let pad = crate::ops::batch::filled(op, what, &fill, (len - s[axis]) * inner / isz)?;
    for o in 0..outer {
        let base = o * s[axis] * inner;
        out.extend_from_slice(&t.data()[base..base + s[axis] * inner]);
        out.extend_from_slice(&pad);
    }
    let mut shape = s.to_vec();
    shape[axis] = len;
    Tensor::new(t.dtype(), shape, Bytes::from(out))
}

/// `axis` of `t` as an index (a negative axis counts from the end, as in numpy), or an error
/// naming the op, the feature and its shape.
fn resolve_axis(op: &str, name: &str, t: &Tensor, axis: isize) -> Result<usize> {
    let rank = t.shape().len() as isize;
    let at = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&at) {
        return Err(Error::schema(
            op,
            format!("feature {name:?} has shape {:?}, no axis {axis}", t.shape()),
        ));
    }
    Ok(at as usize)
}

/// What to do about an element with fewer than `size` positions on `axis`, as the end of the
/// error: the likely fix first. A longer axis elsewhere means the crop was probably meant there
/// (decoded audio is `[channels, frames]`: a mono clip has 1 position on axis 0); `pad=True` is
/// offered only where it would work, its output within the memory this element may take.
fn short_hint(t: &Tensor, axis: usize, size: usize) -> String {
    let s = t.shape();
    let longer = (0..s.len())
        .filter(|&k| k != axis && s[k] > s[axis])
        .max_by_key(|&k| (s[k], k));
    let (at, n) = match longer {
        Some(k) => (k, s[k]),
        None => (axis, s[axis]),
    };
    // The element padded to `size` on axis `at`, were pad=True given.
    let rest = t.len().checked_div(s[at]).unwrap_or(0);
    let pad_fits = n >= size
        || t.dtype().size().is_some_and(|isz| {
            crate::alloc::checked_bytes("random_crop", "", rest.saturating_mul(size), isz).is_ok()
        });
    let pad = if n >= size { "" } else { ", pad=True" };
    let audio = if s.len() == 2 && axis == 0 && at == 1 {
        " (decoded audio is [channels, frames]: time is axis 1, or axis 0 with \
         decode_audio/load_audio(channels_first=False))"
    } else {
        ""
    };
    match (at != axis, pad_fits) {
        (true, true) => {
            format!(": axis {at} has {n} positions; to crop that axis pass axis={at}{pad}{audio}")
        }
        (true, false) => format!(
            ": axis {at} has {n} positions; to crop that axis pass axis={at}{audio}, with a \
             size of at most {n}"
        ),
        (false, true) => " (pass pad=True to zero-pad short elements)".into(),
        (false, false) => format!(
            " (padding it to {size} would take more memory than this process may use: crop \
             a size of at most {n})"
        ),
    }
}

/// A random window of `size` along `axis` of feature `name` (negative: from the end).
///
/// An element shorter than `size` is an error naming the element, unless `pad` is set: then it is
/// padded with zeros at the end to `size` (documented choice: silent padding would hide data bugs,
/// so it must be asked for).
pub fn random_crop(name: &str, axis: isize, size: usize, seed: u64, pad: bool) -> MapFn {
    let name = name.to_string();
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let t = e.tensor(ctx.op, &name)?;
        let axis = resolve_axis(ctx.op, &name, t, axis)?;
        let n = t.shape()[axis];
        let out = if n < size {
            if !pad {
                return Err(Error::schema(
                    ctx.op,
                    format!(
                        "element {}: feature {name:?} has {n} positions on axis {axis} (shape \
                         {:?}), fewer than the crop size {size}{}",
                        ctx.index,
                        t.shape(),
                        short_hint(t, axis, size)
                    ),
                ));
            }
            pad_axis(ctx.op, &name, t, axis, size, &PadValue::Int(0))?
        } else {
            let mut rng = Rng::for_element(seed, Stream::Crop, ctx.epoch, ctx.index);
            let start = rng.below((n - size + 1) as u64) as usize;
            slice_axis(t, axis, start, size)?
        };
        e.insert(&name, out);
        Ok(e)
    })
}

/// Pads (with `value`) or trims feature `name` to exactly `len` along `axis` (negative: from
/// the end).
pub fn pad_or_trim(name: &str, axis: isize, len: usize, value: PadValue) -> MapFn {
    let name = name.to_string();
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let t = e.tensor(ctx.op, &name)?;
        let axis = resolve_axis(ctx.op, &name, t, axis)?;
        let n = t.shape()[axis];
        let out = match n.cmp(&len) {
            std::cmp::Ordering::Equal => t.clone(),
            std::cmp::Ordering::Greater => slice_axis(t, axis, 0, len)?,
            std::cmp::Ordering::Less => pad_axis(ctx.op, &name, t, axis, len, &value)?,
        };
        e.insert(&name, out);
        Ok(e)
    })
}

/// Casts feature `name` to `dtype`.
pub fn cast_feature(name: &str, dtype: DType) -> MapFn {
    let name = name.to_string();
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let t = e.tensor(ctx.op, &name)?;
        let out = cast(t, dtype).map_err(|err| Error::schema(ctx.op, err.to_string()))?;
        e.insert(&name, out);
        Ok(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(index: u64) -> Ctx<'static> {
        Ctx {
            op: "test",
            index,
            epoch: 0,
        }
    }

    fn grid() -> Tensor {
        Tensor::from_vec(vec![2, 4], (0..8).collect::<Vec<i32>>()).unwrap()
    }

    #[test]
    fn crop_axis1_is_a_window_and_deterministic() {
        let f = random_crop("x", 1, 2, 9, false);
        let a = f(Example::new().with("x", grid()), &ctx(3)).unwrap();
        let b = f(Example::new().with("x", grid()), &ctx(3)).unwrap();
        assert_eq!(a, b);
        let v = a.tensor("t", "x").unwrap().to_vec::<i32>().unwrap();
        assert_eq!(v[1] - v[0], 1);
        assert_eq!(v[2] - v[0], 4);
    }

    #[test]
    fn crop_longer_than_clip_errors_or_pads() {
        let t = Tensor::from_vec(vec![3], vec![1i16, 2, 3]).unwrap();
        let err = random_crop("x", 0, 5, 1, false)(Example::new().with("x", t.clone()), &ctx(7))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("element 7") && err.contains("crop size 5"),
            "{err}"
        );
        let ok = random_crop("x", 0, 5, 1, true)(Example::new().with("x", t), &ctx(7)).unwrap();
        assert_eq!(
            ok.tensor("t", "x").unwrap().to_vec::<i16>().unwrap(),
            vec![1, 2, 3, 0, 0]
        );
    }

    fn crop_error(t: Tensor, axis: isize, size: usize) -> String {
        random_crop("x", axis, size, 1, false)(Example::new().with("x", t), &ctx(0))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_short_crop_names_the_likely_fix_and_the_hint_works() {
        // Issue 48: mono audio is [1, frames]; the hint named pad=True on axis 0, which padded
        // to [size, frames] (an abort for long clips). It names axis 1 now, and following it
        // crops.
        let mono = Tensor::from_vec(vec![1, 6], (0..6).collect::<Vec<i16>>()).unwrap();
        let e = crop_error(mono.clone(), 0, 4);
        assert!(e.contains("pass axis=1 (decoded audio"), "{e}");
        assert!(!e.contains("pad=True"), "{e}");
        let ok = random_crop("x", 1, 4, 1, false)(Example::new().with("x", mono.clone()), &ctx(0));
        assert_eq!(ok.unwrap().tensor("t", "x").unwrap().shape(), &[1, 4]);
        // axis=-1 is the last (time, for decoded audio); past the rank is a named error.
        let f = |axis| {
            random_crop("x", axis, 4, 1, false)(Example::new().with("x", mono.clone()), &ctx(0))
        };
        assert_eq!(f(-1).unwrap(), f(1).unwrap());
        let e = f(-3).unwrap_err().to_string();
        assert!(
            e.contains("feature \"x\" has shape [1, 6], no axis -3"),
            "{e}"
        );
        // Longer than the clip: axis 1 and pad=True, which gives [1, size].
        let e = crop_error(mono.clone(), 0, 8);
        assert!(e.contains("pass axis=1, pad=True"), "{e}");
        let ok = random_crop("x", 1, 8, 1, true)(Example::new().with("x", mono), &ctx(0));
        assert_eq!(ok.unwrap().tensor("t", "x").unwrap().shape(), &[1, 8]);
        // No longer axis: pad=True, when it fits; past the memory ceiling, never.
        let v = Tensor::from_vec(vec![3], vec![1f32, 2., 3.]).unwrap();
        assert!(crop_error(v.clone(), 0, 5).contains("pass pad=True"));
        let e = crop_error(v, 0, usize::MAX / 2);
        assert!(
            !e.contains("pass pad=True") && e.contains("at most 3"),
            "{e}"
        );
        let e = random_crop("x", 0, usize::MAX / 2, 1, true)(
            Example::new().with("x", Tensor::from_vec(vec![3], vec![1f32, 2., 3.]).unwrap()),
            &ctx(0),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("invalid argument: test: feature \"x\""),
            "{e}"
        );
    }

    #[test]
    fn pad_or_trim_both_ways() {
        let f = pad_or_trim("x", 1, 6, PadValue::Int(-1));
        let p = f(Example::new().with("x", grid()), &ctx(0)).unwrap();
        assert_eq!(
            p.tensor("t", "x").unwrap().to_vec::<i32>().unwrap(),
            vec![0, 1, 2, 3, -1, -1, 4, 5, 6, 7, -1, -1]
        );
        let g = pad_or_trim("x", 1, 1, PadValue::Int(0));
        let t = g(Example::new().with("x", grid()), &ctx(0)).unwrap();
        assert_eq!(
            t.tensor("t", "x").unwrap().to_vec::<i32>().unwrap(),
            vec![0, 4]
        );
    }
}

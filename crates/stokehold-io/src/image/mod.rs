//! Images, decoded and augmented natively on the pipeline's threads (no Python, no GIL): JPEG,
//! PNG and WebP into `uint8` HWC tensors, then resize, crops, flips and normalisation as map
//! functions. Every random choice is keyed by (seed, epoch, index) like `random_crop`, so the
//! output is the same whatever the thread count.
//!
//! ```no_run
//! use stokehold_core::{Dataset, Parallelism};
//! use stokehold_core::ops::on_error::{ErrorLog, OnError};
//! use stokehold_io::files::list_files;
//! use stokehold_io::image::{self, DecodeOptions, Interpolation};
//! let log = std::sync::Arc::new(ErrorLog::default());
//! let ds = list_files(&["photos/*.jpg"], Some(7)).unwrap()
//!     .map_with_policy("load_image", image::load_image_fn("path", "image", DecodeOptions::default()),
//!                      OnError::Skip, log, Some((Parallelism::Autotune, true)))
//!     .map("rrc", image::random_resized_crop_fn("image", (224, 224), (0.08, 1.0), (0.75, 4.0 / 3.0),
//!                                                Interpolation::Bilinear, 7))
//!     .map("flip", image::random_flip_fn("image", 0.5, 7))
//!     .map("norm", image::normalize_fn("image", &[0.485, 0.456, 0.406], &[0.229, 0.224, 0.225], false));
//! ```
//!
//! Decoding checks the header's dimensions against [`DecodeOptions::max_pixels`] before any
//! pixel buffer exists. Errors name the element, the op, the feature and, for files, the path.

use std::path::Path;
use std::sync::Arc;

use stokehold_core::alloc::checked_bytes;
use stokehold_core::rng::{Rng, Stream};
use stokehold_core::{BatchMapFn, Ctx, DType, Error, Example, MapFn, Result, Tensor, Value};

pub mod augment;
pub mod decode;
mod error;
mod format;
mod pixels;
pub mod resize;

pub use decode::{decode, probe, sniff, DecodeOptions, ImageInfo, SampleType, DEFAULT_MAX_PIXELS};
pub use error::ImageError;
pub use format::Format;
pub use pixels::Layout;
pub use resize::{Interpolation, Rect, Size};

/// The error of element `ctx.index` in feature `feature`: a corrupt-file error naming the path
/// when the element carries one in feature `"path"` (a `read_file` / `list_files` pipeline),
/// else a schema error naming the feature.
fn element_error(e: &Example, ctx: &Ctx, feature: &str, err: ImageError) -> Error {
    let what = format!(
        "element {}: {} feature {feature:?}: {err}",
        ctx.index, ctx.op
    );
    match (&err, path_in(e)) {
        (ImageError::Argument(_), _) | (_, None) => Error::schema(ctx.op, what),
        (_, Some(path)) => Error::corrupt(path, 0, what),
    }
}

fn path_in(e: &Example) -> Option<String> {
    let t = e.tensor("", "path").ok()?;
    (t.dtype() == DType::Bytes && t.len() == 1)
        .then(|| t.string(0).map(|s| String::from_utf8_lossy(s).into_owned()))
        .flatten()
}

/// A map function decoding the bytes in feature `feature` into feature `out` (which may be the
/// same name).
pub fn decode_image_fn(feature: &str, out: &str, opts: DecodeOptions) -> MapFn {
    let (feature, out) = (feature.to_string(), out.to_string());
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let t = e.tensor(ctx.op, &feature)?;
        let data = match t.string(0) {
            Some(d) if t.dtype() == DType::Bytes && t.len() == 1 => d,
            _ => {
                return Err(Error::schema(
                    ctx.op,
                    format!(
                        "element {}: feature {feature:?} must hold one encoded image (a bytes \
                         scalar), got {} {:?}",
                        ctx.index,
                        t.dtype(),
                        t.shape()
                    ),
                ))
            }
        };
        let img = decode(data, &opts).map_err(|err| element_error(&e, ctx, &feature, err))?;
        e.insert(&out, img);
        Ok(e)
    })
}

/// A map function reading the file named by feature `path_feature` and decoding it into feature
/// `out`; errors name the file and the element.
pub fn load_image_fn(path_feature: &str, out: &str, opts: DecodeOptions) -> MapFn {
    let (pf, out) = (path_feature.to_string(), out.to_string());
    let read = crate::files::read_file_fn(&pf, "\0image:bytes");
    Arc::new(move |e: Example, ctx: &Ctx| {
        let mut e = read(e, ctx)?;
        let bytes = e.remove("\0image:bytes");
        let t = bytes.as_ref().and_then(|v| v.as_tensor(ctx.op, "").ok());
        let data = t.and_then(|t| t.string(0)).unwrap_or_default();
        let path = e.tensor(ctx.op, &pf)?.string(0).unwrap_or_default();
        let path = String::from_utf8_lossy(path).into_owned();
        let img = decode(data, &opts).map_err(|err| file_error(&path, data, ctx, err))?;
        e.insert(&out, img);
        Ok(e)
    })
}

fn file_error(path: impl AsRef<Path>, data: &[u8], ctx: &Ctx, err: ImageError) -> Error {
    let mut what = format!("element {}: {}: {err}", ctx.index, ctx.op);
    // Not an image at all: say what it looks like (a .npy array, a WAV file...).
    if let ImageError::Unsupported(_) = err {
        let name = path
            .as_ref()
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        let head = &data[..data.len().min(crate::sniff::HEAD_LEN)];
        if let Some(g) =
            crate::sniff::guess(&name, head).filter(|g| g.read_with != crate::sniff::READ_IMAGE)
        {
            what.push_str(&format!("; {g}"));
        }
    }
    match err {
        ImageError::Argument(_) => Error::schema(ctx.op, what),
        _ => Error::corrupt(path.as_ref(), 0, what),
    }
}

/// An HWC image feature: its tensor and `(h, w, c)`; an error naming the element otherwise.
fn hwc<'a>(
    e: &'a Example,
    ctx: &Ctx,
    name: &str,
    need_u8: bool,
) -> Result<(&'a Tensor, (usize, usize, usize))> {
    let t = e.tensor(ctx.op, name)?;
    let ok_dtype = if need_u8 {
        t.dtype() == DType::U8
    } else {
        t.dtype() != DType::Bytes
    };
    match t.shape() {
        &[h, w, c] if ok_dtype && h > 0 && w > 0 && c > 0 => Ok((t, (h, w, c))),
        _ => Err(Error::schema(
            ctx.op,
            format!(
                "element {}: feature {name:?} must be a {} image [height, width, channels], \
                 got {} {:?}",
                ctx.index,
                if need_u8 { "uint8" } else { "numeric" },
                t.dtype(),
                t.shape()
            ),
        )),
    }
}

fn arg_err(ctx: &Ctx, name: &str, err: ImageError) -> Error {
    Error::schema(
        ctx.op,
        format!("element {}: feature {name:?}: {err}", ctx.index),
    )
}

/// A map function resizing `uint8` HWC feature `name` to `size`.
pub fn resize_fn(name: &str, size: Size, interp: Interpolation) -> MapFn {
    let name = name.to_string();
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let (t, (h, w, c)) = hwc(&e, ctx, &name, true)?;
        let (oh, ow) = size.of(h, w);
        let what = format_args!("feature {name:?} resized to {oh}x{ow}x{c}");
        checked_bytes(ctx.op, what, oh.saturating_mul(ow), c)?;
        let full = Rect {
            top: 0,
            left: 0,
            height: h,
            width: w,
        };
        let px = resize::resize(t.data(), (h, w, c), full, (oh.max(1), ow.max(1)), interp)
            .map_err(|err| arg_err(ctx, &name, err))?;
        let out = Tensor::from_vec(vec![oh.max(1), ow.max(1), c], px)?;
        e.insert(&name, out);
        Ok(e)
    })
}

/// A map function cropping HWC feature `name` (any numeric dtype) to its centre `size`
/// (torchvision's `CenterCrop`: zero padding where the image is smaller).
pub fn center_crop_fn(name: &str, size: (usize, usize)) -> MapFn {
    let name = name.to_string();
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let (t, (h, w, c)) = hwc(&e, ctx, &name, false)?;
        let px = c * t.dtype().size().unwrap_or(1);
        let what = format_args!("feature {name:?} cropped to {}x{}x{c}", size.0, size.1);
        checked_bytes(ctx.op, what, size.0.saturating_mul(size.1), px)?;
        let data = augment::center_crop(t.data(), (h, w, px), size);
        let out = Tensor::new(t.dtype(), vec![size.0, size.1, c], data.into())?;
        e.insert(&name, out);
        Ok(e)
    })
}

/// A map function doing torchvision's `RandomResizedCrop(size, scale, ratio)` on `uint8` HWC
/// feature `name`, the crop drawn from (seed, epoch, index) (see
/// [`augment::random_resized_crop_rect`]); crop and resize are one resampling pass.
pub fn random_resized_crop_fn(
    name: &str,
    size: (usize, usize),
    scale: (f64, f64),
    ratio: (f64, f64),
    interp: Interpolation,
    seed: u64,
) -> MapFn {
    let name = name.to_string();
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let (t, (h, w, c)) = hwc(&e, ctx, &name, true)?;
        let what = format_args!("feature {name:?} resized to {}x{}x{c}", size.0, size.1);
        checked_bytes(ctx.op, what, size.0.saturating_mul(size.1), c)?;
        let mut rng = Rng::for_element(seed, Stream::ResizedCrop, ctx.epoch, ctx.index);
        let rect = augment::random_resized_crop_rect(h, w, scale, ratio, &mut rng);
        let px = resize::resize(t.data(), (h, w, c), rect, size, interp)
            .map_err(|err| arg_err(ctx, &name, err))?;
        e.insert(&name, Tensor::from_vec(vec![size.0, size.1, c], px)?);
        Ok(e)
    })
}

/// A map function mirroring HWC feature `name` left-right with probability `p`, drawn from
/// (seed, epoch, index).
pub fn random_flip_fn(name: &str, p: f64, seed: u64) -> MapFn {
    let name = name.to_string();
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let flip = Rng::for_element(seed, Stream::Flip, ctx.epoch, ctx.index).next_f64() < p;
        if !flip {
            return Ok(e);
        }
        let (t, (h, w, c)) = hwc(&e, ctx, &name, false)?;
        let px = c * t.dtype().size().unwrap_or(1);
        let data = augment::flip_left_right(t.data(), (h, w, px));
        let out = Tensor::new(t.dtype(), vec![h, w, c], data.into())?;
        e.insert(&name, out);
        Ok(e)
    })
}

/// A map function turning `uint8` HWC feature `name` into float32 `(x / 255 - mean) / std` per
/// channel (torchvision's `ToTensor` + `Normalize`), HWC or with `chw` channels first. `mean`
/// and `std` have one value per channel, or one for all.
pub fn normalize_fn(name: &str, mean: &[f32], std: &[f32], chw: bool) -> MapFn {
    let (name, mean, std) = (name.to_string(), mean.to_vec(), std.to_vec());
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let (t, (h, w, c)) = hwc(&e, ctx, &name, true)?;
        let (m, s) = (
            per_channel(&mean, c, ctx, &name)?,
            per_channel(&std, c, ctx, &name)?,
        );
        let mut out = Vec::new();
        augment::normalize_into(t.data(), h * w, &m, &s, chw, &mut out);
        let shape = if chw { vec![c, h, w] } else { vec![h, w, c] };
        e.insert(&name, Tensor::new(DType::F32, shape, out.into())?);
        Ok(e)
    })
}

/// [`normalize_fn`]'s batch form ([`BatchMapFn`]): a batch of same-size `uint8` images
/// `[n, height, width, channels]` normalised straight into one float32 batch buffer, where the
/// element path allocates each image's float32 output and `batch` copies it again. Anything
/// else (ragged sizes, another dtype, a channel count mean/std do not fit) is left to the
/// element path, whose error names the element.
pub fn normalize_batch_fn(name: &str, mean: &[f32], std: &[f32], chw: bool) -> BatchMapFn {
    let (name, mean, std) = (name.to_string(), mean.to_vec(), std.to_vec());
    Arc::new(move |batch: &Example, ctx: &Ctx| {
        let Some(Value::Tensor(t)) = batch.get(&name) else {
            return Ok(None);
        };
        let &[n, h, w, c] = t.shape() else {
            return Ok(None);
        };
        let (Ok(m), Ok(s)) = (
            per_channel(&mean, c, ctx, &name),
            per_channel(&std, c, ctx, &name),
        ) else {
            return Ok(None);
        };
        if t.dtype() != DType::U8 || h == 0 || w == 0 || c == 0 {
            return Ok(None);
        }
        let per = h * w * c;
        let mut out = stokehold_core::alloc::large_vec(n * per * 4);
        for img in t.data().chunks_exact(per) {
            augment::normalize_into(img, h * w, &m, &s, chw, &mut out);
        }
        let shape = if chw {
            vec![n, c, h, w]
        } else {
            vec![n, h, w, c]
        };
        let mut batch = batch.clone();
        batch.insert(&name, Tensor::new(DType::F32, shape, out.into())?);
        Ok(Some(batch))
    })
}

/// Mean or std for `c` channels: one value per channel, or one for all.
fn per_channel(v: &[f32], c: usize, ctx: &Ctx, name: &str) -> Result<Vec<f32>> {
    match v.len() {
        1 => Ok(vec![v[0]; c]),
        n if n == c => Ok(v.to_vec()),
        n => Err(Error::schema(
            ctx.op,
            format!(
                "element {}: feature {name:?} has {c} channels, mean/std give {n}",
                ctx.index
            ),
        )),
    }
}

/// A map function doing torchvision's `ColorJitter(brightness, contrast, saturation)` (no hue)
/// on `uint8` RGB HWC feature `name`: factors and order drawn from (seed, epoch, index) (see
/// [`augment::jitter_params`]).
pub fn color_jitter_fn(
    name: &str,
    brightness: f32,
    contrast: f32,
    saturation: f32,
    seed: u64,
) -> MapFn {
    let name = name.to_string();
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let (t, (h, w, c)) = hwc(&e, ctx, &name, true)?;
        if c != 3 {
            return Err(Error::schema(
                ctx.op,
                format!(
                    "element {}: feature {name:?}: color_jitter takes RGB images, got {c} channels",
                    ctx.index
                ),
            ));
        }
        let mut rng = Rng::for_element(seed, Stream::ColorJitter, ctx.epoch, ctx.index);
        let adjust = augment::jitter_params([brightness, contrast, saturation], &mut rng);
        let mut px = t.data().to_vec();
        augment::color_jitter(&mut px, &adjust);
        e.insert(&name, Tensor::from_vec(vec![h, w, c], px)?);
        Ok(e)
    })
}

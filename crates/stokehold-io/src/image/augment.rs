//! Geometry and value ops on HWC images: torchvision's `RandomResizedCrop` parameters and
//! `CenterCrop` offsets reproduced, a horizontal flip and a fused normalise.

use stokehold_core::rng::Rng;

use super::resize::Rect;

/// torchvision's `RandomResizedCrop.get_params` with our keyed generator: up to 10 attempts at
/// an area fraction uniform in `scale` and an aspect ratio log-uniform in `ratio`; sides are
/// rounded half to even (Python's `round`); the first attempt that fits inside the image wins
/// and its offset is uniform. When none fits, the fallback is torchvision's: the whole image
/// clamped to the ratio range, centred.
pub fn random_resized_crop_rect(
    h: usize,
    w: usize,
    scale: (f64, f64),
    ratio: (f64, f64),
    rng: &mut Rng,
) -> Rect {
    let area = (h * w) as f64;
    let (log_lo, log_hi) = (ratio.0.ln(), ratio.1.ln());
    for _ in 0..10 {
        let target = area * uniform(rng, scale.0, scale.1);
        let aspect = uniform(rng, log_lo, log_hi).exp();
        let cw = (target * aspect).sqrt().round_ties_even();
        let ch = (target / aspect).sqrt().round_ties_even();
        if cw > 0.0 && ch > 0.0 && cw <= w as f64 && ch <= h as f64 {
            let (cw, ch) = (cw as usize, ch as usize);
            let top = rng.below((h - ch + 1) as u64) as usize;
            let left = rng.below((w - cw + 1) as u64) as usize;
            return Rect {
                top,
                left,
                height: ch,
                width: cw,
            };
        }
    }
    let in_ratio = w as f64 / h as f64;
    let (cw, ch) = if in_ratio < ratio.0 {
        (w, ((w as f64 / ratio.0).round_ties_even() as usize).max(1))
    } else if in_ratio > ratio.1 {
        (((h as f64 * ratio.1).round_ties_even() as usize).max(1), h)
    } else {
        (w, h)
    };
    Rect {
        top: (h - ch.min(h)) / 2,
        left: (w - cw.min(w)) / 2,
        height: ch.min(h),
        width: cw.min(w),
    }
}

fn uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.next_f64()
}

/// torchvision's `CenterCrop` on raw pixels of `px` bytes each: an `h x w` image cropped (or
/// zero-padded where it is smaller) to `ch x cw`. Offsets are `round((h - ch) / 2)` for a
/// crop and `(ch - h) / 2` rows of padding on top for a pad, as torchvision computes them.
pub fn center_crop(
    src: &[u8],
    (h, w, px): (usize, usize, usize),
    (ch, cw): (usize, usize),
) -> Vec<u8> {
    let off = |n: usize, c: usize| -> (usize, usize) {
        if n >= c {
            // (source offset, destination offset)
            ((((n - c) as f64) / 2.0).round_ties_even() as usize, 0)
        } else {
            (0, (c - n) / 2)
        }
    };
    let ((sy, dy), (sx, dx)) = (off(h, ch), off(w, cw));
    let rows = h.min(ch);
    let cols = w.min(cw);
    let mut out = vec![0u8; ch * cw * px];
    for r in 0..rows {
        let s = ((sy + r) * w + sx) * px;
        let d = ((dy + r) * cw + dx) * px;
        out[d..d + cols * px].copy_from_slice(&src[s..s + cols * px]);
    }
    out
}

/// Mirrors each row of an `h x w` image of `px`-byte pixels.
pub fn flip_left_right(src: &[u8], (h, w, px): (usize, usize, usize)) -> Vec<u8> {
    let mut out = vec![0u8; h * w * px];
    let src = &src[..h * w * px];
    // Pixels as fixed-size arrays for the usual widths: a copy of `px` bytes known only at run
    // time is a memmove call per pixel (3 % of the JPEG bench's CPU, `perf record`).
    match px {
        1 => mirror::<1>(src, &mut out, w),
        2 => mirror::<2>(src, &mut out, w),
        3 => mirror::<3>(src, &mut out, w),
        4 => mirror::<4>(src, &mut out, w),
        _ => {
            for (row, dst) in src.chunks_exact(w * px).zip(out.chunks_exact_mut(w * px)) {
                for (p, d) in row.chunks_exact(px).zip(dst.chunks_exact_mut(px).rev()) {
                    d.copy_from_slice(p);
                }
            }
        }
    }
    out
}

/// Each row of `w` pixels of `N` bytes in `src`, mirrored into `dst`.
fn mirror<const N: usize>(src: &[u8], dst: &mut [u8], w: usize) {
    for (row, out) in src.chunks_exact(w * N).zip(dst.chunks_exact_mut(w * N)) {
        let (row, _) = row.as_chunks::<N>();
        let (out, _) = out.as_chunks_mut::<N>();
        for (p, d) in row.iter().zip(out.iter_mut().rev()) {
            *d = *p;
        }
    }
}

/// `(x / 255 - mean[c]) / std[c]` as float32, from HWC `uint8`, appended to `out` as
/// little-endian bytes, HWC or (with `chw`) channels first. One pass, one multiply-add per
/// sample (`x * a[c] + b[c]`), through a small buffer: `out` may be a whole batch's buffer, so
/// a batch of images is normalised straight into it.
pub fn normalize_into(
    src: &[u8],
    pixels: usize,
    mean: &[f32],
    std: &[f32],
    chw: bool,
    out: &mut Vec<u8>,
) {
    /// Pixels per buffer-full (64 KiB of float32 at 4 channels).
    const CHUNK: usize = 4096;
    let c = mean.len();
    let a: Vec<f32> = std.iter().map(|s| 1.0 / (255.0 * s)).collect();
    let b: Vec<f32> = mean.iter().zip(std).map(|(m, s)| -m / s).collect();
    let src = src.get(..pixels * c).unwrap_or(src);
    out.reserve(src.len() * 4);
    let mut buf = vec![0f32; CHUNK * c];
    if chw {
        // One pass per channel plane, each reading every `c`-th byte.
        for k in 0..c {
            for px in src.chunks(CHUNK * c) {
                let m = px.len() / c;
                for (o, p) in buf[..m].iter_mut().zip(px.chunks_exact(c)) {
                    *o = f32::from(p[k]) * a[k] + b[k];
                }
                out.extend_from_slice(bytemuck::cast_slice(&buf[..m]));
            }
        }
    } else {
        // Each chunk starts on a pixel, so channel `i % c` is sample `i`'s.
        for px in src.chunks(CHUNK * c) {
            let ab = a.iter().zip(&b).cycle();
            for ((o, &x), (a, b)) in buf.iter_mut().zip(px).zip(ab) {
                *o = f32::from(x) * a + b;
            }
            out.extend_from_slice(bytemuck::cast_slice(&buf[..px.len()]));
        }
    }
}

/// One colour adjustment of torchvision's `ColorJitter` (hue is not offered).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Adjust {
    /// `x * f`.
    Brightness(f32),
    /// Blend with the image's mean gray level: `f * x + (1 - f) * mean`.
    Contrast(f32),
    /// Blend with each pixel's gray level: `f * x + (1 - f) * gray`.
    Saturation(f32),
}

/// torchvision's `rgb_to_grayscale` on uint8 (weights 0.2989, 0.587, 0.114; truncated).
fn gray(p: &[u8]) -> f32 {
    (0.2989 * f32::from(p[0]) + 0.587 * f32::from(p[1]) + 0.114 * f32::from(p[2])).trunc()
}

/// Applies `adjustments` in order to RGB `uint8` pixels in place, each a blend clamped to
/// `0..=255` and truncated as torchvision's `_blend` does on uint8 tensors.
pub fn color_jitter(px: &mut [u8], adjustments: &[Adjust]) {
    let blend =
        |x: u8, f: f32, other: f32| (f * f32::from(x) + (1.0 - f) * other).clamp(0.0, 255.0) as u8;
    for a in adjustments {
        match *a {
            Adjust::Brightness(f) => px.iter_mut().for_each(|x| *x = blend(*x, f, 0.0)),
            Adjust::Contrast(f) => {
                let n = (px.len() / 3).max(1) as f64;
                let mean = (px.chunks_exact(3).map(|p| f64::from(gray(p))).sum::<f64>() / n) as f32;
                px.iter_mut().for_each(|x| *x = blend(*x, f, mean));
            }
            Adjust::Saturation(f) => {
                for p in px.chunks_exact_mut(3) {
                    let g = gray(p);
                    p.iter_mut().for_each(|x| *x = blend(*x, f, g));
                }
            }
        }
    }
}

/// torchvision's `ColorJitter.get_params` without hue, from our keyed generator: a factor
/// uniform in `[max(0, 1 - v), 1 + v]` for each non-zero strength `v` of (brightness, contrast,
/// saturation), in a random order.
pub fn jitter_params(strengths: [f32; 3], rng: &mut Rng) -> Vec<Adjust> {
    let mut order = [0usize, 1, 2];
    rng.shuffle(&mut order);
    let mut out = Vec::with_capacity(3);
    for k in order {
        let v = f64::from(strengths[k]);
        if v == 0.0 {
            continue;
        }
        let f = uniform(rng, (1.0 - v).max(0.0), 1.0 + v) as f32;
        out.push(match k {
            0 => Adjust::Brightness(f),
            1 => Adjust::Contrast(f),
            _ => Adjust::Saturation(f),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrc_within_bounds_and_keyed() {
        for i in 0..500u64 {
            let mut rng = Rng::keyed(3, &[0, i]);
            let r = random_resized_crop_rect(375, 500, (0.08, 1.0), (0.75, 4.0 / 3.0), &mut rng);
            assert!(r.height >= 1 && r.width >= 1);
            assert!(r.top + r.height <= 375 && r.left + r.width <= 500, "{r:?}");
            let mut again = Rng::keyed(3, &[0, i]);
            assert_eq!(
                r,
                random_resized_crop_rect(375, 500, (0.08, 1.0), (0.75, 4.0 / 3.0), &mut again)
            );
        }
    }

    #[test]
    fn rrc_fallback_is_centred_and_clamped_to_ratio() {
        // A 1 x 100 strip: no crop of ratio 3/4..4/3 fits with scale >= 0.9, so the fallback
        // takes the full height and a width of round(1 * 4/3) = 1, centred.
        let mut rng = Rng::keyed(1, &[0, 0]);
        let r = random_resized_crop_rect(1, 100, (0.9, 1.0), (0.75, 4.0 / 3.0), &mut rng);
        assert_eq!(
            r,
            Rect {
                top: 0,
                left: 49,
                height: 1,
                width: 1
            }
        );
    }

    #[test]
    fn center_crop_and_pad() {
        // 3x4 gray image 0..12; crop 2x2: rows round(0.5)=0, cols round(1)=1.
        let src: Vec<u8> = (0..12).collect();
        assert_eq!(center_crop(&src, (3, 4, 1), (2, 2)), vec![1, 2, 5, 6]);
        // Pad a 1x1 to 3x3: centred.
        assert_eq!(
            center_crop(&[9], (1, 1, 1), (3, 3)),
            vec![0, 0, 0, 0, 9, 0, 0, 0, 0]
        );
    }

    #[test]
    fn jitter_blends() {
        let mut px = vec![100u8, 200, 50];
        color_jitter(&mut px, &[Adjust::Brightness(2.0)]);
        assert_eq!(px, vec![200, 255, 100]);
        // Saturation 0 turns a pixel into its gray level.
        let mut px = vec![255u8, 0, 0];
        color_jitter(&mut px, &[Adjust::Saturation(0.0)]);
        assert_eq!(px, vec![76, 76, 76]);
        // Contrast 0 turns the image into its mean gray.
        let mut px = vec![255u8, 255, 255, 0, 0, 0];
        color_jitter(&mut px, &[Adjust::Contrast(0.0)]);
        assert_eq!(px, vec![127; 6]);
        let mut rng = Rng::keyed(1, &[0, 0]);
        let p = jitter_params([0.4, 0.0, 0.4], &mut rng);
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn flip_and_normalize() {
        let src = [1u8, 2, 3, 4, 5, 6];
        assert_eq!(flip_left_right(&src, (1, 2, 3)), vec![4, 5, 6, 1, 2, 3]);
        // Every pixel width (the fixed-size paths and the general one), against the definition.
        for px in 1..=5 {
            let (h, w) = (3, 7);
            let src: Vec<u8> = (0..h * w * px).map(|i| (i * 7 % 251) as u8).collect();
            let got = flip_left_right(&src, (h, w, px));
            for y in 0..h {
                for x in 0..w {
                    let (d, s) = ((y * w + x) * px, (y * w + w - 1 - x) * px);
                    assert_eq!(got[d..d + px], src[s..s + px], "px {px} at ({y}, {x})");
                }
            }
        }
        let norm = |src: &[u8], px, mean: &[f32], std: &[f32], chw| {
            let mut out = Vec::new();
            normalize_into(src, px, mean, std, chw, &mut out);
            let f = |b: &[u8]| f32::from_le_bytes(b.try_into().expect("4 bytes"));
            out.chunks_exact(4).map(f).collect::<Vec<f32>>()
        };
        let n = norm(&[255, 0], 1, &[0.5, 0.5], &[0.5, 0.25], false);
        assert!(
            (n[0] - 1.0).abs() < 1e-6 && (n[1] + 2.0).abs() < 1e-6,
            "{n:?}"
        );
        let chw = norm(&[0, 255, 255, 0], 2, &[0.0, 0.0], &[1.0, 1.0], true);
        assert_eq!(chw, vec![0.0, 1.0, 1.0, 0.0]);
    }
}

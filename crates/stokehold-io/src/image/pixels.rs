//! Pixel-level helpers shared by decode and the augmentation ops: the memory layout
//! ([`Layout`]) and channel conversion.

use crate::options::Choice;

/// Memory order of a decoded or normalised image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// `[height, width, channels]` (tf.image, Pillow, numpy).
    #[default]
    Hwc,
    /// `[channels, height, width]` (torchvision).
    Chw,
}

impl Choice for Layout {
    const ARG: &'static str = "layout";
    const CHOICES: &'static [(&'static str, Self)] = &[("HWC", Layout::Hwc), ("CHW", Layout::Chw)];
}

/// A sample type of decoded images (`u8`, `u16`).
pub trait Sample: Copy + Default + Send + 'static {
    /// Fully opaque alpha.
    const OPAQUE: Self;
    /// ITU-R 601-2 luma (Pillow's `convert("L")`: `(299 R + 587 G + 114 B) / 1000`, rounded).
    fn luma(r: Self, g: Self, b: Self) -> Self;
}

impl Sample for u8 {
    const OPAQUE: u8 = u8::MAX;
    fn luma(r: u8, g: u8, b: u8) -> u8 {
        ((299 * u32::from(r) + 587 * u32::from(g) + 114 * u32::from(b) + 500) / 1000) as u8
    }
}

impl Sample for u16 {
    const OPAQUE: u16 = u16::MAX;
    fn luma(r: u16, g: u16, b: u16) -> u16 {
        ((299 * u64::from(r) + 587 * u64::from(g) + 114 * u64::from(b) + 500) / 1000) as u16
    }
}

/// Converts `pixels` interleaved pixels of `c` channels (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA)
/// to `out` channels (1, 2, 3 or 4): gray is replicated, colour becomes luma, alpha is dropped
/// or set opaque (no compositing, as Pillow's `convert("RGB")`).
pub fn convert_channels<T: Sample>(v: Vec<T>, pixels: usize, c: usize, out: usize) -> Vec<T> {
    if c == out {
        return v;
    }
    let mut o = Vec::with_capacity(pixels * out);
    for p in v.chunks_exact(c) {
        let (gray, rgb, alpha) = match c {
            1 => (p[0], [p[0]; 3], T::OPAQUE),
            2 => (p[0], [p[0]; 3], p[1]),
            3 => (T::luma(p[0], p[1], p[2]), [p[0], p[1], p[2]], T::OPAQUE),
            _ => (T::luma(p[0], p[1], p[2]), [p[0], p[1], p[2]], p[3]),
        };
        match out {
            1 => o.push(gray),
            2 => o.extend_from_slice(&[gray, alpha]),
            3 => o.extend_from_slice(&rgb),
            _ => o.extend_from_slice(&[rgb[0], rgb[1], rgb[2], alpha]),
        }
    }
    o
}

/// `[H*W, C]` interleaved to `[C, H*W]` planes.
pub fn hwc_to_chw<T: Sample>(v: &[T], pixels: usize, c: usize) -> Vec<T> {
    let mut o = vec![T::default(); pixels * c];
    for (i, p) in v.chunks_exact(c).enumerate() {
        for (k, &s) in p.iter().enumerate() {
            o[k * pixels + i] = s;
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_conversions() {
        assert_eq!(
            convert_channels(vec![7u8, 9], 2, 1, 3),
            vec![7, 7, 7, 9, 9, 9]
        );
        assert_eq!(convert_channels(vec![1u8, 2, 3, 4], 1, 4, 3), vec![1, 2, 3]);
        assert_eq!(convert_channels(vec![5u8, 6], 1, 2, 4), vec![5, 5, 5, 6]);
        assert_eq!(convert_channels(vec![255u8, 0, 0], 1, 3, 1), vec![76]);
        assert_eq!(
            convert_channels(vec![1u16, 2, 3], 1, 3, 4),
            vec![1, 2, 3, u16::MAX]
        );
    }

    #[test]
    fn layout() {
        assert_eq!(
            hwc_to_chw(&[1u8, 2, 3, 4, 5, 6], 2, 3),
            vec![1, 4, 2, 5, 3, 6]
        );
    }
}

//! Resizing `uint8` HWC images with fast_image_resize (SIMD convolution). Downscaling
//! antialiases as Pillow does (the filter's support widens with the scale), which is what
//! torchvision's `antialias=True` approximates on tensors.

use std::cell::RefCell;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

use super::error::ImageError;
use crate::options::Choice;

/// How pixels are interpolated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interpolation {
    /// Nearest neighbour.
    Nearest,
    /// Triangle filter (Pillow's / torchvision's `BILINEAR`).
    Bilinear,
    /// Catmull-Rom cubic, a = -0.5 (Pillow's `BICUBIC`).
    Bicubic,
    /// Box filter: each output pixel averages the input area it covers (tf's `area`).
    Area,
    /// Lanczos, 3 lobes.
    Lanczos3,
}

impl Choice for Interpolation {
    const ARG: &'static str = "interpolation";
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("nearest", Interpolation::Nearest),
        ("bilinear", Interpolation::Bilinear),
        ("bicubic", Interpolation::Bicubic),
        ("area", Interpolation::Area),
        ("lanczos3", Interpolation::Lanczos3),
    ];
}

impl Interpolation {
    fn alg(self) -> ResizeAlg {
        match self {
            Interpolation::Nearest => ResizeAlg::Nearest,
            Interpolation::Bilinear => ResizeAlg::Convolution(FilterType::Bilinear),
            Interpolation::Bicubic => ResizeAlg::Convolution(FilterType::CatmullRom),
            Interpolation::Area => ResizeAlg::Convolution(FilterType::Box),
            Interpolation::Lanczos3 => ResizeAlg::Convolution(FilterType::Lanczos3),
        }
    }
}

/// A region of an image: top, left, height, width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    /// First row.
    pub top: usize,
    /// First column.
    pub left: usize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
}

thread_local! {
    // One resizer per thread keeps its scratch buffers between images.
    static RESIZER: RefCell<Resizer> = RefCell::new(Resizer::new());
}

fn pixel_type(c: usize) -> Result<PixelType, ImageError> {
    Ok(match c {
        1 => PixelType::U8,
        2 => PixelType::U8x2,
        3 => PixelType::U8x3,
        4 => PixelType::U8x4,
        _ => {
            return Err(ImageError::Argument(format!(
                "an image with {c} channels (resize takes 1 to 4)"
            )))
        }
    })
}

/// Resizes the `src` region `crop` of an `h x w x c` image to `out_h x out_w`.
pub fn resize(
    src: &[u8],
    (h, w, c): (usize, usize, usize),
    crop: Rect,
    (out_h, out_w): (usize, usize),
    interp: Interpolation,
) -> Result<Vec<u8>, ImageError> {
    let pt = pixel_type(c)?;
    let err = |e: &dyn std::fmt::Display| ImageError::Argument(format!("resize: {e}"));
    let src = ImageRef::new(w as u32, h as u32, src, pt).map_err(|e| err(&e))?;
    let mut dst = Image::new(out_w as u32, out_h as u32, pt);
    // Channels are filtered independently (no alpha premultiplication), as torchvision does on
    // tensors.
    let opts = ResizeOptions::new()
        .resize_alg(interp.alg())
        .use_alpha(false)
        .crop(
            crop.left as f64,
            crop.top as f64,
            crop.width as f64,
            crop.height as f64,
        );
    RESIZER.with(|r| {
        r.borrow_mut()
            .resize(&src, &mut dst, &opts)
            .map_err(|e| err(&e))
    })?;
    Ok(dst.into_vec())
}

/// The output size of `resize(size)`: `Exact(h, w)`, or `Shorter(s)`, torchvision's `Resize(s)`:
/// the shorter side becomes `s`, the longer one keeps the aspect ratio (truncated, as
/// torchvision does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// Exactly this height and width.
    Exact(usize, usize),
    /// The shorter side becomes this.
    Shorter(usize),
}

impl Size {
    /// The output height and width for an `h x w` input.
    pub fn of(self, h: usize, w: usize) -> (usize, usize) {
        match self {
            Size::Exact(oh, ow) => (oh, ow),
            Size::Shorter(s) if h <= w => (s, ((s as u64 * w as u64) / h as u64) as usize),
            Size::Shorter(s) => (((s as u64 * h as u64) / w as u64) as usize, s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorter_side() {
        assert_eq!(Size::Shorter(256).of(375, 500), (256, 341));
        assert_eq!(Size::Shorter(256).of(500, 375), (341, 256));
        assert_eq!(Size::Exact(2, 3).of(10, 10), (2, 3));
    }

    #[test]
    fn resize_constant_stays_constant() {
        let src = vec![100u8; 8 * 6 * 3];
        let full = Rect {
            top: 0,
            left: 0,
            height: 8,
            width: 6,
        };
        for &(interp, i) in Interpolation::CHOICES {
            let out = resize(&src, (8, 6, 3), full, (3, 5), i).unwrap();
            assert_eq!(out, vec![100u8; 3 * 5 * 3], "{interp}");
        }
    }

    #[test]
    fn area_downscale_averages() {
        // 2x2 blocks of 0 and 200 halve to their means.
        let src: Vec<u8> = vec![0, 0, 200, 200, 0, 0, 200, 200];
        let full = Rect {
            top: 0,
            left: 0,
            height: 2,
            width: 4,
        };
        let out = resize(&src, (2, 4, 1), full, (1, 2), Interpolation::Area).unwrap();
        assert_eq!(out, vec![0, 200]);
    }
}

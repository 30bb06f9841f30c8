//! Decoding JPEG (baseline and progressive, zune-jpeg), PNG (1-16 bit, palette, alpha; the `png`
//! crate) and WebP (lossy and lossless, image-webp) into a dense `uint8` or `uint16` tensor.
//!
//! Every decoder reads the header first; the dimensions are checked (each side non-zero, the
//! product at most [`DecodeOptions::max_pixels`]) before any pixel buffer is allocated, so a
//! hostile 100000x100000 header costs a few bytes of parsing, not 30 GB.

use std::io::Cursor;

use stokehold_core::{DType, Error, Tensor};
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

use super::error::ImageError;
pub use super::format::Format;
use super::pixels::Layout;
use crate::options::Choice;

/// Pillow's decompression-bomb ceiling (`2 * Image.MAX_IMAGE_PIXELS`): a user coming from a PIL
/// `map` keeps the same limit by default.
pub const DEFAULT_MAX_PIXELS: u64 = 178_956_970;

/// Recognises the format from the first bytes; formats we do not decode are named in the error.
pub fn sniff(data: &[u8]) -> Result<Format, ImageError> {
    let starts = |m: &[u8]| data.starts_with(m);
    if starts(&[0xFF, 0xD8, 0xFF]) {
        return Ok(Format::Jpeg);
    }
    if starts(b"\x89PNG\r\n\x1a\n") {
        return Ok(Format::Png);
    }
    if data.len() >= 12 && starts(b"RIFF") && &data[8..12] == b"WEBP" {
        return Ok(Format::WebP);
    }
    let other = if starts(b"GIF87a") || starts(b"GIF89a") {
        "GIF"
    } else if starts(b"BM") {
        "BMP"
    } else if starts(b"II*\0") || starts(b"MM\0*") {
        "TIFF"
    } else if data.len() >= 12 && &data[4..8] == b"ftyp" {
        "HEIF/AVIF"
    } else if starts(&[0xFF, 0x0A]) || starts(b"\0\0\0\x0cJXL ") {
        "JPEG XL"
    } else if starts(b"qoif") {
        "QOI"
    } else if data.is_empty() {
        "empty input"
    } else {
        "unrecognised signature"
    };
    Err(ImageError::Unsupported(other))
}

/// What a header says about an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageInfo {
    /// The container format.
    pub format: Format,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Channels a decode with `channels = 0` yields (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA).
    pub channels: u8,
    /// Bits per sample in the file (8 or 16; palette and low-bit PNGs expand to 8).
    pub bit_depth: u8,
}

/// How to decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeOptions {
    /// 0: the file's own channels; 1 gray, 3 RGB, 4 RGBA (alpha dropped or set opaque).
    pub channels: u8,
    /// `DType::U8` (16-bit PNG keeps its high byte) or `DType::U16` (8-bit sources scaled by 257).
    pub dtype: DType,
    /// Height, width, channels (default) or channels first.
    pub layout: Layout,
    /// Largest width x height decoded; larger headers are refused before allocating.
    pub max_pixels: u64,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            channels: 3,
            dtype: DType::U8,
            layout: Layout::Hwc,
            max_pixels: DEFAULT_MAX_PIXELS,
        }
    }
}

impl DecodeOptions {
    /// The Python API's decode arguments, checked: a bad value is an error naming `op` and the
    /// argument.
    pub fn from_args(
        op: &str,
        channels: u64,
        dtype: SampleType,
        layout: Layout,
        max_pixels: u64,
    ) -> stokehold_core::Result<Self> {
        let Some(channels @ (0 | 1 | 3 | 4)) = u8::try_from(channels).ok() else {
            return Err(Error::invalid(format!(
                "{op}(channels={channels}): must be 0 (as in the file), 1, 3 or 4"
            )));
        };
        if max_pixels == 0 {
            return Err(Error::invalid(format!("{op}(max_pixels=0): must be >= 1")));
        }
        Ok(DecodeOptions {
            channels,
            dtype: dtype.dtype(),
            layout,
            max_pixels,
        })
    }
}

/// The sample type a decode produces (Python's `dtype`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SampleType {
    /// `uint8` (16-bit PNGs keep their high byte).
    #[default]
    U8,
    /// `uint16` (8-bit sources scaled by 257).
    U16,
}

impl SampleType {
    /// The tensor dtype.
    pub fn dtype(self) -> DType {
        match self {
            SampleType::U8 => DType::U8,
            SampleType::U16 => DType::U16,
        }
    }
}

impl Choice for SampleType {
    const ARG: &'static str = "dtype";
    const CHOICES: &'static [(&'static str, Self)] =
        &[("uint8", SampleType::U8), ("uint16", SampleType::U16)];
}

/// Samples as the decoders produce them.
enum Samples {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

/// A decoded image before channel conversion.
struct Raw {
    width: usize,
    height: usize,
    channels: usize,
    samples: Samples,
}

fn corrupt(format: Format, e: impl std::fmt::Display) -> ImageError {
    ImageError::Corrupt {
        format,
        reason: e.to_string(),
    }
}

/// Refuses a zero side or more than `max_pixels` pixels (checked in u64: no overflow).
fn check_size(format: Format, width: u64, height: u64, max_pixels: u64) -> Result<(), ImageError> {
    if width == 0 || height == 0 || width.saturating_mul(height) > max_pixels {
        return Err(ImageError::Size {
            format,
            width,
            height,
            max_pixels,
        });
    }
    Ok(())
}

/// Reads only the header.
pub fn probe(data: &[u8]) -> Result<ImageInfo, ImageError> {
    let format = sniff(data)?;
    let (width, height, channels, bit_depth) = match format {
        Format::Jpeg => {
            let mut d = jpeg_decoder(data, 0);
            d.decode_headers().map_err(|e| corrupt(format, e))?;
            let info = d.info().ok_or_else(|| corrupt(format, "no frame header"))?;
            let cs = d.input_colorspace().unwrap_or(ColorSpace::RGB);
            let c = if cs.num_components() == 1 { 1 } else { 3 };
            (u32::from(info.width), u32::from(info.height), c, 8)
        }
        Format::Png => {
            // Up to the first IDAT (tRNS, which adds alpha, comes after the header); no pixels.
            let mut d = png::Decoder::new(Cursor::new(data));
            d.set_transformations(png::Transformations::EXPAND);
            let r = d.read_info().map_err(|e| corrupt(format, e))?;
            let (color, depth) = r.output_color_type();
            let bits = if depth == png::BitDepth::Sixteen {
                16
            } else {
                8
            };
            (r.info().width, r.info().height, color.samples() as u8, bits)
        }
        Format::WebP => {
            let d =
                image_webp::WebPDecoder::new(Cursor::new(data)).map_err(|e| corrupt(format, e))?;
            let (w, h) = d.dimensions();
            (w, h, if d.has_alpha() { 4 } else { 3 }, 8)
        }
    };
    Ok(ImageInfo {
        format,
        width,
        height,
        channels,
        bit_depth,
    })
}

/// Decodes `data` (JPEG, PNG or WebP) into a `[H, W, C]` (or `[C, H, W]`) tensor.
pub fn decode(data: &[u8], opts: &DecodeOptions) -> Result<Tensor, ImageError> {
    if !matches!(opts.channels, 0 | 1 | 3 | 4) {
        return Err(ImageError::Argument(format!(
            "channels={}: must be 0 (as in the file), 1, 3 or 4",
            opts.channels
        )));
    }
    let format = sniff(data)?;
    let raw = match format {
        Format::Jpeg => decode_jpeg(data, opts)?,
        Format::Png => decode_png(data, opts)?,
        Format::WebP => decode_webp(data, opts)?,
    };
    let out_c = if opts.channels == 0 {
        raw.channels
    } else {
        opts.channels as usize
    };
    let shape = |c: usize| match opts.layout {
        Layout::Hwc => vec![raw.height, raw.width, c],
        Layout::Chw => vec![c, raw.height, raw.width],
    };
    let (h, w, c) = (raw.height, raw.width, raw.channels);
    let t = match (raw.samples, opts.dtype) {
        (Samples::U8(v), DType::U8) => {
            let v = finish(v, h * w, c, out_c, opts.layout);
            Tensor::from_vec(shape(out_c), v)
        }
        (Samples::U8(v), _) => {
            let v: Vec<u16> = v.into_iter().map(|x| u16::from(x) * 257).collect();
            Tensor::from_vec(shape(out_c), finish(v, h * w, c, out_c, opts.layout))
        }
        (Samples::U16(v), DType::U8) => {
            let v: Vec<u8> = v.into_iter().map(|x| (x >> 8) as u8).collect();
            Tensor::from_vec(shape(out_c), finish(v, h * w, c, out_c, opts.layout))
        }
        (Samples::U16(v), _) => {
            Tensor::from_vec(shape(out_c), finish(v, h * w, c, out_c, opts.layout))
        }
    };
    t.map_err(|e| ImageError::Argument(e.to_string()))
}

/// Channel conversion, then the layout.
fn finish<T: Sample>(v: Vec<T>, pixels: usize, c: usize, out_c: usize, layout: Layout) -> Vec<T> {
    let v = super::pixels::convert_channels(v, pixels, c, out_c);
    match layout {
        Layout::Hwc => v,
        Layout::Chw => super::pixels::hwc_to_chw(&v, pixels, out_c),
    }
}

pub(crate) use super::pixels::Sample;

/// zune-jpeg's fast paths (SIMD IDCT and colour conversion), strict about truncation and bad
/// markers (a truncated file is an error, as in Pillow, not a silently grey bottom), and its own
/// 16384-pixel side limit lifted to JPEG's 65535: our pixel limit applies instead.
fn jpeg_decoder(data: &[u8], channels: u8) -> JpegDecoder<ZCursor<&[u8]>> {
    let out = match channels {
        1 => ColorSpace::Luma,
        4 => ColorSpace::RGBA,
        _ => ColorSpace::RGB,
    };
    let opts = DecoderOptions::new_fast()
        .set_strict_mode(true)
        .set_max_width(usize::from(u16::MAX))
        .set_max_height(usize::from(u16::MAX))
        .jpeg_set_out_colorspace(out);
    JpegDecoder::new_with_options(ZCursor::new(data), opts)
}

fn decode_jpeg(data: &[u8], opts: &DecodeOptions) -> Result<Raw, ImageError> {
    let f = Format::Jpeg;
    let mut probe = jpeg_decoder(data, opts.channels);
    probe.decode_headers().map_err(|e| corrupt(f, e))?;
    let gray = probe
        .input_colorspace()
        .is_some_and(|cs| cs.num_components() == 1);
    // channels=0 keeps a grayscale file gray; everything else decodes straight to what was asked.
    let want = match opts.channels {
        0 if gray => 1,
        0 => 3,
        c => c,
    };
    let mut d = if want == opts.channels {
        probe
    } else {
        let mut d = jpeg_decoder(data, want);
        d.decode_headers().map_err(|e| corrupt(f, e))?;
        d
    };
    let info = d.info().ok_or_else(|| corrupt(f, "no frame header"))?;
    let (w, h) = (usize::from(info.width), usize::from(info.height));
    check_size(f, w as u64, h as u64, opts.max_pixels)?;
    if !has_eoi_after_scan(data) {
        return Err(corrupt(
            f,
            "truncated: no end-of-image marker after the image data",
        ));
    }
    let mut out = vec![0u8; w * h * usize::from(want)];
    d.decode_into(&mut out).map_err(|e| corrupt(f, e))?;
    Ok(Raw {
        width: w,
        height: h,
        channels: usize::from(want),
        samples: Samples::U8(out),
    })
}

fn decode_png(data: &[u8], opts: &DecodeOptions) -> Result<Raw, ImageError> {
    let f = Format::Png;
    // The png crate's own allocation cap, sized to the largest image we accept (16-bit RGBA)
    // plus room for metadata chunks.
    let limit = opts.max_pixels.saturating_mul(8).saturating_add(64 << 20);
    let limits = png::Limits {
        bytes: usize::try_from(limit).unwrap_or(usize::MAX),
    };
    let mut d = png::Decoder::new_with_limits(Cursor::new(data), limits);
    // Only pixels are decoded: an ICC profile or a compressed text chunk (a zlib bomb of any
    // size in a few kilobytes) is skipped, not inflated.
    d.set_ignore_iccp_chunk(true);
    d.set_ignore_text_chunk(true);
    let info = d.read_header_info().map_err(|e| corrupt(f, e))?;
    let (width, height) = (u64::from(info.width), u64::from(info.height));
    check_size(f, width, height, opts.max_pixels)?;
    // Now the cap is this image's own size (16-bit RGBA) plus 1 MiB for the chunks still read.
    let own = width
        .saturating_mul(height)
        .saturating_mul(8)
        .saturating_add(1 << 20);
    d.set_limits(png::Limits {
        bytes: usize::try_from(own).unwrap_or(usize::MAX),
    });
    // EXPAND: palette to RGB(A), tRNS to alpha, 1/2/4-bit gray to 8-bit; 16 bits stay 16.
    let mut t = png::Transformations::EXPAND;
    if opts.dtype == DType::U8 {
        t |= png::Transformations::STRIP_16;
    }
    d.set_transformations(t);
    let mut r = d.read_info().map_err(|e| corrupt(f, e))?;
    let (color, depth) = r.output_color_type();
    let size = r
        .output_buffer_size()
        .ok_or_else(|| corrupt(f, "image size overflows"))?;
    let mut buf = vec![0u8; size];
    let frame = r.next_frame(&mut buf).map_err(|e| corrupt(f, e))?;
    buf.truncate(frame.buffer_size());
    let (w, h) = (frame.width as usize, frame.height as usize);
    let samples = if depth == png::BitDepth::Sixteen {
        let v = buf
            .chunks_exact(2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .collect();
        Samples::U16(v)
    } else {
        Samples::U8(buf)
    };
    Ok(Raw {
        width: w,
        height: h,
        channels: color.samples(),
        samples,
    })
}

fn decode_webp(data: &[u8], opts: &DecodeOptions) -> Result<Raw, ImageError> {
    let f = Format::WebP;
    let mut d = image_webp::WebPDecoder::new(Cursor::new(data)).map_err(|e| corrupt(f, e))?;
    let (w, h) = d.dimensions();
    check_size(f, w.into(), h.into(), opts.max_pixels)?;
    let size = d
        .output_buffer_size()
        .ok_or_else(|| corrupt(f, "image size overflows"))?;
    let mut buf = vec![0u8; size];
    d.read_image(&mut buf).map_err(|e| corrupt(f, e))?;
    Ok(Raw {
        width: w as usize,
        height: h as usize,
        channels: if d.has_alpha() { 4 } else { 3 },
        samples: Samples::U8(buf),
    })
}

/// Whether the end-of-image marker follows the first scan of the main image. zune-jpeg pads a
/// truncated scan with grey and succeeds; Pillow (libjpeg) refuses it, and so do we. The walk
/// skips the header segments by their lengths (an Exif thumbnail inside APP1 has markers of
/// its own), then looks for `FF D9` in the scans: entropy-coded data cannot contain it, as
/// every `FF` byte there is stuffed (`FF 00`) or a restart marker.
fn has_eoi_after_scan(data: &[u8]) -> bool {
    let mut pos = 2;
    while pos + 4 <= data.len() {
        if data[pos] != 0xFF {
            return false;
        }
        let m = data[pos + 1];
        if m == 0xFF {
            pos += 1; // fill byte
            continue;
        }
        if m == 0xDA {
            return data[pos..].windows(2).any(|w| w == [0xFF, 0xD9]);
        }
        if matches!(m, 0x01 | 0xD0..=0xD7) {
            pos += 2;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([data[pos + 2], data[pos + 3]]));
        pos += 2 + len;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_python_decode_arguments_are_checked_naming_the_op() {
        let o =
            DecodeOptions::from_args("decode_image", 0, SampleType::U16, Layout::Chw, 9).unwrap();
        assert_eq!(
            (o.channels, o.dtype, o.layout, o.max_pixels),
            (0, DType::U16, Layout::Chw, 9)
        );
        for c in [2, 5, 256 + 3] {
            let e = DecodeOptions::from_args("load_image", c, SampleType::U8, Layout::Hwc, 9);
            let want = format!("load_image(channels={c}): must be 0 (as in the file), 1, 3 or 4");
            assert!(e.unwrap_err().to_string().contains(&want));
        }
        let e = Layout::parse("decode_image", "hwc")
            .unwrap_err()
            .to_string();
        assert!(e.contains("decode_image(layout='hwc'): must be one of 'HWC', 'CHW'"));
    }
}

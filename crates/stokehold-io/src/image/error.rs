//! Why an image could not be decoded or transformed.

use super::format::Format;

/// Why an image could not be decoded or transformed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// Not one of the formats we decode (the detected one is named).
    #[error("unsupported image format ({0}); decode_image reads JPEG, PNG and WebP")]
    Unsupported(&'static str),
    /// The decoder refused the bytes.
    #[error("{format}: {reason}")]
    Corrupt {
        /// The format the signature announced.
        format: Format,
        /// The decoder's message.
        reason: String,
    },
    /// A zero side, or more pixels than allowed (checked on the header, before allocating).
    #[error(
        "{format} header says {width}x{height}: refused before decoding (each side must be \
         >= 1 and width*height <= max_pixels = {max_pixels})"
    )]
    Size {
        /// The format.
        format: Format,
        /// Width from the header.
        width: u64,
        /// Height from the header.
        height: u64,
        /// The limit in force.
        max_pixels: u64,
    },
    /// An option or an input tensor an op cannot work with.
    #[error("{0}")]
    Argument(String),
}

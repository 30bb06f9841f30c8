//! TFRecord's masked CRC32C.
//!
//! TensorFlow stores `mask(crc32c(bytes))` rather than the raw CRC because a CRC of data that
//! itself contains CRCs is weak; the mask rotates the CRC and adds a constant.

use crc_fast::{checksum, CrcAlgorithm};

/// The constant TensorFlow adds when masking (`kMaskDelta` in `crc32c.h`).
const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC32C (Castagnoli) of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    checksum(CrcAlgorithm::Crc32Iscsi, data) as u32
}

/// The masked CRC32C of `data`, as TFRecord stores it.
pub fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c(data);
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // Check value of CRC32C from RFC 3720 / the CRC catalogue.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        // TensorFlow's masked CRC of the empty string.
        assert_eq!(masked_crc(b""), 0xa282_ead8);
    }
}

//! Image decoding (JPEG, PNG, WebP) with options, then crop and resize. The body is `stokehold_fuzz::image_decode` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::image_decode(data));

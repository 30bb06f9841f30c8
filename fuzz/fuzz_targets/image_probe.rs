//! Image headers (`probe`), checked against a decode. The body is `stokehold_fuzz::image_probe` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::image_probe(data));

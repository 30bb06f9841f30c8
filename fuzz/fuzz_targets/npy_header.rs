//! The `.npy` header parser and the encode round trip. The body is `stokehold_fuzz::npy_header` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::npy_header(data));

//! A `tokenizer.json`: loading, then encoding. The body is `stokehold_fuzz::tokenizer_json` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::tokenizer_json(data));

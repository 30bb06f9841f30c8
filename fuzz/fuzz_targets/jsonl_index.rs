//! the JSONL line index sidecar. The body is `stokehold_fuzz::jsonl_index` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::jsonl_index(data));

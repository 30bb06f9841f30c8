//! JSONL lines: scan, JSON, field inference and conversion. The body is `stokehold_fuzz::jsonl` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::jsonl(data));

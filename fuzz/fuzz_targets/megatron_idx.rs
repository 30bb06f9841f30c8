//! The Megatron `.idx` index parser. The body is `stokehold_fuzz::megatron_idx` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::megatron_idx(data));

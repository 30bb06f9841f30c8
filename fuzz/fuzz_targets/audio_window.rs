//! Audio window reads (seek, pre-roll, cut). The body is `stokehold_fuzz::audio_window` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::audio_window(data));

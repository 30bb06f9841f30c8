//! The TFRecord framing reader on arbitrary bytes (first byte: mode). The body is `stokehold_fuzz::tfrecord_framing` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::tfrecord_framing(data));

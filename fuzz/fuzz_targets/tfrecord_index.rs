//! The TFRecord `.idx` sidecar decoder and the encode round trip. The body is `stokehold_fuzz::tfrecord_index` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::tfrecord_index(data));

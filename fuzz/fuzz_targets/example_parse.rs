//! tf.train.Example parsing: batch parser vs prost, and the encode/decode round trip. The body is `stokehold_fuzz::example_parse` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::example_parse(data));

//! tf.train.SequenceExample decoding. The body is `stokehold_fuzz::sequence_example` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::sequence_example(data));

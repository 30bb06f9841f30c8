//! The shard record codec: decode, gather and the encode round trip. The body is `stokehold_fuzz::shard_record` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::shard_record(data));

//! A whole shard file (header, records, index, footer) behind a matching manifest. The body is `stokehold_fuzz::shard_file` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::shard_file(data));

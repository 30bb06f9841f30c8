//! A shard folder's manifest, beside valid shard files. The body is `stokehold_fuzz::shard_manifest` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::shard_manifest(data));

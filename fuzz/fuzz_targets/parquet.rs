//! Parquet and Arrow IPC files: footer, page index, pages and the Arrow-to-element conversion. The body is `stokehold_fuzz::parquet` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::parquet(data));

//! WebDataset tar shards: header scan and grouping. The body is `stokehold_fuzz::webdataset_tar` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::webdataset_tar(data));

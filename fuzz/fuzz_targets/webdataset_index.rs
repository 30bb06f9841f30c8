//! the WebDataset member index sidecar. The body is `stokehold_fuzz::webdataset_index`
//! (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::webdataset_index(data));

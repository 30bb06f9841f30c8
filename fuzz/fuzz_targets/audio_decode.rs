//! Audio decoding (WAV, FLAC, MP3, Ogg Vorbis, probed), mix down and resampling. The body is `stokehold_fuzz::audio_decode` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stokehold_fuzz::audio_decode(data));

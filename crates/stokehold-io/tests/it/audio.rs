//! Audio: decoded samples against the fixtures' sources (testdata/audio, made by
//! make_fixtures.py), MP3 / Vorbis against ffmpeg, log-mel against librosa and torchaudio, window
//! reads, resampling, and every kind of bad input.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::{testing, Dataset, ErrorLog, Example, OnError, Tensor};
use stokehold_io::audio::decode::{open_bytes, open_file};
use stokehold_io::audio::*;
use stokehold_io::files::{list_files, read_npy};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/audio")
        .join(name)
}

fn npy_f64(name: &str) -> (Vec<usize>, Vec<f64>) {
    let t = read_npy(fixture(name)).unwrap();
    let shape = t.shape().to_vec();
    let v: Vec<f64> = match t.dtype() {
        stokehold_core::DType::U8 => t.to_vec::<u8>().unwrap().iter().map(|x| *x as f64).collect(),
        stokehold_core::DType::I16 => t.to_vec::<i16>().unwrap().iter().map(|x| *x as f64).collect(),
        stokehold_core::DType::I32 => t.to_vec::<i32>().unwrap().iter().map(|x| *x as f64).collect(),
        stokehold_core::DType::F32 => t.to_vec::<f32>().unwrap().iter().map(|x| *x as f64).collect(),
        d => panic!("{d}"),
    };
    (shape, v)
}

/// Planar audio as interleaved frames (the fixtures' `[frames, channels]` layout).
fn interleaved(a: &Audio) -> Vec<f32> {
    let (c, n) = (a.channels.len(), a.frames());
    (0..c * n).map(|k| a.channels[k % c][k / c]).collect()
}

fn decode_file(name: &str) -> Audio {
    open_file(&fixture(name)).unwrap().decode(0, None).unwrap()
}

#[test]
fn wav_and_flac_decode_to_the_source_samples_exactly() {
    // (file, source .npy, divisor that maps the source's integers to [-1, 1], offset)
    let cases: &[(&str, &str, f64, f64)] = &[
        ("speech.wav", "speech.npy", 32768.0, 0.0),
        ("speech.flac", "speech.npy", 32768.0, 0.0),
        ("stereo_s16.wav", "stereo_s16.npy", 32768.0, 0.0),
        ("u8.wav", "u8.npy", 128.0, -128.0),
        ("s24.wav", "s24.npy", 8388608.0, 0.0),
        ("s24.flac", "s24.npy", 8388608.0, 0.0),
        ("s32.wav", "s32.npy", 2147483648.0, 0.0),
        ("f32.wav", "stereo_s16.npy", 32768.0, 0.0),
        ("f64.wav", "stereo_s16.npy", 32768.0, 0.0),
    ];
    for (file, npy, div, off) in cases {
        let a = decode_file(file);
        let (shape, want) = npy_f64(npy);
        assert_eq!(a.sample_rate, 16000, "{file}");
        assert_eq!(vec![a.frames(), a.channels.len()], shape, "{file}");
        let got = interleaved(&a);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            // The exact float32 of the source sample (s / 2^(bits-1) rounds only for 32-bit).
            let w = ((w + off) / div) as f32;
            assert_eq!(*g, w, "{file}: sample {i}");
        }
    }
}

#[test]
fn int16_output_gives_16_bit_sources_back_unchanged() {
    let ds = Dataset::from_columns(Example::new().with(
        "path",
        Tensor::strings(&[
            fixture("stereo_s16.wav").display().to_string(),
            fixture("speech.flac").display().to_string(),
        ]),
    ))
    .unwrap();
    let opts = DecodeOptions {
        dtype: SampleType::I16,
        channels_first: false,
        ..Default::default()
    };
    let ds = ds.map("load_audio", load_audio_fn("path", "audio", opts));
    for (i, npy) in ["stereo_s16.npy", "speech.npy"].iter().enumerate() {
        let e = ds.get(i as u64).unwrap();
        let t = e.tensor("t", "audio").unwrap();
        let want = read_npy(fixture(npy)).unwrap();
        assert_eq!(t.shape(), want.shape());
        assert_eq!(t.to_vec::<i16>().unwrap(), want.to_vec::<i16>().unwrap());
        let rate = e.tensor("t", "sample_rate").unwrap().to_vec::<i64>().unwrap();
        assert_eq!(rate, vec![16000]);
    }
}

/// Largest absolute difference between two equally long signals.
fn max_diff(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn mp3_and_vorbis_match_ffmpeg_within_tolerance() {
    for (file, tol) in [("speech.mp3", 1e-4), ("stereo.ogg", 1e-4)] {
        let a = decode_file(file);
        let (shape, want) = npy_f64(&format!("{file}.ref.npy"));
        assert_eq!(vec![a.frames(), a.channels.len()], shape, "{file}");
        let d = max_diff(&interleaved(&a), &want);
        eprintln!("{file}: max |symphonia - ffmpeg| = {d:e}");
        assert!(d <= tol, "{file}: max difference {d} > {tol}");
    }
}

fn log_mel(scale: MelScale, slaney_norm: bool, pad_mode: PadMode) -> Vec<f32> {
    let a = decode_file("speech.wav");
    let stft = Stft::new(StftOptions {
        win_length: 400,
        hop_length: 160,
        pad_mode,
        ..StftOptions::new(512)
    })
    .unwrap();
    let bank = MelBank::new(
        stft.n_freqs(),
        &MelOptions {
            sample_rate: 16000,
            n_mels: 64,
            f_min: 0.0,
            f_max: None,
            scale,
            slaney_norm,
        },
    )
    .unwrap();
    let e = Example::new().with(
        "audio",
        Tensor::from_vec(vec![a.frames()], a.channels[0].clone()).unwrap(),
    );
    let f = mel_spectrogram_fn("audio", "mel", stft, bank, Some(None));
    let ctx = stokehold_core::Ctx {
        op: "mel",
        index: 0,
        epoch: 0,
    };
    let out = f(e, &ctx).unwrap();
    let t = out.tensor("t", "mel").unwrap();
    assert_eq!(t.shape(), &[64, 1 + a.frames() / 160]);
    t.to_vec::<f32>().unwrap()
}

#[test]
fn log_mel_matches_librosa_and_torchaudio() {
    for (reference, got) in [
        (
            "logmel_librosa.npy",
            log_mel(MelScale::Slaney, true, PadMode::Constant),
        ),
        (
            "logmel_torchaudio.npy",
            log_mel(MelScale::Htk, false, PadMode::Reflect),
        ),
    ] {
        let (shape, want) = npy_f64(reference);
        assert_eq!(shape.iter().product::<usize>(), got.len());
        let peak = want.iter().copied().fold(f64::MIN, f64::max);
        // Compare where the reference is within 80 dB of its peak: below that both sides are
        // float32 rounding noise.
        let d = got
            .iter()
            .zip(&want)
            .filter(|(_, w)| **w > peak - 80.0)
            .map(|(g, w)| (*g as f64 - w).abs())
            .fold(0.0, f64::max);
        eprintln!("{reference}: max |dB difference| = {d:e}");
        assert!(d < 0.01, "{reference}: {d} dB");
    }
}

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
        stokehold_core::DType::U8 => t
            .to_vec::<u8>()
            .unwrap()
            .iter()
            .map(|x| *x as f64)
            .collect(),
        stokehold_core::DType::I16 => t
            .to_vec::<i16>()
            .unwrap()
            .iter()
            .map(|x| *x as f64)
            .collect(),
        stokehold_core::DType::I32 => t
            .to_vec::<i32>()
            .unwrap()
            .iter()
            .map(|x| *x as f64)
            .collect(),
        stokehold_core::DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| *x as f64)
            .collect(),
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
        let rate = e
            .tensor("t", "sample_rate")
            .unwrap()
            .to_vec::<i64>()
            .unwrap();
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

#[test]
fn window_reads_equal_the_slice_of_a_full_decode() {
    for (file, exact) in [
        ("speech.wav", true),
        ("speech.flac", true),
        ("s24.flac", true),
        ("speech.mp3", false),
        ("stereo.ogg", false),
    ] {
        let full = decode_file(file);
        let (start, len) = (4321u64, 5000u64);
        let w = open_file(&fixture(file))
            .unwrap()
            .decode(start, Some(len))
            .unwrap();
        assert_eq!(w.frames(), len as usize, "{file}");
        for (c, ch) in w.channels.iter().enumerate() {
            let want = &full.channels[c][start as usize..(start + len) as usize];
            let d = ch
                .iter()
                .zip(want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            eprintln!("{file} channel {c}: window vs full decode: {d:e}");
            // MP3 and Vorbis restart their overlap-add after a seek: the first samples of the
            // window may differ by the codec's own noise (well below 16-bit resolution here).
            assert!(if exact { d == 0.0 } else { d < 1e-3 }, "{file}: {d}");
        }
        // A window running past the end is cut at the end.
        let tail = open_file(&fixture(file))
            .unwrap()
            .decode(full.frames() as u64 - 10, Some(100))
            .unwrap();
        assert_eq!(tail.frames(), 10, "{file}");
    }
}

fn element(ds: &Dataset, i: u64) -> Result<Example, stokehold_core::Error> {
    ds.get(i)
}

fn paths(names: &[&str]) -> Dataset {
    let p: Vec<String> = names
        .iter()
        .map(|n| fixture(n).display().to_string())
        .collect();
    Dataset::from_columns(Example::new().with("path", Tensor::strings(&p))).unwrap()
}

#[test]
fn random_windows_are_keyed_by_seed_epoch_and_index_and_padded() {
    let files = ["speech.wav", "speech.flac", "stereo.ogg", "speech.mp3"];
    let opts = |seed| DecodeOptions {
        mono: true,
        window: Window::Random {
            duration: 0.5,
            seed,
        },
        ..Default::default()
    };
    let ds = paths(&files).map("load_audio", load_audio_fn("path", "audio", opts(3)));
    let again = paths(&files).map("load_audio", load_audio_fn("path", "audio", opts(3)));
    let other = paths(&files).map("load_audio", load_audio_fn("path", "audio", opts(4)));
    let all = |d: &Dataset, epoch| d.iter(epoch).unwrap().collect_all().unwrap();
    let (a0, a1) = (all(&ds, 0), all(&ds, 1));
    assert_eq!(a0, all(&again, 0));
    assert_eq!(a1, all(&again, 1));
    let o0 = all(&other, 0);
    for e in &a0 {
        assert_eq!(e.tensor("t", "audio").unwrap().shape(), &[1, 8000]);
    }
    // Other seeds and other epochs draw other windows.
    let differs = (0..4).filter(|i| a0[*i] != o0[*i]).count();
    assert!(
        differs >= 3,
        "seeds 3 and 4 gave {differs}/4 different windows"
    );
    let differs = (0..4).filter(|i| a0[*i] != a1[*i]).count();
    assert!(
        differs >= 3,
        "epochs 0 and 1 gave {differs}/4 different windows"
    );
    // The window equals the same frames of a full decode (WAV: exact).
    let full = decode_file("speech.wav").channels[0].clone();
    let w = element(&ds, 0)
        .unwrap()
        .tensor("t", "audio")
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let at = full.windows(w.len()).position(|s| s == &w[..]);
    assert!(at.is_some());
    // A clip shorter than the window is zero-padded at the end.
    let long = paths(&["speech.wav"]).map(
        "load_audio",
        load_audio_fn(
            "path",
            "audio",
            DecodeOptions {
                window: Window::Random {
                    duration: 2.0,
                    seed: 1,
                },
                ..Default::default()
            },
        ),
    );
    let v = element(&long, 0)
        .unwrap()
        .tensor("t", "audio")
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(v.len(), 32000);
    assert_eq!(&v[..24000], &full[..]);
    assert!(v[24000..].iter().all(|x| *x == 0.0));
}

#[test]
fn random_window_pipeline_conforms() {
    let dir = fixture("").display().to_string();
    let files = list_files(&[format!("{dir}/*.wav"), format!("{dir}/*.flac")], Some(5)).unwrap();
    let opts = DecodeOptions {
        mono: true,
        sample_rate: Some(8000),
        window: Window::Random {
            duration: 0.25,
            seed: 9,
        },
        ..Default::default()
    };
    let skip = Arc::new(ErrorLog::default());
    // empty.wav and adpcm.wav fail: skip them, and the rest must still conform.
    let ds = files.map_with_policy(
        "load_audio",
        load_audio_fn("path", "audio", opts),
        OnError::Skip,
        skip.clone(),
        None,
    );
    testing::check("list_files.load_audio(random_window)", &ds, 30);
    assert!(skip.count() > 0);
}

#[test]
fn resampling_and_mono_through_the_op() {
    let opts = DecodeOptions {
        mono: true,
        sample_rate: Some(8000),
        ..Default::default()
    };
    let ds = paths(&["stereo_s16.wav"]).map("load_audio", load_audio_fn("path", "audio", opts));
    let e = element(&ds, 0).unwrap();
    assert_eq!(e.tensor("t", "audio").unwrap().shape(), &[1, 8000]);
    assert_eq!(
        e.tensor("t", "sample_rate")
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![8000]
    );
}

fn bytes_of(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap()
}

fn blobs(items: &[Vec<u8>]) -> Dataset {
    Dataset::from_columns(Example::new().with("audio", Tensor::strings(items))).unwrap()
}

/// The error `decode_audio` gives on each of `items`, as text.
fn decode_errors(items: &[Vec<u8>]) -> Vec<String> {
    let ds = blobs(items).map(
        "decode_audio:audio",
        decode_audio_fn("audio", "audio", DecodeOptions::default()),
    );
    (0..items.len() as u64)
        .map(|i| match ds.get(i) {
            Ok(_) => format!("element {i} decoded"),
            Err(e) => e.to_string(),
        })
        .collect()
}

fn assert_names_element(errs: &[String], want: &[&str]) {
    for (i, (e, w)) in errs.iter().zip(want).enumerate() {
        assert!(
            e.contains(&format!("<element {i}, feature \"audio\">"))
                && e.contains(&format!("[element {i}, map[decode_audio:audio]"))
                && e.contains(w),
            "element {i}: want {w:?} in: {e}"
        );
    }
}

#[test]
fn truncated_files_of_every_format_are_errors() {
    let files = [
        "speech.wav",
        "speech.flac",
        "speech.mp3",
        "stereo.ogg",
        "s24.flac",
    ];
    let cut: Vec<Vec<u8>> = files
        .iter()
        .map(|f| {
            let b = bytes_of(f);
            b[..b.len() * 6 / 10].to_vec()
        })
        .collect();
    let errs = decode_errors(&cut);
    assert_names_element(
        &errs,
        &[
            "truncated",
            "truncated",
            "truncated",
            "truncated",
            "truncated",
        ],
    );
    // Cut inside the header: nothing to probe.
    let heads: Vec<Vec<u8>> = files.iter().map(|f| bytes_of(f)[..30].to_vec()).collect();
    assert_names_element(&decode_errors(&heads), &["corrupt data"; 5]);
}

#[test]
fn corrupt_files_of_every_format_are_errors() {
    let mut items = Vec::new();
    // WAV: a format chunk claiming 0 channels.
    let mut wav = bytes_of("speech.wav");
    wav[22] = 0;
    items.push(wav);
    // FLAC, MP3, Ogg: a run of garbage in the middle of the coded data.
    for f in ["speech.flac", "speech.mp3", "stereo.ogg"] {
        let mut b = bytes_of(f);
        let mid = b.len() / 2;
        for (k, x) in b[mid..mid + 200].iter_mut().enumerate() {
            *x = (k as u8).wrapping_mul(37) ^ 0x5a;
        }
        items.push(b);
    }
    // Not audio at all.
    items.push(b"this is a text file, not audio".repeat(40));
    let errs = decode_errors(&items);
    for e in &errs {
        eprintln!("{e}");
    }
    assert_names_element(&errs, &["corrupt data"; 5]);
}

#[test]
fn a_wav_header_that_lies_about_its_size_is_an_error() {
    let wav = bytes_of("speech.wav");
    let le = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap());
    // The data chunk's size (bytes 40..44 of a plain 44-byte header) doubled: past the RIFF
    // chunk's own size.
    let mut past_riff = wav.clone();
    past_riff[40..44].copy_from_slice(&(le(&wav[40..44]) * 2).to_le_bytes());
    // Both sizes doubled: a consistent header over half the data it promises.
    let mut both = past_riff.clone();
    both[4..8].copy_from_slice(&(le(&wav[4..8]) + le(&wav[40..44])).to_le_bytes());
    let errs = decode_errors(&[past_riff, both]);
    assert_names_element(
        &errs,
        &[
            "chunk length exceeds parent",
            "the data ends early (truncated file?)",
        ],
    );
}

#[test]
fn zero_length_audio_and_unsupported_codecs_are_errors() {
    let items = vec![
        bytes_of("empty.wav"),
        bytes_of("adpcm.wav"),
        bytes_of("opus.ogg"),
    ];
    let errs = decode_errors(&items);
    assert_names_element(
        &errs,
        &[
            "no audio frames",
            "unsupported codec adpcm_ms in a wav container",
            "unsupported codec opus in a ogg container",
        ],
    );
    // load_audio names the file.
    let ds = paths(&["empty.wav"]).map(
        "load_audio:audio",
        load_audio_fn("path", "audio", DecodeOptions::default()),
    );
    let e = ds.get(0).unwrap_err().to_string();
    assert!(
        e.contains("empty.wav") && e.contains("[element 0, map[load_audio:audio]"),
        "{e}"
    );
    let missing =
        Dataset::from_columns(Example::new().with("path", Tensor::strings(&["/no/such/clip.wav"])))
            .unwrap()
            .map(
                "load_audio:audio",
                load_audio_fn("path", "audio", DecodeOptions::default()),
            );
    let e = missing.get(0).unwrap_err().to_string();
    assert!(
        e.contains("/no/such/clip.wav") && e.contains("[element 0"),
        "{e}"
    );
}

#[test]
fn skip_leaves_bad_clips_out_and_counts_them() {
    let good = bytes_of("speech.flac");
    let bad = good[..good.len() / 2].to_vec();
    let items = vec![
        good.clone(),
        bad,
        good,
        bytes_of("opus.ogg"),
        bytes_of("u8.wav"),
    ];
    let log = Arc::new(ErrorLog::default());
    for par in [None, Some((stokehold_core::Parallelism::Fixed(3), true))] {
        let log = Arc::new(ErrorLog::default());
        let ds = blobs(&items).map_with_policy(
            "decode_audio:audio",
            decode_audio_fn("audio", "audio", DecodeOptions::default()),
            OnError::Skip,
            log.clone(),
            par,
        );
        let got = ds.iter(0).unwrap().collect_all().unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(log.count(), 2);
        let first = log.first();
        assert_eq!(
            first.iter().map(|s| s.index).collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert!(
            first[1].error.contains("unsupported codec opus"),
            "{}",
            first[1].error
        );
    }
    assert_eq!(log.count(), 0);
}

#[test]
fn probe_reads_the_headers() {
    let i = probe_file(&fixture("s24.flac")).unwrap();
    assert_eq!(
        (i.format.as_str(), i.sample_rate, i.channels),
        ("flac", 16000, 2)
    );
    assert_eq!((i.frames, i.bits_per_sample), (Some(16000), Some(24)));
    assert_eq!(i.duration(), Some(1.0));
    let m = probe_bytes(Bytes::from(bytes_of("speech.mp3")), Path::new("x.mp3")).unwrap();
    assert_eq!(
        (m.format.as_str(), m.codec.as_str(), m.frames),
        ("mp3", "mp3", Some(24000))
    );
    assert!(open_bytes(Bytes::from_static(b"RIFF"), Path::new("short")).is_err());
}

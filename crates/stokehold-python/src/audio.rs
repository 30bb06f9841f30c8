//! Bindings of the audio ops (`stokehold_io::audio`): `decode_audio`, `load_audio`,
//! `spectrogram`, `mel_spectrogram` (a `#[pymethods]` block of the native `Dataset`) and
//! `probe_audio`. A decode's `on_error="skip"` goes through the shared skip path
//! (`skips::map_on_error_par`), so `ds.skipped()` counts what it leaves out. Arguments arrive as
//! typed keywords: option strings through `Wrap<T>` (`options.rs`), windows, STFT and mel
//! defaults and checks from `stokehold_io::audio`; everything runs natively on the pipeline's
//! threads.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use stokehold_core::{Dataset, MapFn};
use stokehold_io::audio::{
    decode_audio_fn, load_audio_fn, mel_spectrogram_fn, probe_bytes, probe_file, spectrogram_fn,
    AudioInfo, DecodeOptions, MelBank, MelNorm, MelOptions, MelScale, PadMode, SampleType, Stft,
    StftOptions, Window,
};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};
use crate::options::{get_opt, Wrap};
use crate::skips::map_on_error_par;

/// Maps an audio op on the threads asked for, by the loaders' one rule ([`map_on_error_par`]):
/// over random access (or execution stages over it) a parallel map is `map(f).parallelize()`,
/// so `spectrogram(num_parallel_calls=4)` keeps random access as `decode_audio(...)` does.
/// `deterministic` is `map`'s: `None` or true keeps the input order.
#[allow(clippy::too_many_arguments)]
fn apply(
    py: Python<'_>,
    ds: &Dataset,
    op: &str,
    out: &str,
    f: MapFn,
    on_error: &str,
    threads: Option<i64>,
    deterministic: Option<bool>,
) -> PyResult<PyDataset> {
    let label = format!("{op}:{out}");
    let det = deterministic.unwrap_or(true);
    map_on_error_par(py, ds, op, &label, f, on_error, threads, det)
}

/// The decode options of `decode_audio` / `load_audio` from their keyword arguments (the
/// window rule and the checks are io's: [`Window::from_args`], [`DecodeOptions::checked`]).
#[allow(clippy::too_many_arguments)]
fn decode_options(
    op: &str,
    dtype: Wrap<SampleType>,
    channels_first: bool,
    mono: bool,
    resample_to: Option<u32>,
    offset: f64,
    duration: Option<f64>,
    random_window: Option<f64>,
    seed: u64,
    sample_rate_key: Option<String>,
) -> stokehold_core::Result<DecodeOptions> {
    DecodeOptions {
        dtype: dtype.get(op)?,
        channels_first,
        mono,
        sample_rate: resample_to,
        window: Window::from_args(op, offset, duration, random_window, seed)?,
        rate_feature: sample_rate_key,
    }
    .checked(op)
}

/// The STFT of `spectrogram` / `mel_spectrogram` from their keyword arguments, with io's
/// defaults and checks ([`StftOptions::from_args`]).
fn stft(
    op: &str,
    n_fft: usize,
    win_length: Option<usize>,
    hop_length: Option<usize>,
    power: f32,
    center: bool,
    pad_mode: Wrap<PadMode>,
    axis: isize,
) -> stokehold_core::Result<Stft> {
    let pad_mode = pad_mode.get(op)?;
    Stft::new(StftOptions {
        axis,
        ..StftOptions::from_args(op, n_fft, win_length, hop_length, power, center, pad_mode)?
    })
}

#[pymethods]
impl PyDataset {
    /// Decodes the audio bytes of feature `feature` into feature `out` (see `Dataset.decode_audio`).
    #[pyo3(signature = (feature, out, *, dtype, channels_first, mono, resample_to, offset,
        duration, random_window, seed, sample_rate_key, on_error, num_parallel_calls,
        deterministic))]
    #[allow(clippy::too_many_arguments)]
    fn decode_audio(
        &self,
        py: Python<'_>,
        feature: &str,
        out: &str,
        dtype: Wrap<SampleType>,
        channels_first: bool,
        mono: bool,
        resample_to: Option<u32>,
        offset: f64,
        duration: Option<f64>,
        random_window: Option<f64>,
        seed: u64,
        sample_rate_key: Option<String>,
        on_error: &str,
        num_parallel_calls: Option<i64>,
        deterministic: Option<bool>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let op = "decode_audio";
            let opts = decode_options(
                op,
                dtype,
                channels_first,
                mono,
                resample_to,
                offset,
                duration,
                random_window,
                seed,
                sample_rate_key,
            );
            let opts = ok(py, opts)?;
            let f = decode_audio_fn(feature, out, opts);
            apply(
                py,
                self.dataset(),
                op,
                out,
                f,
                on_error,
                num_parallel_calls,
                deterministic,
            )
        })
    }

    /// Decodes the audio file named by feature `feature` into feature `out`.
    #[pyo3(signature = (feature, out, *, dtype, channels_first, mono, resample_to, offset,
        duration, random_window, seed, sample_rate_key, on_error, num_parallel_calls,
        deterministic))]
    #[allow(clippy::too_many_arguments)]
    fn load_audio(
        &self,
        py: Python<'_>,
        feature: &str,
        out: &str,
        dtype: Wrap<SampleType>,
        channels_first: bool,
        mono: bool,
        resample_to: Option<u32>,
        offset: f64,
        duration: Option<f64>,
        random_window: Option<f64>,
        seed: u64,
        sample_rate_key: Option<String>,
        on_error: &str,
        num_parallel_calls: Option<i64>,
        deterministic: Option<bool>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let op = "load_audio";
            let opts = decode_options(
                op,
                dtype,
                channels_first,
                mono,
                resample_to,
                offset,
                duration,
                random_window,
                seed,
                sample_rate_key,
            );
            let opts = ok(py, opts)?;
            let f = load_audio_fn(feature, out, opts);
            apply(
                py,
                self.dataset(),
                op,
                out,
                f,
                on_error,
                num_parallel_calls,
                deterministic,
            )
        })
    }

    /// `|STFT|^power` of feature `feature` into feature `out`.
    #[pyo3(signature = (feature, out, *, n_fft, win_length, hop_length, power, center,
        pad_mode, num_parallel_calls, deterministic, axis))]
    #[allow(clippy::too_many_arguments)]
    fn spectrogram(
        &self,
        py: Python<'_>,
        feature: &str,
        out: &str,
        n_fft: usize,
        win_length: Option<usize>,
        hop_length: Option<usize>,
        power: f32,
        center: bool,
        pad_mode: Wrap<PadMode>,
        num_parallel_calls: Option<i64>,
        deterministic: Option<bool>,
        axis: isize,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let op = "spectrogram";
            let s = stft(
                op, n_fft, win_length, hop_length, power, center, pad_mode, axis,
            );
            let f = spectrogram_fn(feature, out, ok(py, s)?);
            let (ds, raise) = (self.dataset(), "raise");
            apply(py, ds, op, out, f, raise, num_parallel_calls, deterministic)
        })
    }

    /// The (log-)mel spectrogram of feature `feature` into feature `out`.
    #[pyo3(signature = (feature, out, *, sample_rate, n_fft, win_length, hop_length, f_min,
        f_max, n_mels, power, center, pad_mode, mel_scale, norm, log, top_db,
        num_parallel_calls, deterministic, axis))]
    #[allow(clippy::too_many_arguments)]
    fn mel_spectrogram(
        &self,
        py: Python<'_>,
        feature: &str,
        out: &str,
        sample_rate: u32,
        n_fft: usize,
        win_length: Option<usize>,
        hop_length: Option<usize>,
        f_min: f64,
        f_max: Option<f64>,
        n_mels: usize,
        power: f32,
        center: bool,
        pad_mode: Wrap<PadMode>,
        mel_scale: Wrap<MelScale>,
        norm: Option<Wrap<MelNorm>>,
        log: bool,
        top_db: Option<f32>,
        num_parallel_calls: Option<i64>,
        deterministic: Option<bool>,
        axis: isize,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let op = "mel_spectrogram";
            let s = stft(
                op, n_fft, win_length, hop_length, power, center, pad_mode, axis,
            );
            let built = s.and_then(|s| {
                let (scale, norm) = (mel_scale.get(op)?, get_opt(norm, op)?);
                let mel =
                    MelOptions::from_args(op, sample_rate, n_mels, f_min, f_max, scale, norm)?;
                let bank = MelBank::new(s.n_freqs(), &mel)?;
                Ok((s, bank))
            });
            let (s, bank) = ok(py, built)?;
            let f = mel_spectrogram_fn(feature, out, s, bank, log.then_some(top_db));
            let (ds, raise) = (self.dataset(), "raise");
            apply(py, ds, op, out, f, raise, num_parallel_calls, deterministic)
        })
    }
}

fn info_dict<'py>(py: Python<'py>, i: AudioInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("format", &i.format)?;
    d.set_item("codec", &i.codec)?;
    d.set_item("sample_rate", i.sample_rate)?;
    d.set_item("channels", i.channels)?;
    d.set_item("frames", i.frames)?;
    d.set_item("duration", i.duration())?;
    d.set_item("bits_per_sample", i.bits_per_sample)?;
    Ok(d)
}

/// The headers of an audio file (a path) or of audio bytes: format, codec, sample rate,
/// channels, frames, duration, bits per sample.
#[pyfunction]
fn probe_audio<'py>(py: Python<'py>, source: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    guard(|| {
        let info = if let Ok(b) = source.cast::<PyBytes>() {
            let data = Bytes::copy_from_slice(b.as_bytes());
            py.detach(|| probe_bytes(data, Path::new("<bytes>")))
        } else {
            let path: PathBuf = source.extract()?;
            py.detach(|| probe_file(&path))
        };
        info_dict(py, ok(py, info)?)
    })
}

/// Adds the audio classes and functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(probe_audio, m)?)?;
    Ok(())
}

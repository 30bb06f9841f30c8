//! Bindings of the audio ops (`stokehold_io::audio`): `decode_audio`, `load_audio`,
//! `spectrogram`, `mel_spectrogram` (a `#[pymethods]` block of the native `Dataset`), the
//! `AudioErrorLog` of `on_error="skip"`, and `probe_audio`. Arguments arrive checked by
//! `python/stokehold/audio.py`; everything runs natively on the pipeline's threads.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use stokehold_core::exec::Parallelism;
use stokehold_core::{Dataset, Error, ErrorLog, MapFn, OnError};
use stokehold_io::audio::{
    decode_audio_fn, load_audio_fn, mel_spectrogram_fn, probe_bytes, probe_file, spectrogram_fn,
    AudioInfo, DecodeOptions, MelBank, MelOptions, MelScale, PadMode, SampleType, Stft,
    StftOptions, Window,
};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

/// Elements `on_error="skip"` left out of an audio op: the count and the first few.
#[pyclass(frozen, name = "AudioErrorLog", module = "stokehold._native")]
pub struct PyAudioErrorLog {
    log: Arc<ErrorLog>,
}

#[pymethods]
impl PyAudioErrorLog {
    /// Elements skipped so far.
    #[getter]
    fn count(&self) -> u64 {
        self.log.count()
    }

    /// The first few as (element index, error message).
    #[getter]
    fn first(&self) -> Vec<(u64, String)> {
        self.log
            .first()
            .into_iter()
            .map(|s| (s.index, s.error))
            .collect()
    }
}

/// `None` (inline), a thread count, or -1 (AUTOTUNE) as the core's parallel-map setting.
fn par(op: &str, n: Option<i64>) -> stokehold_core::Result<Option<(Parallelism, bool)>> {
    n.map(|n| Parallelism::from_arg(op, "num_parallel_calls", n).map(|p| (p, true)))
        .transpose()
}

/// Maps `f` with the policy and parallelism asked for; returns the dataset and its log.
fn apply(
    py: Python<'_>,
    ds: &Dataset,
    label: &str,
    f: MapFn,
    on_error: &str,
    threads: Option<i64>,
) -> PyResult<(PyDataset, PyAudioErrorLog)> {
    let op = label.split(':').next().unwrap_or(label);
    let policy = ok(py, OnError::parse(op, on_error))?;
    let par = ok(py, par(op, threads))?;
    let log = Arc::new(ErrorLog::default());
    let out = ds.map_with_policy(label, f, policy, log.clone(), par);
    Ok((PyDataset::from_dataset(out), PyAudioErrorLog { log }))
}

/// The decode options from the Python arguments (checked there).
#[allow(clippy::too_many_arguments)]
fn decode_options(
    dtype: &str,
    channels_first: bool,
    mono: bool,
    sample_rate: Option<u32>,
    offset: f64,
    duration: Option<f64>,
    random_window: Option<f64>,
    seed: u64,
    rate_feature: Option<String>,
) -> stokehold_core::Result<DecodeOptions> {
    let dtype = match dtype {
        "float32" => SampleType::F32,
        "int16" => SampleType::I16,
        other => {
            return Err(Error::invalid(format!(
                "dtype {other:?}: must be \"float32\" or \"int16\""
            )))
        }
    };
    let window = match (random_window, offset, duration) {
        (Some(d), _, _) => Window::Random { duration: d, seed },
        (None, 0.0, None) => Window::All,
        (None, offset, duration) => Window::Span { offset, duration },
    };
    Ok(DecodeOptions {
        dtype,
        channels_first,
        mono,
        sample_rate,
        window,
        rate_feature,
    })
}

/// The STFT from the Python arguments.
fn stft(
    n_fft: usize,
    win_length: Option<usize>,
    hop_length: Option<usize>,
    power: f32,
    center: bool,
    pad_mode: &str,
) -> stokehold_core::Result<Stft> {
    let win = win_length.unwrap_or(n_fft);
    let pad_mode = match pad_mode {
        "reflect" => PadMode::Reflect,
        "constant" => PadMode::Constant,
        other => {
            return Err(Error::invalid(format!(
                "pad_mode {other:?}: must be \"reflect\" or \"constant\""
            )))
        }
    };
    Stft::new(StftOptions {
        n_fft,
        win_length: win,
        hop_length: hop_length.unwrap_or((win / 2).max(1)),
        center,
        pad_mode,
        power,
    })
}

#[pymethods]
impl PyDataset {
    /// Decodes the audio bytes of feature `feature` into feature `out` (see `Dataset.decode_audio`).
    #[pyo3(signature = (feature, out, dtype, channels_first, mono, sample_rate, offset, duration,
        random_window, seed, rate_feature, on_error, num_parallel_calls))]
    fn decode_audio(
        &self,
        py: Python<'_>,
        feature: &str,
        out: &str,
        dtype: &str,
        channels_first: bool,
        mono: bool,
        sample_rate: Option<u32>,
        offset: f64,
        duration: Option<f64>,
        random_window: Option<f64>,
        seed: u64,
        rate_feature: Option<String>,
        on_error: &str,
        num_parallel_calls: Option<i64>,
    ) -> PyResult<(PyDataset, PyAudioErrorLog)> {
        guard(|| {
            let opts = decode_options(
                dtype,
                channels_first,
                mono,
                sample_rate,
                offset,
                duration,
                random_window,
                seed,
                rate_feature,
            );
            let f = decode_audio_fn(feature, out, ok(py, opts)?);
            let label = format!("decode_audio:{out}");
            apply(py, self.dataset(), &label, f, on_error, num_parallel_calls)
        })
    }

    /// Decodes the audio file named by feature `path_feature` into feature `out`.
    #[pyo3(signature = (path_feature, out, dtype, channels_first, mono, sample_rate, offset,
        duration, random_window, seed, rate_feature, on_error, num_parallel_calls))]
    fn load_audio(
        &self,
        py: Python<'_>,
        path_feature: &str,
        out: &str,
        dtype: &str,
        channels_first: bool,
        mono: bool,
        sample_rate: Option<u32>,
        offset: f64,
        duration: Option<f64>,
        random_window: Option<f64>,
        seed: u64,
        rate_feature: Option<String>,
        on_error: &str,
        num_parallel_calls: Option<i64>,
    ) -> PyResult<(PyDataset, PyAudioErrorLog)> {
        guard(|| {
            let opts = decode_options(
                dtype,
                channels_first,
                mono,
                sample_rate,
                offset,
                duration,
                random_window,
                seed,
                rate_feature,
            );
            let f = load_audio_fn(path_feature, out, ok(py, opts)?);
            let label = format!("load_audio:{out}");
            apply(py, self.dataset(), &label, f, on_error, num_parallel_calls)
        })
    }

    /// `|STFT|^power` of feature `feature` into feature `out`.
    #[pyo3(signature = (feature, out, n_fft, win_length, hop_length, power, center, pad_mode,
        num_parallel_calls))]
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
        pad_mode: &str,
        num_parallel_calls: Option<i64>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let s = ok(
                py,
                stft(n_fft, win_length, hop_length, power, center, pad_mode),
            )?;
            let f = spectrogram_fn(feature, out, s);
            let label = format!("spectrogram:{out}");
            let (ds, _) = apply(py, self.dataset(), &label, f, "raise", num_parallel_calls)?;
            Ok(ds)
        })
    }

    /// The (log-)mel spectrogram of feature `feature` into feature `out`.
    #[pyo3(signature = (feature, out, sample_rate, n_fft, win_length, hop_length, f_min, f_max,
        n_mels, power, center, pad_mode, mel_scale, norm, log, top_db, num_parallel_calls))]
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
        pad_mode: &str,
        mel_scale: &str,
        norm: Option<&str>,
        log: bool,
        top_db: Option<f32>,
        num_parallel_calls: Option<i64>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let s = ok(
                py,
                stft(n_fft, win_length, hop_length, power, center, pad_mode),
            )?;
            let scale = match mel_scale {
                "htk" => MelScale::Htk,
                "slaney" => MelScale::Slaney,
                other => {
                    let why = format!("mel_scale {other:?}: must be \"htk\" or \"slaney\"");
                    return ok(py, Err(Error::invalid(why)));
                }
            };
            let mel = MelOptions {
                sample_rate,
                n_mels,
                f_min,
                f_max,
                scale,
                slaney_norm: norm == Some("slaney"),
            };
            let bank = ok(py, MelBank::new(s.n_freqs(), &mel))?;
            let f = mel_spectrogram_fn(feature, out, s, bank, log.then_some(top_db));
            let label = format!("mel_spectrogram:{out}");
            let (ds, _) = apply(py, self.dataset(), &label, f, "raise", num_parallel_calls)?;
            Ok(ds)
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
    m.add_class::<PyAudioErrorLog>()?;
    m.add_function(wrap_pyfunction!(probe_audio, m)?)?;
    Ok(())
}

//! Bindings of the audio ops (`stokehold_io::audio`): `decode_audio`, `load_audio`,
//! `spectrogram`, `mel_spectrogram` (a `#[pymethods]` block of the native `Dataset`) and
//! `probe_audio`. A decode's `on_error="skip"` goes through the shared skip path
//! (`skips::map_on_error_par`), so `ds.skipped()` counts what it leaves out. Arguments arrive checked by
//! `python/stokehold/audio.py`; everything runs natively on the pipeline's threads.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use stokehold_core::{Dataset, Error, MapFn};
use stokehold_io::audio::{
    decode_audio_fn, load_audio_fn, mel_spectrogram_fn, probe_bytes, probe_file, spectrogram_fn,
    AudioInfo, DecodeOptions, MelBank, MelOptions, MelScale, PadMode, SampleType, Stft,
    StftOptions, Window,
};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};
use crate::skips::map_on_error_par;

/// Maps a feature op (no skip policy: its errors are bad arguments or shapes) on the threads
/// asked for, by the loaders' one rule ([`map_on_error_par`]): over random access (or execution
/// stages over it) a parallel map is `map(f).parallelize()`, so `spectrogram(num_parallel_calls=4)`
/// keeps random access as `decode_audio(num_parallel_calls=4)` does.
fn apply(
    py: Python<'_>,
    ds: &Dataset,
    label: &str,
    f: MapFn,
    threads: Option<i64>,
) -> PyResult<PyDataset> {
    let op = label.split(':').next().unwrap_or(label);
    map_on_error_par(py, ds, op, label, f, "raise", threads, true)
}

/// The arguments `decode_audio` and `load_audio` share, one tuple in this order (checked by
/// `python/stokehold/audio.py`): dtype, channels_first, mono, sample_rate, offset, duration,
/// random_window, seed, rate_feature, on_error, num_parallel_calls.
#[derive(FromPyObject)]
struct DecodeArgs(
    String,
    bool,
    bool,
    Option<u32>,
    f64,
    Option<f64>,
    Option<f64>,
    u64,
    Option<String>,
    String,
    Option<i64>,
);

impl DecodeArgs {
    /// The decode options (a bad value is an error naming it).
    fn options(&self) -> stokehold_core::Result<DecodeOptions> {
        let DecodeArgs(
            dtype,
            channels_first,
            mono,
            sample_rate,
            offset,
            duration,
            window,
            seed,
            rate_feature,
            ..,
        ) = self;
        let dtype = match dtype.as_str() {
            "float32" => SampleType::F32,
            "int16" => SampleType::I16,
            other => {
                return Err(Error::invalid(format!(
                    "dtype {other:?}: must be \"float32\" or \"int16\""
                )))
            }
        };
        let window = match (*window, *offset, *duration) {
            (Some(d), _, _) => Window::Random {
                duration: d,
                seed: *seed,
            },
            (None, 0.0, None) => Window::All,
            (None, offset, duration) => Window::Span { offset, duration },
        };
        Ok(DecodeOptions {
            dtype,
            channels_first: *channels_first,
            mono: *mono,
            sample_rate: *sample_rate,
            window,
            rate_feature: rate_feature.clone(),
        })
    }
}

/// A decoder's `MapFn` factory: (source feature, output feature, options).
type MakeFn = fn(&str, &str, DecodeOptions) -> MapFn;

/// `decode_audio` (`from_path` false: `source` is a bytes feature) or `load_audio` (a path
/// feature) under the shared skip path: what `on_error="skip"` leaves out is counted where
/// `ds.skipped()` finds it.
fn decode_op(
    py: Python<'_>,
    ds: &Dataset,
    from_path: bool,
    source: &str,
    out: &str,
    args: DecodeArgs,
) -> PyResult<PyDataset> {
    let (op, make): (&str, MakeFn) = if from_path {
        ("load_audio", load_audio_fn)
    } else {
        ("decode_audio", decode_audio_fn)
    };
    let f = make(source, out, ok(py, args.options())?);
    let label = format!("{op}:{out}");
    map_on_error_par(py, ds, op, &label, f, &args.9, args.10, true)
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
    fn decode_audio(
        &self,
        py: Python<'_>,
        feature: &str,
        out: &str,
        args: DecodeArgs,
    ) -> PyResult<PyDataset> {
        guard(|| decode_op(py, self.dataset(), false, feature, out, args))
    }

    /// Decodes the audio file named by feature `path_feature` into feature `out`.
    fn load_audio(
        &self,
        py: Python<'_>,
        path_feature: &str,
        out: &str,
        args: DecodeArgs,
    ) -> PyResult<PyDataset> {
        guard(|| decode_op(py, self.dataset(), true, path_feature, out, args))
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
            apply(py, self.dataset(), &label, f, num_parallel_calls)
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
            apply(py, self.dataset(), &label, f, num_parallel_calls)
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

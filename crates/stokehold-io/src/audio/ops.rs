//! The audio ops as map functions (`MapFn`s): `decode_audio` over a bytes feature, `load_audio`
//! over a path feature, `spectrogram` and `mel_spectrogram` over decoded samples. They run on the
//! pipeline's threads like any map; the bindings wrap decode and load in
//! `Dataset::map_with_policy` for `on_error="skip"`.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::alloc::checked_bytes;
use stokehold_core::rng::{Rng, Stream};
use stokehold_core::{Ctx, DType, Error, Example, MapFn, Result, Tensor};

use super::decode::{open_bytes, open_file, Audio, Opened};
use super::features::{power_to_db, release_if_large, MelBank, Stft};
use super::resample::{mix_to_mono, resample};
use crate::options::Choice;

/// The sample type of decoded audio.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SampleType {
    /// `float32` in `[-1, 1]` (integer sources divided by 2^(bits-1)).
    #[default]
    F32,
    /// `int16` (`round(x * 32768)`, saturated; 16-bit sources come back unchanged).
    I16,
}

impl Choice for SampleType {
    const ARG: &'static str = "dtype";
    const CHOICES: &'static [(&'static str, Self)] =
        &[("float32", SampleType::F32), ("int16", SampleType::I16)];
}

/// Which part of each clip to decode.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Window {
    /// All of it.
    #[default]
    All,
    /// From `offset` seconds, `duration` seconds of it (to the end with `None`); the reader
    /// seeks, so what comes before is not decoded where the format allows.
    Span {
        /// Start, in seconds.
        offset: f64,
        /// Length, in seconds.
        duration: Option<f64>,
    },
    /// `duration` seconds at an offset drawn from `(seed, epoch, index)`, as `random_crop` draws
    /// (only that window is decoded where the header gives the clip's length); a shorter clip is
    /// zero-padded at the end, so every element has the same length.
    Random {
        /// Length, in seconds.
        duration: f64,
        /// Seed of the draw.
        seed: u64,
    },
}

impl Window {
    /// The Python API's window rule: `random_window` seconds drawn with `seed` (and then no
    /// `offset` or `duration`), else `offset` / `duration` seconds (`0.0` / `None`: all of it).
    /// A bad value is an error naming `op` and the argument.
    pub fn from_args(
        op: &str,
        offset: f64,
        duration: Option<f64>,
        random_window: Option<f64>,
        seed: u64,
    ) -> Result<Window> {
        let seconds = |arg: &str, v: f64, positive: bool| {
            if !v.is_finite() || v < 0.0 || (positive && v == 0.0) {
                let why = if positive { "> 0" } else { ">= 0" };
                return Err(Error::invalid(format!(
                    "{op}({arg}={v}): must be a finite number of seconds {why}"
                )));
            }
            Ok(v)
        };
        let offset = seconds("offset", offset, false)?;
        let duration = duration.map(|d| seconds("duration", d, true)).transpose()?;
        Ok(match random_window {
            Some(d) if offset != 0.0 || duration.is_some() => {
                return Err(Error::invalid(format!(
                    "{op}(random_window={d}): draws its own offset: leave offset and duration out"
                )))
            }
            Some(d) => Window::Random {
                duration: seconds("random_window", d, true)?,
                seed,
            },
            None if offset == 0.0 && duration.is_none() => Window::All,
            None => Window::Span { offset, duration },
        })
    }
}

/// The highest `sample_rate` a decode resamples to (1 MHz: beyond any audio format's rates, and
/// low enough that the resampler's buffers stay small).
pub const MAX_SAMPLE_RATE: u32 = 1_000_000;

/// Options of `decode_audio` / `load_audio`.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeOptions {
    /// Output sample type (default float32).
    pub dtype: SampleType,
    /// `[channels, frames]` (default, as torchaudio) or `[frames, channels]` (as tf.audio).
    pub channels_first: bool,
    /// Mix the channels down to one (their mean).
    pub mono: bool,
    /// Resample to this rate (default: keep the file's).
    pub sample_rate: Option<u32>,
    /// What part of the clip to decode.
    pub window: Window,
    /// Feature that receives the (output) sample rate as an int64 scalar (default
    /// `"sample_rate"`; `None`: not added).
    pub rate_feature: Option<String>,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            dtype: SampleType::F32,
            channels_first: true,
            mono: false,
            sample_rate: None,
            window: Window::All,
            rate_feature: Some("sample_rate".into()),
        }
    }
}

impl DecodeOptions {
    /// These options if `op` can run with them: a `sample_rate` in `1..=MAX_SAMPLE_RATE`, a
    /// non-empty `rate_feature` (the Python names are `resample_to`, `sample_rate_key`).
    pub fn checked(self, op: &str) -> Result<Self> {
        if let Some(r) = self
            .sample_rate
            .filter(|r| !(1..=MAX_SAMPLE_RATE).contains(r))
        {
            return Err(Error::invalid(format!(
                "{op}(resample_to={r}): must be in 1..={MAX_SAMPLE_RATE} Hz"
            )));
        }
        if self.rate_feature.as_deref() == Some("") {
            return Err(Error::invalid(format!(
                "{op}(sample_rate_key=''): must be a non-empty str or None"
            )));
        }
        Ok(self)
    }
}

/// A map function that decodes the audio bytes in feature `feature` into feature `out`.
pub fn decode_audio_fn(feature: &str, out: &str, opts: DecodeOptions) -> MapFn {
    let (feature, out) = (feature.to_string(), out.to_string());
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let t = e.tensor(ctx.op, &feature)?;
        let data = one_bytes(t, &feature, ctx)?;
        let label = PathBuf::from(format!("<element {}, feature {feature:?}>", ctx.index));
        let run = || decode_opened(open_bytes(data, &label)?, &opts, ctx, &label);
        let audio = run().map_err(|err| with_context(err, ctx))?;
        insert(&mut e, &out, audio, &opts)?;
        Ok(e)
    })
}

/// A map function that decodes the audio file named by feature `path_feature` into feature
/// `out` (a window is read without reading the whole file).
pub fn load_audio_fn(path_feature: &str, out: &str, opts: DecodeOptions) -> MapFn {
    let (pf, out) = (path_feature.to_string(), out.to_string());
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let t = e.tensor(ctx.op, &pf)?;
        let path = one_bytes(t, &pf, ctx)?;
        let path = PathBuf::from(String::from_utf8_lossy(&path).into_owned());
        let run = || decode_opened(open_file(&path)?, &opts, ctx, &path);
        let audio = run().map_err(|err| with_context(err, ctx))?;
        insert(&mut e, &out, audio, &opts)?;
        Ok(e)
    })
}

/// The one bytes value of a scalar (or one-item) bytes feature.
fn one_bytes(t: &Tensor, feature: &str, ctx: &Ctx) -> Result<Bytes> {
    match (t.dtype(), t.len(), t.offsets()) {
        (DType::Bytes, 1, Some(off)) => Ok(t.data().slice(off[0] as usize..off[1] as usize)),
        _ => Err(Error::schema(
            ctx.op,
            format!(
                "element {}: feature {feature:?} must hold one bytes value, got {} {:?}",
                ctx.index,
                t.dtype(),
                t.shape()
            ),
        )),
    }
}

/// Names the element and the op in a file's error (the path is already in it).
fn with_context(err: Error, ctx: &Ctx) -> Error {
    let at = format!("[element {}, {}]", ctx.index, ctx.op);
    match err {
        Error::Corrupt {
            path,
            offset,
            reason,
        } => Error::Corrupt {
            path,
            offset,
            reason: format!("{reason} {at}"),
        },
        Error::Io { path, source } => {
            let source = std::io::Error::new(source.kind(), format!("{source} {at}"));
            Error::Io { path, source }
        }
        other => other,
    }
}

/// Frames in `seconds` at `rate`, rounded.
fn frames_of(seconds: f64, rate: u32) -> u64 {
    (seconds * rate as f64).round().max(0.0) as u64
}

/// Decodes the window `opts` asks for, then mixes down and resamples.
fn decode_opened(opened: Opened, opts: &DecodeOptions, ctx: &Ctx, name: &Path) -> Result<Audio> {
    let info = opened.info().clone();
    let rate = info.sample_rate;
    let draw = |n: u64, size: u64| {
        let mut rng = match &opts.window {
            Window::Random { seed, .. } => {
                Rng::for_element(*seed, Stream::AudioWindow, ctx.epoch, ctx.index)
            }
            _ => unreachable!("draws happen for random windows only"),
        };
        if n > size {
            rng.below(n - size + 1)
        } else {
            0
        }
    };
    // The decoded size, checked before decoding: a window from an argument, or a length from
    // the header (a small file can declare billions of frames: a corrupt file, which
    // `on_error="skip"` leaves out). Decoding also stops at the ceiling where no length is known.
    let channels = info.channels.max(1);
    let samples = |frames: u64| {
        usize::try_from(frames)
            .unwrap_or(usize::MAX)
            .saturating_mul(channels)
    };
    match (&opts.window, info.frames) {
        (Window::Random { duration, .. }, _)
        | (
            Window::Span {
                duration: Some(duration),
                ..
            },
            _,
        ) => {
            let f = frames_of(*duration, rate);
            let what = format_args!(
                "a window of {f} frames x {channels} channels of {}",
                name.display()
            );
            checked_bytes(ctx.op, what, samples(f), 4)?;
        }
        (_, Some(total)) => {
            let what = format_args!("{total} frames x {channels} channels decoded");
            checked_bytes(ctx.op, what, samples(total), 4)
                .map_err(|e| Error::corrupt(name, 0, e.to_string()))?;
        }
        _ => {}
    }
    let mut audio = match (&opts.window, info.frames) {
        (Window::All, _) => opened.decode(0, None)?,
        (Window::Span { offset, duration }, _) => opened.decode(
            frames_of(*offset, rate),
            duration.map(|d| frames_of(d, rate)),
        )?,
        (Window::Random { duration, .. }, Some(total)) => {
            let size = frames_of(*duration, rate);
            opened.decode(draw(total, size), Some(size))?
        }
        (Window::Random { duration, .. }, None) => {
            // No length in the header (some MP3s): decode all, then draw over what came out.
            let all = opened.decode(0, None)?;
            let size = frames_of(*duration, rate);
            let start = draw(all.frames() as u64, size) as usize;
            crop(all, start, size as usize)
        }
    };
    if audio.frames() == 0 {
        return Err(Error::corrupt(
            name,
            0,
            format!(
                "no audio frames to decode ({} {} Hz, {} channels)",
                info.format, rate, info.channels
            ),
        ));
    }
    if opts.mono {
        audio = mix_to_mono(audio);
    }
    if let Some(target) = opts.sample_rate {
        // A resampling refusal is about this file's rate: name the file.
        audio = resample(audio, target).map_err(|e| match e {
            Error::Schema { reason, .. } => Error::corrupt(name, 0, reason),
            other => other,
        })?;
    }
    if let Window::Random { duration, .. } = opts.window {
        let want = frames_of(duration, audio.sample_rate) as usize;
        audio = crop(audio, 0, want);
    }
    Ok(audio)
}

/// Frames `start..start + len`, zero-padded at the end where the clip is shorter.
fn crop(mut a: Audio, start: usize, len: usize) -> Audio {
    for ch in &mut a.channels {
        let s = start.min(ch.len());
        ch.drain(..s);
        ch.resize(len, 0.0);
    }
    a
}

/// Writes `audio` into feature `out` (and its rate into the rate feature).
fn insert(e: &mut Example, out: &str, audio: Audio, opts: &DecodeOptions) -> Result<()> {
    let (c, n) = (audio.channels.len(), audio.frames());
    let shape = if opts.channels_first {
        vec![c, n]
    } else {
        vec![n, c]
    };
    let order = |k: usize| {
        if opts.channels_first {
            (k / n, k % n)
        } else {
            (k % c, k / c)
        }
    };
    let t = match opts.dtype {
        SampleType::F32 if opts.channels_first => Tensor::from_vec(shape, audio.channels.concat())?,
        SampleType::F32 => Tensor::from_vec(
            shape,
            (0..c * n)
                .map(|k| {
                    let (ch, i) = order(k);
                    audio.channels[ch][i]
                })
                .collect(),
        )?,
        SampleType::I16 => Tensor::from_vec(
            shape,
            (0..c * n)
                .map(|k| {
                    let (ch, i) = order(k);
                    (audio.channels[ch][i] * 32768.0)
                        .round()
                        .clamp(-32768.0, 32767.0) as i16
                })
                .collect(),
        )?,
    };
    e.insert(out, t);
    if let Some(rf) = &opts.rate_feature {
        e.insert(rf, Tensor::scalar(audio.sample_rate as i64));
    }
    Ok(())
}

/// The signal of feature `feature` as float32 rows `[rows, time]` (int16 scaled by 1/32768),
/// time taken from `axis` (negative: from the end), with the shape of the other axes; errors
/// name the element and the time axis.
fn signal<'a>(
    e: &'a Example,
    feature: &str,
    axis: isize,
    ctx: &Ctx,
) -> Result<(Vec<usize>, usize, Cow<'a, [f32]>)> {
    let t = e.tensor(ctx.op, feature)?;
    let shape = t.shape().to_vec();
    let bad = |why: String| {
        Error::schema(
            ctx.op,
            format!("element {}: feature {feature:?} {why}", ctx.index),
        )
    };
    let rank = shape.len() as isize;
    let at = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&at) {
        return Err(bad(format!(
            "has shape {shape:?}, no axis {axis} to take as time (axis=-1, the default, is the \
             last: decoded audio is [channels, frames]; with channels_first=False it is \
             [frames, channels], time on axis 0)"
        )));
    }
    let at = at as usize;
    let time = shape[at];
    if time == 0 {
        return Err(bad(format!(
            "has no samples on its time axis {axis} (shape {shape:?})"
        )));
    }
    let mut lead = shape.clone();
    lead.remove(at);
    if at + 1 != shape.len() {
        // Time elsewhere than last: the rows are gathered (a copy of the clip, as float32).
        let scale = match t.dtype() {
            DType::I16 => 1.0 / 32768.0,
            DType::F32 | DType::F64 => 1.0,
            other => {
                return Err(bad(format!(
                    "is {other}; need float32, float64 or int16 samples"
                )))
            }
        };
        let v = stokehold_core::cast::cast(t, DType::F32)?.to_vec::<f32>()?;
        let inner: usize = shape[at + 1..].iter().product();
        let mut rows = Vec::with_capacity(v.len());
        for outer in v.chunks_exact(time * inner) {
            for i in 0..inner {
                rows.extend((0..time).map(|k| outer[k * inner + i] * scale));
            }
        }
        return Ok((lead, time, Cow::Owned(rows)));
    }
    let lead = &lead[..];
    let values = match t.dtype() {
        // Float32 samples are read in place (no copy of the clip).
        DType::F32 => match t.as_slice::<f32>()? {
            Some(v) => Cow::Borrowed(v),
            None => Cow::Owned(t.to_vec::<f32>()?),
        },
        DType::I16 => Cow::Owned(
            t.to_vec::<i16>()?
                .into_iter()
                .map(|x| x as f32 / 32768.0)
                .collect(),
        ),
        DType::F64 => Cow::Owned(t.to_vec::<f64>()?.into_iter().map(|x| x as f32).collect()),
        other => {
            return Err(bad(format!(
                "is {other}; need float32, float64 or int16 samples"
            )))
        }
    };
    Ok((lead.to_vec(), time, values))
}

/// Runs `per_row` (time series -> `[bins, frames]`) over every row of `feature`, stacking the
/// results as `[..., bins, frames]` in `out`.
fn per_row_fn(
    feature: &str,
    out: &str,
    bins: usize,
    stft: Stft,
    per_row: impl Fn(&[f32], &mut [f32]) -> Result<()> + Send + Sync + 'static,
) -> MapFn {
    let (feature, out) = (feature.to_string(), out.to_string());
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let (mut shape, time, values) = signal(&e, &feature, stft.options().axis, ctx)?;
        let frames = stft.frames(time);
        if frames == 0 {
            return Err(Error::schema(
                ctx.op,
                format!(
                    "element {}: feature {feature:?} has {time} samples on its time axis {}, \
                     fewer than n_fft without center padding",
                    ctx.index,
                    stft.options().axis
                ),
            ));
        }
        let size = bins.saturating_mul(frames);
        let rows = values.len() / time;
        let what = format_args!("feature {feature:?}'s {rows} x {bins} x {frames} output");
        let mut result =
            stokehold_core::alloc::try_filled(ctx.op, what, 0.0f32, rows.saturating_mul(size))?;
        for (row, dst) in values.chunks_exact(time).zip(result.chunks_exact_mut(size)) {
            per_row(row, dst).map_err(|err| match err {
                Error::InvalidArgument(why) => {
                    Error::schema(ctx.op, format!("element {}: {why}", ctx.index))
                }
                other => other,
            })?;
        }
        shape.extend([bins, frames]);
        e.insert(&out, Tensor::from_vec(shape, result)?);
        Ok(e)
    })
}

/// A map function writing `|STFT|^power` of feature `feature` (`[..., time]`) to feature `out`
/// as `[..., n_fft / 2 + 1, frames]` float32.
pub fn spectrogram_fn(feature: &str, out: &str, stft: Stft) -> MapFn {
    let s = stft.clone();
    per_row_fn(feature, out, stft.n_freqs(), stft, move |row, dst| {
        s.power_into(row, dst)
    })
}

thread_local! {
    /// The power spectrum behind a mel spectrogram, reused from clip to clip on each thread (as
    /// the STFT's padded signal is: `features::PADDED`), up to `features::SCRATCH_KEEP`.
    static SPEC: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A map function writing the mel spectrogram of feature `feature` (`[..., time]`) to feature
/// `out` as `[..., n_mels, frames]` float32; with `db = Some(top_db)` in decibels
/// ([`power_to_db`]).
pub fn mel_spectrogram_fn(
    feature: &str,
    out: &str,
    stft: Stft,
    bank: MelBank,
    db: Option<Option<f32>>,
) -> MapFn {
    let s = stft.clone();
    let n_freqs = stft.n_freqs();
    per_row_fn(feature, out, bank.n_mels(), stft, move |row, dst| {
        let frames = dst.len() / bank.n_mels();
        SPEC.with_borrow_mut(|spec| {
            // Every value is written by `power_into`: only a longer clip grows the buffer.
            spec.resize(n_freqs * frames, 0.0);
            let r = s.power_into(row, spec);
            if r.is_ok() {
                bank.apply(spec, frames, dst);
            }
            release_if_large(spec);
            r
        })?;
        if let Some(top_db) = db {
            power_to_db(dst, top_db);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::StftOptions;

    #[test]
    fn the_time_axis_is_an_argument_and_errors_name_it() {
        let ctx = Ctx {
            op: "spectrogram",
            index: 2,
            epoch: 0,
        };
        let run = |t: Tensor, axis: isize| {
            let stft = Stft::new(StftOptions {
                axis,
                ..StftOptions::new(16)
            })
            .unwrap();
            let e = Example::new().with("a", t);
            spectrogram_fn("a", "s", stft)(e, &ctx).map(|e| e.tensor("t", "s").unwrap().clone())
        };
        let v: Vec<i16> = (0..200).map(|k| ((k * 37) % 101) as i16 * 100).collect();
        // [channels, frames] with time last (the default), and [frames, channels] with axis 0
        // (decode_audio(channels_first=False)): the same spectrogram.
        let first = run(Tensor::from_vec(vec![1, 200], v.clone()).unwrap(), -1).unwrap();
        let last = run(Tensor::from_vec(vec![200, 1], v.clone()).unwrap(), 0).unwrap();
        assert_eq!(first, last);
        assert_eq!(first.shape(), &[1, 9, 26]);
        let e = run(Tensor::from_vec(vec![200], v).unwrap(), 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("element 2") && e.contains("no axis 1 to take as time"),
            "{e}"
        );
    }

    #[test]
    fn the_python_window_arguments_make_one_window_or_name_the_bad_one() {
        let w = |o, d, r| Window::from_args("load_audio", o, d, r, 7);
        assert_eq!(w(0.0, None, None).unwrap(), Window::All);
        let span = Window::Span {
            offset: 0.5,
            duration: Some(0.25),
        };
        assert_eq!(w(0.5, Some(0.25), None).unwrap(), span);
        let random = Window::Random {
            duration: 3.0,
            seed: 7,
        };
        assert_eq!(w(0.0, None, Some(3.0)).unwrap(), random);
        let msg = |r: Result<Window>| r.unwrap_err().to_string();
        assert!(msg(w(2.0, None, Some(1.0))).contains("load_audio(random_window=1): draws its own"));
        assert!(msg(w(-1.0, None, None)).contains("load_audio(offset=-1): must be"));
        assert!(msg(w(0.0, Some(0.0), None)).contains("load_audio(duration=0): must be"));
        assert!(msg(w(0.0, None, Some(f64::INFINITY))).contains("(random_window=inf)"));
        let big = DecodeOptions {
            sample_rate: Some(MAX_SAMPLE_RATE + 1),
            ..Default::default()
        };
        let e = big.checked("decode_audio").unwrap_err().to_string();
        assert!(e.contains("decode_audio(resample_to=1000001): must be in 1..=1000000 Hz"));
        assert_eq!(SampleType::parse("x", "int16").unwrap(), SampleType::I16);
    }
}

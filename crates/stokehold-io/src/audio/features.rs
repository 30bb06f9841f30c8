//! Spectrogram features with torchaudio's and librosa's conventions: a periodic Hann window of
//! `win_length` centred in `n_fft`, frames every `hop_length` samples, with `center` padding of
//! `n_fft / 2` on both sides (`reflect` as torchaudio, `constant` zeros as librosa >= 0.10),
//! `|X|^power` per bin; triangular mel filters on the HTK or Slaney mel scale, with or without
//! Slaney's area normalisation; decibels as `10 * log10(max(x, 1e-10))`, optionally floored at
//! `max - top_db` (librosa's `power_to_db(ref=1.0)`, torchaudio's `AmplitudeToDB`).
//!
//! The FFT plan, window and filter bank are built once per op and shared by its threads.

use std::sync::Arc;

use realfft::num_complex::Complex;
use realfft::{RealFftPlanner, RealToComplex};
use stokehold_core::alloc::{checked_bytes, try_filled};
use stokehold_core::{Error, Result};

use crate::options::Choice;

/// How `center` pads the signal's ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    /// Mirror the signal without repeating the edge sample (torchaudio's default).
    Reflect,
    /// Zeros (librosa's default since 0.10).
    Constant,
}

impl Choice for PadMode {
    const ARG: &'static str = "pad_mode";
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("reflect", PadMode::Reflect),
        ("constant", PadMode::Constant),
    ];
}

/// Options of the short-time Fourier transform.
#[derive(Clone, Debug, PartialEq)]
pub struct StftOptions {
    /// FFT size; `n_fft / 2 + 1` frequency bins come out.
    pub n_fft: usize,
    /// Window length, at most `n_fft` (default `n_fft`).
    pub win_length: usize,
    /// Samples between frames (default `win_length / 2`).
    pub hop_length: usize,
    /// Pad `n_fft / 2` on both ends so frame `t` is centred on sample `t * hop_length`.
    pub center: bool,
    /// How `center` pads.
    pub pad_mode: PadMode,
    /// Exponent of the magnitude: 1 magnitude, 2 power (default).
    pub power: f32,
    /// The input's time axis (default -1, the last, as decoded audio `[channels, frames]` has
    /// it; a negative axis counts from the end, as in numpy and `scipy.signal.stft`). The
    /// output puts frequency and frames last: `[...other axes, bins, frames]`.
    pub axis: isize,
}

impl StftOptions {
    /// torchaudio's defaults for `n_fft`: window `n_fft`, hop half of it, centred with reflect
    /// padding, power 2.
    pub fn new(n_fft: usize) -> Self {
        StftOptions {
            n_fft,
            win_length: n_fft,
            hop_length: (n_fft / 2).max(1),
            center: true,
            pad_mode: PadMode::Reflect,
            power: 2.0,
            axis: -1,
        }
    }

    /// The Python API's STFT arguments with its defaults (`win_length`: `n_fft`; `hop_length`:
    /// `win_length / 2`), checked: a bad value is an error naming `op` and the argument.
    pub fn from_args(
        op: &str,
        n_fft: usize,
        win_length: Option<usize>,
        hop_length: Option<usize>,
        power: f32,
        center: bool,
        pad_mode: PadMode,
    ) -> Result<Self> {
        let bad = |arg: &str, v: &dyn std::fmt::Display, why: &str| {
            Err(Error::invalid(format!("{op}({arg}={v}): {why}")))
        };
        if n_fft < 2 {
            return bad("n_fft", &n_fft, "must be >= 2");
        }
        let win = win_length.unwrap_or(n_fft);
        if win == 0 || win > n_fft {
            return bad(
                "win_length",
                &win,
                &format!("must be in 1..=n_fft ({n_fft})"),
            );
        }
        let hop = hop_length.unwrap_or((win / 2).max(1));
        if hop == 0 {
            return bad("hop_length", &hop, "must be >= 1");
        }
        if !(power > 0.0 && power.is_finite()) {
            return bad(
                "power",
                &power,
                "must be a number > 0 (1: magnitude, 2: power)",
            );
        }
        Ok(StftOptions {
            n_fft,
            win_length: win,
            hop_length: hop,
            center,
            pad_mode,
            power,
            axis: -1,
        })
    }
}

/// A planned STFT: window and FFT plan, shared by threads.
#[derive(Clone)]
pub struct Stft {
    opts: StftOptions,
    window: Arc<[f32]>,
    fft: Arc<dyn RealToComplex<f32>>,
}

impl Stft {
    /// Plans the transform; errors on sizes that make no sense.
    pub fn new(opts: StftOptions) -> Result<Self> {
        let o = &opts;
        if o.n_fft < 2 || o.win_length == 0 || o.win_length > o.n_fft || o.hop_length == 0 {
            return Err(Error::invalid(format!(
                "stft: need n_fft >= 2, 0 < win_length <= n_fft and hop_length > 0, got n_fft \
                 {}, win_length {}, hop_length {}",
                o.n_fft, o.win_length, o.hop_length
            )));
        }
        if !(o.power > 0.0 && o.power.is_finite()) {
            return Err(Error::invalid(format!(
                "stft: power must be > 0, got {}",
                o.power
            )));
        }
        // The window, the plan's twiddles and a frame's scratch: about 24 bytes a point, checked
        // before anything is planned (n_fft is an argument).
        let what = format_args!("an STFT of n_fft={}", o.n_fft);
        checked_bytes("spectrogram", what, o.n_fft, 24)?;
        // Periodic Hann (torch.hann_window's default), zero-padded to n_fft around its centre.
        let mut window = try_filled("spectrogram", what, 0.0f32, o.n_fft)?;
        let left = (o.n_fft - o.win_length) / 2;
        for n in 0..o.win_length {
            let x = 2.0 * std::f64::consts::PI * n as f64 / o.win_length as f64;
            window[left + n] = (0.5 - 0.5 * x.cos()) as f32;
        }
        let fft = RealFftPlanner::<f32>::new().plan_fft_forward(o.n_fft);
        Ok(Stft {
            opts,
            window: window.into(),
            fft,
        })
    }

    /// Frequency bins per frame.
    pub fn n_freqs(&self) -> usize {
        self.opts.n_fft / 2 + 1
    }

    /// The options.
    pub fn options(&self) -> &StftOptions {
        &self.opts
    }

    /// Frames for a signal of `len` samples (0 when it is too short for one frame).
    pub fn frames(&self, len: usize) -> usize {
        let o = &self.opts;
        let padded = if o.center {
            len + 2 * (o.n_fft / 2)
        } else {
            len
        };
        if padded < o.n_fft {
            0
        } else {
            1 + (padded - o.n_fft) / o.hop_length
        }
    }

    /// `|STFT|^power` of `signal` as `[n_freqs, frames]` (row-major), written to `out` (which
    /// must hold `n_freqs * frames(signal.len())` values).
    pub fn power_into(&self, signal: &[f32], out: &mut [f32]) -> Result<()> {
        let o = &self.opts;
        let half = o.n_fft / 2;
        if o.center && o.pad_mode == PadMode::Reflect && signal.len() <= half {
            return Err(Error::invalid(format!(
                "stft: reflect padding needs more than n_fft / 2 = {half} samples, the signal \
                 has {} (use pad_mode=\"constant\" for clips this short)",
                signal.len()
            )));
        }
        if !o.center {
            return self.frames_into(signal, out);
        }
        PADDED.with_borrow_mut(|padded| {
            self.pad_into(signal, padded);
            let r = self.frames_into(padded, out);
            release_if_large(padded);
            r
        })
    }

    /// The frames of the (already padded) `padded` into `out`.
    fn frames_into(&self, padded: &[f32], out: &mut [f32]) -> Result<()> {
        let o = &self.opts;
        let frames = padded
            .len()
            .checked_sub(o.n_fft)
            .map_or(0, |d| 1 + d / o.hop_length);
        let n_freqs = self.n_freqs();
        debug_assert_eq!(out.len(), n_freqs * frames);
        let mut buf = self.fft.make_input_vec();
        let mut spec: Vec<Complex<f32>> = self.fft.make_output_vec();
        let mut scratch = self.fft.make_scratch_vec();
        for t in 0..frames {
            let frame = &padded[t * o.hop_length..t * o.hop_length + o.n_fft];
            for ((b, x), w) in buf.iter_mut().zip(frame).zip(self.window.iter()) {
                *b = x * w;
            }
            self.fft
                .process_with_scratch(&mut buf, &mut spec, &mut scratch)
                .map_err(|e| Error::invalid(format!("stft: {e}")))?;
            for (f, c) in spec.iter().enumerate() {
                let p = c.norm_sqr();
                out[f * frames + t] = if o.power == 2.0 {
                    p
                } else if o.power == 1.0 {
                    p.sqrt()
                } else {
                    p.powf(o.power / 2.0)
                };
            }
        }
        Ok(())
    }

    /// `signal` with `n_fft / 2` samples of padding on both ends, written over `v`.
    fn pad_into(&self, signal: &[f32], v: &mut Vec<f32>) {
        let o = &self.opts;
        let half = o.n_fft / 2;
        let n = signal.len();
        v.clear();
        v.reserve(n + 2 * half);
        match o.pad_mode {
            PadMode::Constant => {
                v.resize(half, 0.0);
                v.extend_from_slice(signal);
                v.resize(n + 2 * half, 0.0);
            }
            PadMode::Reflect => {
                v.extend((1..=half).rev().map(|i| signal[i]));
                v.extend_from_slice(signal);
                v.extend((1..=half).map(|i| signal[n - 1 - i]));
            }
        }
    }
}

thread_local! {
    /// The padded signal of [`Stft::power_into`], reused from clip to clip on each thread: a
    /// fresh buffer of a few hundred KiB per clip went back to the OS and was faulted in again
    /// on the next (a tenth of a log-mel pipeline's time went to page faults).
    static PADDED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The most floats a thread keeps in a reused scratch buffer (16 MiB): a longer clip (about 20
/// minutes of 16 kHz audio padded, or a spectrum of about 80 s) gets a buffer of its own, so a
/// pipeline thread never holds on to the largest clip it has seen.
pub(crate) const SCRATCH_KEEP: usize = 4 << 20;

/// Frees `v` when it grew past [`SCRATCH_KEEP`].
pub(crate) fn release_if_large(v: &mut Vec<f32>) {
    if v.capacity() > SCRATCH_KEEP {
        *v = Vec::new();
    }
}

/// The mel scale of the filter bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MelScale {
    /// `2595 * log10(1 + f / 700)` (torchaudio's default, librosa's `htk=True`).
    Htk,
    /// Linear below 1 kHz, logarithmic above (librosa's default).
    Slaney,
}

impl Choice for MelScale {
    const ARG: &'static str = "mel_scale";
    const CHOICES: &'static [(&'static str, Self)] =
        &[("htk", MelScale::Htk), ("slaney", MelScale::Slaney)];
}

/// A normalisation of the mel filters (Python's `norm`; `None` there is none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MelNorm {
    /// Slaney's constant area: each filter divided by its width in Hz / 2.
    Slaney,
}

impl Choice for MelNorm {
    const ARG: &'static str = "norm";
    const CHOICES: &'static [(&'static str, Self)] = &[("slaney", MelNorm::Slaney)];
}

impl MelScale {
    fn to_mel(self, hz: f64) -> f64 {
        match self {
            MelScale::Htk => 2595.0 * (1.0 + hz / 700.0).log10(),
            MelScale::Slaney => {
                let (f_sp, min_log_hz) = (200.0 / 3.0, 1000.0);
                let logstep = 6.4f64.ln() / 27.0;
                if hz >= min_log_hz {
                    min_log_hz / f_sp + (hz / min_log_hz).ln() / logstep
                } else {
                    hz / f_sp
                }
            }
        }
    }

    fn to_hz(self, mel: f64) -> f64 {
        match self {
            MelScale::Htk => 700.0 * (10f64.powf(mel / 2595.0) - 1.0),
            MelScale::Slaney => {
                let (f_sp, min_log_hz) = (200.0 / 3.0, 1000.0);
                let min_log_mel = min_log_hz / f_sp;
                let logstep = 6.4f64.ln() / 27.0;
                if mel >= min_log_mel {
                    min_log_hz * (logstep * (mel - min_log_mel)).exp()
                } else {
                    f_sp * mel
                }
            }
        }
    }
}

/// Options of the mel filter bank.
#[derive(Clone, Debug, PartialEq)]
pub struct MelOptions {
    /// The audio's sample rate.
    pub sample_rate: u32,
    /// Filters.
    pub n_mels: usize,
    /// Lowest frequency (Hz).
    pub f_min: f64,
    /// Highest frequency (Hz; default the Nyquist frequency).
    pub f_max: Option<f64>,
    /// The mel scale.
    pub scale: MelScale,
    /// Divide each filter by its width in Hz / 2 (Slaney's constant-area normalisation).
    pub slaney_norm: bool,
}

impl MelOptions {
    /// The Python API's mel arguments, checked: a bad value is an error naming `op` and the
    /// argument (`f_min` must lie in `[0, f_max)`, `f_max` defaulting to `sample_rate / 2`).
    pub fn from_args(
        op: &str,
        sample_rate: u32,
        n_mels: usize,
        f_min: f64,
        f_max: Option<f64>,
        scale: MelScale,
        norm: Option<MelNorm>,
    ) -> Result<Self> {
        if sample_rate == 0 || n_mels == 0 {
            let (arg, v) = if n_mels == 0 {
                ("n_mels", 0)
            } else {
                ("sample_rate", 0)
            };
            return Err(Error::invalid(format!("{op}({arg}={v}): must be >= 1")));
        }
        let top = f_max.unwrap_or(sample_rate as f64 / 2.0);
        if let Some(v) = f_max.filter(|v| !v.is_finite()) {
            return Err(Error::invalid(format!(
                "{op}(f_max={v}): must be a finite number"
            )));
        }
        if !(f_min.is_finite() && 0.0 <= f_min && f_min < top) {
            return Err(Error::invalid(format!(
                "{op}(f_min={f_min}): must be >= 0 and below f_max ({top}; default: rate / 2)"
            )));
        }
        Ok(MelOptions {
            sample_rate,
            n_mels,
            f_min,
            f_max,
            scale,
            slaney_norm: norm == Some(MelNorm::Slaney),
        })
    }
}

/// Triangular mel filters over `n_freqs` STFT bins; each keeps only its non-zero span.
#[derive(Clone, Debug)]
pub struct MelBank {
    filters: Arc<[(usize, Vec<f32>)]>,
    n_freqs: usize,
}

impl MelBank {
    /// The filter bank of `opts` for `n_freqs` bins (an `n_fft / 2 + 1`-bin STFT).
    pub fn new(n_freqs: usize, opts: &MelOptions) -> Result<Self> {
        let nyquist = opts.sample_rate as f64 / 2.0;
        let f_max = opts.f_max.unwrap_or(nyquist);
        if opts.n_mels == 0 || n_freqs < 2 || !(0.0 <= opts.f_min && opts.f_min < f_max) {
            return Err(Error::invalid(format!(
                "mel filter bank: need n_mels > 0 and 0 <= f_min < f_max, got n_mels {}, f_min \
                 {}, f_max {f_max}",
                opts.n_mels, opts.f_min
            )));
        }
        let what = format_args!("a mel filter bank of {} x {n_freqs}", opts.n_mels);
        checked_bytes(
            "mel_spectrogram",
            what,
            opts.n_mels.saturating_mul(n_freqs),
            8,
        )?;
        let s = opts.scale;
        let (lo, hi) = (s.to_mel(opts.f_min), s.to_mel(f_max));
        let pts: Vec<f64> = (0..opts.n_mels + 2)
            .map(|i| s.to_hz(lo + (hi - lo) * i as f64 / (opts.n_mels + 1) as f64))
            .collect();
        let freq = |k: usize| nyquist * k as f64 / (n_freqs - 1) as f64;
        let filters = (0..opts.n_mels)
            .map(|m| {
                let (a, b, c) = (pts[m], pts[m + 1], pts[m + 2]);
                let norm = if opts.slaney_norm { 2.0 / (c - a) } else { 1.0 };
                let w: Vec<f64> = (0..n_freqs)
                    .map(|k| {
                        let f = freq(k);
                        ((f - a) / (b - a)).min((c - f) / (c - b)).max(0.0) * norm
                    })
                    .collect();
                let start = w.iter().position(|x| *x > 0.0).unwrap_or(0);
                let end = w.iter().rposition(|x| *x > 0.0).map_or(start, |e| e + 1);
                (start, w[start..end].iter().map(|x| *x as f32).collect())
            })
            .collect();
        Ok(MelBank { filters, n_freqs })
    }

    /// Filters.
    pub fn n_mels(&self) -> usize {
        self.filters.len()
    }

    /// Mel energies `[n_mels, frames]` of a `[n_freqs, frames]` spectrogram.
    pub fn apply(&self, spec: &[f32], frames: usize, out: &mut [f32]) {
        debug_assert_eq!(spec.len(), self.n_freqs * frames);
        out.fill(0.0);
        for (m, (start, w)) in self.filters.iter().enumerate() {
            let row = &mut out[m * frames..(m + 1) * frames];
            for (k, wk) in w.iter().enumerate() {
                let bin = &spec[(start + k) * frames..(start + k + 1) * frames];
                for (o, x) in row.iter_mut().zip(bin) {
                    *o += wk * x;
                }
            }
        }
    }
}

/// The floor of [`power_to_db`]: librosa's and torchaudio's `amin`.
pub const AMIN: f32 = 1e-10;

/// `10 * log10(max(x, 1e-10))` in place, then floored at `max - top_db` when given.
pub fn power_to_db(x: &mut [f32], top_db: Option<f32>) {
    for v in x.iter_mut() {
        *v = 10.0 * log10(v.max(AMIN));
    }
    if let Some(top) = top_db {
        let floor = x.iter().copied().fold(f32::NEG_INFINITY, f32::max) - top;
        for v in x.iter_mut() {
            *v = v.max(floor);
        }
    }
}

/// `log10(x)` for a positive normal `x` (or +inf), within 2e-7 of `f32::log10` relative to
/// `max(1, |log10 x|)` (a few float32 ulps; test below): straight-line code the compiler
/// vectorises over a slice, where `f32::log10` is a libm call per value (a tenth of a log-mel
/// spectrogram's time). `x = m * 2^e` with `m` in `[sqrt(1/2), sqrt(2))`, then
/// `ln m = 2 atanh(z)`, `z = (m - 1) / (m + 1)`, `|z| < 0.172`, by its series to `z^9`.
fn log10(x: f32) -> f32 {
    let bits = x.to_bits();
    // Exponent relative to [sqrt(1/2), sqrt(2)): subtracting sqrt(1/2)'s bits moves the
    // boundary of the exponent field there.
    let shifted = bits.wrapping_sub(0x3f35_04f3);
    let e = (shifted as i32) >> 23;
    let m = f32::from_bits(bits.wrapping_sub((e as u32) << 23)) as f64;
    let z = (m - 1.0) / (m + 1.0);
    let z2 = z * z;
    let series =
        z * (2.0 + z2 * (2.0 / 3.0 + z2 * (2.0 / 5.0 + z2 * (2.0 / 7.0 + z2 * (2.0 / 9.0)))));
    let y = ((e as f64) * std::f64::consts::LOG10_2 + series * std::f64::consts::LOG10_E) as f32;
    // +inf (a spectrum of overflowing samples) stays +inf, as libm has it.
    if bits >= 0x7f80_0000 {
        f32::INFINITY
    } else {
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_python_arguments_take_torchaudios_defaults_and_name_a_bad_one() {
        let o = StftOptions::from_args("spectrogram", 400, None, None, 2.0, true, PadMode::Reflect);
        assert_eq!(o.unwrap(), StftOptions::new(400));
        let o = StftOptions::from_args("s", 512, Some(300), None, 1.0, false, PadMode::Constant);
        assert_eq!(
            (o.as_ref().unwrap().win_length, o.unwrap().hop_length),
            (300, 150)
        );
        let e = StftOptions::from_args(
            "spectrogram",
            512,
            Some(600),
            None,
            2.0,
            true,
            PadMode::Reflect,
        );
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("spectrogram(win_length=600): must be in 1..=n_fft (512)"));
        let e = StftOptions::from_args("s", 512, None, None, f32::NAN, true, PadMode::Reflect);
        assert!(e.unwrap_err().to_string().contains("s(power=NaN)"));
        let m = MelOptions::from_args(
            "m",
            16000,
            64,
            0.0,
            None,
            MelScale::Slaney,
            Some(MelNorm::Slaney),
        );
        assert!(m.unwrap().slaney_norm);
        let e = MelOptions::from_args(
            "mel_spectrogram",
            16000,
            64,
            9000.0,
            None,
            MelScale::Htk,
            None,
        );
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("mel_spectrogram(f_min=9000): must be >= 0 and below f_max (8000"));
        assert_eq!(MelScale::parse("m", "slaney").unwrap(), MelScale::Slaney);
        assert!(PadMode::parse("spectrogram", "zeros")
            .unwrap_err()
            .to_string()
            .contains("spectrogram(pad_mode='zeros'): must be one of 'reflect', 'constant'"));
    }

    #[test]
    fn a_sine_peaks_in_its_bin() {
        let rate = 16000.0;
        let sig: Vec<f32> = (0..4000)
            .map(|t| (2.0 * std::f32::consts::PI * 1000.0 * t as f32 / rate).sin())
            .collect();
        let s = Stft::new(StftOptions::new(512)).unwrap();
        let frames = s.frames(sig.len());
        assert_eq!(frames, 1 + 4000 / 256);
        let mut out = vec![0.0; s.n_freqs() * frames];
        s.power_into(&sig, &mut out).unwrap();
        let t = frames / 2;
        let peak = (0..s.n_freqs())
            .max_by(|a, b| out[a * frames + t].total_cmp(&out[b * frames + t]))
            .unwrap();
        assert_eq!(peak, 32); // 1000 Hz * 512 / 16000
    }

    #[test]
    fn a_long_clip_leaves_no_large_scratch_behind() {
        let s = Stft::new(StftOptions {
            hop_length: 4096,
            ..StftOptions::new(512)
        })
        .unwrap();
        let run = |n: usize| {
            let sig = vec![0.5f32; n];
            let mut out = vec![0.0; s.n_freqs() * s.frames(n)];
            s.power_into(&sig, &mut out).unwrap();
            PADDED.with_borrow(|p| p.capacity())
        };
        assert!(
            run(4000) >= 4000,
            "a short clip's padded buffer is kept for the next"
        );
        assert_eq!(run(SCRATCH_KEEP + 1000), 0, "a long clip's is freed");
    }

    #[test]
    fn mel_scales_round_trip() {
        for s in [MelScale::Htk, MelScale::Slaney] {
            for hz in [0.0, 440.0, 1000.0, 7999.0] {
                assert!((s.to_hz(s.to_mel(hz)) - hz).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn log10_is_within_a_few_ulps_of_libm() {
        let mut worst = 0.0f64;
        let mut x = AMIN;
        while x < 1e12 {
            for k in 0..64 {
                let v = x * (1.0 + k as f32 / 64.0);
                let (got, want) = (log10(v) as f64, (v as f64).log10());
                worst = worst.max((got - want).abs() / want.abs().max(1.0));
            }
            x *= 1.7;
        }
        assert!(worst < 2e-7, "relative error {worst:e}");
        assert_eq!(log10(1.0), 0.0);
        assert_eq!(log10(1000.0), 3.0);
        assert_eq!(log10(f32::INFINITY), f32::INFINITY);
    }

    #[test]
    fn db_floor() {
        let mut x = vec![1.0, 1e-3, 0.0];
        power_to_db(&mut x, Some(20.0));
        assert_eq!(x, vec![0.0, -20.0, -20.0]);
    }
}

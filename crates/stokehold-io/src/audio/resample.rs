//! Sample-rate conversion with rubato's synchronous FFT resampler (fixed ratio, band-limited),
//! and the mix down to mono.

use rubato::audioadapter_buffers::direct::SequentialSliceOfVecs;
use rubato::{Fft, FixedSync, Resampler};
use stokehold_core::{Error, Result};

use super::decode::Audio;

/// Frames per FFT chunk. 1024 keeps rubato's delay (which `process_all` removes) and its
/// buffers small while its FFTs stay efficient; the ratio is exact whatever the chunk.
const CHUNK: usize = 1024;

/// The largest reduced ratio `rate / target` (both sides after dividing by their gcd) we
/// resample: rubato's FFT sizes are multiples of these, so a header claiming 1,375,747,712 Hz
/// (found by the fuzzer) would ask for gigabytes. Every rate in use (8 kHz ... 384 kHz, 11025,
/// 22050, 44100 and multiples) reduces to at most 441 / 640 against another.
const MAX_REDUCED: u32 = 4096;

/// The largest sample magnitude we resample (see `resample`).
const LARGEST: f32 = 1e6;

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `audio` at `target` frames per second: `round(frames * target / rate)` frames.
pub fn resample(audio: Audio, target: u32) -> Result<Audio> {
    let rate = audio.sample_rate;
    if target == 0 {
        return Err(Error::invalid("resample: the target rate must be > 0"));
    }
    let g = gcd(rate, target);
    if rate / g > MAX_REDUCED || target / g > MAX_REDUCED {
        return Err(Error::schema(
            "resample",
            format!(
                "cannot resample {rate} Hz to {target} Hz: the ratio reduces to {} / {}, \
                 beyond {MAX_REDUCED} (is the file's sample rate right?)",
                rate / g,
                target / g
            ),
        ));
    }
    if rate == target || audio.frames() == 0 {
        return Ok(Audio {
            sample_rate: target,
            ..audio
        });
    }
    // rubato's FFT panics on NaN / infinity, and on finite samples large enough to overflow
    // inside it (both found by the fuzzer in float WAVs). Audio lies near [-1, 1]: beyond
    // +-1e6 it is not audio.
    if audio
        .channels
        .iter()
        .flatten()
        .any(|x| !x.is_finite() || x.abs() > LARGEST)
    {
        return Err(Error::schema(
            "resample",
            format!(
                "cannot resample {rate} Hz to {target} Hz: the audio holds NaN, infinity or \
                 samples beyond +-{LARGEST:e}"
            ),
        ));
    }
    let (channels, frames) = (audio.channels.len(), audio.frames());
    let want = ((frames as u128 * target as u128 + rate as u128 / 2) / rate as u128) as usize;
    let fail = |what: String| Error::invalid(format!("resample {rate} Hz -> {target} Hz: {what}"));
    let mut r = Fft::<f32>::new(
        rate as usize,
        target as usize,
        CHUNK,
        channels,
        FixedSync::Input,
    )
    .map_err(|e| fail(e.to_string()))?;
    let input = SequentialSliceOfVecs::new(&audio.channels, channels, frames)
        .map_err(|e| fail(e.to_string()))?;
    // Belt and braces: a panic inside rubato becomes this element's error, not a crash.
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        r.process_all(&input, frames, None)
    }));
    let out = match run {
        Ok(out) => out.map_err(|e| fail(e.to_string()))?,
        Err(_) => {
            return Err(Error::schema(
                "resample",
                "the resampler failed on this audio",
            ))
        }
    };
    let got = out.take_data();
    let have = got.len() / channels;
    let mut planar = vec![vec![0.0f32; want]; channels];
    for (t, frame) in got.chunks_exact(channels).take(want.min(have)).enumerate() {
        for (c, s) in frame.iter().enumerate() {
            planar[c][t] = *s;
        }
    }
    Ok(Audio {
        sample_rate: target,
        channels: planar,
    })
}

/// The mean of the channels, as one channel (torchaudio's and librosa's mix down).
pub fn mix_to_mono(audio: Audio) -> Audio {
    if audio.channels.len() <= 1 {
        return audio;
    }
    let n = audio.channels.len() as f32;
    let mut mono = vec![0.0f32; audio.frames()];
    for ch in &audio.channels {
        for (m, s) in mono.iter_mut().zip(ch) {
            *m += *s;
        }
    }
    for m in &mut mono {
        *m /= n;
    }
    Audio {
        sample_rate: audio.sample_rate,
        channels: vec![mono],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(rate: u32, hz: f32, frames: usize) -> Vec<f32> {
        (0..frames)
            .map(|t| (2.0 * std::f32::consts::PI * hz * t as f32 / rate as f32).sin() * 0.5)
            .collect()
    }

    #[test]
    fn resampled_sine_keeps_its_frequency_and_length() {
        let a = Audio {
            sample_rate: 44100,
            channels: vec![sine(44100, 440.0, 44100), sine(44100, 1000.0, 44100)],
        };
        let b = resample(a, 16000).unwrap();
        assert_eq!(b.frames(), 16000);
        assert_eq!(b.channels.len(), 2);
        // Away from the edges the output is the same sine sampled at 16 kHz, up to the FFT
        // resampler's sub-sample delay (measured 0.016 of the 0.5 amplitude: ~0.2 samples).
        let want = sine(16000, 440.0, 16000);
        let err = b.channels[0][2000..14000]
            .iter()
            .zip(&want[2000..14000])
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(err < 0.025, "max error {err}");
    }

    #[test]
    fn absurd_ratios_are_refused_not_allocated() {
        let a = Audio {
            sample_rate: 1_375_747_712,
            channels: vec![vec![0.0; 64]],
        };
        let e = resample(a, 16000).unwrap_err().to_string();
        assert!(
            e.contains("cannot resample 1375747712 Hz to 16000 Hz"),
            "{e}"
        );
    }

    #[test]
    fn non_finite_samples_are_refused_not_a_panic() {
        let a = Audio {
            sample_rate: 8000,
            channels: vec![vec![0.0, f32::NAN, 1.0, f32::INFINITY]],
        };
        let e = resample(a, 16000).unwrap_err().to_string();
        assert!(e.contains("NaN, infinity"), "{e}");
        let huge = Audio {
            sample_rate: 8000,
            channels: vec![vec![3e38; 4096]],
        };
        assert!(resample(huge, 16000).is_err());
    }

    #[test]
    fn mono_is_the_channel_mean() {
        let a = Audio {
            sample_rate: 8000,
            channels: vec![vec![1.0, 0.5], vec![0.0, -0.5]],
        };
        assert_eq!(mix_to_mono(a).channels, vec![vec![0.5, 0.0]]);
    }
}

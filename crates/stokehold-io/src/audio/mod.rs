//! Audio: decoding WAV (PCM 8/16/24/32-bit, float 32/64), FLAC, MP3 and Ogg Vorbis through
//! symphonia, resampling (rubato), and STFT / mel / log-mel features (realfft), all native: an
//! audio pipeline runs on the pipeline's threads with no Python (and no GIL) per element.
//!
//! * [`decode`]: probe a file or bytes ([`probe_file`], [`AudioInfo`]) and decode its first audio
//!   track to planar `f32`, all of it or a window (the reader seeks, so a 3 s window of a 3 min
//!   file decodes about 3 s);
//! * [`resample`]: rate conversion and the mix down to mono;
//! * [`features`]: [`Stft`], [`MelBank`], [`power_to_db`] with torchaudio's / librosa's
//!   conventions;
//! * [`ops`]: the same as map functions for pipelines: [`decode_audio_fn`], [`load_audio_fn`],
//!   [`spectrogram_fn`], [`mel_spectrogram_fn`].
//!
//! ```no_run
//! use stokehold_core::{BatchOptions, Parallelism};
//! use stokehold_io::audio::{load_audio_fn, mel_spectrogram_fn, DecodeOptions, MelBank,
//!     MelOptions, MelScale, Stft, StftOptions, Window};
//! use stokehold_io::files::list_files;
//! let opts = DecodeOptions {
//!     mono: true,
//!     sample_rate: Some(16000),
//!     window: Window::Random { duration: 3.0, seed: 7 },
//!     ..Default::default()
//! };
//! let stft = Stft::new(StftOptions { hop_length: 160, ..StftOptions::new(512) }).unwrap();
//! let mel = MelOptions { sample_rate: 16000, n_mels: 64, f_min: 0.0, f_max: None,
//!     scale: MelScale::Htk, slaney_norm: false };
//! let bank = MelBank::new(stft.n_freqs(), &mel).unwrap();
//! let ds = list_files(&["clips/*.flac"], Some(7)).unwrap()
//!     .map("load_audio", load_audio_fn("path", "audio", opts))
//!     .map("log_mel", mel_spectrogram_fn("audio", "mel", stft, bank, Some(None)))
//!     .batch(32, true)
//!     .unwrap()
//!     .parallelize(Parallelism::Autotune, true);
//! ```

pub mod decode;
pub mod features;
pub mod ops;
pub mod resample;

pub use decode::{decode_bytes, probe_bytes, probe_file, Audio, AudioInfo};
pub use features::{
    power_to_db, MelBank, MelNorm, MelOptions, MelScale, PadMode, Stft, StftOptions,
};
pub use ops::{
    decode_audio_fn, load_audio_fn, mel_spectrogram_fn, spectrogram_fn, DecodeOptions, SampleType,
    Window, MAX_SAMPLE_RATE,
};

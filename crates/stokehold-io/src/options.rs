//! Options spelled as strings: the rule is core's [`Choice`] (`stokehold_core::choice`), which
//! io's option types (audio `SampleType`, `PadMode`, `MelScale`, `MelNorm`; image `Layout`,
//! `Interpolation`, `SampleType`) implement; re-exported here for them and their users.
//!
//! ```
//! use stokehold_io::audio::PadMode;
//! use stokehold_io::options::Choice;
//! assert_eq!(PadMode::parse("spectrogram", "constant").unwrap(), PadMode::Constant);
//! let err = PadMode::parse("spectrogram", "zeros").unwrap_err().to_string();
//! assert!(err.contains("spectrogram(pad_mode='zeros'): must be one of 'reflect', 'constant'"));
//! ```

pub use stokehold_core::choice::{quote, Choice};

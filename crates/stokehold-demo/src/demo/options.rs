//! What the demo runs: its options, each with its default.

use serde::{Deserialize, Serialize};
use stokehold_core::{Error, Result};

/// What the demo runs. Every field has a default (shown in brackets).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DemoOptions {
    /// Number of clips [400].
    pub clips: usize,
    /// Shortest clip in seconds [5].
    pub min_seconds: f64,
    /// Longest clip in seconds [180].
    pub max_seconds: f64,
    /// Samples per second [16000].
    pub sample_rate: u32,
    /// Epochs to train [5].
    pub epochs: u64,
    /// Clips per batch [32]; the last batch of an epoch may be smaller.
    pub batch_size: usize,
    /// Length of the random crop in seconds [3]; at most `min_seconds`.
    pub crop_seconds: f64,
    /// Simulated training step per batch in milliseconds [50]; 0 runs flat out.
    pub step_ms: f64,
    /// Batches prepared ahead on the prefetch thread [4].
    pub prefetch: usize,
    /// Seed of the clips, the shuffle and the crops [0].
    pub seed: u64,
    /// Show progress bars on stderr when it is a terminal [true].
    pub progress: bool,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            clips: 400,
            min_seconds: 5.0,
            max_seconds: 180.0,
            sample_rate: 16_000,
            epochs: 5,
            batch_size: 32,
            crop_seconds: 3.0,
            step_ms: 50.0,
            prefetch: 4,
            seed: 0,
            progress: true,
        }
    }
}

impl DemoOptions {
    pub(super) fn samples(&self, seconds: f64) -> u64 {
        (seconds * f64::from(self.sample_rate)).round() as u64
    }

    /// Checks the options; the error names the offending option.
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("clips", self.clips as u64),
            ("epochs", self.epochs),
            ("batch_size", self.batch_size as u64),
            ("prefetch", self.prefetch as u64),
            ("sample_rate", u64::from(self.sample_rate)),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(Error::invalid(format!("demo: {name} must be > 0")));
        }
        let finite = [
            self.min_seconds,
            self.max_seconds,
            self.crop_seconds,
            self.step_ms,
        ];
        if finite.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return Err(Error::invalid("demo: durations must be finite and >= 0"));
        }
        if self.samples(self.crop_seconds) == 0 {
            return Err(Error::invalid(
                "demo: crop_seconds must be at least one sample",
            ));
        }
        if self.min_seconds > self.max_seconds {
            return Err(Error::invalid(format!(
                "demo: min_seconds ({}) is more than max_seconds ({})",
                self.min_seconds, self.max_seconds
            )));
        }
        if self.samples(self.crop_seconds) > self.samples(self.min_seconds) {
            return Err(Error::invalid(format!(
                "demo: crop_seconds ({}) is longer than the shortest clip (min_seconds = {})",
                self.crop_seconds, self.min_seconds
            )));
        }
        Ok(())
    }
}

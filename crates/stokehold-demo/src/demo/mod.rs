//! The audio-cache demo: the motivating case of stokehold, end to end.
//!
//! It makes `clips` synthetic int16 clips of uniform random length (5-180 s at 16 kHz by default),
//! caches them ragged in memory (one contiguous arena plus row splits), and trains on them for
//! `epochs` epochs through `shuffle -> random_crop -> batch -> repeat -> prefetch` with a consumer
//! that sleeps for a simulated step. It measures what users asked about: the memory the cache
//! takes (resident set growth, against the raw samples and against a padded matrix) and the time
//! lost at each epoch boundary. [`run`] prints a table and returns the same figures as a
//! [`DemoReport`]; the CLI and the Python package both call it.
//!
//! ```no_run
//! use stokehold_demo::demo::{run, DemoOptions};
//! let opts = DemoOptions { clips: 40, epochs: 2, ..DemoOptions::default() };
//! let report = run(&opts, &mut std::io::stdout()).unwrap();
//! println!("{:?}", report.stall_median_ms);
//! ```

pub mod clips;
mod table;

use std::io::Write;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use stokehold_core::rng::key;
use stokehold_core::{Dataset, DatasetIter, Error, Example, Result};

use crate::checksum::checksum;
use crate::timing::{self, BatchTiming, Boundary};
use crate::{mem, progress};

pub use table::write_table;

/// Target: the cache's resident growth is at most this factor of the raw sample bytes...
pub const CACHE_TARGET_FACTOR: f64 = 1.05;
/// ...plus this slack, which covers allocator and thread bookkeeping that does not scale.
pub const CACHE_TARGET_SLACK: u64 = 16 << 20;
/// Target: the median epoch-boundary stall is below this many milliseconds.
pub const STALL_TARGET_MS: f64 = 1.0;

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
    fn samples(&self, seconds: f64) -> u64 {
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

/// The figures of one run, as printed in the table.
#[derive(Clone, Debug, Serialize)]
pub struct DemoReport {
    /// The options the run used.
    pub options: DemoOptions,
    /// The pipeline, as `Dataset::describe` writes it.
    pub pipeline: String,
    /// Samples over all clips.
    pub total_samples: u64,
    /// The samples' bytes (2 per int16 sample).
    pub raw_bytes: u64,
    /// The longest clip, in samples.
    pub max_clip_samples: u64,
    /// Resident set growth while building the cache (`None` without `/proc`).
    pub cache_rss_growth_bytes: Option<i64>,
    /// `cache_rss_growth_bytes / raw_bytes`.
    pub cache_ratio: Option<f64>,
    /// Seconds to generate and cache the clips.
    pub cache_build_seconds: f64,
    /// Bytes of a padded `[clips, max_len]` int16 matrix (computed, never allocated).
    pub padded_bytes: u64,
    /// `padded_bytes / raw_bytes`.
    pub padded_ratio: f64,
    /// Batches in one epoch.
    pub batches_per_epoch: usize,
    /// Wall time of each epoch in seconds (see [`timing::epoch_seconds`]).
    pub epoch_seconds: Vec<f64>,
    /// Checksum of the first batch of each epoch (equal seeds give equal sums).
    pub first_batch_checksums: Vec<u64>,
    /// Median wait for a batch that starts no epoch, in ms, the step excluded.
    pub steady_wait_ms: Option<f64>,
    /// Median arrival-to-arrival time of such batches in ms, the step included.
    pub steady_interval_ms: Option<f64>,
    /// Every epoch boundary, with its stall.
    pub boundaries: Vec<Boundary>,
    /// Median stall over the boundaries, in ms.
    pub stall_median_ms: Option<f64>,
    /// Whether the cache met `growth <= 1.05 x raw + 16 MiB` (`None` when not measured).
    pub cache_target_met: Option<bool>,
    /// Whether the median stall was below 1 ms (`None` with a single epoch or a single batch per
    /// epoch).
    pub stall_target_met: Option<bool>,
}

/// Runs the demo, writing a table of its figures to `out`, and returns them.
pub fn run(opts: &DemoOptions, out: &mut dyn Write) -> Result<DemoReport> {
    opts.validate()?;
    let (min, max) = (
        opts.samples(opts.min_seconds),
        opts.samples(opts.max_seconds),
    );
    let lengths = clips::lengths(opts.clips, min, max, opts.seed);
    let total_samples: u64 = lengths.iter().sum();
    let max_clip_samples = lengths.iter().copied().max().unwrap_or(0);

    let pb = progress::bar(Some(opts.clips as u64), "caching", opts.progress);
    let rss_before = mem::rss_bytes();
    let started = Instant::now();
    let column = clips::generate(&lengths, opts.seed, opts.sample_rate, &pb)?;
    let cache = Dataset::from_columns(Example::new().with("audio", column))?;
    let cache_build_seconds = started.elapsed().as_secs_f64();
    let rss_after = mem::rss_bytes();
    pb.finish_and_clear();

    let pipeline = cache
        .shuffle(key(opts.seed, &[0x5f]))
        .random_crop(
            "audio",
            0,
            opts.samples(opts.crop_seconds) as usize,
            key(opts.seed, &[0xc4]),
            false,
        )
        .batch(opts.batch_size, false)?
        // Repeat before prefetch: one iterator and one thread run through every epoch.
        .repeat(Some(opts.epochs))
        .prefetch(opts.prefetch)?;
    let per_epoch = opts.clips.div_ceil(opts.batch_size);
    let (timings, first_batch_checksums) = train(&pipeline, per_epoch, opts)?;

    let raw_bytes = total_samples * 2;
    let padded_bytes = opts.clips as u64 * max_clip_samples * 2;
    let growth = rss_before.zip(rss_after).map(|(b, a)| a as i64 - b as i64);
    let steady_wait_ms = timing::steady_wait_ms(&timings, per_epoch);
    // With one batch per epoch there is no steady batch to compare with, hence no stall figure.
    let boundaries = timing::boundaries(&timings, per_epoch, steady_wait_ms);
    let stalls: Vec<f64> = boundaries.iter().filter_map(|b| b.stall_ms).collect();
    let stall_median_ms = timing::median(&stalls);
    let report = DemoReport {
        pipeline: pipeline.describe(),
        total_samples,
        raw_bytes,
        max_clip_samples,
        cache_rss_growth_bytes: growth,
        cache_ratio: growth.map(|g| g as f64 / raw_bytes as f64),
        cache_build_seconds,
        padded_bytes,
        padded_ratio: padded_bytes as f64 / raw_bytes as f64,
        batches_per_epoch: per_epoch,
        epoch_seconds: timing::epoch_seconds(&timings, per_epoch),
        first_batch_checksums,
        steady_wait_ms,
        steady_interval_ms: timing::steady_interval_ms(&timings, per_epoch),
        boundaries,
        stall_median_ms,
        cache_target_met: growth.map(|g| g as f64 <= cache_target_bytes(raw_bytes)),
        stall_target_met: stall_median_ms.map(|s| s < STALL_TARGET_MS),
        options: opts.clone(),
    };
    write_table(&report, out).map_err(|e| Error::io("<demo output>", e))?;
    Ok(report)
}

/// The most resident growth the cache of `raw_bytes` of samples may take to meet its target.
pub fn cache_target_bytes(raw_bytes: u64) -> f64 {
    raw_bytes as f64 * CACHE_TARGET_FACTOR + CACHE_TARGET_SLACK as f64
}

/// Iterates every batch of every epoch like a training loop: wait for a batch, then "train" on
/// it (sleep). Returns the timings of each batch and the checksum of each epoch's first batch.
fn train(
    pipeline: &Dataset,
    per_epoch: usize,
    opts: &DemoOptions,
) -> Result<(Vec<BatchTiming>, Vec<u64>)> {
    let total = per_epoch * opts.epochs as usize;
    let step = Duration::from_secs_f64(opts.step_ms / 1e3);
    let pb = progress::bar(Some(total as u64), "training", opts.progress);
    let mut it = pipeline.iter(0)?;
    let mut timings = Vec::with_capacity(total);
    let mut sums = Vec::with_capacity(opts.epochs as usize);
    let start = Instant::now();
    loop {
        let requested = start.elapsed();
        let batch = it.next()?;
        let arrived = start.elapsed();
        let Some(batch) = batch else { break };
        if timings.len() % per_epoch == 0 {
            sums.push(checksum(&batch));
        }
        drop(batch);
        if !step.is_zero() {
            std::thread::sleep(step);
        }
        timings.push(BatchTiming {
            requested,
            arrived,
            done: start.elapsed(),
        });
        pb.inc(1);
    }
    pb.finish_and_clear();
    if timings.len() != total {
        return Err(Error::invalid(format!(
            "demo: the pipeline yielded {} batches, expected {total} ({} epochs of {per_epoch})",
            timings.len(),
            opts.epochs
        )));
    }
    Ok((timings, sums))
}

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
mod options;
mod report;
mod table;

use std::io::Write;
use std::time::{Duration, Instant};

use stokehold_core::rng::key;
use stokehold_core::{Dataset, DatasetIter, Error, Example, Result};

use crate::checksum::checksum;
use crate::timing::{self, BatchTiming};
use crate::{mem, progress};

pub use options::DemoOptions;
pub use report::{
    cache_target_bytes, DemoReport, CACHE_TARGET_FACTOR, CACHE_TARGET_SLACK, STALL_TARGET_MS,
};
pub use table::write_table;

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

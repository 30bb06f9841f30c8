//! What a demo run reports, and the targets it is judged by.

use serde::Serialize;

use super::options::DemoOptions;
use crate::timing::Boundary;

/// Target: the cache's resident growth is at most this factor of the raw sample bytes...
pub const CACHE_TARGET_FACTOR: f64 = 1.05;
/// ...plus this slack, which covers allocator and thread bookkeeping that does not scale.
pub const CACHE_TARGET_SLACK: u64 = 16 << 20;
/// Target: the median epoch-boundary stall is below this many milliseconds.
pub const STALL_TARGET_MS: f64 = 1.0;

/// The most resident growth the cache of `raw_bytes` of samples may take to meet its target.
pub fn cache_target_bytes(raw_bytes: u64) -> f64 {
    raw_bytes as f64 * CACHE_TARGET_FACTOR + CACHE_TARGET_SLACK as f64
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
    /// Wall time of each epoch in seconds (see
    /// [`timing::epoch_seconds`](crate::timing::epoch_seconds)).
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

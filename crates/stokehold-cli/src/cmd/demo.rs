//! `stokehold demo`: see [`crate::demo`].

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::demo::{self, DemoOptions};
use anyhow::Context;

/// Options of `stokehold demo` (defaults from [`DemoOptions::default`]).
#[derive(clap::Args)]
pub struct Args {
    /// Number of synthetic clips.
    #[arg(long, default_value_t = DemoOptions::default().clips)]
    clips: usize,
    /// Epochs to train.
    #[arg(long, default_value_t = DemoOptions::default().epochs)]
    epochs: u64,
    /// Clips per batch.
    #[arg(long, default_value_t = DemoOptions::default().batch_size)]
    batch_size: usize,
    /// Length of the random crop, in seconds (at most --min-seconds).
    #[arg(long, default_value_t = DemoOptions::default().crop_seconds)]
    crop_seconds: f64,
    /// Simulated training step per batch, in milliseconds (0: none).
    #[arg(long, default_value_t = DemoOptions::default().step_ms)]
    step_ms: f64,
    /// Batches prepared ahead on the prefetch thread.
    #[arg(long, default_value_t = DemoOptions::default().prefetch)]
    prefetch: usize,
    /// Seed of the clips, the shuffle and the crops.
    #[arg(long, default_value_t = DemoOptions::default().seed)]
    seed: u64,
    /// Shortest clip, in seconds.
    #[arg(long, default_value_t = DemoOptions::default().min_seconds)]
    min_seconds: f64,
    /// Longest clip, in seconds.
    #[arg(long, default_value_t = DemoOptions::default().max_seconds)]
    max_seconds: f64,
    /// Hide the progress bars (they are hidden anyway when stderr is not a terminal).
    #[arg(long)]
    no_progress: bool,
    /// Sample rate of the synthetic clips, in Hz.
    #[arg(long, default_value_t = DemoOptions::default().sample_rate)]
    sample_rate: u32,
    /// Also write the figures as JSON to PATH; with no PATH (or `-`), print them on stdout after
    /// the table.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "-")]
    json: Option<PathBuf>,
}

/// Runs the demo and prints its table on stdout.
pub fn run(args: Args) -> anyhow::Result<()> {
    let opts = DemoOptions {
        clips: args.clips,
        epochs: args.epochs,
        batch_size: args.batch_size,
        crop_seconds: args.crop_seconds,
        step_ms: args.step_ms,
        prefetch: args.prefetch,
        seed: args.seed,
        min_seconds: args.min_seconds,
        max_seconds: args.max_seconds,
        sample_rate: args.sample_rate,
        progress: !args.no_progress,
    };
    let mut stdout = std::io::stdout().lock();
    let report = demo::run(&opts, &mut stdout)?;
    stdout.flush()?;
    match &args.json {
        Some(path) if path.as_os_str() == "-" => {
            writeln!(stdout, "{}", serde_json::to_string_pretty(&report)?)?;
        }
        Some(path) => {
            let text = serde_json::to_string_pretty(&report)?;
            write_atomic(path, text.as_bytes())
                .with_context(|| format!("writing the report to {}", path.display()))?;
        }
        None => {}
    }
    Ok(())
}

/// Writes `data` to a temporary name beside `path`, then renames it into place, so a reader never
/// sees a half-written file.
fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map_or_else(|| "report".into(), |n| n.to_string_lossy());
    let tmp = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

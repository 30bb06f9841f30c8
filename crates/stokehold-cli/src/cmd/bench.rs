//! `stokehold bench PATH`: reads a shard folder or TFRecord files through a pipeline (optionally
//! shuffled, batched, on worker threads, prefetched) and prints records/s, MB/s and the
//! pipeline's per-stage stats table: how fast this machine reads this data.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use stokehold_core::exec::{executor_of, ExecOptions, Parallelism};
use stokehold_core::{Dataset, DatasetIter};
use stokehold_io::shard::ShardDataset;
use stokehold_io::tfrecord::{tfrecord_dataset, ReadOptions};
use stokehold_io::units::{bytes, count};

/// Options of `stokehold bench`.
#[derive(clap::Args)]
pub struct Args {
    /// A shard folder, or TFRecord files.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Shuffle with this seed (a global permutation over random access, else a buffer of 10000).
    #[arg(long, value_name = "SEED")]
    shuffle: Option<u64>,
    /// Records per batch (1: element by element).
    #[arg(long, default_value_t = 256)]
    batch_size: usize,
    /// Worker threads (0: AUTOTUNE).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Epochs to read.
    #[arg(long, default_value_t = 1)]
    epochs: u64,
}

fn source(paths: &[PathBuf]) -> anyhow::Result<(Dataset, &'static str)> {
    let first: &Path = &paths[0];
    if paths.len() == 1 && super::tfrecord::is_shard_folder(first) {
        let ds =
            ShardDataset::open(first).with_context(|| format!("opening {}", first.display()))?;
        return Ok((Dataset::from_map(ds), "shard folder"));
    }
    let (ds, _) =
        tfrecord_dataset(paths, ReadOptions::default()).context("opening the TFRecord files")?;
    Ok((ds, "TFRecord"))
}

/// Rows in a batch (the leading size of its first feature), 1 for an unbatched element.
fn rows(e: &stokehold_core::Example, batched: bool) -> u64 {
    if !batched {
        return 1;
    }
    e.iter()
        .next()
        .map_or(0, |(_, v)| v.rows().unwrap_or(1) as u64)
}

/// Runs the benchmark and prints its figures and the stats table.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (mut ds, kind) = source(&args.paths)?;
    if let Some(seed) = args.shuffle {
        ds = match ds.is_random_access() {
            true => ds.shuffle(seed),
            false => ds.shuffle_buffer(10_000, seed)?,
        };
    }
    let batched = args.batch_size > 1;
    if batched {
        ds = ds.batch(args.batch_size, false)?;
    }
    let par = match args.threads {
        0 => Parallelism::Autotune,
        n => Parallelism::Fixed(n),
    };
    let ds = ds
        .parallelize(par, true)
        .prefetch_autotune()
        .with_options(ExecOptions::default());
    println!("{} {kind}: {}", args.paths[0].display(), ds.describe());
    let (mut records, mut total_bytes) = (0u64, 0u64);
    let start = Instant::now();
    for epoch in 0..args.epochs {
        let mut it = ds.iter(epoch)?;
        while let Some(e) = it.next()? {
            records += rows(&e, batched);
            total_bytes += e.nbytes() as u64;
        }
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    println!(
        "read {} ({}) in {secs:.2} s: {:.0} records/s, {:.1} MB/s",
        count(records, "record"),
        bytes(total_bytes),
        records as f64 / secs,
        total_bytes as f64 / secs / 1e6
    );
    if let Some(exec) = executor_of(&ds) {
        print!("{}", exec.stats().table());
    }
    Ok(())
}

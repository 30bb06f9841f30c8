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
    /// TFRecord files: auto (from the names: .gz GZIP, .zz/.zlib ZLIB), none, gzip or zlib.
    #[arg(long, default_value = "auto", value_parser = super::tfrecord::parse_read_compression)]
    compression: String,
}

fn source(paths: &[PathBuf], compression: &str) -> anyhow::Result<(Dataset, &'static str)> {
    let first: &Path = &paths[0];
    if paths.len() == 1 && super::tfrecord::is_shard_folder(first) {
        let ds =
            ShardDataset::open(first).with_context(|| format!("opening {}", first.display()))?;
        return Ok((Dataset::from_map(ds), "shard folder"));
    }
    let opts = ReadOptions {
        compression: super::tfrecord::read_compression("bench", compression, paths)?,
        ..Default::default()
    };
    let (ds, _) = tfrecord_dataset(paths, opts).context("opening the TFRecord files")?;
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
    let (mut ds, kind) = source(&args.paths, &args.compression)?;
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
        "read {} ({}) in {secs:.2} s: {} records/s, {:.1} MB/s",
        count(records, "record"),
        bytes(total_bytes),
        indicatif::HumanCount((records as f64 / secs).round() as u64),
        total_bytes as f64 / secs / 1e6
    );
    if let Some(exec) = executor_of(&ds) {
        print!("{}", exec.stats().table());
        print!("{LEGEND}");
    }
    Ok(())
}

/// What the stats table's columns and notes mean (docs/GUIDE.md, "Stats and trace", says the
/// same for `ds.stats()`).
const LEGEND: &str = "\
columns: elems, elem/s, MB/s: what the op handed on; busy: the share of its threads' time spent
  making elements (a batch built inside parallelize counts per thread of that stage); c.wait:
  how long its consumer waited for it; in.wait: how long it waited for its input; fill: how
  full its buffer was on average, as a share of the most it may hold at that moment (a bound
  AUTOTUNE moves: over 100% when it was lowered below what the buffer already held); par: its
  worker threads (0: it runs on its consumer's thread).
autotune: \"parallelism N (max M)\": N workers now; M is the cores it may use, which AUTOTUNE
  passes (up to 4x) only while the workers are blocked on reads or wait for a core.
verdict: the op the pipeline waits on; \"its threads are busy X%\" is that op's busy column.
";

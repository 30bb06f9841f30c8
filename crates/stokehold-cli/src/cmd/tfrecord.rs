//! `stokehold inspect`, `stokehold verify` and `stokehold index`: TFRecord files (see
//! [`stokehold_io::tfrecord::inspect`] and [`stokehold_io::tfrecord::index`]). One file for the
//! three because they share the file and compression arguments.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use stokehold_io::tfrecord::index::build_index;
use stokehold_io::tfrecord::inspect::{inspect_file, verify_file};
use stokehold_io::tfrecord::{Compression, OnCorrupt, ReadOptions};

/// Compression of the files: `auto` guesses from the name (`.gz` GZIP, `.zz`/`.zlib` ZLIB).
fn compression(arg: &str, path: &Path) -> anyhow::Result<Compression> {
    Ok(match arg {
        "auto" => Compression::from_path(path),
        other => other.parse()?,
    })
}

/// Options of `stokehold inspect`.
#[derive(clap::Args)]
pub struct InspectArgs {
    /// TFRecord files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// auto, none, gzip or zlib.
    #[arg(long, default_value = "auto")]
    compression: String,
    /// Decode at most this many records per file as Examples (all are counted).
    #[arg(long, value_name = "N")]
    max_records: Option<u64>,
}

/// Prints records, sizes, features (dtypes, values per record, a suggested spec) per file.
pub fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    for f in &args.files {
        let opts = ReadOptions {
            compression: compression(&args.compression, f)?,
            ..Default::default()
        };
        let rep = inspect_file(f, opts, args.max_records)
            .with_context(|| format!("inspecting {}", f.display()))?;
        println!("{} ({:?})", f.display(), opts.compression);
        print!("{rep}");
    }
    Ok(())
}

/// Options of `stokehold verify`.
#[derive(clap::Args)]
pub struct VerifyArgs {
    /// TFRecord files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// auto, none, gzip or zlib.
    #[arg(long, default_value = "auto")]
    compression: String,
    /// Hide the progress bar (hidden anyway when stderr is not a terminal).
    #[arg(long)]
    no_progress: bool,
}

/// Checks every CRC of every file; fails (exit 1) when any record is corrupt.
pub fn verify(args: VerifyArgs) -> anyhow::Result<()> {
    // The bar counts stream bytes; for compressed files the stream is longer than the file, so
    // their bar just runs past the file's share.
    let total: u64 = args
        .files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    let pb = stokehold_cli::progress::bar(total, "verify", !args.no_progress);
    let (mut bad, mut records) = (0u64, 0u64);
    for f in &args.files {
        let base = pb.position();
        let rep = verify_file(f, compression(&args.compression, f)?, &mut |o| {
            pb.set_position(base + o)
        })
        .with_context(|| format!("verifying {}", f.display()))?;
        records += rep.records;
        if rep.corrupt == 0 {
            pb.suspend(|| println!("{}: ok, {} records", f.display(), rep.records));
        } else {
            bad += rep.corrupt;
            // suspend: print above the bar (println on a hidden bar would print nothing).
            pb.suspend(|| {
                println!(
                    "{}: {} corrupt records, {} good",
                    f.display(),
                    rep.corrupt,
                    rep.records
                );
                for c in &rep.first_corrupt {
                    println!("  offset {}: {}", c.offset, c.reason);
                }
            });
        }
    }
    pb.finish_and_clear();
    println!(
        "{} files, {records} good records, {bad} corrupt",
        args.files.len()
    );
    if bad > 0 {
        bail!("{bad} corrupt records");
    }
    Ok(())
}

/// Options of `stokehold index`.
#[derive(clap::Args)]
pub struct IndexArgs {
    /// Uncompressed TFRecord files; each gets `<file>.idx`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Leave corrupt records out of the index instead of failing.
    #[arg(long)]
    skip_corrupt: bool,
}

/// Writes the index sidecar of each file (atomically) and prints its record count.
pub fn index(args: IndexArgs) -> anyhow::Result<()> {
    let on_corrupt = if args.skip_corrupt {
        OnCorrupt::Skip
    } else {
        OnCorrupt::Raise
    };
    for f in &args.files {
        // Compression is guessed from the name only to refuse compressed files clearly.
        let opts = ReadOptions {
            on_corrupt,
            compression: Compression::from_path(f),
            ..Default::default()
        };
        let s = build_index(f, opts).with_context(|| format!("indexing {}", f.display()))?;
        let skipped = if s.skipped > 0 {
            format!(", {} corrupt left out", s.skipped)
        } else {
            String::new()
        };
        println!(
            "{}: {} records{skipped} -> {}",
            f.display(),
            s.records,
            s.path.display()
        );
    }
    Ok(())
}

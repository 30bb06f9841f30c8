//! `stokehold inspect`, `stokehold verify` and `stokehold index`: TFRecord files (see
//! [`stokehold_io::tfrecord::inspect`] and [`stokehold_io::tfrecord::index`]). One file for the
//! three because they share the file and compression arguments.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use stokehold_core::choice::Choice;
use stokehold_io::shard;
use stokehold_io::tfrecord::index::build_index_in;
use stokehold_io::tfrecord::inspect::{inspect_file_with, not_a_tfrecord, offset_of, verify_file};
use stokehold_io::tfrecord::{Compression, OnCorrupt, ReadOptions};
use stokehold_io::units::{bytes, count, count_with};

/// The `--compression` of a verb that reads TFRecord files: `auto` (from the names, as Python's
/// `TFRecordDataset` does: `.gz` GZIP, `.zz`/`.zlib` ZLIB) or a spelling Python takes too
/// (`none`, `gzip`, `zlib`, any case).
pub(crate) fn parse_read_compression(s: &str) -> Result<String, String> {
    if s == "auto" || Compression::from_name(s).is_some() {
        return Ok(s.to_string());
    }
    Err(format!("{} or 'auto'", Compression::expected()))
}

/// The compression of `files` read by `verb` ([`Compression::resolve`]).
pub(crate) fn read_compression(
    verb: &str,
    arg: &str,
    files: &[impl AsRef<Path>],
) -> anyhow::Result<Compression> {
    Ok(Compression::resolve(verb, arg, files)?)
}

/// Options of `stokehold inspect`.
#[derive(clap::Args)]
pub struct InspectArgs {
    /// TFRecord files, shard folders, JSON-lines files, WebDataset tar shards, Megatron token
    /// files (.idx / .bin), audio files (WAV, FLAC, MP3, Ogg) or images (PNG, JPEG, GIF, WebP,
    /// BMP).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// TFRecord files: auto (from the name: .gz GZIP, .zz/.zlib ZLIB), none, gzip or zlib.
    #[arg(long, default_value = "auto", value_parser = parse_read_compression)]
    compression: String,
    /// Hide the progress bar (hidden anyway when stderr is not a terminal).
    #[arg(long)]
    no_progress: bool,
    /// Decode at most this many records per file as Examples (all are counted).
    #[arg(long, value_name = "N")]
    max_records: Option<u64>,
}

/// True when `path` is a shard folder (it has a manifest).
/// A URL (`s3://bucket/ds`) is one when the manifest object exists.
pub(crate) fn is_shard_folder(path: &Path) -> bool {
    let manifest = path.join(shard::format::MANIFEST_NAME);
    if stokehold_io::storage::is_remote(path) {
        return stokehold_io::storage::head(&manifest).is_ok_and(|m| m.is_some());
    }
    path.is_dir() && manifest.exists()
}

/// Prints records, sizes, features (dtypes, values per record, a suggested spec) per file, or a
/// shard folder's manifest; fails (exit 1) when a file has corrupt records or is not a TFRecord
/// file (the same verdict as `verify`'s: [`not_a_tfrecord`]).
pub fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    let (mut corrupt, mut failed) = (0u64, 0u64);
    for f in &args.files {
        if super::image::inspect(f)? {
            continue;
        }
        if is_shard_folder(f) {
            inspect_shards(f)?;
            continue;
        }
        if super::audio::is_audio(f) {
            super::audio::inspect(f)?;
            continue;
        }
        if let Some(fmt) = super::formats::format_of(f) {
            if let Err(e) = super::formats::inspect(f, fmt) {
                failed += 1;
                println!("{}: {e:#}", f.display());
            }
            continue;
        }
        let opts = ReadOptions {
            compression: read_compression("inspect", &args.compression, &[f])?,
            ..Default::default()
        };
        // Bytes and rate of the file read: a remote file streams over the network.
        let size = stokehold_io::storage::head(f)
            .ok()
            .flatten()
            .map(|m| m.size);
        let pb = crate::progress::byte_bar(size, "inspect", !args.no_progress);
        let rep = inspect_file_with(f, opts, args.max_records, &mut |o| pb.set_position(o))
            .with_context(|| format!("inspecting {}", f.display()))?;
        pb.finish_and_clear();
        if let Some(verdict) = not_a_tfrecord(f, opts.compression, rep.records, &rep.first_corrupt)
        {
            failed += 1;
            println!("{}: {verdict}", f.display());
            continue;
        }
        println!("{} ({})", f.display(), opts.compression);
        print!("{rep}");
        corrupt += rep.corrupt;
    }
    if failed > 0 {
        bail!("{} could not be read", count(failed, "input"));
    }
    if corrupt > 0 {
        bail!("{} found", count(corrupt, "corrupt record"));
    }
    Ok(())
}

/// A shard folder's manifest: records, shards, bytes, compression and the schema.
fn inspect_shards(dir: &Path) -> anyhow::Result<()> {
    let ds =
        shard::ShardDataset::open(dir).with_context(|| format!("opening {}", dir.display()))?;
    let m = ds.manifest();
    let total: u64 = m.shards.iter().map(|s| s.bytes).sum();
    println!(
        "{} (shard folder, format version {})",
        dir.display(),
        m.version
    );
    println!(
        "  {} in {}, {}, compression {}",
        count(m.num_records, "record"),
        count(m.shards.len() as u64, "shard"),
        bytes(total),
        m.compression
    );
    for f in &m.schema {
        let shape = match &f.shape {
            None => "any rank".to_string(),
            Some(dims) => {
                let d: Vec<String> = dims
                    .iter()
                    .map(|d| d.map_or("?".into(), |v| v.to_string()))
                    .collect();
                format!("[{}]", d.join(", "))
            }
        };
        let kind = match f.kind {
            shard::format::Kind::Tensor => "dense",
            shard::format::Kind::Ragged => "ragged",
        };
        println!(
            "  {:<24} {:<10} {kind:<7} {shape}",
            f.name,
            f.dtype.to_string()
        );
    }
    Ok(())
}

/// Options of `stokehold verify`.
#[derive(clap::Args)]
pub struct VerifyArgs {
    /// TFRecord files, shard folders, JSON-lines files, WebDataset tar shards, Megatron token
    /// files (.idx / .bin), audio files (WAV, FLAC, MP3, Ogg) or images (PNG, JPEG, GIF, WebP,
    /// BMP).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// TFRecord files: auto (from the name: .gz GZIP, .zz/.zlib ZLIB), none, gzip or zlib.
    #[arg(long, default_value = "auto", value_parser = parse_read_compression)]
    compression: String,
    /// Hide the progress bar (hidden anyway when stderr is not a terminal).
    #[arg(long)]
    no_progress: bool,
}

/// Checks every CRC of every file (every byte of a shard folder); fails (exit 1) when any record
/// is corrupt or a file is not a TFRecord file.
pub fn verify(args: VerifyArgs) -> anyhow::Result<()> {
    // The bar counts stream bytes; for compressed files the stream is longer than the file, so
    // their bar just runs past the file's share.
    let total: u64 = args
        .files
        .iter()
        .filter(|f| !is_shard_folder(f))
        .filter_map(|f| stokehold_io::storage::head(f).ok().flatten())
        .map(|m| m.size)
        .sum();
    let pb = crate::progress::byte_bar(Some(total), "verify", !args.no_progress);
    let (mut bad, mut records, mut failed) = (0u64, 0u64, 0u64);
    for f in &args.files {
        if is_shard_folder(f) {
            let ds =
                shard::ShardDataset::open(f).with_context(|| format!("opening {}", f.display()))?;
            let n = ds.manifest().num_records;
            // Shard folders' bytes join the bar's total as they are opened.
            pb.inc_length(ds.manifest().shards.iter().map(|s| s.bytes).sum());
            let base = pb.position();
            match ds.verify_with(&mut |done| pb.set_position(base + done)) {
                Ok(()) => {
                    records += n;
                    pb.suspend(|| println!("{}: ok, {}", f.display(), count(n, "record")));
                }
                Err(e) => {
                    failed += 1;
                    pb.suspend(|| println!("{}: {e}", f.display()));
                }
            }
            continue;
        }
        // Images and audio: every pixel or frame decoded.
        let media = super::image::verify(f)
            .or_else(|| super::audio::is_audio(f).then(|| super::audio::verify(f)));
        if let Some(outcome) = media {
            match outcome {
                Ok(msg) => pb.suspend(|| println!("{}: {msg}", f.display())),
                Err(e) => {
                    failed += 1;
                    pb.suspend(|| println!("{}: {e:#}", f.display()));
                }
            }
            continue;
        }
        // JSON lines, WebDataset shards, token files: every line, sample or token checked.
        if let Some(fmt) = super::formats::format_of(f) {
            let (base, size) = (pb.position(), std::fs::metadata(f).map_or(0, |m| m.len()));
            let outcome = super::formats::verify(f, fmt, &mut |done, n| {
                pb.set_position(base + size * done / n.max(1))
            });
            pb.set_position(base + size);
            match outcome {
                Ok(msg) => pb.suspend(|| println!("{}: {msg}", f.display())),
                Err(e) => {
                    failed += 1;
                    pb.suspend(|| println!("{}: {e:#}", f.display()));
                }
            }
            continue;
        }
        let base = pb.position();
        let c = read_compression("verify", &args.compression, &[f])?;
        let rep = verify_file(f, c, &mut |o| pb.set_position(base + o))
            .with_context(|| format!("verifying {}", f.display()))?;
        records += rep.records;
        if rep.corrupt == 0 {
            pb.suspend(|| println!("{}: ok, {}", f.display(), count(rep.records, "record")));
        } else if let Some(verdict) = not_a_tfrecord(f, c, rep.records, &rep.first_corrupt) {
            // Nothing framed anywhere, from the first byte on: another kind of file.
            failed += 1;
            pb.suspend(|| println!("{}: {verdict}", f.display()));
        } else {
            bad += rep.corrupt;
            // suspend: print above the bar (println on a hidden bar would print nothing).
            pb.suspend(|| {
                println!(
                    "{}: {}, {} good",
                    f.display(),
                    count(rep.corrupt, "corrupt record"),
                    rep.records
                );
                for c in &rep.first_corrupt {
                    println!("  offset {}: {}", offset_of(c), c.reason());
                }
            });
        }
    }
    pb.finish_and_clear();
    println!(
        "checked {}: {}, {}",
        count(args.files.len() as u64, "input"),
        count_with(records, "good record", "good records"),
        count(bad, "corrupt record")
    );
    if failed > 0 {
        bail!("{} failed the check", count(failed, "input"));
    }
    if bad > 0 {
        bail!("{} found", count(bad, "corrupt record"));
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
    /// Write each index into `<dir>/.stokehold-idx/` instead of beside its file (readers find it
    /// there; tf.data's `list_files("train-*")` then sees data files only).
    #[arg(long)]
    side_folder: bool,
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
        let s = build_index_in(f, opts, args.side_folder)
            .with_context(|| format!("indexing {}", f.display()))?;
        let skipped = if s.skipped > 0 {
            format!(
                ", {} left out (listed in the index)",
                count(s.skipped, "corrupt record")
            )
        } else {
            String::new()
        };
        println!(
            "{}: {}{skipped} -> {}",
            f.display(),
            count(s.records, "record"),
            s.path.display()
        );
    }
    Ok(())
}

//! `stokehold write` and `stokehold convert`: shard folders (docs/FORMAT.md) from a source, and
//! TFRecord <-> shards.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context};
use stokehold_core::choice::{quote, Choice};
use stokehold_core::{map_fn, Dataset, Example, MapDataset, Tensor};
use stokehold_io::shard::{self, Compression, Progress, WriteOptions};
use stokehold_io::tfrecord;
use stokehold_io::units::{self, bytes, count, count_with};

use super::upload::UploadBar;

/// How shards are written (shared by `write` and `convert`).
#[derive(clap::Args)]
pub struct ShardArgs {
    /// Target shard size: bytes, or with a suffix (KiB, MiB, GiB, KB, MB, GB).
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    shard_size: u64,
    /// Compression of what is written: a shard folder's records none, lz4 or zstd; TFRecord
    /// files (`convert` from a shard folder) none, gzip or zlib. TFRecord inputs are read as
    /// their names say (.gz GZIP, .zz/.zlib ZLIB, else uncompressed).
    #[arg(long, default_value = "none")]
    compression: String,
    /// zstd level.
    #[arg(long, default_value_t = 3)]
    zstd_level: i32,
    /// Write the records in a seeded random order (random-access sources only).
    #[arg(long)]
    shuffle_seed: Option<u64>,
    /// Threads that read, encode and compress (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Replace a complete dataset already in the output folder.
    #[arg(long)]
    overwrite: bool,
    /// Hide the progress bar (hidden anyway when stderr is not a terminal).
    #[arg(long)]
    no_progress: bool,
}

/// Options of `stokehold write`.
#[derive(clap::Args)]
pub struct WriteArgs {
    /// Output folder.
    out: PathBuf,
    /// Source: TFRecord files of tf.train.Example (features become 1-D tensors).
    #[arg(long, num_args = 1.., conflicts_with = "synthetic")]
    tfrecord: Vec<PathBuf>,
    /// Source: N synthetic records `{"id": int64, "payload": uint8[record_bytes]}`.
    #[arg(long, value_name = "N")]
    synthetic: Option<u64>,
    /// Payload size of synthetic records.
    #[arg(long, default_value_t = 1024)]
    record_bytes: usize,
    #[command(flatten)]
    shard: ShardArgs,
}

/// Options of `stokehold convert`.
#[derive(clap::Args)]
pub struct ConvertArgs {
    /// A shard folder (converted to TFRecord files, or WebDataset shards with --to webdataset),
    /// or TFRecord files, JSON-lines files, WebDataset tar shards or Megatron token files
    /// (converted to a shard folder).
    #[arg(required = true, num_args = 1..)]
    inputs: Vec<PathBuf>,
    /// What a shard folder becomes: tfrecord, or webdataset (`<out>/shard-000000.tar`...,
    /// --shard-size bytes of members each at most).
    #[arg(long, default_value = "tfrecord", value_parser = ["tfrecord", "webdataset"])]
    to: String,
    /// Token files: windows of N + 1 tokens (one record each, feature `tokens`).
    #[arg(long, value_name = "N")]
    seq_len: Option<u64>,
    /// Output folder.
    #[arg(long, short)]
    out: PathBuf,
    /// To TFRecord: write the `.idx` indexes into `<out>/.stokehold-idx/` instead of beside the
    /// files (tf.data's `list_files("<out>/*")` then sees data files only).
    #[arg(long)]
    index_side_folder: bool,
    #[command(flatten)]
    shard: ShardArgs,
}

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("not a size: {s:?}"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        u => return Err(format!("unknown size unit {u:?} in {s:?}")),
    };
    n.checked_mul(mult)
        .filter(|v| *v > 0)
        .ok_or_else(|| format!("size {s:?} out of range"))
}

/// The synthetic source: record `i` holds its id and `bytes` bytes derived from it.
pub fn synthetic(n: u64, bytes: usize) -> Dataset {
    Dataset::range(n).map(
        "synthetic",
        map_fn(move |e, _| {
            let i = e.tensor("synthetic", "x")?.to_vec::<i64>()?[0];
            let payload: Vec<u8> = (0..bytes).map(|k| (i as usize * 31 + k) as u8).collect();
            Ok(Example::new()
                .with("id", Tensor::scalar(i))
                .with("payload", Tensor::from_vec(vec![bytes], payload)?))
        }),
    )
}

/// The Examples of TFRecord `files`, decompressed as their names say (Python's
/// `TFRecordDataset(compression="auto")`).
fn tfrecord_source(verb: &str, files: &[PathBuf]) -> anyhow::Result<Dataset> {
    let opts = tfrecord::ReadOptions {
        compression: super::tfrecord::read_compression(verb, "auto", files)?,
        ..Default::default()
    };
    let (ds, _log) = tfrecord::tfrecord_dataset(files, opts)?;
    Ok(ds.map(
        "decode_example",
        map_fn(|e, _| {
            let rec = e.tensor("decode_example", tfrecord::RECORD)?;
            tfrecord::decode_example(rec.data())
        }),
    ))
}

/// `--compression` for a shard folder: none, lz4 or zstd.
fn shard_compression(s: &str) -> anyhow::Result<Compression> {
    Compression::from_name(s).ok_or_else(|| {
        let tfrecord = tfrecord::Compression::from_name(s).is_some();
        anyhow::anyhow!(
            "--compression {}: a shard folder's records take {}{}",
            quote(s),
            Compression::expected().trim_start_matches("must be "),
            if tfrecord {
                " (gzip and zlib compress TFRecord files: `convert` a shard folder to get them)"
            } else {
                ""
            }
        )
    })
}

/// `--compression` for TFRecord files: none, gzip or zlib (any case, as Python spells them).
fn tfrecord_compression(s: &str) -> anyhow::Result<tfrecord::Compression> {
    tfrecord::Compression::from_name(s).ok_or_else(|| {
        let shard = Compression::from_name(s).is_some();
        anyhow::anyhow!(
            "--compression {}: TFRecord files take {}{}",
            quote(s),
            tfrecord::Compression::expected().trim_start_matches("must be "),
            if shard {
                " (lz4 and zstd compress a shard folder's records)"
            } else {
                ""
            }
        )
    })
}

fn write(ds: &Dataset, out: &Path, a: &ShardArgs) -> anyhow::Result<()> {
    let mut opts = WriteOptions {
        shard_bytes: a.shard_size,
        compression: shard_compression(&a.compression)?,
        zstd_level: a.zstd_level,
        shuffle_seed: a.shuffle_seed,
        overwrite: a.overwrite,
        ..WriteOptions::default()
    };
    if let Some(t) = a.threads {
        opts.threads = t.max(1);
    }
    let bar = crate::progress::bar(ds.len(), "write", !a.no_progress);
    let upload = UploadBar::install(out, !a.no_progress, Some(bar.clone()));
    let bar = Mutex::new(bar);
    let cb = |p: &Progress| {
        if let Ok(b) = bar.lock() {
            b.set_position(p.records);
            b.set_message(format!(
                "{}, {}",
                count(p.shards as u64, "shard"),
                byte_rate(p.bytes, b.elapsed())
            ));
        }
        Ok(())
    };
    let m = shard::write_shards(ds, out, opts, Some(&cb))
        .with_context(|| format!("writing shards to {}", out.display()))?;
    bar.into_inner().map(|b| b.finish_and_clear()).ok();
    drop(upload);
    let bytes: u64 = m.shards.iter().map(|s| s.bytes).sum();
    println!(
        "wrote {} in {} ({}, compression {}) to {}",
        count(m.num_records, "record"),
        count(m.shards.len() as u64, "shard"),
        units::bytes(bytes),
        m.compression,
        out.display()
    );
    Ok(())
}

/// `n` bytes and their rate over `elapsed` (`12.0 MiB at 40.1 MiB/s`): records are what the
/// bar counts, bytes what the disk and the network see.
pub(crate) fn byte_rate(n: u64, elapsed: std::time::Duration) -> String {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return bytes(n);
    }
    format!("{} at {}/s", bytes(n), bytes((n as f64 / secs) as u64))
}

/// `stokehold write`.
pub fn run_write(args: WriteArgs) -> anyhow::Result<()> {
    let ds = match (args.synthetic, args.tfrecord.is_empty()) {
        (Some(n), true) => synthetic(n, args.record_bytes),
        (None, false) => tfrecord_source("write", &args.tfrecord)?,
        _ => bail!("give one source: --synthetic N or --tfrecord FILES"),
    };
    write(&ds, &args.out, &args.shard)
}

/// `stokehold convert`.
pub fn run_convert(args: ConvertArgs) -> anyhow::Result<()> {
    let first = &args.inputs[0];
    let folder = args.inputs.len() == 1 && super::tfrecord::is_shard_folder(first);
    if folder && args.to == "webdataset" {
        return to_webdataset(first, &args);
    }
    if !folder && args.to == "webdataset" {
        bail!("--to webdataset converts a shard folder; write one first (stokehold convert ... --out DIR)");
    }
    if folder {
        let ds = shard::ShardDataset::open(first)?;
        let n = ds.len();
        let compression = tfrecord_compression(&args.shard.compression)?;
        let opts = tfrecord::ShardOptions {
            bytes_per_shard: Some(args.shard.shard_size),
            index_side_folder: args.index_side_folder,
            compression,
            // Names that say the compression, so every reader's "auto" (the name rule) finds it.
            suffix: match compression {
                tfrecord::Compression::None => ".tfrecord",
                tfrecord::Compression::Gzip => ".tfrecord.gz",
                tfrecord::Compression::Zlib => ".tfrecord.zz",
            }
            .into(),
            // An index needs random access, which compressed files do not allow.
            write_index: compression == tfrecord::Compression::None,
            ..Default::default()
        };
        let bar = crate::progress::bar(Some(n), "convert", !args.shard.no_progress);
        let upload = UploadBar::install(&args.out, !args.shard.no_progress, Some(bar.clone()));
        let paths =
            tfrecord::write_tfrecord_shards(&Dataset::from_map(ds), &args.out, &opts, &mut |p| {
                bar.set_position(p.records);
                bar.set_message(byte_rate(p.bytes, bar.elapsed()));
            })?;
        bar.finish_and_clear();
        drop(upload);
        println!(
            "wrote {} in {} to {}",
            count(n, "record"),
            count_with(paths.len() as u64, "TFRecord file", "TFRecord files"),
            args.out.display()
        );
        return Ok(());
    }
    // JSON lines, WebDataset shards, token files (the sniff rule), else TFRecord files.
    let ds = match super::formats::source(&args.inputs, args.seq_len)? {
        Some(ds) => ds,
        None => tfrecord_source("convert", &args.inputs)?,
    };
    write(&ds, &args.out, &args.shard)
}

/// `stokehold convert FOLDER --to webdataset`: the folder's records as tar shards
/// `<out>/shard-%06d.tar` (webdataset's encoders by feature name; `write_webdataset`).
fn to_webdataset(dir: &Path, args: &ConvertArgs) -> anyhow::Result<()> {
    use stokehold_io::webdataset::{write_webdataset, WriteOptions};
    let ds = shard::ShardDataset::open(dir)?;
    let n = ds.len();
    let bar = crate::progress::bar(Some(n), "convert", !args.shard.no_progress);
    let pattern = args.out.join("shard-%06d.tar");
    let opts = WriteOptions {
        maxsize: args.shard.shard_size,
        ..WriteOptions::default()
    };
    let paths = write_webdataset(
        &Dataset::from_map(ds),
        &pattern.to_string_lossy(),
        opts,
        &mut |p| {
            bar.set_position(p.samples);
            bar.set_message(byte_rate(p.bytes, bar.elapsed()));
        },
    )
    .with_context(|| format!("writing WebDataset shards to {}", args.out.display()))?;
    bar.finish_and_clear();
    println!(
        "wrote {} in {} to {}",
        count(n, "sample"),
        count_with(paths.len() as u64, "tar shard", "tar shards"),
        args.out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2 GB"), Ok(2_000_000_000));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("0").is_err());
    }
}

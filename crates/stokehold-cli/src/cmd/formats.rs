//! `stokehold inspect`, `verify` and `convert` for the formats users already have: JSON-lines
//! files, WebDataset tar shards and Megatron token files. What a file is comes from the one
//! file-kind rule ([`stokehold_io::sniff::guess`]); this module only says what each verb does
//! with each kind. (Parquet joins here when `stokehold_io::parquet` lands: one more [`Format`]
//! arm in [`format_of`], [`inspect`], [`verify`] and [`source`].)

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use stokehold_core::{Dataset, MapDataset};
use stokehold_io::jsonl::{JsonlDataset, JsonlOptions};
use stokehold_io::sniff;
use stokehold_io::tokens::{read_tokens, Order, TokenFile};
use stokehold_io::units::{bytes, count};
use stokehold_io::webdataset::{Decoders, WebDataset, WebDatasetOptions};

/// A format these verbs read besides TFRecord, shard folders, audio and images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// JSON lines (plain, `.gz`, `.zst`).
    Jsonl,
    /// A WebDataset tar shard.
    WebDataset,
    /// A Megatron indexed dataset (`.idx` or its `.bin`).
    Tokens,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Jsonl => "JSON lines",
            Format::WebDataset => "WebDataset tar shard",
            Format::Tokens => "Megatron token file",
        }
    }
}

/// The format of the local file `path` by the sniff rule (a `.bin` is a token file when the
/// `.idx` beside it is a Megatron index); `None`: none of these.
pub(crate) fn format_of(path: &Path) -> Option<Format> {
    if stokehold_io::storage::is_remote(path) || !path.is_file() {
        return None;
    }
    let kind = |p: &Path| {
        let name = p.file_name()?.to_string_lossy().into_owned();
        sniff::guess(&name, &sniff::head_of(p)).map(|g| g.what)
    };
    match kind(path).unwrap_or_default() {
        sniff::JSONL => Some(Format::Jsonl),
        sniff::TAR => Some(Format::WebDataset),
        sniff::MEGATRON => Some(Format::Tokens),
        _ if path.extension().is_some_and(|e| e == "bin")
            && kind(&path.with_extension("idx")) == Some(sniff::MEGATRON) =>
        {
            Some(Format::Tokens)
        }
        _ => None,
    }
}

/// Headers only: no index sidecar is read or written by `inspect` / `verify`.
fn open_tar(f: &Path, decode: Decoders) -> anyhow::Result<WebDataset> {
    let opts = WebDatasetOptions {
        decode,
        index: false,
    };
    WebDataset::open_with(&[f], opts).with_context(|| format!("opening {}", f.display()))
}

fn file_size(f: &Path) -> u64 {
    std::fs::metadata(f).map_or(0, |m| m.len())
}

/// Prints what `f` (of format `fmt`) holds.
pub(crate) fn inspect(f: &Path, fmt: Format) -> anyhow::Result<()> {
    println!("{} ({}, {})", f.display(), fmt.name(), bytes(file_size(f)));
    match fmt {
        Format::Jsonl => {
            let ds = JsonlDataset::open(&[f], JsonlOptions::default())
                .with_context(|| format!("opening {}", f.display()))?;
            println!("  {}", count(ds.len(), "line"));
            for field in ds.fields() {
                let rank = if field.list { "list" } else { "scalar" };
                println!(
                    "  {:<24} {:<10} {rank}",
                    field.name,
                    field.dtype.to_string()
                );
            }
        }
        Format::WebDataset => {
            let ds = open_tar(f, Decoders::default())?;
            let samples = ds.samples(0);
            let members: usize = samples.iter().map(|s| s.members.len()).sum();
            println!(
                "  {} of {}",
                count(samples.len() as u64, "sample"),
                count(members as u64, "member")
            );
            // Extensions in order of first appearance: samples holding one, and their bytes.
            let mut exts: Vec<(String, u64, u64)> = Vec::new();
            for m in samples.iter().flat_map(|s| &s.members) {
                match exts.iter_mut().find(|e| e.0 == m.ext) {
                    Some(e) => (e.1, e.2) = (e.1 + 1, e.2 + m.len),
                    None => exts.push((m.ext.clone(), 1, m.len)),
                }
            }
            for (ext, n, b) in exts {
                println!("  {ext:<24} in {:<14} {}", count(n, "sample"), bytes(b));
            }
        }
        Format::Tokens => {
            let t = TokenFile::open(f, None).with_context(|| format!("opening {}", f.display()))?;
            println!(
                "  {} ({}) in {}{}",
                count(t.num_tokens(), "token"),
                t.dtype(),
                count(t.sequence_lengths().len() as u64, "sequence"),
                t.document_indices().map_or(String::new(), |d| format!(
                    ", {}",
                    count(d.len().saturating_sub(1) as u64, "document")
                ))
            );
        }
    }
    Ok(())
}

/// Reads every line, member or token index of `f`, decoding members by extension (images,
/// audio, `.npy`, class labels); `tick(done, total)` as it goes. The verdict line, or the first
/// error.
pub(crate) fn verify(
    f: &Path,
    fmt: Format,
    tick: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<String> {
    let every = |ds: &dyn MapDataset, noun: &str, tick: &mut dyn FnMut(u64, u64)| {
        let n = ds.len();
        for i in 0..n {
            ds.get(i)?;
            tick(i + 1, n);
        }
        anyhow::Ok(format!("ok, {}", count(n, noun)))
    };
    match fmt {
        Format::Jsonl => every(
            &JsonlDataset::open(&[f], JsonlOptions::default())?,
            "line",
            tick,
        ),
        Format::WebDataset => every(&open_tar(f, Decoders::defaults())?, "sample", tick),
        Format::Tokens => {
            // Opening checks the index against the data file (sizes, pointers, dtype).
            let t = TokenFile::open(f, None)?;
            Ok(format!("ok, {}", count(t.num_tokens(), "token")))
        }
    }
}

/// The dataset `stokehold convert` writes from `inputs` when they are all of one of these
/// formats: JSONL lines with their fields, WebDataset samples with their members as bytes
/// (`__key__`, `__url__` too), token windows of `seq_len + 1` (`tokens`). `None`: not these.
pub(crate) fn source(inputs: &[PathBuf], seq_len: Option<u64>) -> anyhow::Result<Option<Dataset>> {
    let Some(fmt) = inputs.first().and_then(|f| format_of(f)) else {
        return Ok(None);
    };
    if let Some(other) = inputs.iter().find(|f| format_of(f) != Some(fmt)) {
        bail!(
            "{}: not a {} like {}: convert one kind of input at a time",
            other.display(),
            fmt.name(),
            inputs[0].display()
        );
    }
    Ok(Some(match fmt {
        Format::Jsonl => Dataset::from_map(JsonlDataset::open(inputs, JsonlOptions::default())?),
        Format::WebDataset => Dataset::from_map(WebDataset::open(inputs)?),
        Format::Tokens => {
            let Some(seq_len) = seq_len else {
                bail!("converting token files needs --seq-len N (windows of N + 1 tokens)");
            };
            let paths: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
            read_tokens(&paths, seq_len, Order::InFile, None)?
        }
    }))
}

//! The `stokehold` command.
//!
//! Each subcommand is one variant of [`Command`] plus one module file under `src/cmd/`. To add
//! one: write `src/cmd/<name>.rs` with a `clap::Args` struct `Args` (nested subcommands go inside
//! it) and `pub fn run(args: Args) -> anyhow::Result<()>`; add `pub mod <name>;` to
//! `src/cmd/mod.rs`; add the variant below with its doc comment (the help text) and its arm in
//! `Command::run`. Work that Python or benchmarks may want too belongs in a library crate
//! (`stokehold-io` for formats, `stokehold-demo` for the demo), not in `cmd/`.

mod cmd;

use std::process::ExitCode;

/// The allocator of stokehold's binaries (docs/ARCHITECTURE.md, "Memory").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

/// stokehold: a fast, memory-lean input pipeline for ML training.
#[derive(Parser)]
#[command(name = "stokehold", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Cache synthetic audio clips ragged in memory, train on them for a few epochs, and print
    /// the memory taken and the time lost at epoch boundaries.
    Demo(cmd::demo::Args),
    /// Write (`table write`) or inspect (`table info`) a memory-mapped feature table.
    Table(cmd::table::Args),
    /// TFRecord files (record count, sizes, features with dtypes and shapes seen), shard
    /// folders (manifest) or images (format, size); exit 1 on a corrupt record.
    Inspect(cmd::tfrecord::InspectArgs),
    /// Check every CRC of TFRecord files, every byte of shard folders, or decode every frame of
    /// audio files and every pixel of images (progress bar); exit 1 if any is corrupt or a file
    /// is none of these.
    Verify(cmd::tfrecord::VerifyArgs),
    /// Write the `<file>.idx` record index of TFRecord files (random access, len, shuffle).
    Index(cmd::tfrecord::IndexArgs),
    /// Write a dataset (synthetic or TFRecord) as a shard folder (docs/FORMAT.md).
    Write(cmd::shard::WriteArgs),
    /// Convert TFRecord files to a shard folder, or a shard folder to TFRecord files.
    Convert(cmd::shard::ConvertArgs),
    /// Read a shard folder or TFRecord files through a pipeline: records/s, MB/s, stats table.
    Bench(cmd::bench::Args),
}

impl Command {
    fn run(self) -> anyhow::Result<()> {
        match self {
            Command::Demo(args) => cmd::demo::run(args),
            Command::Table(args) => cmd::table::run(args),
            Command::Inspect(args) => cmd::tfrecord::inspect(args),
            Command::Verify(args) => cmd::tfrecord::verify(args),
            Command::Index(args) => cmd::tfrecord::index(args),
            Command::Write(args) => cmd::shard::run_write(args),
            Command::Convert(args) => cmd::shard::run_convert(args),
            Command::Bench(args) => cmd::bench::run(args),
        }
    }
}

fn main() -> ExitCode {
    match Cli::parse().command.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stokehold: error: {}", message(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, joined by ": ", each cause left out when the text before it already
/// says it (an I/O error names its file and OS reason, and its OS error is also its source: the
/// reason would print twice).
fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

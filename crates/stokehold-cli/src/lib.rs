//! # stokehold-cli
//!
//! The `stokehold` command as a library: [`run`] parses the arguments and runs a subcommand,
//! returning the exit code. Two front ends call it: the binary (`src/main.rs`, which adds only
//! the allocator) and the Python package's `stokehold` script and `python -m stokehold`
//! (`stokehold._native.cli_main`), so both have the same verbs, messages and exit codes. The demo
//! and the progress bars live in `stokehold-demo` (which the Python bindings share),
//! re-exported here so the subcommands keep one path to them.
//!
//! Each subcommand is one variant of `Command` plus one module file under `src/cmd/`. To add
//! one: write `src/cmd/<name>.rs` with a `clap::Args` struct `Args` (nested subcommands go inside
//! it) and `pub fn run(args: Args) -> anyhow::Result<()>`; add `pub mod <name>;` to
//! `src/cmd/mod.rs`; add the variant below with its doc comment (the help text) and its arm in
//! `Command::run`. Work that Python or benchmarks may want too belongs in a library crate
//! (`stokehold-io` for formats, `stokehold-demo` for the demo), not in `cmd/`.
//!
//! ```
//! // `stokehold --version` prints the version and exits 0; an unknown verb is a usage error (2).
//! assert_eq!(stokehold_cli::run(["stokehold", "--version"]), 0);
//! assert_eq!(stokehold_cli::run(["stokehold", "frobnicate"]), 2);
//! ```
#![deny(missing_docs)]

mod cmd;

use std::ffi::OsString;

use clap::{Parser, Subcommand};
pub use stokehold_demo::{checksum, demo, mem, progress, timing};

/// Exit code of a subcommand that failed (an error printed as `stokehold: error: ...`).
pub const EXIT_FAILURE: i32 = 1;
/// Exit code of a command line clap refused (unknown verb or flag, a bad value).
pub const EXIT_USAGE: i32 = 2;

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
    /// folders (manifest), JSON-lines files (lines, fields), WebDataset tar shards (samples,
    /// members), Megatron token files (tokens, sequences), audio files or images (format,
    /// size); exit 1 on a corrupt record or a file that is none of these.
    Inspect(cmd::tfrecord::InspectArgs),
    /// Check every CRC of TFRecord files, every byte of shard folders, every line of JSON-lines
    /// files, every member of WebDataset shards (decoded by extension), token files' indexes, or
    /// decode every frame of audio files and every pixel of images (progress bar); exit 1 if any
    /// is corrupt or a file is none of these.
    Verify(cmd::tfrecord::VerifyArgs),
    /// Write the `<file>.idx` record index of TFRecord files (random access, len, shuffle).
    Index(cmd::tfrecord::IndexArgs),
    /// Write a dataset (synthetic or TFRecord) as a shard folder (docs/FORMAT.md).
    Write(cmd::shard::WriteArgs),
    /// Convert TFRecord files, JSON-lines files, WebDataset tar shards or token files to a shard
    /// folder, or a shard folder to TFRecord files or WebDataset shards (--to webdataset).
    Convert(cmd::shard::ConvertArgs),
    /// Read a shard folder or TFRecord files through a pipeline: records/s, MB/s, stats table.
    Bench(cmd::bench::Args),
    /// Live stats of running pipelines (pids or URLs of the endpoints they serve with
    /// `stokehold.serve_stats`), refreshed: per stage, the training loop's wait, the verdict;
    /// several ranks of a job side by side.
    Top(cmd::top::Args),
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
            Command::Top(args) => cmd::top::run(args),
        }
    }
}

/// Runs the command line `argv` (`argv[0]` is the program's name) and returns its exit code:
/// 0 on success (and for `--help` / `--version`), [`EXIT_FAILURE`] when the subcommand failed
/// (its error printed on stderr), [`EXIT_USAGE`] when the arguments were refused (clap's message
/// printed on stderr).
pub fn run<I, T>(argv: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are "errors" that print on stdout and exit 0.
            let _ = e.print();
            return e.exit_code();
        }
    };
    match cli.command.run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("stokehold: error: {}", flags(&message(&e)));
            EXIT_FAILURE
        }
    }
}

/// The libraries' messages name Python's arguments (they serve the Python package first); on the
/// command line each says the flag that does the same.
const FLAGS: &[(&str, &str)] = &[("pass overwrite", "pass --overwrite")];

/// `text` with Python's argument names replaced by the CLI's flags ([`FLAGS`]).
fn flags(text: &str) -> String {
    FLAGS
        .iter()
        .fold(text.to_string(), |t, (python, cli)| t.replace(python, cli))
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

//! `stokehold table`: write and inspect memory-mapped feature tables (see `docs/TABLES.md`).

use std::path::PathBuf;

use anyhow::Context;
use stokehold_io::table::{concat_npy, table_from_shards, Table};
use stokehold_io::units::{bytes, count};

/// Options of `stokehold table`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: TableCommand,
}

#[derive(clap::Subcommand)]
enum TableCommand {
    /// Concatenate the rows of `.npy` files (one dtype and row shape) into one table, or copy a
    /// fixed-shape feature of a shard folder into one. The table is written under a temporary
    /// name and renamed into place when complete.
    Write {
        /// The table to write (`.npy`).
        #[arg(short, long, value_name = "PATH")]
        output: PathBuf,
        /// Input `.npy` files, in row order.
        #[arg(required_unless_present = "from_shards", value_name = "INPUT")]
        inputs: Vec<PathBuf>,
        /// Read the rows from this shard folder instead (one row per record, in record order).
        #[arg(
            long,
            value_name = "DIR",
            conflicts_with = "inputs",
            requires = "feature"
        )]
        from_shards: Option<PathBuf>,
        /// The fixed-shape feature of `--from-shards` that becomes the table.
        #[arg(long, value_name = "NAME")]
        feature: Option<String>,
        /// Hide the progress bar (it is hidden anyway when stderr is not a terminal).
        #[arg(long)]
        no_progress: bool,
    },
    /// Print a table's rows, row shape, dtype and size after validating it.
    Info {
        /// The table (`.npy`).
        path: PathBuf,
    },
}

/// Runs `stokehold table ...`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        TableCommand::Write {
            output,
            inputs,
            from_shards,
            feature,
            no_progress,
        } => {
            let table = match (from_shards, feature) {
                (Some(dir), Some(feature)) => {
                    let pb = crate::progress::bar(None, "table", !no_progress);
                    let t = table_from_shards(&dir, &feature, &output, |d, n| {
                        pb.set_length(n);
                        pb.set_position(d);
                        pb.set_message("records");
                    });
                    pb.finish_and_clear();
                    t
                }
                _ => {
                    let pb = crate::progress::byte_bar(None, "table", !no_progress);
                    let t = concat_npy(&inputs, &output, |done, total| {
                        pb.set_length(total);
                        pb.set_position(done);
                    });
                    pb.finish_and_clear();
                    t
                }
            }
            .with_context(|| format!("writing table {}", output.display()))?;
            println!("wrote {}", describe(&table));
        }
        TableCommand::Info { path } => println!("{}", describe(&Table::open(&path)?)),
    }
    Ok(())
}

fn describe(t: &Table) -> String {
    let shape: Vec<String> = t.row_shape().iter().map(|d| d.to_string()).collect();
    format!(
        "{}: {} of {} [{}] ({} per row, {})",
        t.path().display(),
        count(t.len(), "row"),
        t.dtype(),
        shape.join(", "),
        bytes(t.row_bytes() as u64),
        bytes(t.tensor().data().len() as u64)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use stokehold_core::{DType, Tensor};
    use stokehold_io::table::TableWriter;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Args {
        Cli::try_parse_from(std::iter::once("table").chain(argv.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn write_concatenates_inputs_and_info_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let part = |name: &str, rows: usize, base: f32| {
            let p = dir.path().join(name);
            let mut w = TableWriter::create(&p, DType::F32, &[2]).unwrap();
            let v: Vec<f32> = (0..rows * 2).map(|x| base + x as f32).collect();
            w.append(&Tensor::from_vec(vec![rows, 2], v).unwrap())
                .unwrap();
            w.finish().unwrap();
            p.to_str().unwrap().to_string()
        };
        let (a, b) = (part("a.npy", 3, 0.0), part("b.npy", 2, 100.0));
        let out = dir.path().join("t.npy");
        let o = out.to_str().unwrap();
        run(parse(&["write", "-o", o, &a, &b, "--no-progress"])).unwrap();
        let t = Table::open(&out).unwrap();
        assert_eq!(t.shape(), &[5, 2]);
        assert_eq!(
            t.take(&[2, 3]).unwrap().to_vec::<f32>().unwrap(),
            vec![4., 5., 100., 101.]
        );
        run(parse(&["info", o])).unwrap();
        let missing = dir.path().join("nope.npy");
        let e = run(parse(&["write", "-o", o, missing.to_str().unwrap()])).unwrap_err();
        assert!(format!("{e:#}").contains("nope.npy"), "{e:#}");
    }
}

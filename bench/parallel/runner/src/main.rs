//! bench/parallel runner: prints one JSON line per timed epoch for bench.py.
//!
//! ```text
//! par-bench-runner files DIR PAR EPOCHS      # list_files -> load .npy -> padded_batch(64) -> parallel -> prefetch
//! par-bench-runner cpu N PAR EPOCHS WORK     # range(N) -> CPU-bound native map (WORK sin() per element)
//! ```
//! PAR is a thread count or `auto`. Epoch 0 is a warm-up (page cache, thread start) and is not
//! printed. On stderr: AUTOTUNE's decision trace (`autotune trace: SECONDS s: NOTE` lines), then
//! the stats table of the final epoch.

use std::time::Instant;

use stokehold_core::exec::{ExecOptions, Executor};
use stokehold_core::{map_fn, BatchOptions, Dataset, DatasetIter, Example, Parallelism, Tensor};
use stokehold_io::files::{list_files, load_npy_fn};

fn par(s: &str) -> Parallelism {
    match s {
        "auto" => Parallelism::Autotune,
        n => Parallelism::Fixed(n.parse().expect("PAR is a number or auto")),
    }
}

fn files_pipeline(dir: &str, p: Parallelism) -> Dataset {
    let pattern = format!("{dir}/*.npy");
    let opts = BatchOptions {
        padding: Some(Default::default()),
        ..BatchOptions::new(64, false)
    };
    list_files(&[pattern.as_str()], Some(1))
        .unwrap()
        .map("load", load_npy_fn("path", "x"))
        .batch_with(opts)
        .unwrap()
        .parallelize(p, true)
        .prefetch(2)
        .unwrap()
}

fn cpu_pipeline(n: u64, p: Parallelism, work: usize) -> Dataset {
    let f = map_fn(move |e: Example, _| {
        let x = e.tensor("cpu", "x")?.to_vec::<i64>()?[0] as f32;
        let mut acc = 0f32;
        for k in 0..work {
            acc += (k as f32 * 1e-3 + x).sin();
        }
        Ok(Example::new().with("y", Tensor::scalar(acc)))
    });
    Dataset::range(n).map_parallel("sin", f, p, true)
}

/// The allocator of stokehold's own binaries (docs/ARCHITECTURE.md, "Memory: the allocator").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (ds, epochs, unit_per_elem): (Dataset, u64, Box<dyn Fn(&Example) -> u64>) =
        match args[1].as_str() {
            "files" => (
                files_pipeline(&args[2], par(&args[3])),
                args[4].parse().unwrap(),
                Box::new(|e: &Example| e.tensor("b", "x").unwrap().shape()[0] as u64),
            ),
            "cpu" => (
                cpu_pipeline(
                    args[2].parse().unwrap(),
                    par(&args[3]),
                    args[5].parse().unwrap(),
                ),
                args[4].parse().unwrap(),
                Box::new(|_: &Example| 1),
            ),
            other => panic!("unknown workload {other}"),
        };
    let exec = Executor::new(ExecOptions::default());
    let mut last = String::new();
    let mut trace = String::new();
    for epoch in 0..=epochs {
        let t = Instant::now();
        let mut it = exec.iter(&ds, epoch).unwrap();
        let mut n = 0u64;
        while let Some(e) = it.next().unwrap() {
            n += unit_per_elem(&e);
        }
        let secs = t.elapsed().as_secs_f64();
        let stats = it.stats();
        last = stats.table();
        // AUTOTUNE's decisions so far (the op's stats span every epoch).
        trace = stats
            .ops
            .iter()
            .flat_map(|o| &o.autotune_trace)
            .map(|d| format!("autotune trace: {:.2} s: {}\n", d.at_s, d.note))
            .collect();
        if epoch > 0 {
            println!(
                "{{\"elements\": {n}, \"seconds\": {secs}, \"per_s\": {}}}",
                n as f64 / secs
            );
        }
    }
    eprint!("{trace}");
    eprintln!("{last}");
}

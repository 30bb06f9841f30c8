//! Rows per second of `in_memory -> shuffle -> batch(256)` with and without the batch fast path,
//! and the time a shuffle's permutation takes for a value of a batch.
//! `cargo run --release -p stokehold-core --example batch_speed`
use std::time::Instant;
use stokehold_core::rng::Permutation;
use stokehold_core::{map_fn, Dataset, Example, Tensor};

/// Nanoseconds a value of `Permutation::apply_many` over an epoch of 400k in batches of 256
/// (best of 15 epochs): 400k is just past a power of four, so each value is encrypted about 2.6
/// times (cycle walking).
fn permutation_ns() -> f64 {
    let n = 400_000u64;
    let p = Permutation::new(n, stokehold_core::rng::key(3, &[0]));
    let xs: Vec<u64> = (0..n).collect();
    let mut out = Vec::with_capacity(256);
    let mut best = f64::MAX;
    for _ in 0..15 {
        let t = Instant::now();
        for c in xs.chunks(256) {
            out.clear();
            p.apply_many(c, &mut out);
            std::hint::black_box(&out);
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    best * 1e9 / n as f64
}

fn main() {
    println!(
        "{:>20}: {:.1} ns a value (n = 400k, batches of 256)",
        "permutation",
        permutation_ns()
    );
    let n = 800_000usize;
    let ids = Tensor::from_vec(vec![n], (0..n as i64).collect()).unwrap();
    let base = Dataset::from_columns(Example::new().with("image_id", ids)).unwrap();
    let fast = base.shuffle(1).batch(256, false).unwrap();
    let slow = base
        .shuffle(1)
        .map("identity", map_fn(|e, _| Ok(e)))
        .batch(256, false)
        .unwrap();
    for (name, ds) in [("fast path", &fast), ("element by element", &slow)] {
        let mut times = Vec::new();
        for epoch in 0..3 {
            let t = Instant::now();
            let mut it = ds.iter(epoch).unwrap();
            while it.next().unwrap().is_some() {}
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{name:>20}: {:.2} M rows/s (median of 3 epochs)",
            n as f64 / times[1] / 1e6
        );
    }
}

//! Rows per second of `in_memory -> shuffle -> batch(256)` with and without the batch fast path.
//! `cargo run --release -p stokehold-core --example batch_speed`
use std::time::Instant;
use stokehold_core::{map_fn, Dataset, Example, Tensor};

fn main() {
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

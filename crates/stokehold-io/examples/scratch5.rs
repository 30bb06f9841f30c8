use std::time::Instant;
use stokehold_core::Dataset;
use stokehold_io::shard::ShardDataset;
fn main() {
    let dir = std::env::args().nth(1).unwrap();
    let data = Dataset::from_map(ShardDataset::open_with(&dir, true).unwrap());
    let b = data.batch(256, false).unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let mut it = b.iter(0).unwrap();
        let mut a = 0usize;
        while let Some(e) = it.next().unwrap() {
            a += e.len();
        }
        println!(
            "seq batch epoch {:.0} ns/rec {a}",
            t.elapsed().as_secs_f64() / 1e6 * 1e9
        );
    }
}

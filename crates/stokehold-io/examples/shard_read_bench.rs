//! Read throughput of a shard folder (used by `bench/shard/bench.py`; prints JSON lines).
//!
//! `shard_read_bench quality DIR SEED WINDOW OUT_PREFIX`: writes 100 shards x 2000 records (an id
//! and 16 bytes) in index order into DIR, then writes the id order of one epoch of the global
//! shuffle and of the windowed shuffle as little-endian u64 arrays to OUT_PREFIX{global,window}.u64.
//!
//! `shard_read_bench DIR N RECORD_BYTES RUNS`: writes N records of RECORD_BYTES (uncompressed,
//! 256 MiB shards) into DIR unless DIR already holds them, reads everything once to fill the page
//! cache, then times RUNS passes of: sequential `get(i)`, random `get(i)` (uniform indices, with
//! repetition), a global-shuffle epoch and a sequential epoch through the iterator API.

use std::time::Instant;

use stokehold_core::rng::Rng;
use stokehold_core::{map_fn, Dataset, Example, MapDataset, Result, Tensor};
use stokehold_io::shard::{write_shards, ShardDataset, WriteOptions};

fn source(n: u64, bytes: usize) -> Dataset {
    Dataset::range(n).map(
        "payload",
        map_fn(move |e, _| {
            let i = e.tensor("p", "x")?.to_vec::<i64>()?[0];
            let p: Vec<u8> = (0..bytes).map(|k| (i as usize + k) as u8).collect();
            Ok(Example::new()
                .with("id", Tensor::scalar(i))
                .with("payload", Tensor::from_vec(vec![bytes], p)?))
        }),
    )
}

/// Touches the element so the read cannot be optimised away.
fn touch(e: &Example) -> u64 {
    let t = e.tensor("bench", "payload").expect("payload");
    t.data()[t.data().len() / 2] as u64
}

fn timed(label: &str, n: u64, mut f: impl FnMut() -> Result<u64>) -> Result<()> {
    let t = Instant::now();
    let sink = f()?;
    let s = t.elapsed().as_secs_f64();
    println!("{{\"case\": \"{label}\", \"records\": {n}, \"seconds\": {s}, \"sink\": {sink}}}");
    Ok(())
}

/// Writes the shuffle-quality folder and the two orders.
fn quality(args: &[String]) -> Result<()> {
    let dir = std::path::PathBuf::from(&args[2]);
    let seed: u64 = args[3].parse().expect("SEED");
    let window: u64 = args[4].parse().expect("WINDOW");
    let (shards, per) = (100u64, 2000u64);
    // Size one record, then make each shard hold exactly `per` of them.
    let probe = dir.join("probe");
    write_shards(
        &source(1, 16),
        &probe,
        WriteOptions {
            overwrite: true,
            ..Default::default()
        },
        None,
    )?;
    let rec = ShardDataset::open(&probe)?.manifest().shards[0].bytes - 32 - 24 - 32;
    std::fs::remove_dir_all(&probe).ok();
    let opts = WriteOptions {
        shard_bytes: 32 + per * rec,
        overwrite: true,
        ..Default::default()
    };
    let m = write_shards(&source(shards * per, 16), dir.join("ordered"), opts, None)?;
    assert!(
        m.shards.iter().all(|s| s.records == per),
        "shards of {per} records"
    );
    let ds = Dataset::from_map(ShardDataset::open(dir.join("ordered"))?);
    for (name, d) in [
        ("global", ds.shuffle(seed)),
        ("window", ds.window_shuffle(window, seed)?),
    ] {
        let mut it = d.iter(0)?;
        let mut out = Vec::with_capacity((shards * per * 8) as usize);
        while let Some(e) = it.next()? {
            out.extend_from_slice(&(e.tensor("q", "id")?.to_vec::<i64>()?[0] as u64).to_le_bytes());
        }
        std::fs::write(format!("{}{name}.u64", args[5]), out)
            .map_err(|e| stokehold_core::Error::io(&args[5], e))?;
    }
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args[1] == "quality" {
        return quality(&args);
    }
    let dir = std::path::PathBuf::from(&args[1]);
    let n: u64 = args[2].parse().expect("N");
    let bytes: usize = args[3].parse().expect("RECORD_BYTES");
    let runs: usize = args[4].parse().expect("RUNS");
    let ready = ShardDataset::open(&dir)
        .map(|d| d.len() == n)
        .unwrap_or(false);
    if !ready {
        let opts = WriteOptions {
            overwrite: true,
            ..WriteOptions::default()
        };
        write_shards(&source(n, bytes), &dir, opts, None)?;
    }
    let ds = ShardDataset::open(&dir)?;
    let mut warm = 0;
    for i in 0..n {
        warm += touch(&ds.get(i)?);
    }
    eprintln!("warm: {warm}");
    let mut rng = Rng::keyed(7, &[]);
    let random: Vec<u64> = (0..n).map(|_| rng.below(n)).collect();
    let data = Dataset::from_map(ShardDataset::open(&dir)?);
    let shuffled = data.shuffle(3);
    for _ in 0..runs {
        timed("sequential get", n, || {
            (0..n).try_fold(0, |a, i| Ok(a + touch(&ds.get(i)?)))
        })?;
        timed("random get", n, || {
            random
                .iter()
                .try_fold(0, |a, i| Ok(a + touch(&ds.get(*i)?)))
        })?;
        timed("sequential epoch", n, || {
            let mut it = data.iter(0)?;
            let mut a = 0;
            while let Some(e) = it.next()? {
                a += touch(&e);
            }
            Ok(a)
        })?;
        timed("global shuffle epoch", n, || {
            let mut it = shuffled.iter(0)?;
            let mut a = 0;
            while let Some(e) = it.next()? {
                a += touch(&e);
            }
            Ok(a)
        })?;
    }
    Ok(())
}

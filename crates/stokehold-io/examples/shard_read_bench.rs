//! Read throughput of a shard folder (used by `bench/shard/bench.py`; prints JSON lines).
//!
//! `shard_read_bench quality DIR SEED WINDOW[,WINDOW...] OUT_PREFIX`: writes 100 shards x 2000
//! records (an id and 16 bytes) in index order into DIR, then writes the id order of one epoch of
//! the global shuffle and of each windowed shuffle as little-endian u64 arrays to
//! OUT_PREFIX{global,window-W}.u64.
//!
//! `shard_read_bench DIR N RECORD_BYTES RUNS`: writes N records of RECORD_BYTES (uncompressed,
//! 256 MiB shards) into DIR unless DIR already holds them, reads everything once to fill the page
//! cache, then times RUNS passes of: sequential `get(i)`, random `get(i)` and random `get_batch`
//! of 256 indices (uniform indices, with repetition; one and two threads, and two threads handing
//! their batches to the main thread through a channel; the same on one and two threads over the
//! records of a sequential and of a global-shuffle epoch, in its order, also with each thread
//! holding its last [`HELD`] batches), and a sequential and a global-shuffle epoch through the iterator API:
//! element by element, in batches of 256 (also after an identity `map`, which takes the reader's
//! batch path and cuts it into rows), and in batches of 256 made by two workers and by one. Each timed
//! epoch is its pipeline's second (the first, untimed, starts its workers). An optional fifth
//! argument runs only the cases whose label contains it, or with a leading `=` the one it names
//! (for a profiler).

use std::time::Instant;

use stokehold_core::rng::Rng;
use stokehold_core::{map_fn, Dataset, Example, MapDataset, Parallelism, Result, Tensor};
use stokehold_io::shard::{write_shards, ShardDataset, WriteOptions};

/// The allocator stokehold's own binaries use (docs/ARCHITECTURE.md, "Memory"), so that a batch
/// freed on the consumer's thread does not cost the worker that made it fresh pages.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Batches a reference thread keeps alive before dropping the oldest: about what a two-worker
/// pipeline holds per worker here (two runs of about 24 batches of 256 KiB, 1 ms each, see
/// `exec/parallel/`), so that its buffers leave the core's cache as the pipeline's do.
const HELD: usize = 48;

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

/// `read` over each half of `indices` on its own thread, both at once; the sum of the results.
fn on_two_threads(indices: &[u64], read: impl Fn(&[u64]) -> Result<u64> + Sync) -> Result<u64> {
    std::thread::scope(|s| {
        let read = &read;
        let parts: Vec<_> = indices
            .chunks(indices.len().div_ceil(2))
            .map(|part| s.spawn(move || read(part)))
            .collect();
        parts
            .into_iter()
            .map(|h| h.join().expect("reader thread"))
            .sum()
    })
}

/// Batches of 256 of each half of `indices`, made on two threads and handed to this thread
/// through a bounded channel, which touches and drops them: the floor of any pipeline that hands
/// batches from two workers to a consumer.
fn handed_over(
    indices: &[u64],
    batch: &(impl Fn(&[u64]) -> Result<Example> + Sync),
) -> Result<u64> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Example>>(8);
    std::thread::scope(|s| {
        for part in indices.chunks(indices.len().div_ceil(2)) {
            let tx = tx.clone();
            s.spawn(move || {
                for c in part.chunks(256) {
                    if tx.send(batch(c)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        rx.iter().try_fold(0, |a, b| Ok(a + touch(&b?)))
    })
}

/// Batches of 256 made by `n` workers of a parallel map (each worker reads whole batches).
fn workers(d: &Dataset, n: usize) -> Result<Dataset> {
    let batches = d.batch(256, false)?;
    Ok(batches.map_parallel("batches", map_fn(|e, _| Ok(e)), Parallelism::Fixed(n), true))
}

/// Touches the element so the read cannot be optimised away.
fn touch(e: &Example) -> u64 {
    let t = e.tensor("bench", "payload").expect("payload");
    t.data()[t.data().len() / 2] as u64
}

/// CPU seconds (user + system) this process has used, from /proc (10 ms resolution): on a
/// shared, oversubscribed machine, records per CPU-second says what a dedicated core would do.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let f: Vec<f64> = after
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // Fields after the command: state(skipped, not a number), ppid, ... utime is field 14 of
    // the whole line, i.e. index 10 among the numeric fields after the state.
    f.get(10)
        .zip(f.get(11))
        .map_or(f64::NAN, |(u, s)| (u + s) / 100.0)
}

/// Whether case `label` runs: all, those whose label contains the fifth argument, or with a
/// leading `=`, the one whose label it is (`=sequential get` alone, for a profiler).
fn selected(label: &str) -> bool {
    std::env::args()
        .nth(5)
        .is_none_or(|only| match only.strip_prefix('=') {
            Some(exact) => label == exact,
            None => label.contains(&only),
        })
}

fn timed(label: &str, n: u64, mut f: impl FnMut() -> Result<u64>) -> Result<()> {
    if !selected(label) {
        return Ok(());
    }
    let (t, c) = (Instant::now(), cpu_seconds());
    let sink = f()?;
    let (s, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
    println!(
        "{{\"case\": \"{label}\", \"records\": {n}, \"seconds\": {s}, \"cpu_seconds\": {cpu}, \"sink\": {sink}}}"
    );
    Ok(())
}

/// Writes the shuffle-quality folder and the orders.
fn quality(args: &[String]) -> Result<()> {
    let dir = std::path::PathBuf::from(&args[2]);
    let seed: u64 = args[3].parse().expect("SEED");
    let windows: Vec<u64> = args[4]
        .split(',')
        .map(|w| w.parse().expect("WINDOW"))
        .collect();
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
    let mut cases = vec![("global".to_string(), ds.shuffle(seed))];
    for w in windows {
        cases.push((format!("window-{w}"), ds.window_shuffle(w, seed)?));
    }
    for (name, d) in cases {
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
    let mut warm = 0;
    let probe = ShardDataset::open(&dir)?;
    for i in 0..n {
        warm += touch(&probe.get(i)?);
    }
    eprintln!("warm: {warm}");
    let mut rng = Rng::keyed(7, &[]);
    let random: Vec<u64> = (0..n).map(|_| rng.below(n)).collect();
    // The records of one global-shuffle epoch (seed 3, as `shuffled` below) in its order: the
    // baseline an epoch is held to reads exactly its records. Uniform indices repeat (about 37 %
    // of them: 1/e of the records are never drawn), and a repeat is often still in cache.
    let permuted = Dataset::from_map(ShardDataset::open(&dir)?).shuffle(3);
    let epoch_order: Vec<u64> = (0..n)
        .map(|i| Ok(permuted.get(i)?.tensor("bench", "id")?.to_vec::<i64>()?[0] as u64))
        .collect::<Result<_>>()?;
    let sequential: Vec<u64> = (0..n).collect();
    for _ in 0..runs {
        // With and without the per-record CRC32C check (on by default).
        for (verify, tag) in [(true, ""), (false, ", no CRC")] {
            let ds = ShardDataset::open_with(&dir, verify)?;
            let data = Dataset::from_map(ShardDataset::open_with(&dir, verify)?);
            let shuffled = data.shuffle(3);
            timed(&format!("sequential get{tag}"), n, || {
                (0..n).try_fold(0, |a, i| Ok(a + touch(&ds.get(i)?)))
            })?;
            let gets = |idx: &[u64]| idx.iter().try_fold(0, |a, i| Ok(a + touch(&ds.get(*i)?)));
            let batches_of = |part: &[u64]| -> Result<Example> {
                Ok(ds.get_batch(part)?.expect("dense records batch"))
            };
            // Batches of 256 of `idx`, each touched, the last `keep` of them kept alive.
            let batches_keeping = |idx: &[u64], keep: usize| {
                let mut held = std::collections::VecDeque::with_capacity(keep + 1);
                idx.chunks(256).try_fold(0, |a, part| {
                    let b = batches_of(part)?;
                    let t = touch(&b);
                    held.push_back(b);
                    if held.len() > keep {
                        held.pop_front();
                    }
                    Ok(a + t)
                })
            };
            let batches = |idx: &[u64]| batches_keeping(idx, 0);
            let batches_held = |idx: &[u64]| batches_keeping(idx, HELD);
            timed(&format!("random get{tag}"), n, || gets(&random))?;
            timed(&format!("random get, 2 threads{tag}"), n, || {
                on_two_threads(&random, gets)
            })?;
            timed(&format!("random get_batch(256){tag}"), n, || {
                batches(&random)
            })?;
            timed(
                &format!("random get_batch(256), 2 threads, handed over{tag}"),
                n,
                || handed_over(&random, &batches_of),
            )?;
            timed(&format!("random get_batch(256), 2 threads{tag}"), n, || {
                on_two_threads(&random, batches)
            })?;
            for (order, what) in [(&sequential, "sequential"), (&epoch_order, "shuffled")] {
                timed(&format!("{what} get_batch(256), 1 thread{tag}"), n, || {
                    batches(order)
                })?;
                timed(
                    &format!("{what} get_batch(256), 1 thread, holding {HELD}{tag}"),
                    n,
                    || batches_held(order),
                )?;
                timed(&format!("{what} get_batch(256), 2 threads{tag}"), n, || {
                    on_two_threads(order, batches)
                })?;
                timed(
                    &format!("{what} get_batch(256), 2 threads, each holding {HELD}{tag}"),
                    n,
                    || on_two_threads(order, batches_held),
                )?;
                timed(
                    &format!("{what} get_batch(256), 2 threads, handed over{tag}"),
                    n,
                    || handed_over(order, &batches_of),
                )?;
            }
            for (label, d) in [
                ("sequential epoch", data.clone()),
                ("global shuffle epoch", shuffled.clone()),
                ("sequential epoch, batch 256", data.batch(256, false)?),
                (
                    "sequential epoch, map, batch 256",
                    data.map("identity", map_fn(|e, _| Ok(e)))
                        .batch(256, false)?,
                ),
                (
                    "global shuffle epoch, map, batch 256",
                    shuffled
                        .map("identity", map_fn(|e, _| Ok(e)))
                        .batch(256, false)?,
                ),
                (
                    "global shuffle epoch, batch 256",
                    shuffled.batch(256, false)?,
                ),
                ("sequential epoch, batch 256, 2 threads", workers(&data, 2)?),
                (
                    "global shuffle epoch, batch 256, 2 threads",
                    workers(&shuffled, 2)?,
                ),
                // One worker and the consumer: on two cores each has one, as two workers and
                // their consumer would on three.
                ("sequential epoch, batch 256, 1 worker", workers(&data, 1)?),
                (
                    "global shuffle epoch, batch 256, 1 worker",
                    workers(&shuffled, 1)?,
                ),
            ] {
                let epoch = || {
                    let mut it = d.iter(0)?;
                    let mut a = 0;
                    while let Some(e) = it.next()? {
                        a += touch(&e);
                    }
                    Ok(a)
                };
                // The timed epoch is the pipeline's second, as every epoch of training but the
                // first: the first starts the workers, which live across epochs, and their
                // allocator arenas (a new pipeline each pass had two-worker epochs 5-10 % slower).
                let label = format!("{label}{tag}");
                if selected(&label) {
                    epoch()?;
                }
                timed(&label, n, epoch)?;
            }
        }
    }
    Ok(())
}

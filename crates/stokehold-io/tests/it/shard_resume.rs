//! Checkpoints over shard folders: for every op this work adds (the shard reader, global and
//! windowed shuffle over it, shard / worker_split / slice with each policy, elastic_shard, the
//! in-memory and on-disk caches), save at k -> restore into a fresh iterator -> continue equals
//! the uninterrupted run, for 200 random cut points over 3 epochs, with a chained second resume.
//! Then the partition over ranks x workers and elastic resume across world sizes.

use std::collections::BTreeSet;

use serde_json::Value as Json;
use stokehold_core::rng::Rng;
use stokehold_core::{filter_fn, Dataset, DatasetIter, Example, PipelineIter, ShardPolicy};
use stokehold_io::shard::{open_shards, write_shards, CacheExt, Compression};

use super::shard_format::{id, opts, sample};

const EPOCHS: u64 = 3;
const CUTS: usize = 200;

fn folder(n: u64, c: Compression) -> (tempfile::TempDir, Dataset) {
    let dir = tempfile::tempdir().unwrap();
    write_shards(&sample(n), dir.path(), opts(1024, c), None).unwrap();
    let ds = open_shards(dir.path()).unwrap();
    (dir, ds)
}

fn drain(it: &mut PipelineIter, limit: usize) -> Vec<Example> {
    let mut out = Vec::new();
    while out.len() < limit {
        match it.next().unwrap() {
            Some(e) => out.push(e),
            None => break,
        }
    }
    out
}

/// A state through JSON text and back, as a checkpoint file would carry it.
fn round_trip(state: Json) -> Json {
    serde_json::from_str(&serde_json::to_string(&state).unwrap()).unwrap()
}

fn check_resume(name: &str, ds: &Dataset, seed: u64) {
    let epochs: Vec<Vec<Example>> = (0..EPOCHS)
        .map(|e| drain(&mut PipelineIter::new(ds.clone(), e).unwrap(), usize::MAX))
        .collect();
    let flat: Vec<&Example> = epochs.iter().flatten().collect();
    assert!(!flat.is_empty(), "{name}: empty");
    let mut rng = Rng::keyed(seed, &[]);
    for _ in 0..CUTS {
        let k = rng.below(flat.len() as u64 + 1) as usize;
        // (epoch, offset) of the cut; a cut at an epoch's end is taken inside that epoch.
        let (mut e, mut j) = (0usize, k);
        while e + 1 < epochs.len() && j > epochs[e].len() {
            j -= epochs[e].len();
            e += 1;
        }
        let mut it = PipelineIter::new(ds.clone(), e as u64).unwrap();
        assert_eq!(drain(&mut it, j).len(), j, "{name}");
        let mut got: Vec<Example> = Vec::new();
        let mut resumed = PipelineIter::new(ds.clone(), 0).unwrap();
        resumed.set_state(&round_trip(it.state())).unwrap();
        // Chained: run a little, save again, resume again.
        let m = rng.below(4) as usize;
        got.extend(drain(&mut resumed, m));
        let mut again = PipelineIter::new(ds.clone(), 0).unwrap();
        again.set_state(&round_trip(resumed.state())).unwrap();
        got.extend(drain(&mut again, usize::MAX));
        for later in e + 1..epochs.len() {
            got.extend(drain(
                &mut PipelineIter::new(ds.clone(), later as u64).unwrap(),
                usize::MAX,
            ));
        }
        let want: Vec<Example> = flat[k..].iter().map(|x| (*x).clone()).collect();
        assert!(
            got == want,
            "{name}: resume at {k} (epoch {e}, offset {j}, then +{m}) differs"
        );
    }
}

#[test]
fn reader_shuffles_and_splits_resume_exactly() {
    let (_d, ds) = folder(61, Compression::None);
    let odd = filter_fn(|e, _| Ok(id(e) % 2 == 1));
    let cases: Vec<(&str, Dataset)> = vec![
        ("reader", ds.clone()),
        ("global_shuffle", ds.shuffle(7)),
        ("window_shuffle", ds.window_shuffle(9, 7).unwrap()),
        (
            "shard_even",
            ds.shuffle(1).shard(4, 3, ShardPolicy::Even).unwrap(),
        ),
        ("shard_drop", ds.shard(4, 1, ShardPolicy::Drop).unwrap()),
        (
            "shard_pad",
            ds.shuffle(2).shard(4, 2, ShardPolicy::Pad).unwrap(),
        ),
        (
            "worker_split",
            ds.shuffle(3)
                .shard(2, 1, ShardPolicy::Even)
                .unwrap()
                .worker_split(3, 2)
                .unwrap(),
        ),
        ("slice", ds.slice(5, 50)),
        (
            "elastic_batch",
            ds.shuffle(4)
                .elastic_shard(3, 1, ShardPolicy::Even)
                .unwrap()
                .batch(4, false)
                .unwrap(),
        ),
        (
            "window_batch_prefetch",
            ds.window_shuffle(16, 2)
                .unwrap()
                .batch(5, false)
                .unwrap()
                .prefetch(2)
                .unwrap(),
        ),
        ("mem_cache_map", ds.shuffle(5).cache().unwrap()),
        ("mem_cache_stream", ds.filter("odd", odd).cache().unwrap()),
    ];
    for (i, (name, d)) in cases.iter().enumerate() {
        check_resume(name, d, i as u64);
    }
}

#[test]
fn compressed_reader_and_disk_cache_resume_exactly() {
    let (_d, ds) = folder(40, Compression::Zstd);
    check_resume("zstd_shuffle", &ds.shuffle(9), 100);
    let cdir = tempfile::tempdir().unwrap();
    let cached = ds
        .window_shuffle(8, 1)
        .unwrap()
        .cache_to(cdir.path().join("c"))
        .unwrap();
    check_resume("disk_cache", &cached, 101);
    assert!(cdir.path().join("c/manifest.json").exists());
}

/// Ids yielded by (rank, worker) of `world x workers`, batched.
fn split_ids(
    ds: &Dataset,
    world: u64,
    workers: u64,
    batch: usize,
    p: ShardPolicy,
) -> Vec<Vec<i64>> {
    let mut parts = Vec::new();
    for r in 0..world {
        for w in 0..workers {
            let d = ds
                .shard(world, r, p)
                .unwrap()
                .worker_split(workers, w)
                .unwrap();
            let batches = d
                .batch(batch, false)
                .unwrap()
                .iter(0)
                .unwrap()
                .collect_all()
                .unwrap();
            let ids = batches
                .iter()
                .flat_map(|b| b.tensor("t", "id").unwrap().to_vec::<i64>().unwrap())
                .collect();
            parts.push(ids);
        }
    }
    parts
}

#[test]
fn ranks_times_workers_partition_the_epoch() {
    let (_d, ds) = folder(103, Compression::Lz4); // 103 = prime: no world x batch divides it
    let ds = ds.shuffle(11);
    for (world, workers, batch) in [(4, 3, 8), (3, 2, 5), (5, 1, 7), (1, 4, 6)] {
        let parts = split_ids(&ds, world, workers, batch, ShardPolicy::Even);
        let all: Vec<i64> = parts.iter().flatten().copied().collect();
        let set: BTreeSet<i64> = all.iter().copied().collect();
        assert_eq!(
            all.len(),
            103,
            "no duplicates: world {world} x workers {workers}"
        );
        assert_eq!(set, (0..103).collect(), "union is the epoch");
        // Drop: equal shares, no duplicates, the remainder skipped.
        let drop = split_ids(&ds, world, 1, batch, ShardPolicy::Drop);
        assert!(drop.iter().all(|p| p.len() as u64 == 103 / world));
        let drop_set: BTreeSet<i64> = drop.iter().flatten().copied().collect();
        assert_eq!(drop_set.len() as u64, 103 / world * world);
        // Pad: equal shares covering the epoch.
        let pad = split_ids(&ds, world, 1, batch, ShardPolicy::Pad);
        assert!(pad.iter().all(|p| p.len() as u64 == 103u64.div_ceil(world)));
        assert_eq!(
            pad.iter().flatten().copied().collect::<BTreeSet<i64>>(),
            (0..103).collect()
        );
    }
}

/// Runs `steps` batches of `batch` on every rank of `world` from `states` (or the epoch start);
/// returns the ids seen and each rank's state after.
fn run_world(
    ds: &Dataset,
    world: u64,
    states: Option<&Json>,
    steps: usize,
    batch: usize,
) -> (Vec<i64>, Vec<Json>) {
    let (mut seen, mut out) = (Vec::new(), Vec::new());
    for r in 0..world {
        let d = ds.elastic_shard(world, r, ShardPolicy::Even).unwrap();
        let mut it = PipelineIter::new(d, 0).unwrap();
        if let Some(s) = states {
            it.set_state(s).unwrap();
        }
        for e in drain(&mut it, steps * batch) {
            seen.push(id(&e));
        }
        out.push(round_trip(it.state()));
    }
    (seen, out)
}

#[test]
fn elastic_resume_on_other_world_sizes_loses_and_repeats_nothing() {
    let (_d, ds) = folder(97, Compression::None);
    let ds = ds.shuffle(5);
    let mut rng = Rng::keyed(77, &[]);
    for trial in 0..40 {
        let batch = 1 + rng.below(6) as usize;
        let worlds: Vec<u64> = (0..3).map(|_| 1 + rng.below(6)).collect();
        let mut seen = Vec::new();
        let mut state: Option<Json> = None;
        for (leg, &w) in worlds.iter().enumerate() {
            // Every leg but the last stops after a random number of synchronous steps.
            let steps = if leg + 1 == worlds.len() {
                usize::MAX / 8
            } else {
                rng.below(8) as usize
            };
            let (ids, states) = run_world(&ds, w, state.as_ref(), steps, batch);
            seen.extend(ids);
            // All ranks saved at the same step: any rank's state carries the global position.
            state = Some(states[rng.below(w) as usize].clone());
        }
        seen.sort();
        assert_eq!(
            seen,
            (0..97).collect::<Vec<_>>(),
            "trial {trial}: worlds {worlds:?}, batch {batch}"
        );
    }
}

//! Shard folders: write -> read round trips (every dtype, strings, ragged, every compression,
//! any thread count), zero-copy reads, atomic restarts and the in-memory / on-disk caches.

use std::path::Path;

use proptest::prelude::*;
use stokehold_core::{map_fn, DType, Dataset, DatasetIter, Example, MapDataset, Tensor};
use stokehold_io::shard::{
    open_shards, write_shards, CacheExt, Compression, Kind, ShardDataset, WriteOptions,
};

/// Elements with a scalar id, a variable-length f32 vector, a string and a fixed u8 image.
pub fn sample(n: u64) -> Dataset {
    Dataset::range(n).map(
        "sample",
        map_fn(|e, _| {
            let x = e.tensor("t", "x")?.to_vec::<i64>()?[0];
            let v: Vec<f32> = (0..(x % 7) as usize)
                .map(|k| x as f32 + k as f32 / 8.0)
                .collect();
            Ok(Example::new()
                .with("id", Tensor::scalar(x))
                .with("v", Tensor::from_vec(vec![v.len()], v)?)
                .with(
                    "s",
                    Tensor::strings(&[format!("rec-{x}"), "z".repeat((x % 3) as usize)]),
                )
                .with("img", Tensor::from_vec(vec![2, 3], vec![x as u8; 6])?))
        }),
    )
}

/// The id feature of an element.
pub fn id(e: &Example) -> i64 {
    e.tensor("t", "id")
        .or_else(|_| e.tensor("t", "x"))
        .unwrap()
        .to_vec::<i64>()
        .unwrap()[0]
}

pub fn opts(shard_bytes: u64, compression: Compression) -> WriteOptions {
    WriteOptions {
        shard_bytes,
        compression,
        threads: 2,
        ..WriteOptions::default()
    }
}

fn all(ds: &ShardDataset) -> Vec<Example> {
    (0..ds.len()).map(|i| ds.get(i).unwrap()).collect()
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn round_trip_every_compression_and_many_shards() {
    let src = sample(300);
    let want: Vec<Example> = src.iter(0).unwrap().collect_all().unwrap();
    for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let m = write_shards(&src, dir.path(), opts(4096, c), None).unwrap();
        assert!(m.shards.len() > 3, "{c:?}: {} shards", m.shards.len());
        let ds = ShardDataset::open(dir.path()).unwrap();
        assert_eq!(ds.len(), 300);
        assert_eq!(all(&ds), want, "{c:?}");
        ds.verify().unwrap();
        let v = m.schema.iter().find(|f| f.name == "v").unwrap();
        assert_eq!(
            (v.dtype, v.kind, v.shape.clone()),
            (DType::F32, Kind::Tensor, Some(vec![None]))
        );
        let img = m.schema.iter().find(|f| f.name == "img").unwrap();
        assert_eq!(img.shape, Some(vec![Some(2), Some(3)]));
    }
}

#[test]
fn records_straddling_the_writers_2_mib_chunks_round_trip() {
    // Odd-sized records of ~300 KB in 5 MiB shards: every shard spans several of the writer's
    // aligned 2 MiB writes, with records and the index crossing chunk boundaries.
    let src = Dataset::range(40).map(
        "big",
        map_fn(|e, _| {
            let x = e.tensor("t", "x")?.to_vec::<i64>()?[0];
            let n = 300_001 + x as usize * 37;
            let p: Vec<u8> = (0..n).map(|k| (k as i64 * 31 + x) as u8).collect();
            Ok(Example::new()
                .with("id", Tensor::scalar(x))
                .with("p", Tensor::from_vec(vec![n], p)?))
        }),
    );
    let want: Vec<Example> = src.iter(0).unwrap().collect_all().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let m = write_shards(&src, dir.path(), opts(5 << 20, Compression::None), None).unwrap();
    assert!(
        m.shards.len() >= 2 && m.shards[0].bytes > 4 << 20,
        "{:?}",
        m.shards
    );
    let ds = ShardDataset::open(dir.path()).unwrap();
    ds.verify().unwrap();
    assert_eq!(all(&ds), want);
}

#[test]
fn reader_batches_equal_stacked_elements_for_every_kind_of_feature() {
    // Dense features only (copied straight into the batch) and the sample's strings and
    // variable lengths (stacked from decoded examples); every compression; in order and
    // shuffled; a last, short batch.
    let dense = Dataset::range(90).map(
        "dense",
        map_fn(|e, _| {
            let x = e.tensor("t", "x")?.to_vec::<i64>()?[0];
            Ok(Example::new()
                .with("id", Tensor::scalar(x))
                .with("img", Tensor::from_vec(vec![2, 3], vec![x as u8; 6])?)
                .with("f", Tensor::from_vec(vec![4], vec![x as f32 / 3.0; 4])?))
        }),
    );
    for src in [dense, sample(90)] {
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let dir = tempfile::tempdir().unwrap();
            write_shards(&src, dir.path(), opts(2048, c), None).unwrap();
            let ds = Dataset::from_map(ShardDataset::open(dir.path()).unwrap());
            for d in [ds.clone(), ds.shuffle(5)] {
                let mut it = d.batch(16, false).unwrap().iter(0).unwrap();
                let fast = it.collect_all().unwrap();
                let elements = d.iter(0).unwrap().collect_all().unwrap();
                let slow: Vec<Example> = elements
                    .chunks(16)
                    .map(|c| stokehold_core::stack_examples("batch", c).unwrap())
                    .collect();
                assert_eq!(fast, slow, "{c:?}");
                // Any indices, repeats included, through Dataset::get_batch.
                let picked = [7u64, 0, 7, 89, 3];
                let want: Vec<Example> = picked.iter().map(|&i| d.get(i).unwrap()).collect();
                assert_eq!(
                    d.get_batch(&picked).unwrap(),
                    stokehold_core::stack_examples("batch", &want).unwrap()
                );
                assert!(matches!(
                    d.get_batch(&[1, 90]),
                    Err(stokehold_core::Error::OutOfRange { index: 90, .. })
                ));
            }
        }
    }
}

#[test]
fn ragged_batches_and_empty_dataset_round_trip() {
    let batches = sample(50).batch(4, false).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let m = write_shards(&batches, dir.path(), opts(1 << 20, Compression::Lz4), None).unwrap();
    assert_eq!(
        m.schema.iter().find(|f| f.name == "v").unwrap().kind,
        Kind::Ragged
    );
    let back = open_shards(dir.path())
        .unwrap()
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap();
    assert_eq!(back, batches.iter(0).unwrap().collect_all().unwrap());

    let empty = tempfile::tempdir().unwrap();
    write_shards(
        &Dataset::range(0),
        empty.path(),
        opts(1 << 20, Compression::None),
        None,
    )
    .unwrap();
    assert_eq!(ShardDataset::open(empty.path()).unwrap().len(), 0);
}

#[test]
fn output_is_identical_for_any_thread_count_and_pre_shuffle_is_a_permutation() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let shuffled = |threads| WriteOptions {
        threads,
        shuffle_seed: Some(4),
        ..opts(2048, Compression::Zstd)
    };
    write_shards(&sample(200), a.path(), shuffled(1), None).unwrap();
    write_shards(&sample(200), b.path(), shuffled(3), None).unwrap();
    assert_eq!(files(a.path()), files(b.path()));
    let ds = ShardDataset::open(a.path()).unwrap();
    let ids: Vec<i64> = all(&ds).iter().map(id).collect();
    assert_ne!(ids, (0..200).collect::<Vec<_>>());
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, (0..200).collect::<Vec<_>>());
}

#[test]
fn uncompressed_reads_are_zero_copy_views_of_the_map() {
    let dir = tempfile::tempdir().unwrap();
    write_shards(
        &sample(20),
        dir.path(),
        opts(1 << 20, Compression::None),
        None,
    )
    .unwrap();
    let ds = ShardDataset::open(dir.path()).unwrap();
    let (a, b) = (ds.get(3).unwrap(), ds.get(4).unwrap());
    let pa = a.tensor("t", "img").unwrap().data().as_ptr() as usize;
    let pb = b.tensor("t", "img").unwrap().data().as_ptr() as usize;
    // Both views point into one mapping, a record apart, and are 8-aligned.
    assert!(pb > pa && pb - pa < 512, "{pa:x} {pb:x}");
    assert_eq!(pa % 8, 0);
    assert_eq!(ds.raw_record(3).unwrap().as_ptr() as usize % 8, 0);
}

#[test]
fn progress_reports_reach_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    let cb = |p: &stokehold_io::shard::Progress| {
        seen.lock().unwrap().push((p.records, p.total));
        Ok(())
    };
    write_shards(
        &sample(500),
        dir.path(),
        opts(8192, Compression::None),
        Some(&cb),
    )
    .unwrap();
    let seen = seen.into_inner().unwrap();
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(seen.last(), Some(&(500, Some(500))));
}

#[test]
fn complete_folder_is_refused_without_overwrite_and_restart_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    write_shards(
        &sample(100),
        dir.path(),
        opts(2048, Compression::None),
        None,
    )
    .unwrap();
    let e = write_shards(&sample(10), dir.path(), opts(2048, Compression::None), None).unwrap_err();
    assert!(e.to_string().contains("overwrite"), "{e}");
    // Leftovers of an interrupted write: a stale shard and a temp file.
    std::fs::remove_file(dir.path().join("manifest.json")).unwrap();
    std::fs::write(dir.path().join("shard-00099.stk.tmp"), b"half").unwrap();
    std::fs::write(dir.path().join(".shard-00003.stk.tmp-999999-0"), b"half").unwrap();
    std::fs::write(dir.path().join("keep-me.txt"), b"user file").unwrap();
    write_shards(
        &sample(10),
        dir.path(),
        opts(1 << 20, Compression::None),
        None,
    )
    .unwrap();
    let names: Vec<String> = files(dir.path()).into_iter().map(|f| f.0).collect();
    assert_eq!(names, ["keep-me.txt", "manifest.json", "shard-00000.stk"]);
    assert_eq!(ShardDataset::open(dir.path()).unwrap().len(), 10);
}

#[test]
fn disk_cache_writes_on_the_first_full_pass_and_reads_after() {
    let dir = tempfile::tempdir().unwrap();
    let cdir = dir.path().join("cache");
    let src = sample(40).shuffle(2);
    let ds = src.cache_to(&cdir).unwrap();
    let mut it = ds.iter(0).unwrap();
    it.next().unwrap();
    drop(it); // abandoned pass: nothing left behind
    assert!(!cdir.join("manifest.json").exists());
    assert_eq!(std::fs::read_dir(&cdir).map(|d| d.count()).unwrap_or(0), 0);
    let first = ds.iter(0).unwrap().collect_all().unwrap();
    assert!(cdir.join("manifest.json").exists());
    assert_eq!(ds.iter(1).unwrap().collect_all().unwrap(), first);
    // A new pipeline object with the same description finds the complete cache; another
    // pipeline is refused rather than served the wrong data.
    let poisoned = src.map(
        "boom",
        map_fn(|_, _| Err(stokehold_core::Error::invalid("read"))),
    );
    let again = src.cache_to(&cdir).unwrap();
    assert_eq!(again.iter(5).unwrap().collect_all().unwrap(), first);
    let e = poisoned.cache_to(&cdir).err().expect("refused").to_string();
    assert!(e.contains("not a cache of this"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn any_records_round_trip(lens in prop::collection::vec(0usize..40, 1..30), c in 0u8..3) {
        let data: Vec<Example> = lens
            .iter()
            .enumerate()
            .map(|(i, n)| {
                Example::new()
                    .with("a", Tensor::from_vec(vec![*n], (0..*n as i32).map(|k| k * i as i32).collect()).unwrap())
                    .with("b", Tensor::strings(&["x".repeat(*n)]))
            })
            .collect();
        let rows = data.clone();
        let ds = Dataset::range(data.len() as u64).map(
            "rows",
            map_fn(move |e, _| Ok(rows[e.tensor("t", "x")?.to_vec::<i64>()?[0] as usize].clone())),
        );
        let dir = tempfile::tempdir().unwrap();
        let comp = Compression::from_code(c).unwrap();
        write_shards(&ds, dir.path(), opts(64, comp), None).unwrap();
        let back = ShardDataset::open(dir.path()).unwrap();
        prop_assert_eq!(all(&back), data);
    }
}

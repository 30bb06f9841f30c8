//! The conformance suite (`stokehold_core::testing::check`: len vs iteration, get vs iteration,
//! the batch path vs the element path, hints on and off, prefetch depths and thread counts,
//! resume at random cut points over three epochs) on io's datasets, alone and under the ops
//! users put on them: shard folders (plain and zstd), indexed TFRecord files, the disk cache, a
//! memory-mapped table through gather, `.npy` files listed and loaded lazily, and JSONL files.

use std::path::Path;
use std::sync::Arc;

use stokehold_core::{map_fn, testing, Dataset, Example, Ragged, ShardPolicy, Tensor, Value};
use stokehold_io::files::{list_files, load_npy_fn};
use stokehold_io::shard::{CacheExt, Compression, ShardDataset, WriteOptions};
use stokehold_io::table::{Table, TableWriter};
use stokehold_io::tfrecord::{tfrecord_dataset, ReadOptions, ShardOptions};

const CUTS: usize = 40;

/// 30 records: an int64 id, a ragged float32 clip of 0..5 values, a bytes label.
fn source() -> Dataset {
    clips(30, 5)
}

/// `n` records: an int64 id, a ragged float32 clip of `i % max_len` values, a bytes label (the
/// shape of data every io test writes and reads back).
pub(crate) fn clips(n: usize, max_len: usize) -> Dataset {
    let mut splits = vec![0u64];
    let mut values = Vec::new();
    for i in 0..n {
        for k in 0..i % max_len {
            values.push((i * 10 + k) as f32);
        }
        splits.push(values.len() as u64);
    }
    let mut e = Example::new();
    e.insert(
        "id",
        Value::Tensor(Tensor::from_vec(vec![n], (0..n as i64).collect()).unwrap()),
    );
    let values = Tensor::from_vec(vec![values.len()], values).unwrap();
    e.insert(
        "clip",
        Value::Ragged(Ragged::new(values, splits.into()).unwrap()),
    );
    let labels: Vec<String> = (0..n).map(|i| format!("label-{i}")).collect();
    e.insert("label", Value::Tensor(Tensor::strings(&labels)));
    Dataset::from_columns(e).unwrap()
}

/// The dataset alone and under the ops users chain on it.
fn check_under_ops(name: &str, ds: &Dataset) {
    testing::check(name, ds, CUTS);
    testing::check(&format!("{name}.shuffle"), &ds.shuffle(5), CUTS);
    testing::check(
        &format!("{name}.shard"),
        &ds.shard(3, 1, ShardPolicy::Even).unwrap(),
        CUTS,
    );
    testing::check(
        &format!("{name}.window_shuffle"),
        &ds.window_shuffle(7, 2).unwrap(),
        CUTS,
    );
    let batched = ds.shuffle(9).batch(4, false).unwrap();
    testing::check(&format!("{name}.shuffle.batch"), &batched, CUTS);
}

fn shard_folder(dir: &Path, compression: Compression) -> Dataset {
    let opts = WriteOptions {
        compression,
        shard_bytes: 256,
        threads: 1,
        ..WriteOptions::default()
    };
    stokehold_io::shard::write_shards(&source(), dir, opts, None).unwrap();
    Dataset::from_map(ShardDataset::open(dir).unwrap())
}

#[test]
fn shard_folders_conform() {
    for compression in [Compression::None, Compression::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let ds = shard_folder(dir.path(), compression);
        assert!(ds.is_random_access());
        check_under_ops(&format!("shards({compression:?})"), &ds);
    }
}

#[test]
fn indexed_tfrecords_conform() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ShardOptions {
        num_shards: Some(3),
        ..Default::default()
    };
    let files =
        stokehold_io::tfrecord::write_tfrecord_shards(&source(), dir.path(), &opts, &mut |_| {})
            .unwrap();
    let (ds, _) = tfrecord_dataset(&files, ReadOptions::default()).unwrap();
    assert!(ds.is_random_access(), "every file has its .idx");
    check_under_ops("tfrecord(indexed)", &ds);
}

#[test]
fn the_disk_cache_conforms_empty_and_full() {
    let dir = tempfile::tempdir().unwrap();
    let cached = source()
        .map("double", map_fn(|e, _| Ok(e)))
        .cache_to(dir.path().join("cache"))
        .unwrap();
    // First while empty (the pass that fills it), then full.
    testing::check("cache_to(empty)", &cached, CUTS);
    testing::check("cache_to(full)", &cached, CUTS);
    // The disk cache is a stream: a buffer shuffle, not the global permutation.
    testing::check(
        "cache_to.shuffle_buffer",
        &cached.shuffle_buffer(8, 3).unwrap(),
        CUTS,
    );
}

#[test]
fn table_gather_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.npy");
    let mut w = TableWriter::create(&path, stokehold_core::DType::F32, &[3]).unwrap();
    w.append(&Tensor::from_vec(vec![10, 3], (0..30).map(|v| v as f32).collect()).unwrap())
        .unwrap();
    let table: Arc<Table> = Arc::new(w.finish().unwrap());
    let rows = source().map(
        "row",
        map_fn(|mut e, _| {
            let id = e.tensor("t", "id")?.to_vec::<i64>()?[0];
            e.insert("row", Tensor::scalar(id % 10));
            Ok(e)
        }),
    );
    let ds = rows.gather(table.clone(), "row", "features");
    check_under_ops("gather(table)", &ds);
    // Batched indices: one gather per batch.
    let batched = rows
        .shuffle(4)
        .batch(5, false)
        .unwrap()
        .gather(table, "row", "features");
    testing::check("batch.gather(table)", &batched, CUTS);
}

#[test]
fn listed_npy_files_conform() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..12usize {
        let mut w = TableWriter::create(
            dir.path().join(format!("a-{i:02}.npy")),
            stokehold_core::DType::I64,
            &[],
        )
        .unwrap();
        w.append(&Tensor::from_vec(vec![i % 4 + 1], vec![i as i64; i % 4 + 1]).unwrap())
            .unwrap();
        w.finish().unwrap();
    }
    let pattern = dir.path().join("a-*.npy").to_string_lossy().into_owned();
    let files = list_files(&[pattern], Some(3)).unwrap();
    let ds = files.map("load_npy:array", load_npy_fn("path", "array"));
    assert!(ds.is_random_access());
    testing::check("list_files.load_npy", &ds, CUTS);
    testing::check(
        "list_files.load_npy.padded",
        &ds.batch(5, false).unwrap(),
        CUTS,
    );
}

#[test]
fn jsonl_files_conform_plain_and_zstd() {
    use stokehold_io::jsonl::{JsonlDataset, JsonlOptions};
    let dir = tempfile::tempdir().unwrap();
    let line = |i: usize| {
        let clip: Vec<String> = (0..i % 5).map(|k| format!("{}.5", i * 10 + k)).collect();
        format!(
            "{{\"id\": {i}, \"clip\": [{}], \"m\": {{\"label\": \"label-{i}\"}}}}\n",
            clip.join(",")
        )
    };
    let mut files = Vec::new();
    for (k, range) in [0..12usize, 12..13, 13..30].into_iter().enumerate() {
        let text: String = range.map(line).collect();
        let path = dir.path().join(format!("part-{k}.jsonl"));
        std::fs::write(&path, &text).unwrap();
        files.push(path);
    }
    let zst = dir.path().join("part-3.jsonl.zst");
    let text: String = (30..37).map(line).collect();
    std::fs::write(&zst, zstd::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
    files.push(zst);
    let opts = JsonlOptions {
        fields: Some(vec![
            stokehold_io::jsonl::FieldRequest {
                name: "clip".into(),
                kind: Some("float64[]".into()),
                default: None,
            },
            stokehold_io::jsonl::FieldRequest {
                name: "id".into(),
                ..Default::default()
            },
            stokehold_io::jsonl::FieldRequest {
                name: "m.label".into(),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    let ds = Dataset::from_map(JsonlDataset::open(&files, opts).unwrap());
    assert!(ds.is_random_access());
    check_under_ops("read_jsonl", &ds);
}

/// Token files (issue 46): windows of a Megatron `.bin`/`.idx` in file order under the usual
/// ops, and in megatron-core's order (several epochs, a separately shuffled last one) and a blend.
#[test]
fn token_files_conform_in_file_and_megatron_order() {
    use stokehold_io::tokens::{read_tokens, Order};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/tokens");
    let (a, b) = (dir.join("corpus_a"), dir.join("corpus_b"));
    let ds = read_tokens(&[a.as_path(), b.as_path()], 24, Order::InFile, None).unwrap();
    check_under_ops("read_tokens", &ds);
    let megatron = |blend: Option<(Vec<f64>, u64)>| Order::Megatron {
        seed: 99,
        num_samples: vec![Some(150), Some(40)],
        documents: vec![None, None],
        blend,
    };
    let one = read_tokens(&[a.as_path()], 8, megatron(None), None).unwrap();
    testing::check("read_tokens(megatron)", &one, CUTS);
    let two = [a.as_path(), b.as_path()];
    let blend = read_tokens(&two, 8, megatron(Some((vec![3.0, 1.0], 120))), None).unwrap();
    testing::check("read_tokens(megatron blend)", &blend, CUTS);
}

/// Parquet files (with and without a page index: page and row-group blocks, through a cache
/// that holds only a few blocks) and Arrow IPC files (file and stream), projected to a scalar,
/// a variable list (ragged when batched) and a struct's string child.
#[cfg(feature = "parquet")]
#[test]
fn parquet_and_arrow_files_conform() {
    use stokehold_io::parquet::{open_arrow, open_parquet, ColumnarOptions};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/parquet");
    let opts = ColumnarOptions {
        columns: Some(vec!["id".into(), "tokens".into(), "meta.tag".into()]),
        cache_bytes: Some(8_000),
        ..Default::default()
    };
    let pq = open_parquet(
        &[dir.join("paged.parquet"), dir.join("nopage.parquet")],
        &opts,
    )
    .unwrap();
    let pq = Dataset::from_map(pq).skip(940).take(120);
    check_under_ops("read_parquet", &pq);
    let ipc = open_arrow(&[dir.join("data.arrow"), dir.join("data.arrows")], &opts).unwrap();
    check_under_ops("read_arrow", &Dataset::from_map(ipc).skip(60).take(80));
}

//! TFRecord datasets: resume from state, random access with indexes, writing shards.

use std::path::{Path, PathBuf};

use stokehold_core::{Dataset, DatasetIter, Example, PipelineIter, Tensor};
use stokehold_io::tfrecord::*;

fn payload(e: &Example) -> Vec<u8> {
    e.tensor("t", RECORD).unwrap().string(0).unwrap().to_vec()
}

/// `files` files of `per` records each; record j of file f is `"f{f}-r{j}"` repeated j times.
fn make_files(
    dir: &Path,
    files: usize,
    per: usize,
    comp: Compression,
) -> (Vec<PathBuf>, Vec<Vec<u8>>) {
    let mut paths = Vec::new();
    let mut all = Vec::new();
    for f in 0..files {
        let p = dir.join(format!("f{f}.tfrecord"));
        let mut w = RecordWriter::create(&p, comp).unwrap();
        for j in 0..per {
            let rec = format!("f{f}-r{j}").repeat(j + 1).into_bytes();
            w.write(&rec).unwrap();
            all.push(rec);
        }
        w.finish().unwrap();
        paths.push(p);
    }
    (paths, all)
}

#[test]
fn stream_resumes_from_every_position() {
    for comp in [Compression::None, Compression::Gzip, Compression::Zlib] {
        let dir = tempfile::tempdir().unwrap();
        let (paths, all) = make_files(dir.path(), 3, 4, comp);
        let opts = ReadOptions {
            compression: comp,
            ..Default::default()
        };
        let ds = TFRecordDataset::new(&paths, opts).into_dataset();
        for stop in 0..=all.len() {
            let mut it = PipelineIter::new(ds.clone(), 0).unwrap();
            for _ in 0..stop {
                it.next().unwrap().unwrap();
            }
            let state = it.state();
            let mut resumed = PipelineIter::new(ds.clone(), 0).unwrap();
            resumed.set_state(&state).unwrap();
            let mut rest = Vec::new();
            while let Some(e) = resumed.next().unwrap() {
                rest.push(payload(&e));
            }
            assert_eq!(rest, all[stop..].to_vec(), "{comp:?} stop {stop}");
        }
    }
}

#[test]
fn missing_file_is_named() {
    let ds =
        TFRecordDataset::new(["/nonexistent/x.tfrecord"], ReadOptions::default()).into_dataset();
    let e = ds.iter(0).unwrap().next().unwrap_err().to_string();
    assert!(e.contains("/nonexistent/x.tfrecord"), "{e}");
}

#[test]
fn indexes_make_random_access_and_global_shuffle() {
    let dir = tempfile::tempdir().unwrap();
    let (paths, all) = make_files(dir.path(), 4, 5, Compression::None);
    for p in &paths {
        build_index(p, ReadOptions::default()).unwrap();
    }
    let (ds, _) = tfrecord_dataset(&paths, ReadOptions::default()).unwrap();
    assert!(ds.is_random_access());
    assert_eq!(ds.len(), Some(all.len() as u64));
    assert_eq!(payload(&ds.get(13).unwrap()), all[13]);
    assert!(ds.get(all.len() as u64).is_err());
    let shuffled = ds.shuffle(5);
    let order: Vec<Vec<u8>> = shuffled
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap()
        .iter()
        .map(payload)
        .collect();
    assert_ne!(order, all);
    let mut sorted = order.clone();
    sorted.sort();
    let mut want = all.clone();
    want.sort();
    assert_eq!(sorted, want);
    let again: Vec<Vec<u8>> = ds
        .shuffle(5)
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap()
        .iter()
        .map(payload)
        .collect();
    assert_eq!(again, order);
}

#[test]
fn missing_index_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let (paths, _) = make_files(dir.path(), 1, 2, Compression::None);
    let e = IndexedTFRecord::open(&paths, true)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("stokehold index") && e.contains("f0.tfrecord"),
        "{e}"
    );
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn write_shards_by_count_with_indexes_and_progress() {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::range(103);
    let opts = ShardOptions {
        prefix: "train".into(),
        num_shards: Some(4),
        ..Default::default()
    };
    let mut calls = 0;
    let mut last = WriteProgress::default();
    let out = write_tfrecord_shards(&ds, dir.path(), &opts, &mut |p| {
        calls += 1;
        last = *p;
    })
    .unwrap();
    assert_eq!(calls, 104);
    assert_eq!((last.records, last.shards, last.total), (103, 4, Some(103)));
    let names: Vec<String> = (0..4)
        .map(|i| format!("train-{i:05}-of-00004.tfrecord"))
        .collect();
    let mut want: Vec<String> = names
        .iter()
        .flat_map(|n| [n.clone(), format!("{n}.idx")])
        .collect();
    want.sort();
    assert_eq!(listing(dir.path()), want, "no temporary files left");
    assert_eq!(
        out,
        names.iter().map(|n| dir.path().join(n)).collect::<Vec<_>>()
    );
    let (back, _) = tfrecord_dataset(&out, ReadOptions::default()).unwrap();
    assert!(back.is_random_access());
    let spec = ParseSpec::new()
        .with("x", ParseFeature::fixed(vec![], stokehold_core::DType::I64))
        .unwrap();
    let xs: Vec<i64> = back
        .map("parse", Parser::new(spec).element_fn(RECORD))
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap()
        .iter()
        .map(|e| e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0])
        .collect();
    assert_eq!(xs, (0..103).collect::<Vec<_>>());
    assert_eq!(back.get(26).unwrap(), back.get(26).unwrap());
    assert_eq!(read_index(&out[0]).unwrap().len(), 26);
    assert_eq!(read_index(&out[3]).unwrap().len(), 103 - 78);
}

#[test]
fn write_shards_by_bytes_shuffled_and_gzip() {
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<Example> = (0..50)
        .map(|i| {
            Example::new().with(
                RECORD,
                Tensor::strings(&[vec![i as u8; 100]])
                    .reshape(vec![])
                    .unwrap(),
            )
        })
        .collect();
    let ds = Dataset::from_map(stokehold_core::ops::source::from_examples(&recs).unwrap());
    let opts = ShardOptions {
        bytes_per_shard: Some(1000),
        shuffle_seed: Some(3),
        compression: Compression::Gzip,
        write_index: false,
        suffix: ".tfrecord.gz".into(),
        ..Default::default()
    };
    let out = write_tfrecord_shards(&ds, dir.path(), &opts, &mut |_| {}).unwrap();
    // 116 framed bytes per record: 8 records fit under 1000 bytes.
    assert_eq!(out.len(), 7);
    assert!(out[0].ends_with("data-00000-of-00007.tfrecord.gz"));
    let read = ReadOptions {
        compression: Compression::Gzip,
        ..Default::default()
    };
    let got: Vec<u8> = TFRecordDataset::new(&out, read)
        .into_dataset()
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap()
        .iter()
        .map(|e| payload(e)[0])
        .collect();
    assert_ne!(got, (0..50).collect::<Vec<u8>>(), "shuffled order");
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        (0..50).collect::<Vec<u8>>(),
        "raw records passed through unchanged"
    );
}

#[test]
fn failed_write_leaves_no_final_files() {
    let dir = tempfile::tempdir().unwrap();
    let bad = Dataset::range(10).map(
        "fail",
        stokehold_core::map_fn(|e, ctx| {
            if ctx.index == 7 {
                Err(stokehold_core::Error::invalid("boom"))
            } else {
                Ok(e)
            }
        }),
    );
    let opts = ShardOptions {
        records_per_shard: Some(3),
        ..Default::default()
    };
    assert!(write_tfrecord_shards(&bad, dir.path(), &opts, &mut |_| {}).is_err());
    assert_eq!(listing(dir.path()), Vec::<String>::new());
}

#[test]
fn batch_iterator_state_round_trip_over_parse() {
    let dir = tempfile::tempdir().unwrap();
    let (paths, _) = make_files(dir.path(), 2, 7, Compression::None);
    let ds = TFRecordDataset::new(&paths, ReadOptions::default())
        .into_dataset()
        .batch(3, false)
        .unwrap();
    let full = ds.iter(0).unwrap().collect_all().unwrap();
    let mut it = ds.iter(0).unwrap();
    it.next().unwrap();
    it.next().unwrap();
    let s = it.state();
    let mut it2 = ds.iter(0).unwrap();
    it2.set_state(&s).unwrap();
    assert_eq!(it2.collect_all().unwrap(), full[2..].to_vec());
}

#[test]
fn parse_batches_equals_batch_then_parse_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for f in 0..3 {
        let p = dir.path().join(format!("e{f}.tfrecord"));
        let mut w = RecordWriter::create(&p, Compression::None).unwrap();
        for i in 0..(5 + f as i64 * 3) {
            let ids: Vec<i64> = (0..i % 4).map(|k| k * 10 + f as i64).collect();
            let e = Example::new()
                .with(
                    "x",
                    Tensor::from_vec(vec![1], vec![i + 100 * f as i64]).unwrap(),
                )
                .with("ids", Tensor::from_vec(vec![ids.len()], ids).unwrap());
            w.write(&encode_example(&e).unwrap()).unwrap();
        }
        w.finish().unwrap();
        paths.push(p);
    }
    let spec = ParseSpec::new()
        .with("x", ParseFeature::fixed(vec![], stokehold_core::DType::I64))
        .unwrap()
        .with("ids", ParseFeature::var(stokehold_core::DType::I64))
        .unwrap();
    let src = TFRecordDataset::new(&paths, ReadOptions::default());
    let parser = Parser::new(spec);
    let slow = src
        .clone()
        .into_dataset()
        .batch(4, false)
        .unwrap()
        .map("parse", parser.batch_fn(RECORD));
    let want = slow.iter(0).unwrap().collect_all().unwrap();
    let fast = src.parse_batches(parser.clone(), 4, false).unwrap();
    assert_eq!(fast.iter(0).unwrap().collect_all().unwrap(), want);
    for stop in 0..=want.len() {
        let mut it = PipelineIter::new(fast.clone(), 0).unwrap();
        for _ in 0..stop {
            it.next().unwrap();
        }
        let mut resumed = PipelineIter::new(fast.clone(), 0).unwrap();
        resumed.set_state(&it.state()).unwrap();
        let mut rest = Vec::new();
        while let Some(b) = resumed.next().unwrap() {
            rest.push(b);
        }
        assert_eq!(rest, want[stop..].to_vec(), "stop {stop}");
    }
    let dropped = src.parse_batches(parser, 4, true).unwrap();
    assert_eq!(
        dropped.iter(0).unwrap().collect_all().unwrap().len(),
        24 / 4
    );
}

/// The seed's pipeline: `list_files` + `interleave(TFRecordDataset)` in tf.data's order, the same
/// with parallel reads, and skipped records logged.
#[test]
fn list_files_interleave_tfrecord() {
    use stokehold_core::Parallelism;
    use stokehold_io::files::list_files;
    let dir = tempfile::tempdir().unwrap();
    let (paths, _) = make_files(dir.path(), 3, 5, Compression::None);
    // Damage record 2 of file 1: skip mode drops it and logs it.
    let mut bytes = std::fs::read(&paths[1]).unwrap();
    let off = read_all_offsets(&paths[1])[2];
    bytes[off as usize + 13] ^= 1;
    std::fs::write(&paths[1], &bytes).unwrap();
    let pattern = dir.path().join("f*.tfrecord").display().to_string();
    let skip = ReadOptions {
        on_corrupt: OnCorrupt::Skip,
        ..Default::default()
    };
    // tf.data's order for cycle_length 2, block_length 2 over files f0, f1, f2 (5, 4, 5 records).
    let rec = |f: usize, j: usize| format!("f{f}-r{j}").repeat(j + 1).into_bytes();
    let mut want = Vec::new();
    for (f, js) in [(0, [0, 1]), (1, [0, 1]), (0, [2, 3]), (1, [3, 4])] {
        want.extend(js.iter().map(|&j| rec(f, j)));
    }
    want.extend([
        rec(0, 4),
        rec(2, 0),
        rec(2, 1),
        rec(2, 2),
        rec(2, 3),
        rec(2, 4),
    ]);
    for par in [None, Some(Parallelism::Fixed(2))] {
        let log = std::sync::Arc::new(stokehold_core::skip::ErrorLog::default());
        let ds = list_files(&[&pattern], None)
            .unwrap()
            .interleave(
                "tfrecord",
                tfrecord_fn("path", skip, log.clone()),
                2,
                2,
                par,
                true,
            )
            .unwrap();
        let got: Vec<Vec<u8>> = ds
            .iter(0)
            .unwrap()
            .collect_all()
            .unwrap()
            .iter()
            .map(payload)
            .collect();
        assert_eq!(got, want, "parallelism {par:?}");
        assert_eq!(log.count(), 1);
        assert_eq!(log.first()[0].at.as_ref().unwrap().0, paths[1]);
    }
}

fn read_all_offsets(path: &Path) -> Vec<u64> {
    let mut r = RecordReader::open(path, ReadOptions::default()).unwrap();
    let mut v = Vec::new();
    while let Some((o, _)) = r.next_ref().unwrap() {
        v.push(o);
    }
    v
}

//! Corrupt inputs: each kind of damage, in raise mode (the error names file and offset) and in
//! skip mode (every good record comes back and the count is right).

use std::io::Write;
use std::path::{Path, PathBuf};

use stokehold_core::Error;
use stokehold_io::tfrecord::writer::frame_into;
use stokehold_io::tfrecord::*;

/// Ten records of different lengths and contents, and the offset of each in the framed file.
fn records() -> (Vec<Vec<u8>>, Vec<usize>, Vec<u8>) {
    let recs: Vec<Vec<u8>> = (0..10u8)
        .map(|i| (0..(i as usize * 37 + 3)).map(|j| i ^ (j as u8)).collect())
        .collect();
    let mut file = Vec::new();
    let mut offsets = Vec::new();
    for r in &recs {
        offsets.push(file.len());
        frame_into(&mut file, r);
    }
    (recs, offsets, file)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn read_all(path: &Path, opts: ReadOptions) -> stokehold_core::Result<(Vec<Vec<u8>>, u64)> {
    let mut r = RecordReader::open(path, opts)?;
    let mut out = Vec::new();
    while let Some((_, d)) = r.next_record()? {
        out.push(d.to_vec());
    }
    Ok((out, r.skipped()))
}

const SKIP: ReadOptions = ReadOptions {
    compression: Compression::None,
    verify: true,
    on_corrupt: OnCorrupt::Skip,
};

fn expect_corrupt(e: Error, path: &Path, offset: usize) {
    match &e {
        Error::Corrupt {
            path: p, offset: o, ..
        } => {
            assert_eq!((p.as_path(), *o), (path, offset as u64), "{e}");
        }
        other => panic!("expected a corrupt-data error, got {other}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains(&offset.to_string()),
        "{msg}"
    );
}

/// Damages record `k` with `damage`, then checks raise and skip modes.
fn check_damage(name: &str, k: usize, damage: impl Fn(&mut Vec<u8>, usize)) {
    let dir = tempfile::tempdir().unwrap();
    let (recs, offs, mut file) = records();
    damage(&mut file, offs[k]);
    let path = write(dir.path(), name, &file);
    let err = read_all(&path, ReadOptions::default()).unwrap_err();
    expect_corrupt(err, &path, offs[k]);
    let (got, skipped) = read_all(&path, SKIP).unwrap();
    let mut want = recs.clone();
    want.remove(k);
    assert_eq!((got, skipped), (want, 1), "{name}");
}

#[test]
fn flipped_data_byte() {
    for k in [0, 4, 9] {
        check_damage("data.tfrecord", k, |f, o| f[o + 12 + 1] ^= 0x20);
    }
}

#[test]
fn flipped_length_byte() {
    for (k, byte) in [(0, 0), (3, 2), (9, 7)] {
        check_damage("len.tfrecord", k, |f, o| f[o + byte] ^= 0x01);
    }
}

#[test]
fn flipped_length_crc_byte() {
    check_damage("lencrc.tfrecord", 5, |f, o| f[o + 9] ^= 0x80);
}

#[test]
fn flipped_data_crc_byte() {
    let (recs, ..) = records();
    let len = recs[6].len();
    check_damage("datacrc.tfrecord", 6, move |f, o| {
        f[o + 12 + len + 2] ^= 0x04
    });
}

#[test]
fn truncated_file() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, offs, file) = records();
    // Cut inside the last record's data, and inside its header.
    for cut in [file.len() - 7, offs[9] + 5] {
        let path = write(dir.path(), "cut.tfrecord", &file[..cut]);
        let err = read_all(&path, ReadOptions::default()).unwrap_err();
        expect_corrupt(err, &path, offs[9]);
        let (got, skipped) = read_all(&path, SKIP).unwrap();
        assert_eq!((got, skipped), (recs[..9].to_vec(), 1));
    }
}

#[test]
fn empty_file_has_no_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "empty.tfrecord", b"");
    assert_eq!(
        read_all(&path, ReadOptions::default()).unwrap(),
        (vec![], 0)
    );
    assert_eq!(read_all(&path, SKIP).unwrap(), (vec![], 0));
    let s = build_index(&path, ReadOptions::default()).unwrap();
    assert_eq!(s.records, 0);
    let (ds, _) = tfrecord_dataset([&path], ReadOptions::default()).unwrap();
    assert_eq!(ds.len(), Some(0));
}

/// SplitMix64 bytes: a fixed, seeded stream of garbage.
fn garbage(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            (z ^ (z >> 27)) as u8
        })
        .collect()
}

#[test]
fn random_garbage() {
    let dir = tempfile::tempdir().unwrap();
    for seed in 0..8 {
        let path = write(dir.path(), "garbage.tfrecord", &garbage(seed, 5000));
        let err = read_all(&path, ReadOptions::default()).unwrap_err();
        expect_corrupt(err, &path, 0);
        let (got, skipped) = read_all(&path, SKIP).unwrap();
        assert_eq!((got.len(), skipped), (0, 1), "seed {seed}");
    }
}

#[test]
fn garbage_between_good_records_is_one_skip() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, offs, file) = records();
    let mut bad = file[..offs[5]].to_vec();
    bad.extend(garbage(99, 777));
    bad.extend_from_slice(&file[offs[5]..]);
    let path = write(dir.path(), "mid.tfrecord", &bad);
    let err = read_all(&path, ReadOptions::default()).unwrap_err();
    expect_corrupt(err, &path, offs[5]);
    assert_eq!(read_all(&path, SKIP).unwrap(), (recs, 1));
}

#[test]
fn several_corrupt_records_are_counted_and_logged() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, offs, mut file) = records();
    file[offs[1] + 12] ^= 1; // data
    file[offs[4] + 3] ^= 1; // length
    file[offs[8] + 13] ^= 1; // data
    let path = write(dir.path(), "many.tfrecord", &file);
    let ds = TFRecordDataset::new([&path], SKIP);
    let log = ds.log().clone();
    let got = ds.into_dataset().iter(0).unwrap().collect_all().unwrap();
    assert_eq!(got.len(), recs.len() - 3);
    assert_eq!(log.count(), 3);
    let first: Vec<(PathBuf, u64)> = log.first().into_iter().filter_map(|c| c.at).collect();
    let want: Vec<(PathBuf, u64)> = [1, 4, 8]
        .iter()
        .map(|&k| (path.clone(), offs[k] as u64))
        .collect();
    assert_eq!(first, want);
    // An index built in skip mode leaves them out, so random access never meets them.
    let s = build_index(&path, SKIP).unwrap();
    assert_eq!((s.records, s.skipped), (7, 3));
    // ... and lists them: a raising reader refuses, a skipping one counts them.
    let e = IndexedTFRecord::open(&[&path], true).err().unwrap();
    assert!(
        matches!(e, Error::Corrupt { offset, .. } if offset == offs[1] as u64),
        "{e}"
    );
    let ix = IndexedTFRecord::open_with(&[&path], SKIP).unwrap();
    assert_eq!(ix.log().count(), 3);
    // Each names its ordinal in the file, as the stream reader's log does.
    let ordinals: Vec<u64> = ix.log().first().iter().map(|c| c.index).collect();
    assert_eq!(ordinals, [1, 4, 8]);
    let mut want = recs.clone();
    for k in [8, 4, 1] {
        want.remove(k);
    }
    for (i, w) in want.iter().enumerate() {
        assert_eq!(&ix.record(i as u64).unwrap()[..], &w[..]);
    }
}

#[test]
fn verify_off_returns_damaged_data() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, offs, mut file) = records();
    file[offs[2] + 12] ^= 0xff;
    let path = write(dir.path(), "noverify.tfrecord", &file);
    let opts = ReadOptions {
        verify: false,
        ..Default::default()
    };
    let (got, skipped) = read_all(&path, opts).unwrap();
    assert_eq!((got.len(), skipped), (recs.len(), 0));
    assert_eq!(got[2][0], recs[2][0] ^ 0xff);
}

#[test]
fn skip_works_inside_gzip_and_raise_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, offs, mut file) = records();
    file[offs[3] + 12 + 2] ^= 0x10;
    let path = dir.path().join("bad.tfrecord.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&file).unwrap();
    std::fs::write(&path, enc.finish().unwrap()).unwrap();
    let opts = ReadOptions {
        compression: Compression::Gzip,
        ..Default::default()
    };
    expect_corrupt(read_all(&path, opts).unwrap_err(), &path, offs[3]);
    let (got, skipped) = read_all(
        &path,
        ReadOptions {
            on_corrupt: OnCorrupt::Skip,
            ..opts
        },
    )
    .unwrap();
    let mut want = recs;
    want.remove(3);
    assert_eq!((got, skipped), (want, 1));
}

#[test]
fn indexed_read_raises_on_damage_after_indexing() {
    let dir = tempfile::tempdir().unwrap();
    let (_, offs, mut file) = records();
    let path = write(dir.path(), "later.tfrecord", &file);
    build_index(&path, ReadOptions::default()).unwrap();
    file[offs[6] + 12] ^= 1;
    std::fs::write(&path, &file).unwrap();
    let ix = IndexedTFRecord::open(&[&path], true).unwrap();
    assert!(ix.record(5).is_ok());
    expect_corrupt(ix.record(6).unwrap_err(), &path, offs[6]);
}

#[test]
fn stale_or_damaged_index_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, file) = records();
    let path = write(dir.path(), "stale.tfrecord", &file);
    build_index(&path, ReadOptions::default()).unwrap();
    std::fs::write(&path, &file[..file.len() - 10]).unwrap();
    let e = IndexedTFRecord::open(&[&path], true)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("stale index"), "{e}");
    std::fs::write(&path, &file).unwrap();
    let ipath = index_path(&path);
    let mut ix = std::fs::read(&ipath).unwrap();
    ix[30] ^= 1;
    std::fs::write(&ipath, &ix).unwrap();
    let e = IndexedTFRecord::open(&[&path], true)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("bad CRC") && e.contains(".idx"), "{e}");
}

/// The one skip log: a record the reader skips is counted by `error_logs` of the whole pipeline
/// (Python's `ds.skipped()`), under map, batch, prefetch and a parallel stage, streamed or read
/// at random through an index built in skip mode; the message names the file and the offset.
#[test]
fn skipped_records_are_found_at_any_depth_of_the_pipeline() {
    use stokehold_core::ops::ignore_errors::error_logs;
    use stokehold_core::{map_fn, Dataset, Parallelism};
    let dir = tempfile::tempdir().unwrap();
    let (recs, offs, mut file) = records();
    file[offs[3] + 12] ^= 1; // record 3's data: bad data CRC
    let path = write(dir.path(), "deep.tfrecord", &file);
    // `counts`: what the log holds after each pipeline's pass (a stream counts each pass; an
    // index counted what it left out once, when it was opened).
    let deep = |ds: &Dataset, counts: [u64; 2], reason: &str| {
        let mapped = ds.map("touch", map_fn(|e, _| Ok(e)));
        let batched = mapped.batch(2, false).unwrap();
        let pipelines = [
            batched.prefetch(2).unwrap(),
            mapped.parallelize(Parallelism::Fixed(2), true),
        ];
        for (p, want) in pipelines.into_iter().zip(counts) {
            let got = p.iter(0).unwrap().collect_all().unwrap();
            assert!(!got.is_empty());
            let logs = error_logs(&p);
            let count: u64 = logs.iter().map(|l| l.count()).sum();
            assert_eq!(count, want, "{}", p.describe());
            let s = &logs[0].first()[0];
            assert_eq!(s.at, Some((path.clone(), offs[3] as u64)));
            assert_eq!(s.index, 3);
            let (name, at) = (path.display().to_string(), offs[3].to_string());
            assert!(
                s.error.contains(&name) && s.error.contains(&at),
                "{}",
                s.error
            );
            assert!(s.reason().starts_with(reason), "{}", s.error);
        }
    };
    // Streamed: the reader's log, reported by the TFRecord dataset (and by the fused parser).
    let (ds, log) = tfrecord_dataset([&path], SKIP).unwrap();
    assert_eq!(ds.len(), None);
    deep(&ds, [1, 2], "bad data CRC");
    assert_eq!(
        log.count(),
        2,
        "the log returned beside the dataset is the same one"
    );
    // At random, after a global shuffle: the index lists the record it left out.
    assert_eq!(build_index(&path, SKIP).unwrap().skipped, 1);
    let (ds, _) = tfrecord_dataset([&path], SKIP).unwrap();
    assert_eq!(ds.len(), Some(recs.len() as u64 - 1));
    deep(
        &ds.shuffle(7),
        [1, 1],
        "corrupt record left out of the index",
    );
}

#[test]
fn the_fused_parser_reports_the_readers_skips() {
    use stokehold_core::ops::ignore_errors::error_logs;
    use stokehold_core::{DType, Example, Tensor};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("parsed.tfrecord");
    let mut w = RecordWriter::create(&path, Compression::None).unwrap();
    let mut offs = Vec::new();
    for i in 0..10i64 {
        offs.push(w.bytes());
        let e = Example::new().with("label", Tensor::from_vec(vec![1], vec![i]).unwrap());
        w.write(&encode_example(&e).unwrap()).unwrap();
    }
    w.finish().unwrap();
    let mut b = std::fs::read(&path).unwrap();
    b[offs[5] as usize + 12 + 2] ^= 1; // record 5's data: bad data CRC
    std::fs::write(&path, &b).unwrap();
    let spec = ParseSpec::new()
        .with("label", ParseFeature::fixed(vec![], DType::I64))
        .unwrap();
    let src = TFRecordDataset::new([&path], SKIP);
    let ds = src.parse_batches(Parser::new(spec), 4, false).unwrap();
    let ds = ds.prefetch(2).unwrap();
    let got = ds.iter(0).unwrap().collect_all().unwrap();
    let rows: usize = got
        .iter()
        .map(|b| b.tensor("t", "label").unwrap().len())
        .sum();
    assert_eq!(rows, 9);
    let logs = error_logs(&ds);
    assert_eq!(logs.iter().map(|l| l.count()).sum::<u64>(), 1);
    assert_eq!(logs[0].first()[0].at, Some((path, offs[5])));
}

/// A GZIP TFRecord file named plain `.tfrecord` and read uncompressed: the error at offset 0
/// says the file looks gzip-compressed and how to read it (issue 48: "bad length CRC" alone
/// before), and following the hint reads every record.
#[test]
fn a_gzip_file_read_plain_says_it_is_gzip_and_how_to_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, _, file) = records();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&file).unwrap();
    let path = write(dir.path(), "data.tfrecord", &gz.finish().unwrap());
    let e = read_all(&path, ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("offset 0")
            && e.contains("bad length CRC")
            && e.contains(
                "looks like a gzip-compressed file; read it as GZIP: end its name in .gz"
            ),
        "{e}"
    );
    let opts = ReadOptions {
        compression: Compression::Gzip,
        ..ReadOptions::default()
    };
    assert_eq!(read_all(&path, opts).unwrap().0, recs);
}

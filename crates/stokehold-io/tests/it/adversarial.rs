//! Adversarial input: nothing corrupt is read silently, nothing is lost, nothing hangs. One test
//! per case; each failed on the code before the change that made it pass.
//!
//! | case | before | after | test |
//! |---|---|---|---|
//! | C1 `FixedLen([2**32, 2**32])` | accepted (the product wraps to 0) | refused naming the feature | `fixed_len_shape_product_that_overflows_is_refused` |
//! | C2 `FixedLen` present but empty | silently filled with the default | `Schema` error naming feature and record; a missing feature, or an empty `Feature()` with no list set (TensorFlow reads it as missing), still takes the default | `present_but_empty_fixed_len_is_an_error_missing_takes_default` |
//! | C3 shard record declaring 4 GiB from a few bytes | buffer of the declared size allocated, then a codec error | refused before allocating (1024x ratio limit), naming file and record | `shard_record_declaring_a_huge_expansion_is_refused_before_allocating` |
//! | C4 `.idx` built in skip mode | the corrupt record left out silently: 9 of 10 records, corrupt count 0, even with `raise` | the index (version 2) lists skipped offsets: `raise` refuses naming file and offset, `skip` counts them | `index_built_in_skip_mode_is_not_silent` |
//! | C5 shard listed twice, reordered, or swapped in from another dataset (same size and count) | opened and read without complaint | refused at open naming the file (manifest fingerprint: first record + index CRC; old manifests without it still open) | `shard_listed_twice_reordered_or_swapped_in_is_refused_at_open` |
//! | C11 shard folder with a record whose CRC fails, `on_corrupt=skip` | no skip policy: every read of it raises | `open_shards_with(.., ShardReadOptions { on_corrupt: Skip })` iterates past it and counts it in its `error_log()` (core's one `ErrorLog`); `get(i)` on it still raises | `shard_skip_mode_skips_and_counts_corrupt_records_get_still_raises` |
//! | C6 truncated GZIP / ZLIB TFRecord | `Io` error, skip mode does not apply | `Corrupt` naming the file and offset; skip counts it and keeps the records before | `truncated_gzip_and_zlib_are_corruption_and_skip_applies` |
//! | C7 shard truncated in place while mapped | the next read of a lost page kills the process (SIGBUS) | `fstat` once per shard per `get_batch`, and before a `get` when the shard's last check is over 1 ms old: an error naming the file | `shard_truncated_while_mapped_is_an_error_not_sigbus` |
//! | C8 FIFO named as a shard | `open_shards` blocks forever | refused: not a regular file | `fifo_named_as_a_shard_is_refused_not_waited_on` |
//! | C9 `.npy` headers numpy refuses | accepted (minor version, extra keys, `(2)` shape, text after the dict, misaligned) | refused, saying why | `npy_headers_numpy_refuses_are_refused` |
//! | C10 two writers on one folder | both write, the folder is a mix | the second is refused naming the folder and the holder's pid; the lock goes with the first | `second_writer_on_a_folder_is_refused_with_the_holders_pid` |
//! | A leftovers of a killed run (one temp-name convention) | hidden temp files stay forever | removed by the next write into the folder | `killed_runs_temp_files_are_cleaned_by_the_next_write` |

use std::fs;
use std::path::Path;
use std::time::Duration;

use stokehold_core::{DType, Dataset, Error, Example, MapDataset, Tensor};
use stokehold_io::shard::format::crc32c;
use stokehold_io::shard::{write_shards, Compression, ShardDataset, ShardWriter, WriteOptions};
use stokehold_io::table::npy::parse_header;
use stokehold_io::tfrecord::{self, OnCorrupt, ParseFeature, ParseSpec, Parser, ReadOptions};

use super::shard_format::{opts, sample};

#[test]
fn fixed_len_shape_product_that_overflows_is_refused() {
    let big = 1usize << 32;
    let e = ParseSpec::new()
        .with("x", ParseFeature::fixed(vec![big, big], DType::I64))
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"x\"") && e.contains("overflow"), "{e}");
    // Products that fit are still fine.
    ParseSpec::new()
        .with("x", ParseFeature::fixed(vec![1 << 20, 4], DType::F32))
        .unwrap();
}

#[test]
fn present_but_empty_fixed_len_is_an_error_missing_takes_default() {
    let spec = ParseSpec::new()
        .with(
            "x",
            ParseFeature::FixedLen {
                shape: vec![2],
                dtype: DType::I64,
                default: Some(Tensor::from_vec(vec![1], vec![7i64]).unwrap()),
            },
        )
        .unwrap();
    let p = Parser::new(spec);
    let empty = Example::new().with("x", Tensor::from_vec(vec![0], Vec::<i64>::new()).unwrap());
    let rec = tfrecord::encode_example(&empty).unwrap();
    match p.parse_one(&rec) {
        Err(e @ Error::Schema { .. }) => {
            let m = e.to_string();
            assert!(
                m.contains("record 0") && m.contains("\"x\"") && m.contains("empty"),
                "{m}"
            );
        }
        other => panic!("present but empty feature parsed: {other:?}"),
    }
    let missing = Example::new().with("y", Tensor::scalar(1i64));
    let got = p
        .parse_one(&tfrecord::encode_example(&missing).unwrap())
        .unwrap();
    assert_eq!(
        got.tensor("t", "x").unwrap().to_vec::<i64>().unwrap(),
        [7, 7]
    );
    // An empty `Feature()` (no list set) is missing to TensorFlow too, so the default fills it
    // (issue 49, class 12): Example { features { feature { key: "x" value {} } } }.
    let unset = [0x0a, 0x07, 0x0a, 0x05, 0x0a, 0x01, b'x', 0x12, 0x00];
    let got = p.parse_one(&unset).unwrap();
    assert_eq!(
        got.tensor("t", "x").unwrap().to_vec::<i64>().unwrap(),
        [7, 7]
    );
}

/// Dataset of records of 64 KiB of zeros: they compress, so they are stored compressed.
fn zeros(n: u64) -> Dataset {
    Dataset::range(n).map(
        "zeros",
        stokehold_core::map_fn(|_, _| {
            Ok(Example::new().with("z", Tensor::from_vec(vec![65536], vec![0u8; 65536])?))
        }),
    )
}

#[test]
fn shard_record_declaring_a_huge_expansion_is_refused_before_allocating() {
    for compression in [Compression::Lz4, Compression::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        write_shards(&zeros(3), dir.path(), opts(1 << 30, compression), None).unwrap();
        let path = dir.path().join("shard-00000.stk");
        let mut b = fs::read(&path).unwrap();
        let foot = b.len() - 32;
        let index_offset = u64::from_le_bytes(b[foot..foot + 8].try_into().unwrap()) as usize;
        let at = index_offset + 24; // record 1's entry
        assert_ne!(b[at + 20], 0, "the record is stored compressed");
        b[at + 12..at + 16].copy_from_slice(&u32::MAX.to_le_bytes()); // raw_len: 4 GiB
                                                                      // A consistent index (its checksum recomputed): only the declared size is wrong.
        let crc = crc32c(&b[index_offset..foot]);
        b[foot + 16..foot + 20].copy_from_slice(&crc.to_le_bytes());
        fs::write(&path, &b).unwrap();
        // ... and the manifest's fingerprint made to match: a crafted, consistent folder.
        edit_manifest(dir.path(), |m| {
            m["shards"][0]["index_crc32c"] = format!("{crc:08x}").into();
        });
        let ds = ShardDataset::open(dir.path()).unwrap();
        assert!(ds.get(0).is_ok());
        let e = ds.get(1).unwrap_err().to_string();
        assert!(
            e.contains("shard-00000.stk") && e.contains("record 1") && e.contains("limit"),
            "{compression:?}: {e}"
        );
    }
}

#[test]
fn truncated_gzip_and_zlib_are_corruption_and_skip_applies() {
    for c in [tfrecord::Compression::Gzip, tfrecord::Compression::Zlib] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.tfrecord");
        let mut w = tfrecord::RecordWriter::create(&path, c).unwrap();
        for i in 0..200u32 {
            // Incompressible-ish data, so the cut lands inside the records.
            let rec: Vec<u8> = (0..500u32)
                .map(|k| (k.wrapping_mul(2654435761).wrapping_add(i * 40503) >> 13) as u8)
                .collect();
            w.write(&rec).unwrap();
        }
        w.finish().unwrap();
        let b = fs::read(&path).unwrap();
        fs::write(&path, &b[..b.len() / 2]).unwrap();
        let read = |on_corrupt| {
            let opts = ReadOptions {
                compression: c,
                verify: true,
                on_corrupt,
            };
            let mut r = tfrecord::RecordReader::open(&path, opts)?;
            let mut n = 0;
            while r.next_record()?.is_some() {
                n += 1;
            }
            Ok::<_, Error>((n, r.skipped()))
        };
        match read(OnCorrupt::Raise) {
            Err(Error::Corrupt { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{c:?}: truncated stream read as {other:?}"),
        }
        let (n, skipped) = read(OnCorrupt::Skip).unwrap();
        assert!(n > 10 && n < 200, "{c:?}: {n} records");
        assert_eq!(skipped, 1, "{c:?}: the cut is counted once");
    }
}

/// An error in the progress callback aborts the write, comes back as it is, and leaves nothing
/// that opens as a folder (it was swallowed and the write went on).
#[test]
fn write_shards_progress_error_aborts_the_write_and_propagates() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shards");
    let cb = |p: &stokehold_io::shard::Progress| {
        if p.records > 0 {
            return Err(Error::invalid("stop from progress"));
        }
        Ok(())
    };
    let err = write_shards(&sample(500), &out, opts(2048, Compression::None), Some(&cb))
        .expect_err("the callback's error");
    assert!(err.to_string().contains("stop from progress"), "{err}");
    assert!(ShardDataset::open(&out).is_err(), "no complete folder left");
    let left: Vec<_> = fs::read_dir(&out)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.iter()
            .all(|n| n.to_string_lossy().starts_with(".stokehold.lock")),
        "{left:?}"
    );
}

/// A GZIP/ZLIB record inflates from a few bytes to any size: one larger than the memory budget
/// is refused from its header, before a byte of it is buffered (it was read whole).
#[test]
fn compressed_record_larger_than_the_memory_budget_is_refused_before_buffering() {
    use stokehold_core::exec::{ExecOptions, Executor};
    for c in [tfrecord::Compression::Gzip, tfrecord::Compression::Zlib] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bomb.tfrecord");
        let mut w = tfrecord::RecordWriter::create(&path, c).unwrap();
        w.write(b"small").unwrap();
        w.write(&vec![0u8; 4 << 20]).unwrap(); // 4 MiB of zeros: a few KiB compressed
        w.finish().unwrap();
        assert!(fs::metadata(&path).unwrap().len() < 64 << 10);
        let exec = Executor::new(ExecOptions {
            memory_budget: 1 << 20,
            ..ExecOptions::default()
        });
        let read = |on_corrupt| {
            exec.enter(|| {
                let opts = ReadOptions {
                    compression: c,
                    verify: true,
                    on_corrupt,
                };
                let mut r = tfrecord::RecordReader::open(&path, opts)?;
                let mut n = 0;
                while r.next_record()?.is_some() {
                    n += 1;
                }
                Ok::<_, Error>((n, r.skipped()))
            })
        };
        match read(OnCorrupt::Raise) {
            Err(e @ Error::Corrupt { .. }) => {
                assert!(e.to_string().contains("memory budget"), "{e}")
            }
            other => panic!("{c:?}: a record over the budget read as {other:?}"),
        }
        assert_eq!(read(OnCorrupt::Skip).unwrap(), (1, 1), "{c:?}");
    }
}

#[cfg(unix)]
#[test]
fn fifo_named_as_a_shard_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    write_shards(
        &sample(10),
        dir.path(),
        opts(1 << 20, Compression::None),
        None,
    )
    .unwrap();
    let shard = dir.path().join("shard-00000.stk");
    fs::remove_file(&shard).unwrap();
    let ok = std::process::Command::new("mkfifo")
        .arg(&shard)
        .status()
        .unwrap();
    assert!(ok.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let d = dir.path().to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(
            ShardDataset::open(&d)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        );
    });
    let got = rx.recv_timeout(Duration::from_secs(10));
    if got.is_err() {
        // Unblock the reader thread before failing: open the FIFO's other end.
        let _ = fs::OpenOptions::new().write(true).open(&shard);
        panic!("opening a folder with a FIFO for a shard blocked");
    }
    let e = got.unwrap().unwrap_err();
    assert!(
        e.contains("shard-00000.stk") && e.contains("not a regular file"),
        "{e}"
    );
}

/// A version 1.0 `.npy` header around `dict`, padded as numpy pads unless told otherwise.
fn npy(version: [u8; 2], dict: &str, pad_to: usize, tail: &str) -> Vec<u8> {
    let body = format!("{dict}{tail}");
    let total = (10 + body.len()).next_multiple_of(pad_to);
    let mut h = b"\x93NUMPY".to_vec();
    h.extend_from_slice(&version);
    h.extend_from_slice(&((total - 10) as u16).to_le_bytes());
    h.extend_from_slice(body.as_bytes());
    let nl = tail.ends_with('\n');
    if nl {
        h.pop();
    }
    h.resize(total - nl as usize, b' ');
    if nl {
        h.push(b'\n');
    }
    h.extend_from_slice(&[0u8; 64]);
    h
}

#[test]
fn npy_headers_numpy_refuses_are_refused() {
    let p = Path::new("t.npy");
    let good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    assert!(parse_header(&npy([1, 0], good, 64, "\n"), p).is_ok());
    let bad = [
        ("minor version", npy([1, 1], good, 64, "\n"), "version"),
        (
            "extra key",
            npy(
                [1, 0],
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 'y'}",
                64,
                "\n",
            ),
            "exactly",
        ),
        (
            "int, not a tuple",
            npy(
                [1, 0],
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2)}",
                64,
                "\n",
            ),
            "not a tuple",
        ),
        (
            "text after the dict",
            npy([1, 0], good, 64, " junk\n"),
            "newline",
        ),
        ("no newline", npy([1, 0], good, 64, " "), "newline"),
        ("misaligned", npy([1, 0], good, 7, "\n"), "multiple of 16"),
    ];
    for (what, bytes, says) in bad {
        match parse_header(&bytes, p) {
            Ok(h) => panic!("{what}: accepted as {h:?}"),
            Err(e) => {
                let m = e.to_string();
                assert!(m.contains("t.npy") && m.contains(says), "{what}: {m}");
            }
        }
    }
}

#[test]
fn second_writer_on_a_folder_is_refused_with_the_holders_pid() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = ShardWriter::create(dir.path(), WriteOptions::default()).unwrap();
    let e = ShardWriter::create(dir.path(), WriteOptions::default())
        .err()
        .expect("second writer refused")
        .to_string();
    assert!(
        e.contains(&dir.path().display().to_string())
            && e.contains(&format!("pid {}", std::process::id())),
        "{e}"
    );
    // The TFRecord writer of a folder takes the same lock.
    let e = tfrecord::shards::write_tfrecord_shards(
        &Dataset::range(3),
        dir.path(),
        &Default::default(),
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("another writer"), "{e}");
    first
        .push(&Example::new().with("x", Tensor::scalar(1i64)))
        .unwrap();
    first.finish().unwrap();
    // Released with the first writer, and no lock file is left.
    assert!(!dir.path().join(".stokehold.lock").exists());
    let w = ShardWriter::create(
        dir.path(),
        WriteOptions {
            overwrite: true,
            ..WriteOptions::default()
        },
    );
    assert!(w.is_ok());
}

#[test]
fn killed_runs_temp_files_are_cleaned_by_the_next_write() {
    // Above Linux's largest pid (2^22): no such process runs.
    let dead = 5_000_000;
    let dir = tempfile::tempdir().unwrap();
    let shard_tmp = dir.path().join(format!(".shard-00004.stk.tmp-{dead}-0"));
    let manifest_tmp = dir.path().join(format!(".manifest.json.tmp-{dead}-1"));
    fs::write(&shard_tmp, b"half").unwrap();
    fs::write(&manifest_tmp, b"{").unwrap();
    let e = ShardDataset::open(dir.path()).err().unwrap().to_string();
    assert!(
        e.contains("incomplete") && e.contains("2 temporary files"),
        "{e}"
    );
    write_shards(
        &sample(5),
        dir.path(),
        opts(1 << 20, Compression::None),
        None,
    )
    .unwrap();
    assert!(!shard_tmp.exists() && !manifest_tmp.exists());

    let tdir = tempfile::tempdir().unwrap();
    let rec_tmp = tdir
        .path()
        .join(format!(".data-00000.tfrecord.tmp-{dead}-0"));
    let idx_tmp = tdir
        .path()
        .join(format!(".data-00000.tfrecord.tmp-{dead}-0.idx"));
    fs::write(&rec_tmp, b"half").unwrap();
    fs::write(&idx_tmp, b"half").unwrap();
    let out = tfrecord::shards::write_tfrecord_shards(
        &Dataset::range(4),
        tdir.path(),
        &Default::default(),
        &mut |_| {},
    )
    .unwrap();
    assert!(!rec_tmp.exists() && !idx_tmp.exists());
    let mut names: Vec<_> = fs::read_dir(tdir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "data-00000-of-00001.tfrecord",
            "data-00000-of-00001.tfrecord.idx"
        ]
    );
    assert_eq!(out.len(), 1);
}

fn edit_manifest(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
    f(&mut m);
    fs::write(&p, serde_json::to_vec(&m).unwrap()).unwrap();
}

fn open_err(dir: &Path) -> String {
    match ShardDataset::open(dir) {
        Ok(_) => panic!("{} opened", dir.display()),
        Err(e) => e.to_string(),
    }
}

/// A folder of 4 shards of 25 records each, equal in size.
fn four_shards() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::range(100);
    write_shards(&ds, dir.path(), opts(32 + 25 * 32, Compression::None), None).unwrap();
    let m = ShardDataset::open(dir.path()).unwrap();
    assert_eq!(m.manifest().shards.len(), 4);
    dir
}

#[test]
fn shard_listed_twice_reordered_or_swapped_in_is_refused_at_open() {
    // Listed twice (the count kept consistent by dropping another shard).
    let dir = four_shards();
    edit_manifest(dir.path(), |m| {
        m["shards"][2] = m["shards"][1].clone();
    });
    let e = open_err(dir.path());
    assert!(e.contains("shard-00001.stk") && e.contains("twice"), "{e}");

    // Reordered: all shards have the same size and count, so only the fingerprint tells.
    let dir = four_shards();
    edit_manifest(dir.path(), |m| {
        let s = m["shards"].as_array_mut().unwrap();
        s.swap(1, 2);
    });
    let e = open_err(dir.path());
    assert!(
        e.contains("shard-00002.stk") && e.contains("out of order"),
        "{e}"
    );

    // Swapped in from another dataset of the same shape: same size, same count.
    let dir = four_shards();
    let other = tempfile::tempdir().unwrap();
    let ds = Dataset::range(100).map(
        "plus",
        stokehold_core::map_fn(|e, _| {
            let x = e.tensor("t", "x")?.to_vec::<i64>()?[0];
            Ok(Example::new().with("x", Tensor::scalar(x + 1000)))
        }),
    );
    write_shards(
        &ds,
        other.path(),
        opts(32 + 25 * 32, Compression::None),
        None,
    )
    .unwrap();
    fs::copy(
        other.path().join("shard-00003.stk"),
        dir.path().join("shard-00003.stk"),
    )
    .unwrap();
    let e = open_err(dir.path());
    assert!(
        e.contains("shard-00003.stk") && e.contains("another dataset"),
        "{e}"
    );

    // A manifest written before the fingerprints (fields absent) still opens.
    let dir = four_shards();
    edit_manifest(dir.path(), |m| {
        for s in m["shards"].as_array_mut().unwrap() {
            let s = s.as_object_mut().unwrap();
            s.remove("first_record");
            s.remove("index_crc32c");
        }
    });
    assert_eq!(ShardDataset::open(dir.path()).unwrap().len(), 100);
}

#[test]
fn shard_skip_mode_skips_and_counts_corrupt_records_get_still_raises() {
    use stokehold_io::shard::{open_shards_with, ShardReadOptions};
    let dir = tempfile::tempdir().unwrap();
    write_shards(
        &Dataset::range(10),
        dir.path(),
        opts(1 << 20, Compression::None),
        None,
    )
    .unwrap();
    let path = dir.path().join("shard-00000.stk");
    let mut b = fs::read(&path).unwrap();
    let foot = b.len() - 32;
    let index_offset = u64::from_le_bytes(b[foot..foot + 8].try_into().unwrap()) as usize;
    let at = index_offset + 3 * 24;
    let rec3 = u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
    b[rec3 + 20] ^= 0x40; // inside record 3's data: its CRC fails
    fs::write(&path, &b).unwrap();

    let read = |on_corrupt| {
        let (ds, log) = open_shards_with(
            dir.path(),
            ShardReadOptions {
                on_corrupt,
                ..Default::default()
            },
        )
        .unwrap();
        (ds.iter(0).unwrap().collect_all(), log)
    };
    let (got, _) = read(OnCorrupt::Raise);
    let e = got.unwrap_err().to_string();
    assert!(
        e.contains("shard-00000.stk") && e.contains("record 3"),
        "{e}"
    );
    let (got, log) = read(OnCorrupt::Skip);
    let ids: Vec<i64> = got
        .unwrap()
        .iter()
        .map(|e| e.tensor("t", "x").unwrap().to_vec::<i64>().unwrap()[0])
        .collect();
    assert_eq!(ids, [0, 1, 2, 4, 5, 6, 7, 8, 9]);
    assert_eq!(log.count(), 1);
    let first = &log.first()[0];
    assert_eq!((first.index, &first.at.as_ref().unwrap().0), (3, &path));
    assert!(first.reason().contains("checksum"), "{}", first.error);
    let e = ShardDataset::open(dir.path()).unwrap().get(3).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
    // The one skip log: under map, batch and prefetch, `error_logs` (Python's `ds.skipped()`)
    // finds the skipped record, its message naming the shard and the offset.
    let (ds, _) = open_shards_with(
        dir.path(),
        ShardReadOptions {
            on_corrupt: OnCorrupt::Skip,
            ..Default::default()
        },
    )
    .unwrap();
    let deep = ds
        .map("touch", stokehold_core::map_fn(|e, _| Ok(e)))
        .batch(2, false)
        .unwrap()
        .prefetch(2)
        .unwrap();
    assert_eq!(deep.iter(0).unwrap().collect_all().unwrap().len(), 5);
    let logs = stokehold_core::ops::ignore_errors::error_logs(&deep);
    assert_eq!(logs.iter().map(|l| l.count()).sum::<u64>(), 1);
    let s = &logs[0].first()[0];
    assert_eq!(
        (s.index, s.at.clone()),
        (3, Some((path.clone(), rec3 as u64)))
    );
    assert!(
        s.error.contains("shard-00000.stk") && s.error.contains(&rec3.to_string()),
        "{}",
        s.error
    );
}

#[test]
fn index_built_in_skip_mode_is_not_silent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.tfrecord");
    let mut w = tfrecord::RecordWriter::create(&path, tfrecord::Compression::None).unwrap();
    let mut offsets = Vec::new();
    for i in 0..10u8 {
        offsets.push(w.bytes());
        w.write(&[i; 40]).unwrap();
    }
    w.finish().unwrap();
    let mut b = fs::read(&path).unwrap();
    b[offsets[6] as usize + 12 + 5] ^= 1; // record 6's data: bad data CRC
    fs::write(&path, &b).unwrap();
    let skip = ReadOptions {
        on_corrupt: OnCorrupt::Skip,
        ..ReadOptions::default()
    };
    let s = tfrecord::build_index(&path, skip).unwrap();
    assert_eq!((s.records, s.skipped), (9, 1));
    match tfrecord::tfrecord_dataset([&path], ReadOptions::default()) {
        Err(Error::Corrupt {
            path: p, offset, ..
        }) => {
            assert_eq!((p, offset), (path.clone(), offsets[6]));
        }
        Err(e) => panic!("{e}"),
        Ok((ds, log)) => panic!("raise read {:?} records, {} corrupt", ds.len(), log.count()),
    }
    let (ds, log) = tfrecord::tfrecord_dataset([&path], skip).unwrap();
    assert_eq!((ds.len(), log.count()), (Some(9), 1));
    assert_eq!(log.first()[0].at.as_ref().unwrap().1, offsets[6]);
}

#[test]
fn shard_truncated_while_mapped_is_an_error_not_sigbus() {
    let dir = tempfile::tempdir().unwrap();
    write_shards(
        &zeros(64),
        dir.path(),
        opts(1 << 30, Compression::None),
        None,
    )
    .unwrap();
    let ds = ShardDataset::open(dir.path()).unwrap();
    assert!(ds.get(63).is_ok());
    // Truncated in place (not replaced by rename): the map's later pages have no file behind.
    let f = fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("shard-00000.stk"))
        .unwrap();
    f.set_len(4096).unwrap();
    // A batch checks at once; a single record once its shard's last check is 1 ms old.
    let batch = ds.get_batch(&[1, 2, 60]).unwrap_err();
    std::thread::sleep(Duration::from_millis(5));
    for e in [batch, ds.get(63).unwrap_err()] {
        let m = e.to_string();
        assert!(m.contains("shard-00000.stk") && m.contains("shrank"), "{m}");
    }
}

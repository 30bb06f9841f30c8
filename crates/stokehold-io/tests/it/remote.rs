//! Object storage against moto's S3 server on loopback: remote reads equal local reads byte for
//! byte (shard folders, indexed TFRecords, tables, whole files), writes to S3 read back, globs,
//! and the faults: 5xx and dropped connections, truncated bodies, a changed object, refused
//! credentials, a missing bucket, and a fork after first use.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::{Dataset, Example, MapDataset, Tensor, Value};
use stokehold_io::files::{list_files, read_bytes};
use stokehold_io::shard::{Compression, ShardDataset, WriteOptions};
use stokehold_io::storage;
use stokehold_io::table::{Table, TableWriter};
use stokehold_io::tfrecord::{tfrecord_dataset, ReadOptions, RecordReader, ShardOptions};

use super::remote_server::{make_bucket, moto, Fault, Proxy};

/// `n` records: an int64 id, a ragged float32 clip, a bytes label.
pub fn source(n: usize) -> Dataset {
    super::conformance_io::clips(n, 7)
}

pub fn shard_opts(compression: Compression) -> WriteOptions {
    WriteOptions {
        compression,
        shard_bytes: 2048,
        threads: 2,
        ..WriteOptions::default()
    }
}

/// Uploads every file under `local` to `url` (keys relative to `local`).
pub fn upload_dir(local: &Path, url: &str) {
    for e in std::fs::read_dir(local).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            upload_dir(&p, &storage::join(url, &name));
        } else if name != stokehold_io::atomic::LOCK_NAME {
            storage::upload(&p, Path::new(&storage::join(url, &name))).unwrap();
        }
    }
}

pub fn assert_same(local: &ShardDataset, remote: &ShardDataset) {
    assert_eq!(local.len(), remote.len());
    for i in 0..local.len() {
        assert_eq!(
            local.raw_record(i).unwrap(),
            remote.raw_record(i).unwrap(),
            "record {i}"
        );
        assert_eq!(local.get(i).unwrap(), remote.get(i).unwrap(), "record {i}");
    }
    let idx: Vec<u64> = (0..local.len()).rev().step_by(3).collect();
    assert_eq!(
        local.get_batch(&idx).unwrap(),
        remote.get_batch(&idx).unwrap()
    );
}

#[test]
fn a_shard_folder_read_from_s3_equals_the_local_read() {
    moto();
    make_bucket("shards");
    for (k, compression) in [Compression::None, Compression::Zstd]
        .into_iter()
        .enumerate()
    {
        let dir = tempfile::tempdir().unwrap();
        stokehold_io::shard::write_shards(&source(200), dir.path(), shard_opts(compression), None)
            .unwrap();
        let url = format!("s3://shards/up{k}");
        upload_dir(dir.path(), &url);
        let local = ShardDataset::open(dir.path()).unwrap();
        let remote = ShardDataset::open(&url).unwrap();
        assert!(local.manifest().shards.len() > 3, "several shards");
        assert_same(&local, &remote);
        remote.verify().unwrap();
    }
}

#[test]
fn write_shards_to_s3_then_read_back() {
    moto();
    make_bucket("written");
    let url = "s3://written/ds";
    let m =
        stokehold_io::shard::write_shards(&source(200), url, shard_opts(Compression::Lz4), None)
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let m2 = stokehold_io::shard::write_shards(
        &source(200),
        dir.path(),
        shard_opts(Compression::Lz4),
        None,
    )
    .unwrap();
    assert_eq!(m.num_records, m2.num_records);
    let listed = storage::list("s3://written/ds/*").unwrap();
    let names: Vec<&str> = listed
        .iter()
        .map(|m| m.location.rsplit('/').next().unwrap())
        .collect();
    assert!(names.contains(&"manifest.json"), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n.contains(".tmp") || n.contains("lock")),
        "{names:?}"
    );
    assert_same(
        &ShardDataset::open(dir.path()).unwrap(),
        &ShardDataset::open(url).unwrap(),
    );
    // Without its manifest (a write that died before the end) the folder does not open.
    make_bucket("halfwritten");
    for m in &listed {
        let name = m.location.rsplit('/').next().unwrap();
        if name != "manifest.json" {
            let data = storage::read(Path::new(&m.location)).unwrap();
            storage::write(Path::new(&format!("s3://halfwritten/ds/{name}")), data).unwrap();
        }
    }
    let err = ShardDataset::open("s3://halfwritten/ds")
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("incomplete dataset") && err.contains("s3://halfwritten/ds"),
        "{err}"
    );
}

#[test]
fn tfrecords_with_idx_from_s3_equal_the_local_read() {
    moto();
    make_bucket("tfr");
    let opts = ShardOptions {
        num_shards: Some(3),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let local =
        stokehold_io::tfrecord::write_tfrecord_shards(&source(200), dir.path(), &opts, &mut |_| {})
            .unwrap();
    let remote = stokehold_io::tfrecord::write_tfrecord_shards(
        &source(200),
        Path::new("s3://tfr/train"),
        &opts,
        &mut |_| {},
    )
    .unwrap();
    assert!(remote[0].to_str().unwrap().starts_with("s3://tfr/train/"));
    let (l, _) = tfrecord_dataset(&local, ReadOptions::default()).unwrap();
    let (r, _) = tfrecord_dataset(&remote, ReadOptions::default()).unwrap();
    assert!(r.is_random_access(), "the .idx files were found in S3");
    assert_eq!(l.len(), r.len());
    for i in 0..l.len().unwrap() {
        let (a, b) = (l.get(i).unwrap(), r.get(i).unwrap());
        if a != b {
            let bytes = |e: &Example| match e.get("record") {
                Some(Value::Tensor(t)) => t.data().to_vec(),
                _ => vec![],
            };
            panic!("record {i}: {:?} vs {:?}", bytes(&a), bytes(&b));
        }
    }
    // The stream reader (no index) too, from an offset.
    let mut a = RecordReader::open(&local[1], ReadOptions::default()).unwrap();
    let mut b = RecordReader::open(&remote[1], ReadOptions::default()).unwrap();
    loop {
        let (x, y) = (a.next_record().unwrap(), b.next_record().unwrap());
        assert_eq!(x, y);
        if x.is_none() {
            break;
        }
    }
}

#[test]
fn a_table_gathered_from_s3_equals_the_local_gather() {
    moto();
    make_bucket("tables");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.npy");
    let mut w = TableWriter::create(&path, stokehold_core::DType::F32, &[5]).unwrap();
    w.append(&Tensor::from_vec(vec![1000, 5], (0..5000).map(|v| v as f32).collect()).unwrap())
        .unwrap();
    let local = w.finish().unwrap();
    storage::upload(&path, Path::new("s3://tables/t.npy")).unwrap();
    let remote = Table::open("s3://tables/t.npy").unwrap();
    assert_eq!(remote.shape(), local.shape());
    let idx: Vec<u64> = vec![999, 0, 1, 2, 500, 501, 3, 999];
    assert_eq!(local.take(&idx).unwrap(), remote.take(&idx).unwrap());
    assert_eq!(local.row(7).unwrap(), remote.row(7).unwrap());
    let err = remote.take(&[1000]).unwrap_err().to_string();
    assert!(err.contains("1000"), "{err}");
    // Through the gather op, batched.
    let ids = Dataset::from_columns(Example::new().with(
        "i",
        Tensor::from_vec(vec![40], (0..40i64).map(|i| i * 7 % 1000).collect()).unwrap(),
    ))
    .unwrap()
    .batch(8, false)
    .unwrap();
    let a = ids.gather(Arc::new(local), "i", "f");
    let b = ids.gather(Arc::new(remote), "i", "f");
    for k in 0..5 {
        assert_eq!(a.get(k).unwrap(), b.get(k).unwrap());
    }
}

#[test]
fn list_files_globs_and_whole_reads_on_s3() {
    moto();
    make_bucket("files");
    for key in [
        "d/a.npy",
        "d/b.npy",
        "d/c.txt",
        "d/sub/e.npy",
        "other/f.npy",
    ] {
        storage::write(
            Path::new(&format!("s3://files/{key}")),
            Bytes::from(key.as_bytes().to_vec()),
        )
        .unwrap();
    }
    let names = |pattern: &str| -> Vec<String> {
        let ds = list_files(&[pattern], None).unwrap();
        (0..ds.len().unwrap())
            .map(|i| {
                let e = ds.get(i).unwrap();
                let t = e.tensor("t", "path").unwrap().clone();
                String::from_utf8(t.string(0).unwrap().to_vec()).unwrap()
            })
            .collect()
    };
    assert_eq!(
        names("s3://files/d/*.npy"),
        ["s3://files/d/a.npy", "s3://files/d/b.npy"]
    );
    assert_eq!(
        names("s3://files/d/**/*.npy"),
        [
            "s3://files/d/a.npy",
            "s3://files/d/b.npy",
            "s3://files/d/sub/e.npy"
        ]
    );
    assert_eq!(names("s3://files/*/f.npy"), ["s3://files/other/f.npy"]);
    let err = list_files(&["s3://files/d/*.png"], None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("s3://files/d/*.png") && err.contains("no file matches"),
        "{err}"
    );
    assert_eq!(
        read_bytes(Path::new("s3://files/d/c.txt"))
            .unwrap()
            .as_ref(),
        b"d/c.txt"
    );
}

#[test]
fn a_key_with_dot_dot_segments_is_left_out_of_a_listing_and_named() {
    let m = moto();
    make_bucket("dotdot");
    for key in ["ds/a.bin", "ds/sub/b.bin"] {
        storage::write(
            Path::new(&format!("s3://dotdot/{key}")),
            Bytes::from_static(b"ok"),
        )
        .unwrap();
    }
    // Legal S3 keys that object_store's paths refuse: one leading out of the prefix, one with
    // an empty segment. Written unsigned, straight to moto (our client would refuse the keys).
    for target in ["/dotdot/ds/a/%2E%2E/%2E%2E/evil.bin", "/dotdot/ds/x//y.bin"] {
        let (status, _) = super::remote_server::raw_request(m.port, "PUT", target);
        assert_eq!(status, 200, "{target}");
    }
    let before = storage::remote::stats().keys_left_out;
    let names = |pattern: &str| -> Vec<String> {
        let ds = list_files(&[pattern], None).unwrap();
        (0..ds.len().unwrap())
            .map(|i| {
                let e = ds.get(i).unwrap();
                let t = e.tensor("t", "path").unwrap().clone();
                String::from_utf8(t.string(0).unwrap().to_vec()).unwrap()
            })
            .collect()
    };
    // Before, the whole listing failed on the first such key.
    assert_eq!(
        names("s3://dotdot/ds/**"),
        ["s3://dotdot/ds/a.bin", "s3://dotdot/ds/sub/b.bin"]
    );
    let left_out = storage::remote::stats().keys_left_out - before;
    assert!(left_out >= 2, "{left_out} keys left out");
    let named = storage::remote::left_out_keys();
    assert!(
        named
            .iter()
            .any(|k| k.ends_with("/dotdot: ds/a/../../evil.bin"))
            && named.iter().any(|k| k.ends_with("/dotdot: ds/x//y.bin")),
        "{named:?}"
    );
}

#[test]
fn retries_ride_out_server_errors_and_dropped_connections() {
    moto();
    make_bucket("flaky");
    let dir = tempfile::tempdir().unwrap();
    stokehold_io::shard::write_shards(
        &source(300),
        dir.path(),
        shard_opts(Compression::None),
        None,
    )
    .unwrap();
    upload_dir(dir.path(), "s3://flaky/ds");
    // Every 3rd request fails: 503, dropped connection, in turn.
    let proxy = Proxy::start(|n, _, _| match n % 6 {
        1 => Fault::ServerError,
        4 => Fault::Drop,
        _ => Fault::Pass,
    });
    proxy.route("flaky");
    let local = ShardDataset::open(dir.path()).unwrap();
    let remote = ShardDataset::open("s3://flaky/ds").unwrap();
    assert_same(&local, &remote);
    assert!(
        proxy.faults.load(Ordering::SeqCst) >= 10,
        "faults were injected"
    );
}

#[test]
fn a_truncated_body_is_an_error_naming_the_url_and_offset() {
    moto();
    make_bucket("short");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    storage::write(Path::new("s3://short/blob"), Bytes::from(data)).unwrap();
    // HEAD passes; every GET body is cut in half.
    let proxy = Proxy::start(|_, m, _| {
        if m == "GET" {
            Fault::Truncate
        } else {
            Fault::Pass
        }
    });
    proxy.route("short");
    let o = storage::open_object(Path::new("s3://short/blob")).unwrap();
    let err = o.read_range(1000..51_000).unwrap_err().to_string();
    assert!(
        err.contains("s3://short/blob") && err.contains("1000"),
        "{err}"
    );
}

#[test]
fn an_object_changed_between_two_reads_is_detected() {
    moto();
    make_bucket("changing");
    let url = Path::new("s3://changing/obj");
    storage::write(url, Bytes::from(vec![1u8; 4096])).unwrap();
    let o = storage::open_object(url).unwrap();
    assert_eq!(o.read_range(0..10).unwrap().as_ref(), &[1u8; 10]);
    storage::write(url, Bytes::from(vec![2u8; 4096])).unwrap();
    let err = o.read_range(10..20).unwrap_err().to_string();
    assert!(
        err.contains("s3://changing/obj") && err.contains("changed"),
        "{err}"
    );
}

#[test]
fn refused_credentials_and_a_missing_bucket_are_clear_errors() {
    moto();
    let proxy = Proxy::start(|_, _, _| Fault::Forbidden);
    proxy.route("locked");
    let err = storage::read(Path::new("s3://locked/x"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("s3://locked/x"), "{err}");
    assert!(
        err.contains("denied") || err.contains("Denied") || err.contains("403"),
        "{err}"
    );
    let err = ShardDataset::open("s3://no-such-bucket/ds")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("s3://no-such-bucket/ds"), "{err}");
    assert!(
        err.contains("NoSuchBucket") || err.contains("bucket") || err.contains("not found"),
        "{err}"
    );
}

extern "C" {
    fn fork() -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn _exit(code: i32) -> !;
}

#[test]
fn a_forked_child_reads_after_the_parent_used_the_store() {
    moto();
    make_bucket("forked");
    let url = Path::new("s3://forked/blob");
    storage::write(url, Bytes::from(vec![7u8; 1 << 16])).unwrap();
    let o = storage::open_object(url).unwrap();
    assert_eq!(o.read_range(0..4).unwrap().as_ref(), &[7u8; 4]);
    // SAFETY: the child only reads through the storage seam (which starts its own runtime after
    // the fork) and leaves with _exit; the parent waits for it.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = std::panic::catch_unwind(|| {
            let o = storage::open_object(url).unwrap();
            o.read_range(100..200).unwrap().as_ref() == [7u8; 100]
                && o.read_ranges(&[0..1, 60_000..60_010]).unwrap()[1].len() == 10
        });
        // SAFETY: leaves the child without running the parent's atexit handlers or tests.
        unsafe { _exit(if matches!(ok, Ok(true)) { 0 } else { 1 }) };
    }
    let start = std::time::Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: waiting on our own child; WNOHANG (1) so a hang fails the test instead.
        let r = unsafe { waitpid(pid, &mut status, 1) };
        if r == pid {
            break;
        }
        assert!(start.elapsed().as_secs() < 60, "the forked child hangs");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(status, 0, "the child read correctly");
    // The parent still reads too.
    assert_eq!(o.read_range(4..8).unwrap().as_ref(), &[7u8; 4]);
}

//! A sequential epoch over a remote shard folder reads whole shards ahead (about one GET per
//! shard), equal to the local read; random access keeps one ranged read per record.

use stokehold_core::{Dataset, MapDataset};
use stokehold_io::shard::{Compression, ShardDataset};
use stokehold_io::storage::stream_ahead::RUN;

use super::remote::{shard_opts, source, upload_dir};
use super::remote_server::{make_bucket, moto, Fault, Proxy};

/// A folder of `n` records in `bucket` behind a counting proxy: (local, remote, proxy, shards).
fn setup(bucket: &str, n: usize) -> (tempfile::TempDir, ShardDataset, ShardDataset, Proxy) {
    moto();
    make_bucket(bucket);
    let dir = tempfile::tempdir().unwrap();
    stokehold_io::shard::write_shards(&source(n), dir.path(), shard_opts(Compression::Zstd), None)
        .unwrap();
    let url = format!("s3://{bucket}/ds");
    upload_dir(dir.path(), &url);
    let proxy = Proxy::start(|_, _, _| Fault::Pass);
    proxy.route(bucket);
    let local = ShardDataset::open(dir.path()).unwrap();
    let remote = ShardDataset::open(&url).unwrap();
    proxy.clear(); // opening's reads (manifest, ends, indexes) are not the epoch's
    (dir, local, remote, proxy)
}

#[test]
fn a_sequential_epoch_reads_about_one_get_per_shard() {
    let (_dir, local, remote, proxy) = setup("streamed", 400);
    let shards = local.manifest().shards.len();
    assert!(shards >= 8, "{shards} shards");
    for i in 0..local.len() {
        assert_eq!(
            local.raw_record(i).unwrap(),
            remote.raw_record(i).unwrap(),
            "record {i}"
        );
    }
    // Requests counted once each (a hedge on a loaded machine repeats one). The first RUN reads
    // are ranged (the reads are not yet known to be in order), then one whole GET per shard.
    let gets = proxy.distinct_gets_of(".stk");
    assert!(
        gets <= shards + RUN as usize,
        "{gets} GETs for {shards} shards"
    );

    // A second epoch through the pipeline, batched: the same.
    proxy.clear();
    let (a, b) = (
        Dataset::from_map(local).batch(16, false).unwrap(),
        Dataset::from_map(remote).batch(16, false).unwrap(),
    );
    let (mut ia, mut ib) = (a.iter(0).unwrap(), b.iter(0).unwrap());
    loop {
        let (x, y) = (ia.next().unwrap(), ib.next().unwrap());
        assert_eq!(x, y);
        if x.is_none() {
            break;
        }
    }
    let gets = proxy.distinct_gets_of(".stk");
    assert!(
        gets <= shards + RUN as usize,
        "{gets} GETs for {shards} shards"
    );
}

#[test]
fn a_sequential_read_of_indexed_tfrecords_reads_whole_files() {
    moto();
    make_bucket("tfstream");
    let opts = stokehold_io::tfrecord::ShardOptions {
        num_shards: Some(4),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let write = |to: &std::path::Path| {
        stokehold_io::tfrecord::write_tfrecord_shards(&source(300), to, &opts, &mut |_| {}).unwrap()
    };
    let (local, remote) = (
        write(dir.path()),
        write(std::path::Path::new("s3://tfstream/tf")),
    );
    let proxy = Proxy::start(|_, _, _| Fault::Pass);
    proxy.route("tfstream");
    let read = stokehold_io::tfrecord::ReadOptions::default();
    let (l, _) = stokehold_io::tfrecord::tfrecord_dataset(&local, read).unwrap();
    let (r, _) = stokehold_io::tfrecord::tfrecord_dataset(&remote, read).unwrap();
    assert!(r.is_random_access());
    proxy.clear();
    for i in 0..l.len().unwrap() {
        assert_eq!(l.get(i).unwrap(), r.get(i).unwrap(), "record {i}");
    }
    let gets = proxy.distinct_gets_of(".tfrecord");
    assert!(
        gets <= remote.len() + RUN as usize,
        "{gets} GETs for {} files",
        remote.len()
    );
}

extern "C" {
    fn fork() -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn _exit(code: i32) -> !;
}

#[test]
fn a_child_forked_mid_read_ahead_reads_in_order_without_hanging() {
    let (_dir, local, remote, _proxy) = setup("forkahead", 400);
    // The parent is mid-epoch: whole shards are being fetched ahead on its threads.
    for i in 0..40 {
        assert_eq!(local.raw_record(i).unwrap(), remote.raw_record(i).unwrap());
    }
    // SAFETY: the child only reads through the dataset (the storage seam starts its own runtime
    // and the reader its own read-ahead after the fork) and leaves with _exit.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = std::panic::catch_unwind(|| {
            (0..local.len()).all(|i| local.raw_record(i).unwrap() == remote.raw_record(i).unwrap())
        });
        // SAFETY: leaves the child without running the parent's atexit handlers or tests.
        unsafe { _exit(if matches!(ok, Ok(true)) { 0 } else { 1 }) };
    }
    let start = std::time::Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: waiting on our own child; WNOHANG (1) so a hang fails the test instead.
        if unsafe { waitpid(pid, &mut status, 1) } == pid {
            break;
        }
        assert!(start.elapsed().as_secs() < 60, "the forked child hangs");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(status, 0, "the child read every record equal");
    for i in 40..local.len() {
        assert_eq!(local.raw_record(i).unwrap(), remote.raw_record(i).unwrap());
    }
}

#[test]
fn random_access_keeps_ranged_reads() {
    let (_dir, local, remote, proxy) = setup("randomly", 300);
    // Reads 97 records apart (further than the reader's notion of "in order"): one ranged GET
    // of a record each, never a whole shard.
    let n = local.len();
    let idx: Vec<u64> = (0..60).map(|k| (k * 97) % n).collect();
    for &i in &idx {
        assert_eq!(local.get(i).unwrap(), remote.get(i).unwrap(), "record {i}");
    }
    // Distinct requests: a hedge (a slow answer on a loaded machine) repeats one.
    assert_eq!(
        proxy.distinct_gets_of(".stk"),
        idx.len(),
        "one GET per record"
    );
    let gets = proxy.gets_of(".stk");
    let smallest = local
        .manifest()
        .shards
        .iter()
        .map(|s| s.bytes)
        .min()
        .unwrap();
    for g in &gets {
        let r = g.range.as_deref().expect("a ranged GET");
        let (a, b) = r.trim_start_matches("bytes=").split_once('-').unwrap();
        let len = b.parse::<u64>().unwrap() + 1 - a.parse::<u64>().unwrap();
        assert!(len < smallest, "{r}: a record, not a shard");
    }
}

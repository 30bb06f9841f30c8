//! The local shard cache over S3 (moto on loopback, requests counted by the proxy): a shard
//! folder read through the cache equals the local read byte for byte, a warm open downloads no
//! shard, a cap smaller than the folder is a clear error, and a process killed while filling the
//! cache from S3 leaves no complete-looking file.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stokehold_core::MapDataset;
use stokehold_io::shard::cached_shards::{open_cached, shard_source};
use stokehold_io::shard::{Compression, ShardDataset};
use stokehold_io::storage::local_cache::LocalCache;

use super::remote::{assert_same, shard_opts, source, upload_dir};
use super::remote_server::{make_bucket, moto, Fault, Proxy};

/// Writes a shard folder of `n` records locally and uploads it to `url`; the local reader.
fn folder(n: usize, url: &str) -> (tempfile::TempDir, ShardDataset) {
    let dir = tempfile::tempdir().unwrap();
    stokehold_io::shard::write_shards(&source(n), dir.path(), shard_opts(Compression::Zstd), None)
        .unwrap();
    upload_dir(dir.path(), url);
    let local = ShardDataset::open(dir.path()).unwrap();
    (dir, local)
}

fn open(url: &str, cache: &LocalCache) -> stokehold_core::Result<ShardDataset> {
    open_cached(shard_source(Path::new(url))?, cache, true, 4)
}

/// GETs of shard files (`shard-NNNNN.stk`) the proxy saw.
fn shard_gets(proxy: &Proxy) -> usize {
    proxy.gets_of(".stk").len()
}

#[test]
fn a_shard_folder_from_s3_through_the_cache_equals_the_local_read() {
    moto();
    make_bucket("cached");
    let url = "s3://cached/ds";
    let (dir, local) = folder(300, url);
    let shards = local.manifest().shards.len();
    assert!(shards > 3, "several shards");
    let proxy = Proxy::start(|_, _, _| Fault::Pass);
    proxy.route("cached");
    let cdir = tempfile::tempdir().unwrap();
    let cache = LocalCache::open(cdir.path(), 1 << 30).unwrap();

    let cold = open(url, &cache).unwrap();
    assert_same(&local, &cold);
    cold.verify().unwrap();
    for s in &local.manifest().shards {
        let a = std::fs::read(dir.path().join(&s.file)).unwrap();
        let key = format!("{url}/{}", s.file);
        let entry = cache.get(&key, &s.crc32c, s.bytes).unwrap().unwrap();
        let b = entry.map().unwrap().to_vec();
        assert!(a == b, "{}: the cached copy differs", s.file);
    }
    assert_eq!(shard_gets(&proxy), shards, "one whole GET per shard");

    // Warm: the manifest is read again, no shard is.
    proxy.clear();
    let warm = open(url, &cache).unwrap();
    assert_same(&local, &warm);
    assert_eq!(shard_gets(&proxy), 0, "{:?}", proxy.seen());
    assert!(
        !proxy.gets_of("manifest.json").is_empty(),
        "the manifest comes from S3"
    );
}

#[test]
fn a_cache_cap_smaller_than_the_s3_folder_is_a_clear_error() {
    moto();
    make_bucket("capped");
    let url = "s3://capped/ds";
    let (_dir, local) = folder(200, url);
    let proxy = Proxy::start(|_, _, _| Fault::Pass);
    proxy.route("capped");
    let total: u64 = local.manifest().shards.iter().map(|s| s.bytes).sum();
    let biggest = local
        .manifest()
        .shards
        .iter()
        .map(|s| s.bytes)
        .max()
        .unwrap();
    // Smaller than one shard, then holding a shard but not the folder.
    for cap in [biggest - 1, total - 1] {
        let cdir = tempfile::tempdir().unwrap();
        let cache = LocalCache::open(cdir.path(), cap).unwrap();
        let err = open(url, &cache).err().expect("refused").to_string();
        assert!(
            err.contains(url) && err.contains(&total.to_string()) && err.contains(&cap.to_string()),
            "{err}"
        );
    }
    assert_eq!(
        shard_gets(&proxy),
        0,
        "nothing downloaded for a refused folder"
    );
}

const CHILD_ENV: &str = "STOKEHOLD_REMOTE_CACHE_CHILD";

/// Child body (`endpoint|url|cache dir`): opens the folder through the cache, S3 reached at
/// `endpoint` (the parent's proxy, which hangs the shard download half-way).
#[test]
fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let (endpoint, url, dir) = (parts[0], parts[1], parts[2]);
    stokehold_io::storage::remote::set_options(
        "",
        vec![
            ("aws_endpoint".into(), endpoint.into()),
            ("aws_access_key_id".into(), "testing".into()),
            ("aws_secret_access_key".into(), "testing".into()),
            ("aws_region".into(), "us-east-1".into()),
        ],
    )
    .unwrap();
    let cache = LocalCache::open(dir, 1 << 30).unwrap();
    let _ = open_cached(shard_source(Path::new(url)).unwrap(), &cache, true, 1);
}

/// Entries and temporary files in the cache folder (not its locks and mirrors).
fn cache_files(dir: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            (n, e.metadata().unwrap().len())
        })
        .filter(|(n, _)| !n.starts_with(".index"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_process_killed_while_filling_from_s3_leaves_no_complete_looking_file() {
    moto();
    make_bucket("killed");
    let url = "s3://killed/ds";
    let (_dir, local) = folder(200, url);
    // Shard downloads send half their body, then hang; everything else passes.
    let proxy = Proxy::start(|_, m, t| {
        if m == "GET" && t.split('?').next().unwrap().ends_with(".stk") {
            Fault::HalfThenStall
        } else {
            Fault::Pass
        }
    });
    let root = tempfile::tempdir().unwrap();
    let cdir = root.path().join("cache");
    let spec = format!("http://127.0.0.1:{}|{url}|{}", proxy.port, cdir.display());
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "remote_cache::child", "--test-threads=1", "-q"])
        .env(CHILD_ENV, spec)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once a fill has written part of a shard.
    let t0 = Instant::now();
    while !cdir.exists() || !cache_files(&cdir).iter().any(|(_, len)| *len > 0) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the child never filled"
        );
        assert!(child.try_wait().unwrap().is_none(), "the child ended early");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let left = cache_files(&cdir);
    assert!(
        left.iter()
            .all(|(n, _)| n.starts_with('.') && n.contains(".tmp-")),
        "only hidden temporary files: {left:?}"
    );
    // Reopened: the dead fill's file goes, and the folder reads whole (straight from moto).
    let cache = LocalCache::open(&cdir, 1 << 30).unwrap();
    assert!(cache_files(&cdir).is_empty(), "{:?}", cache_files(&cdir));
    let ds = open(url, &cache).unwrap();
    assert_same(&local, &ds);
    assert_eq!(ds.len(), 200);
}

//! A shard folder read through the local shard cache from a source that is not the local reader:
//! here a folder served by copying (the object-store backends plug in the same way), counting
//! downloads. Equal to the direct read; a second open downloads nothing; a transfer that changes a
//! byte is refused; a dataset larger than the cap is refused; a rewritten dataset is read anew.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use stokehold_core::{Error, MapDataset, Result};
use stokehold_io::shard::cached_shards::{open_cached, ShardSource};
use stokehold_io::shard::{write_shards, Compression, ShardDataset, WriteOptions};
use stokehold_io::storage::local_cache::LocalCache;

use super::shard_format::{opts, sample};

struct Folder {
    dir: PathBuf,
    downloads: AtomicUsize,
    flip_byte: bool,
}

impl ShardSource for Folder {
    fn url(&self) -> String {
        format!("test://{}", self.dir.display())
    }
    fn manifest(&self) -> Result<Vec<u8>> {
        let p = self.dir.join("manifest.json");
        std::fs::read(&p).map_err(|e| Error::io(p, e))
    }
    fn download(&self, file: &str, size: u64, out: &mut File) -> Result<()> {
        self.downloads.fetch_add(1, Ordering::SeqCst);
        let p = self.dir.join(file);
        let mut bytes = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
        assert_eq!(bytes.len() as u64, size);
        if self.flip_byte {
            bytes[size as usize / 2] ^= 1;
        }
        out.write_all(&bytes).map_err(|e| Error::io(&p, e))
    }
}

fn source(dir: &std::path::Path, flip_byte: bool) -> Arc<Folder> {
    Arc::new(Folder {
        dir: dir.to_path_buf(),
        downloads: AtomicUsize::new(0),
        flip_byte,
    })
}

fn write(dir: &std::path::Path, n: u64) -> ShardDataset {
    let o = WriteOptions {
        overwrite: true,
        ..opts(2048, Compression::None)
    };
    write_shards(&sample(n), dir, o, None).unwrap();
    ShardDataset::open(dir).unwrap()
}

#[test]
fn cached_read_equals_local_and_warm_open_downloads_nothing() {
    let root = tempfile::tempdir().unwrap();
    let src_dir = root.path().join("src");
    let local = write(&src_dir, 300);
    let shards = local.manifest().shards.len();
    assert!(shards > 3, "want several shards, got {shards}");
    let cache = LocalCache::open(root.path().join("cache"), 1 << 30).unwrap();
    let src = source(&src_dir, false);
    let ds = open_cached(src.clone(), &cache, true, 3).unwrap();
    assert_eq!(ds.len(), local.len());
    for i in 0..ds.len() {
        assert_eq!(ds.get(i).unwrap(), local.get(i).unwrap(), "record {i}");
    }
    assert_eq!(src.downloads.load(Ordering::SeqCst), shards);
    let again = open_cached(src.clone(), &cache, true, 3).unwrap();
    assert_eq!(again.get(7).unwrap(), local.get(7).unwrap());
    assert_eq!(
        src.downloads.load(Ordering::SeqCst),
        shards,
        "warm: no downloads"
    );
    // A rewritten dataset (new manifest) is read anew, never from the old entries.
    let local2 = write(&src_dir, 120);
    let ds2 = open_cached(src.clone(), &cache, true, 3).unwrap();
    assert_eq!(ds2.len(), 120);
    assert_eq!(ds2.get(119).unwrap(), local2.get(119).unwrap());
}

#[test]
fn changed_bytes_in_transit_are_refused_and_not_cached() {
    let root = tempfile::tempdir().unwrap();
    let src_dir = root.path().join("src");
    write(&src_dir, 100);
    let cache = LocalCache::open(root.path().join("cache"), 1 << 30).unwrap();
    let err = open_cached(source(&src_dir, true), &cache, true, 2)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("checksum") && err.contains("test://"), "{err}");
    assert_eq!(cache.used_bytes(), 0);
    // A good transfer afterwards works.
    open_cached(source(&src_dir, false), &cache, true, 2).unwrap();
}

#[test]
fn dataset_larger_than_the_cap_is_refused_clearly() {
    let root = tempfile::tempdir().unwrap();
    let src_dir = root.path().join("src");
    write(&src_dir, 100);
    let cache = LocalCache::open(root.path().join("cache"), 4096).unwrap();
    let src = source(&src_dir, false);
    let err = open_cached(src.clone(), &cache, true, 2).err().unwrap();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("raise the cache cap"), "{err}");
    assert_eq!(src.downloads.load(Ordering::SeqCst), 0);
}

/// The mirror name the cache used to take, `.mirrors/<crc64(url)>-<crc64(manifest)>`, planted as
/// a link to another folder: nothing is written through it, and the open still reads right.
#[test]
fn planted_mirror_link_is_never_written_through() {
    let root = tempfile::tempdir().unwrap();
    let src_dir = root.path().join("src");
    let local = write(&src_dir, 300);
    let cdir = root.path().join("cache");
    let cache = LocalCache::open(&cdir, 1 << 30).unwrap();
    let src = source(&src_dir, false);
    let h = |b: &[u8]| crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, b);
    let manifest = std::fs::read(src_dir.join("manifest.json")).unwrap();
    let victim = root.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("manifest.json"), b"precious").unwrap();
    std::fs::write(victim.join("shard-00000.stk"), b"precious").unwrap();
    std::fs::create_dir(cdir.join(".mirrors")).unwrap();
    let name = format!("{:016x}-{:016x}", h(src.url().as_bytes()), h(&manifest));
    std::os::unix::fs::symlink(&victim, cdir.join(".mirrors").join(name)).unwrap();
    let ds = open_cached(src.clone(), &cache, true, 3).unwrap();
    for i in 0..ds.len() {
        assert_eq!(ds.get(i).unwrap(), local.get(i).unwrap(), "record {i}");
    }
    let mut left: Vec<_> = std::fs::read_dir(&victim)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["manifest.json", "shard-00000.stk"]);
    for f in &left {
        assert_eq!(std::fs::read(victim.join(f)).unwrap(), b"precious", "{f}");
    }
}

/// A source that, once its last shard is downloaded, removes every other entry from the cache
/// folder: what another process with a smaller cap does between this one's download and its open.
struct Evicting(Arc<Folder>, PathBuf, usize);

impl ShardSource for Evicting {
    fn url(&self) -> String {
        self.0.url()
    }
    fn manifest(&self) -> Result<Vec<u8>> {
        self.0.manifest()
    }
    fn download(&self, file: &str, size: u64, out: &mut File) -> Result<()> {
        self.0.download(file, size, out)?;
        if self
            .0
            .downloads
            .load(Ordering::SeqCst)
            .is_multiple_of(self.2)
        {
            for e in std::fs::read_dir(&self.1).unwrap().flatten() {
                if e.file_name().to_string_lossy().ends_with(".shard") {
                    std::fs::remove_file(e.path()).unwrap();
                }
            }
        }
        Ok(())
    }
}

#[test]
fn entries_evicted_by_another_process_before_the_open_are_still_read() {
    let root = tempfile::tempdir().unwrap();
    let src_dir = root.path().join("src");
    let local = write(&src_dir, 300);
    let shards = local.manifest().shards.len();
    let cdir = root.path().join("cache");
    let cache = LocalCache::open(&cdir, 1 << 30).unwrap();
    let src = Arc::new(Evicting(source(&src_dir, false), cdir.clone(), shards));
    let ds = open_cached(src.clone(), &cache, true, 1).unwrap();
    assert_eq!(ds.len(), local.len());
    for i in 0..ds.len() {
        assert_eq!(ds.get(i).unwrap(), local.get(i).unwrap(), "record {i}");
    }
    assert_eq!(
        src.0.downloads.load(Ordering::SeqCst),
        shards,
        "no download twice"
    );
}

const CHILD_ENV: &str = "STOKEHOLD_CACHED_SHARDS_CHILD";

/// Child body for `read_only_cache_serves_a_warm_open`: `src|cache`. Run as another user when
/// the test runs as root (root writes anywhere), else in a folder made read-only.
#[test]
fn child_read_only() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (src_dir, cdir) = spec.split_once('|').unwrap();
    // SAFETY: plain libc calls in a single-purpose child.
    unsafe {
        if libc::geteuid() == 0 {
            assert_eq!(libc::setgid(65534), 0);
            assert_eq!(libc::setuid(65534), 0);
            // setuid makes the process undumpable, which closes /proc/self/fd to it.
            libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
        }
    }
    let local = ShardDataset::open(src_dir).unwrap();
    let cache = LocalCache::open(cdir, 1 << 30).unwrap();
    assert!(cache.is_read_only());
    let src = source(std::path::Path::new(src_dir), false);
    let ds = open_cached(src.clone(), &cache, true, 2).unwrap();
    for i in 0..ds.len() {
        assert_eq!(ds.get(i).unwrap(), local.get(i).unwrap(), "record {i}");
    }
    assert_eq!(src.downloads.load(Ordering::SeqCst), 0);
    // A miss names the folder and says why.
    let err = cache
        .get_or_fill("test://missing", "v", 3, |_| panic!("no fill"))
        .unwrap_err()
        .to_string();
    assert!(err.contains(cdir) && err.contains("read-only"), "{err}");
}

fn chmod_tree(p: &std::path::Path, dir_mode: u32, file_mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let md = std::fs::symlink_metadata(p).unwrap();
    if md.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            chmod_tree(&e.unwrap().path(), dir_mode, file_mode);
        }
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(dir_mode)).unwrap();
    } else if md.is_file() {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(file_mode)).unwrap();
    }
}

/// A cache warmed, then made read-only: a warm open reads every shard from it (it failed with
/// EACCES / EROFS on `.index.lock`).
#[test]
fn read_only_cache_serves_a_warm_open() {
    let root = tempfile::tempdir().unwrap();
    let src_dir = root.path().join("src");
    write(&src_dir, 300);
    let cdir = root.path().join("cache");
    let cache = LocalCache::open(&cdir, 1 << 30).unwrap();
    open_cached(source(&src_dir, false), &cache, true, 3).unwrap();
    drop(cache);
    chmod_tree(root.path(), 0o555, 0o444);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "cached_shards::child_read_only",
            "--test-threads=1",
        ])
        .env(
            CHILD_ENV,
            format!("{}|{}", src_dir.display(), cdir.display()),
        )
        .output()
        .unwrap();
    chmod_tree(root.path(), 0o755, 0o644);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the child ran: {text}");
}

const CHURN_ENV: &str = "STOKEHOLD_CACHED_SHARDS_CHURN";

/// Child body for `two_processes_with_different_caps_share_one_cache`: `root|cache|cap|offset`.
/// Opens the three datasets under `root` in turn through the cache, 15 times, checking every
/// record against the direct read.
#[test]
fn child_churn() {
    let Ok(spec) = std::env::var(CHURN_ENV) else {
        return;
    };
    let p: Vec<&str> = spec.split('|').collect();
    let (root, cdir) = (std::path::Path::new(p[0]), p[1]);
    let (cap, offset): (u64, usize) = (p[2].parse().unwrap(), p[3].parse().unwrap());
    let cache = LocalCache::open(cdir, cap).unwrap();
    for round in 0..15 {
        let d = root.join(format!("ds{}", (round + offset) % 3));
        let local = ShardDataset::open(&d).unwrap();
        let ds = open_cached(source(&d, false), &cache, true, 2)
            .unwrap_or_else(|e| panic!("round {round}, {}: {e}", d.display()));
        assert_eq!(ds.len(), local.len());
        for i in 0..ds.len() {
            assert_eq!(
                ds.get(i).unwrap(),
                local.get(i).unwrap(),
                "round {round} record {i}"
            );
        }
    }
}

/// Two processes share one cache folder with different caps (one holds one dataset, the other
/// two), so each evicts what the other is about to open: every open of both reads right.
#[test]
fn two_processes_with_different_caps_share_one_cache() {
    let root = tempfile::tempdir().unwrap();
    let mut sizes = Vec::new();
    for (k, n) in [300, 200, 250].into_iter().enumerate() {
        let ds = write(&root.path().join(format!("ds{k}")), n);
        sizes.push(ds.manifest().shards.iter().map(|s| s.bytes).sum::<u64>());
    }
    sizes.sort();
    let cdir = root.path().join("cache");
    let spawn = |cap: u64, offset: usize| {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "cached_shards::child_churn", "--test-threads=1"])
            .env(
                CHURN_ENV,
                format!(
                    "{}|{}|{cap}|{offset}",
                    root.path().display(),
                    cdir.display()
                ),
            )
            .output()
            .unwrap()
    };
    let (small, large) = (sizes[2], sizes[2] + sizes[1]);
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| spawn(small, 0));
        let b = spawn(large, 1);
        (a.join().unwrap(), b)
    });
    for out in [a, b] {
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 passed"), "the child ran: {text}");
    }
}

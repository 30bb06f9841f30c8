//! The local shard cache with real files and real processes: the cap, a fill killed by SIGKILL,
//! two processes filling one key, stale temporary files, LRU order, changed objects.
//!
//! Child processes are this test binary re-run with only `local_cache::child` selected and what
//! to do in an environment variable.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use stokehold_core::{Error, Result};
use stokehold_io::storage::local_cache::LocalCache;

const CHILD_ENV: &str = "STOKEHOLD_CACHE_CHILD";
const SIZE: u64 = 64 * 1024;

fn body(tag: u8, size: u64) -> Vec<u8> {
    (0..size).map(|i| tag.wrapping_add(i as u8)).collect()
}

fn write(f: &mut fs::File, bytes: &[u8]) -> Result<()> {
    f.write_all(bytes).map_err(|e| Error::io("fill", e))
}

/// Child body: `mode|dir|marker`. `hang`: writes half the object, creates the marker, sleeps
/// (to be killed). `fill`: fills slowly, appending one line to the marker per fill it runs.
#[test]
fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let (mode, dir, marker) = (parts[0], parts[1], parts[2]);
    let cache = LocalCache::open(dir, 1 << 20).unwrap();
    let got = cache
        .get_or_fill("s3://b/shard-0", "v1", SIZE, |f| {
            let data = body(7, SIZE);
            write(f, &data[..SIZE as usize / 2])?;
            f.sync_all().unwrap();
            let mut m = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(marker)
                .unwrap();
            writeln!(m, "{}", std::process::id()).unwrap();
            let nap = if mode == "hang" { 60_000 } else { 300 };
            std::thread::sleep(Duration::from_millis(nap));
            write(f, &data[SIZE as usize / 2..])
        })
        .unwrap();
    assert_eq!(&got.map().unwrap()[..], &body(7, SIZE)[..]);
}

fn spawn(mode: &str, dir: &Path, marker: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "local_cache::child", "--test-threads=1", "-q"])
        .env(
            CHILD_ENV,
            format!("{mode}|{}|{}", dir.display(), marker.display()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(".locks") && !n.starts_with(".index"))
        .collect();
    v.sort();
    v
}

fn fill_bytes(cache: &LocalCache, key: &str, version: &str, bytes: &[u8]) -> Result<Vec<u8>> {
    let got = cache.get_or_fill(key, version, bytes.len() as u64, |f| write(f, bytes))?;
    Ok(got.map()?.to_vec())
}

#[test]
fn cap_smaller_than_one_shard_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let cache = LocalCache::open(dir.path(), 1000).unwrap();
    let mut called = false;
    let err = cache
        .get_or_fill("s3://b/big-shard", "v1", 1001, |_| {
            called = true;
            Ok(())
        })
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::InvalidArgument(_)), "{msg}");
    assert!(msg.contains("s3://b/big-shard") && msg.contains("1001") && msg.contains("1000"));
    assert!(!called, "nothing is downloaded for a refused object");
    // Exactly the cap fits.
    assert_eq!(
        fill_bytes(&cache, "s3://b/s", "v1", &[1; 1000]).unwrap(),
        [1; 1000]
    );
}

#[test]
fn fill_killed_by_sigkill_leaves_no_complete_looking_file() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache");
    let marker = root.path().join("marker");
    let mut child = spawn("hang", &dir, &marker);
    let t0 = Instant::now();
    while !marker.exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "child never filled");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let left = names(&dir);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0].starts_with('.') && left[0].contains(".tmp-"),
        "{left:?}"
    );
    // Reopening removes the dead fill's file; a lookup misses; a new fill is whole.
    let cache = LocalCache::open(&dir, 1 << 20).unwrap();
    assert_eq!(names(&dir), Vec::<String>::new());
    assert!(cache.get("s3://b/shard-0", "v1", SIZE).unwrap().is_none());
    let data = body(7, SIZE);
    assert_eq!(
        fill_bytes(&cache, "s3://b/shard-0", "v1", &data).unwrap(),
        data
    );
}

#[test]
fn two_processes_fill_one_key_once() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache");
    let marker = root.path().join("fills");
    let mut a = spawn("fill", &dir, &marker);
    let mut b = spawn("fill", &dir, &marker);
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());
    let fills = fs::read_to_string(&marker).unwrap();
    assert_eq!(
        fills.lines().count(),
        1,
        "one download for two processes: {fills}"
    );
    let cache = LocalCache::open(&dir, 1 << 20).unwrap();
    let hit = cache.get("s3://b/shard-0", "v1", SIZE).unwrap().unwrap();
    assert_eq!(&hit.map().unwrap()[..], &body(7, SIZE)[..]);
}

/// The pid of a process that has exited.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[test]
fn open_removes_only_dead_fills_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let dead = dir
        .path()
        .join(format!(".00-00-10.shard.tmp-{}-0", dead_pid()));
    let live = dir
        .path()
        .join(format!(".00-00-10.shard.tmp-{}-0", std::process::id()));
    fs::write(&dead, b"half").unwrap();
    fs::write(&live, b"half").unwrap();
    let cache = LocalCache::open(dir.path(), 100).unwrap();
    assert!(!dead.exists(), "a dead process's fill is cleaned");
    assert!(live.exists(), "a live process's fill is kept");
    // The live fill's declared 10 bytes count against the cap.
    assert_eq!(cache.used_bytes(), 10);
}

#[test]
fn eviction_removes_least_recently_used_first() {
    let dir = tempfile::tempdir().unwrap();
    let cache = LocalCache::open(dir.path(), 300).unwrap();
    for k in ["a", "b", "c"] {
        fill_bytes(&cache, k, "v", &[k.as_bytes()[0]; 100]).unwrap();
    }
    assert!(cache.get("a", "v", 100).unwrap().is_some()); // a is now newer than b and c
                                                          // A reader that has b mapped keeps reading it after b's eviction.
    let b_map = cache.get("b", "v", 100).unwrap().unwrap().map().unwrap();
    assert!(cache.get("a", "v", 100).unwrap().is_some());
    assert!(cache.get("c", "v", 100).unwrap().is_some()); // order now b, a, c
    fill_bytes(&cache, "d", "v", &[b'd'; 100]).unwrap();
    assert_eq!(&b_map[..], &[b'b'; 100]);
    let present = |k: &str| cache.get(k, "v", 100).unwrap().is_some();
    assert!(!present("b"), "b was the least recently used");
    assert!(present("a") && present("c") && present("d"));
    assert!(cache.used_bytes() <= 300);
    // A bigger object evicts as many as it needs, oldest first (a, c, d were used in that order).
    fill_bytes(&cache, "e", "v", &[b'e'; 200]).unwrap();
    let now: Vec<bool> = ["a", "c", "d"].map(present).to_vec();
    assert_eq!(now, [false, false, true], "{:?}", names(dir.path()));
    assert!(cache.get("e", "v", 200).unwrap().is_some());
}

#[test]
fn changed_object_is_never_served_stale() {
    let dir = tempfile::tempdir().unwrap();
    let cache = LocalCache::open(dir.path(), 1000).unwrap();
    assert_eq!(fill_bytes(&cache, "k", "etag-1", b"old").unwrap(), b"old");
    let mut filled = false;
    let got = cache
        .get_or_fill("k", "etag-2", 3, |f| {
            filled = true;
            write(f, b"new")
        })
        .unwrap();
    assert!(filled && !got.was_hit());
    assert_eq!(&got.map().unwrap()[..], b"new");
    assert!(
        cache.get("k", "etag-1", 3).unwrap().is_none(),
        "old version removed"
    );
    // Same version, new size: also a miss.
    assert!(cache.get("k", "etag-2", 4).unwrap().is_none());
}

#[test]
fn fill_of_the_wrong_length_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cache = LocalCache::open(dir.path(), 1000).unwrap();
    let err = cache
        .get_or_fill("s3://b/k", "v", 10, |f| write(f, b"short"))
        .unwrap_err();
    assert!(err.to_string().contains("wrote 5 bytes"), "{err}");
    let err = cache
        .get_or_fill("s3://b/k", "v", 10, |_| Err(Error::invalid("network down")))
        .unwrap_err();
    assert!(err.to_string().contains("network down"));
    let left: Vec<PathBuf> = fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.ends_with(".locks") && !p.ends_with(".index.lock"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

fn symlink(target: &Path, at: &Path) {
    let _ = fs::remove_file(at);
    std::os::unix::fs::symlink(target, at).unwrap();
}

/// Symlinks planted as the fill locks (`.locks/NN`, all 256) or the index lock: refused with an
/// error naming the link, and their targets never created (they were, through the link).
#[test]
fn planted_lock_links_are_refused_and_their_targets_untouched() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache");
    let victim = root.path().join("victim");
    fs::create_dir(&victim).unwrap();
    drop(LocalCache::open(&dir, 1 << 20).unwrap());
    for i in 0..256 {
        let at = dir.join(".locks").join(format!("{i:02x}"));
        symlink(&victim.join(format!("lock-{i:02x}")), &at);
    }
    let cache = LocalCache::open(&dir, 1 << 20).unwrap();
    let err = fill_bytes(&cache, "s3://b/k", "v1", b"abc")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(".locks/") && err.contains("symbolic link"),
        "{err}"
    );
    symlink(&victim.join("index"), &dir.join(".index.lock"));
    let err = LocalCache::open(&dir, 1 << 20).unwrap_err().to_string();
    assert!(
        err.contains(".index.lock") && err.contains("symbolic link"),
        "{err}"
    );
    let err = fill_bytes(&cache, "s3://b/k", "v1", b"abc")
        .unwrap_err()
        .to_string();
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(
        fs::read_dir(&victim).unwrap().count(),
        0,
        "nothing created through a link"
    );
    // A FIFO under an entry's name is refused at once (not waited on); the folder was made 0700.
    let h = |s: &str| crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, s.as_bytes());
    let entry = dir.join(format!("{:016x}-{:016x}-3.shard", h("s3://b/f"), h("v1")));
    let c = std::ffi::CString::new(entry.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let err = cache.get("s3://b/f", "v1", 3).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    // The cache folder itself as a link, writable by others, or another user's: refused.
    symlink(&dir, &root.path().join("alias"));
    let err = LocalCache::open(root.path().join("alias"), 1 << 20)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("alias") && err.contains("symbolic link"),
        "{err}"
    );
    let open = root.path().join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    let err = LocalCache::open(&open, 1 << 20).unwrap_err().to_string();
    assert!(err.contains("writable by group or others"), "{err}");
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&victim, Some(65534), Some(65534)).unwrap();
        let err = LocalCache::open(&victim, 1 << 20).unwrap_err().to_string();
        assert!(err.contains("owned by uid 65534"), "{err}");
    }
}

/// Child body for the full-disk test: `dir|marker`. A file-size limit (SIGXFSZ ignored, so
/// writes past it fail with EFBIG) stands for a full disk; the error is written to the marker.
#[test]
fn child_full_disk() {
    let Ok(spec) = std::env::var("STOKEHOLD_CACHE_FULL_CHILD") else {
        return;
    };
    let (dir, marker) = spec.split_once('|').unwrap();
    // SAFETY: plain libc calls in a single-purpose child.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let lim = libc::rlimit {
            rlim_cur: 48 * 1024,
            rlim_max: 48 * 1024,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
    let cache = LocalCache::open(dir, 1 << 20).unwrap();
    let mut tries = 0;
    let err = cache
        .get_or_fill("s3://b/big", "v1", SIZE, |f| {
            tries += 1;
            write(f, &body(9, SIZE))
        })
        .unwrap_err();
    fs::write(marker, format!("{tries}\n{err}")).unwrap();
}

/// A fill the disk cannot hold evicts least recently used entries and tries once more; failing
/// again, the error names the cache folder and its cap, and no temporary file is left.
#[test]
fn full_disk_evicts_retries_once_then_names_the_folder_and_cap() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache");
    let marker = root.path().join("marker");
    let cache = LocalCache::open(&dir, 1 << 20).unwrap();
    for k in 0..3u8 {
        fill_bytes(
            &cache,
            &format!("s3://b/old-{k}"),
            "v1",
            &body(k, 32 * 1024),
        )
        .unwrap();
    }
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "local_cache::child_full_disk",
            "--test-threads=1",
            "-q",
        ])
        .env(
            "STOKEHOLD_CACHE_FULL_CHILD",
            format!("{}|{}", dir.display(), marker.display()),
        )
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let said = fs::read_to_string(&marker).unwrap();
    let (tries, err) = said.split_once('\n').unwrap();
    assert_eq!(tries, "2", "one retry: {err}");
    assert!(
        err.contains(&dir.display().to_string()) && err.contains("cap 1048576 bytes"),
        "{err}"
    );
    // Two of the three 32 KiB entries (the least recently used) made way for the 64 KiB fill.
    let left = names(&dir);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(cache.used_bytes(), 32 * 1024);
    assert_eq!(
        fill_bytes(&cache, "s3://b/old-2", "v1", &body(2, 32 * 1024)).unwrap(),
        body(2, 32 * 1024)
    );
}

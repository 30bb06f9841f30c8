//! The local shard cache: whole remote objects (shards, TFRecord files) kept in a folder on local
//! disk, under a byte cap, for random access and later epochs.
//!
//! ```no_run
//! # fn main() -> stokehold_core::Result<()> {
//! use std::io::Write;
//! use stokehold_io::storage::local_cache::LocalCache;
//!
//! let cache = LocalCache::open("/tmp/stokehold-cache", 10 << 30)?;
//! let shard = cache.get_or_fill("s3://bucket/train/shard-00000.skh", "\"etag-1\"", 5, |f| {
//!     f.write_all(b"bytes").map_err(|e| stokehold_core::Error::io("shard-00000.skh", e))
//! })?;
//! assert_eq!(&shard.map()?[..], b"bytes");
//! # Ok(())
//! # }
//! ```
//!
//! ## On disk
//! One flat folder. An entry is named `<h(key)>-<h(version)>-<size>.shard` (`h` is CRC-64 in hex):
//! the version (an ETag or generation) and the size are part of the name, so an object changed
//! remotely is a miss, never served stale, and the old entry of its key is removed on the next fill.
//! The folder's state is the folder: several processes share it with no index file to corrupt.
//!
//! * **Atomic fills**: a fill writes `.<entry>.tmp-<pid>-<n>` (the crate's [`crate::atomic`]
//!   convention), checks it holds exactly `size` bytes, fsyncs, renames it into place and syncs the
//!   folder. A process killed mid-fill leaves only a hidden temporary file, which no lookup reads.
//! * **Several processes**: fills of one key are serialised by an `flock` on one of
//!   [`FILL_STRIPES`] lock files (`.locks/NN`), so two processes asking for the same shard download
//!   it once; the second waits and then hits. Eviction and the space check run under the folder's
//!   `.index.lock`. Locks die with their process, so a killed process never wedges the cache.
//! * **Stale temporary files**: [`LocalCache::open`] removes the temporary files whose writer
//!   process is gone (never a live writer's; see [`crate::atomic::clean_temps`]).
//! * **LRU**: a hit and a fill set the entry's mtime to now (the precise clock, not the kernel's
//!   coarse file times); eviction removes the oldest mtimes first. Removing a file another process
//!   has open or mapped is safe on Unix: its mapping stays valid until dropped.
//! * **Cap**: used bytes are the entries plus the declared sizes of fills in flight. Before a fill,
//!   entries are evicted until the new one fits. Fills in flight in other processes are never
//!   evicted, so while several run at once the folder may exceed the cap by at most those fills.
//! * **Cap smaller than one object**: refused with [`Error::InvalidArgument`] naming the object, its
//!   size and the cap. We chose a clear error over silently streaming without the cache: a
//!   cache that quietly stops caching turns every random read into a remote read, the slow tail the
//!   cache exists to avoid. Raise the cap or read that data without a cache.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use stokehold_core::{Error, Result};

use crate::atomic::{self, TempFile};

/// Lock files that serialise fills by key (a key's stripe is its hash modulo this). 256 makes two
/// concurrent fills of different keys wait on each other rarely (read-ahead keeps a few in flight)
/// while bounding the lock files to a fixed, small set that is never removed (removing lock files
/// races with their takers).
pub const FILL_STRIPES: u64 = 256;
const INDEX_LOCK: &str = ".index.lock";
const LOCK_DIR: &str = ".locks";
const SUFFIX: &str = ".shard";

/// A folder of cached whole objects under a byte cap (see the module docs).
#[derive(Debug, Clone)]
pub struct LocalCache {
    dir: PathBuf,
    cap: u64,
}

/// A cached object, open for reading. It stays readable even if another process evicts it.
#[derive(Debug)]
pub struct CachedFile {
    path: PathBuf,
    file: File,
    len: u64,
    hit: bool,
}

impl CachedFile {
    /// The entry's path in the cache folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The object's size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the object was already cached (false: this call filled it).
    pub fn was_hit(&self) -> bool {
        self.hit
    }

    /// Maps the whole object read-only. An empty object maps as an empty slice.
    pub fn map(&self) -> Result<memmap2::Mmap> {
        // SAFETY: cache entries are never written after their rename into place (a new version
        // gets a new name), so the mapped bytes cannot change under the reader.
        unsafe { memmap2::Mmap::map(&self.file) }.map_err(|e| Error::io(&self.path, e))
    }
}

/// CRC-64 of `s`, the hash in entry names (stable across releases, unlike std's hasher).
fn h64(s: &str) -> u64 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, s.as_bytes())
}

/// An entry's file name.
fn entry_name(key: &str, version: &str, size: u64) -> String {
    format!("{:016x}-{:016x}-{size}{SUFFIX}", h64(key), h64(version))
}

/// The size declared in an entry name, or in the temporary name of a fill of one.
fn declared_size(name: &str) -> Option<u64> {
    let stem = &name[..name.find(SUFFIX)?];
    stem.rsplit('-').next()?.parse().ok()
}

/// An open lock file, locked exclusively until dropped (or the process dies).
struct Held(#[allow(dead_code)] File);

fn lock(path: &Path) -> Result<Held> {
    let f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    f.lock().map_err(|e| Error::io(path, e))?;
    Ok(Held(f))
}

impl LocalCache {
    /// Opens (creating it) the cache folder `dir` with a cap of `cap_bytes`, and removes the
    /// temporary files of fills whose process is gone.
    pub fn open(dir: impl AsRef<Path>, cap_bytes: u64) -> Result<LocalCache> {
        let dir = dir.as_ref().to_path_buf();
        let locks = dir.join(LOCK_DIR);
        fs::create_dir_all(&locks).map_err(|e| Error::io(&locks, e))?;
        // Absolute, so entry paths stay valid whatever the working folder (mirrors link to them).
        let dir = fs::canonicalize(&dir).map_err(|e| Error::io(&dir, e))?;
        let cache = LocalCache {
            dir,
            cap: cap_bytes,
        };
        let _index = cache.index_lock()?;
        atomic::clean_temps(&cache.dir);
        Ok(cache)
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The byte cap.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    fn index_lock(&self) -> Result<Held> {
        lock(&self.dir.join(INDEX_LOCK))
    }

    /// The cached object `key` at `version` of `size` bytes, if present (and marks it used).
    pub fn get(&self, key: &str, version: &str, size: u64) -> Result<Option<CachedFile>> {
        let path = self.dir.join(entry_name(key, version, size));
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&path, e)),
        };
        let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
        if len != size {
            return Ok(None); // cannot happen with atomic fills; refuse rather than serve it
        }
        // LRU stamp; best effort (a read-only cache folder still serves hits).
        let _ = file.set_modified(SystemTime::now());
        Ok(Some(CachedFile {
            path,
            file,
            len,
            hit: true,
        }))
    }

    /// The cached object `key` at `version` (an ETag or generation: anything that changes when
    /// the object does) of `size` bytes; on a miss `fill` writes the whole object into the file
    /// it is given (empty, open for reading and writing), which is then checked to hold `size` bytes and published atomically.
    /// Concurrent callers for one key, in this or other processes, fill it once.
    pub fn get_or_fill(
        &self,
        key: &str,
        version: &str,
        size: u64,
        fill: impl FnOnce(&mut File) -> Result<()>,
    ) -> Result<CachedFile> {
        if size > self.cap {
            return Err(Error::invalid(format!(
                "{key} is {size} bytes, more than the whole local cache cap of {} bytes ({}); \
                 raise the cache cap or read this data without a cache",
                self.cap,
                self.dir.display()
            )));
        }
        if let Some(hit) = self.get(key, version, size)? {
            return Ok(hit);
        }
        let stripe = h64(key) % FILL_STRIPES;
        let _fill_lock = lock(&self.dir.join(LOCK_DIR).join(format!("{stripe:02x}")))?;
        if let Some(hit) = self.get(key, version, size)? {
            return Ok(hit); // another process filled it while we waited
        }
        let name = entry_name(key, version, size);
        let (tmp, mut file) = {
            let _index = self.index_lock()?;
            self.drop_other_versions(key, &name);
            self.make_room(size)?;
            let (tmp, _) = TempFile::create_in_locked(self.dir.join(&name))?;
            // Reopened readable too, so a fill can check what it wrote (a checksum).
            let file = File::options()
                .read(true)
                .write(true)
                .open(tmp.path())
                .map_err(|e| Error::io(tmp.path(), e))?;
            (tmp, file)
        };
        fill(&mut file)?;
        let written = file.metadata().map_err(|e| Error::io(tmp.path(), e))?.len();
        if written != size {
            return Err(Error::corrupt(
                key,
                written,
                format!("cache fill wrote {written} bytes, the object's size is {size}"),
            ));
        }
        file.set_modified(SystemTime::now())
            .map_err(|e| Error::io(tmp.path(), e))?;
        let path = tmp.commit(Some(file))?;
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        Ok(CachedFile {
            path,
            file,
            len: size,
            hit: false,
        })
    }

    /// Removes the entries of `key` other than `keep` (older versions). Best effort.
    fn drop_other_versions(&self, key: &str, keep: &str) {
        let prefix = format!("{:016x}-", h64(key));
        for (name, _, _) in self.entries() {
            if name.starts_with(&prefix) && name != keep {
                let _ = fs::remove_file(self.dir.join(name));
            }
        }
    }

    /// Entries as (name, size, mtime).
    fn entries(&self) -> Vec<(String, u64, SystemTime)> {
        let Ok(rd) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        rd.flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') || !name.ends_with(SUFFIX) {
                    return None;
                }
                let md = e.metadata().ok()?;
                Some((name, md.len(), md.modified().ok()?))
            })
            .collect()
    }

    /// Bytes the folder holds or has promised: entries plus the declared sizes of fills in flight.
    pub fn used_bytes(&self) -> u64 {
        let entries: u64 = self.entries().iter().map(|e| e.1).sum();
        entries + self.in_flight()
    }

    fn in_flight(&self) -> u64 {
        let Ok(rd) = fs::read_dir(&self.dir) else {
            return 0;
        };
        rd.flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                atomic::is_temp_name(&name)?;
                declared_size(&name)
            })
            .sum()
    }

    /// Evicts least recently used entries until `size` more bytes fit under the cap (or nothing
    /// evictable is left: only other processes' fills in flight hold the rest).
    fn make_room(&self, size: u64) -> Result<()> {
        let mut entries = self.entries();
        let mut used: u64 = entries.iter().map(|e| e.1).sum::<u64>() + self.in_flight();
        entries.sort_by(|a, b| (a.2, &a.0).cmp(&(b.2, &b.0)));
        for (name, len, _) in entries {
            if used.saturating_add(size) <= self.cap {
                break;
            }
            let path = self.dir.join(&name);
            match fs::remove_file(&path) {
                Ok(()) => used -= len,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => used -= len,
                Err(e) => return Err(Error::io(path, e)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_version_and_size() {
        let a = entry_name("s3://b/k", "v1", 10);
        assert_ne!(a, entry_name("s3://b/k", "v2", 10));
        assert_ne!(a, entry_name("s3://b/k", "v1", 11));
        assert_eq!(declared_size(&a), Some(10));
        assert_eq!(declared_size(&format!(".{a}.tmp-12-0")), Some(10));
    }
}

//! A remote shard folder read through the local shard cache: every shard is downloaded whole
//! into the [`LocalCache`] (a bounded number at once, by [`ReadAhead`]), checked against the
//! manifest's CRC32C, and the folder is then opened by the ordinary memory-mapped
//! [`ShardDataset`] reader, so random access and global shuffle run at local speed.
//!
//! How: a *mirror* folder holds the manifest and one symlink per shard, named as in the manifest,
//! pointing at the open handle of the shard's cache entry (`/proc/self/fd/N`; `/dev/fd/N` off
//! Linux). The mirror is private to one open: a fresh folder of an unguessable name made with
//! `mkdir` (never an existing one: a name taken is skipped) in the system's temporary folder,
//! mode 0700, removed once the reader has mapped every shard. So nothing is written into the
//! cache folder for a hit (a read-only cache serves warm opens), no other process or user can
//! plant or redirect a mirror, and an entry another process evicts between the download and the
//! open is still read through the handle this open holds, never a missing file. The dataset's
//! [`ShardDataset::dir`] names that mirror, gone once the open returns: the copies themselves
//! are the cache's entries ([`LocalCache::get`]).
//!
//! A shard's cache key is `<url>/<file>` and its version the manifest's CRC32C of the file, so a
//! dataset rewritten remotely (new manifest) never reads old shards; the manifest itself is always
//! read from the source. The whole folder must fit under the cache's cap (the reader maps every
//! shard when it opens): a larger dataset is refused with an error naming both sizes.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stokehold_core::{Error, Result};

use super::format::MANIFEST_NAME;
use super::reader::read_manifest;
use super::{Manifest, ShardDataset};
use crate::storage::local_cache::{CachedFile, LocalCache, SafeDir};
use crate::storage::{self, folder::Folder, read_ahead::ReadAhead};

/// Shards downloaded at once: enough to keep a loopback or datacenter link busy while one shard's
/// request waits on its first byte, few enough to bound connections and memory in flight.
pub const DEFAULT_READ_AHEAD: usize = 4;

/// Where a remote shard folder's bytes come from: a backend of the storage seam, or a test.
pub trait ShardSource: Send + Sync {
    /// The folder's URL (for cache keys and messages).
    fn url(&self) -> String;
    /// The bytes of `manifest.json`.
    fn manifest(&self) -> Result<Vec<u8>>;
    /// Writes the whole object `file` (a name inside the folder, `size` bytes) into `out`.
    fn download(&self, file: &str, size: u64, out: &mut File) -> Result<()>;
}

/// The source of the shard folder at `location`: an object-store URL (cargo feature `remote`)
/// or a local or mounted folder.
pub fn shard_source(location: &Path) -> Result<Arc<dyn ShardSource>> {
    Ok(Arc::new(FolderShards {
        folder: storage::folder::folder(location)?,
        location: location.to_path_buf(),
    }))
}

/// A shard folder read through the storage seam's [`Folder`]: the manifest is a file in it.
struct FolderShards {
    folder: Arc<dyn Folder>,
    location: PathBuf,
}

impl ShardSource for FolderShards {
    fn url(&self) -> String {
        self.folder.url()
    }

    fn manifest(&self) -> Result<Vec<u8>> {
        match self.folder.read(MANIFEST_NAME) {
            // No manifest in an object store: the reader's own words (an incomplete folder, or
            // nothing at all under the prefix, a missing bucket), then the read's error if it
            // has none.
            Err(Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound
                    && storage::is_remote(&self.location) =>
            {
                read_manifest(Path::new(&self.folder.url()))?;
                self.folder.read(MANIFEST_NAME)
            }
            other => other,
        }
    }

    fn download(&self, file: &str, size: u64, out: &mut File) -> Result<()> {
        self.folder.download(file, size, out)
    }
}

fn h64(s: &[u8]) -> u64 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, s)
}

/// Opens the remote shard folder of `source` through `cache` (see the module docs);
/// `verify_records` as in [`ShardDataset::open_with`].
pub fn open_cached(
    source: Arc<dyn ShardSource>,
    cache: &LocalCache,
    verify_records: bool,
    read_ahead: usize,
) -> Result<ShardDataset> {
    let url = source.url();
    let text = source.manifest()?;
    let mirror = Mirror::create(&url)?;
    let mut f = mirror.dir.create_new(MANIFEST_NAME)?;
    f.write_all(&text)
        .map_err(|e| Error::io(mirror.dir.path().join(MANIFEST_NAME), e))?;
    drop(f);
    let manifest = read_manifest(mirror.dir.path())?; // checks format, version and plain names
    let total: u64 = manifest.shards.iter().map(|s| s.bytes).sum();
    if total > cache.cap() {
        return Err(Error::invalid(format!(
            "{url} holds {total} bytes of shards, more than the local cache cap of {} bytes \
             ({}); random access maps every shard: raise the cache cap",
            cache.cap(),
            cache.dir().display()
        )));
    }
    // Held until the reader has mapped every shard through the mirror's links.
    let _entries = fill_all(&source, cache, &manifest, &mirror.dir, read_ahead)?;
    ShardDataset::open_with(mirror.dir.path(), verify_records)
}

/// A private mirror folder, removed when dropped.
struct Mirror {
    dir: SafeDir,
}

impl Mirror {
    /// A fresh folder in the system's temporary folder: `mkdir` (mode 0700) of a name made of the
    /// pid, the clock and a counter, hashed; a name that exists (planted or not) is skipped.
    fn create(url: &str) -> Result<Mirror> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let tmp = std::env::temp_dir();
        for _ in 0..64 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let seed = format!(
                "{url}|{}|{nanos}|{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            );
            let name = format!(
                ".stokehold-mirror-{}-{:016x}",
                std::process::id(),
                h64(seed.as_bytes())
            );
            let path = tmp.join(name);
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    return match SafeDir::open(&path, false) {
                        Ok(dir) => Ok(Mirror { dir }),
                        Err(e) => {
                            let _ = std::fs::remove_dir_all(&path);
                            Err(e)
                        }
                    };
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(&path, e)),
            }
        }
        Err(Error::invalid(format!(
            "{}: no fresh name for a mirror folder after 64 tries",
            tmp.display()
        )))
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        for name in self.dir.names() {
            let _ = self.dir.remove(&name);
        }
        let _ = std::fs::remove_dir(self.dir.path());
    }
}

/// Downloads every shard missing from the cache and links it into the mirror; returns the open
/// entries the links point at.
fn fill_all(
    source: &Arc<dyn ShardSource>,
    cache: &LocalCache,
    manifest: &Manifest,
    mirror: &SafeDir,
    read_ahead: usize,
) -> Result<Vec<CachedFile>> {
    let shards = Arc::new(manifest.shards.clone());
    let (src, c, list) = (Arc::clone(source), cache.clone(), Arc::clone(&shards));
    let mut ahead = ReadAhead::new(shards.len(), read_ahead, move |i| {
        let s = &list[i];
        let key = format!("{}/{}", src.url().trim_end_matches('/'), s.file);
        c.get_or_fill(&key, &s.crc32c, s.bytes, |f| {
            src.download(&s.file, s.bytes, f)?;
            check_crc(f, &key, &s.crc32c)
        })
    });
    let mut held = Vec::with_capacity(shards.len());
    for s in shards.iter() {
        let Some(got) = ahead.next() else { break };
        let linked = got.and_then(|entry| {
            mirror.symlink(&fd_path(entry.file()), &s.file)?;
            held.push(entry);
            Ok(())
        });
        if let Err(e) = linked {
            // The downloads still in flight end before the error is returned: none goes on
            // filling the cache after this call (a refused transfer's caller found another
            // shard's download still counted in the cache's bytes).
            ahead.settle();
            return Err(e);
        }
    }
    Ok(held)
}

/// The path that opens `file` again, whatever became of its name.
fn fd_path(file: &File) -> PathBuf {
    let base = if cfg!(target_os = "linux") {
        "/proc/self/fd"
    } else {
        "/dev/fd"
    };
    Path::new(base).join(file.as_raw_fd().to_string())
}
/// Checks the downloaded file's CRC32C against the manifest's (a body cut short or changed in
/// transit is refused before it is published in the cache).
fn check_crc(f: &mut File, key: &str, want: &str) -> Result<()> {
    use std::io::Seek;
    f.rewind().map_err(|e| Error::io(key, e))?;
    let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(key, e))?;
        if n == 0 {
            break;
        }
        digest.update(&buf[..n]);
    }
    let got = format!("{:08x}", digest.finalize() as u32);
    if got != want {
        return Err(Error::corrupt(
            key,
            0,
            format!("downloaded file's checksum {got}, manifest says {want}"),
        ));
    }
    Ok(())
}

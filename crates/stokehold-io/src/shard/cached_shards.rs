//! A remote shard folder read through the local shard cache: every shard is downloaded whole
//! into the [`LocalCache`] (a bounded number at once, by [`ReadAhead`]), checked against the
//! manifest's CRC32C, and the folder is then opened by the ordinary memory-mapped
//! [`ShardDataset`] reader, so random access and global shuffle run at local speed.
//!
//! How: a *mirror* folder inside the cache (`.mirrors/<h(url)>-<h(manifest)>/`) holds the
//! manifest and one symlink per shard, named as in the manifest, pointing at the shard's cache
//! entry. Opening the mirror maps the entries; an entry evicted afterwards (by this or another
//! process) stays readable through its mapping. An entry evicted between the download and the
//! open is downloaded again (one retry).
//!
//! A shard's cache key is `<url>/<file>` and its version the manifest's CRC32C of the file, so a
//! dataset rewritten remotely (new manifest) never reads old shards; the manifest itself is always
//! read from the source. The whole folder must fit under the cache's cap (the reader maps every
//! shard when it opens): a larger dataset is refused with an error naming both sizes.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stokehold_core::{Error, Result};

use super::format::MANIFEST_NAME;
use super::reader::read_manifest;
use super::{Manifest, ShardDataset};
use crate::atomic;
use crate::storage::{self, folder::Folder, local_cache::LocalCache, read_ahead::ReadAhead};

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
    let mirror = cache.dir().join(".mirrors").join(format!(
        "{:016x}-{:016x}",
        h64(url.as_bytes()),
        h64(&text)
    ));
    std::fs::create_dir_all(&mirror).map_err(|e| Error::io(&mirror, e))?;
    atomic::write_atomic(mirror.join(MANIFEST_NAME), &text)?;
    let manifest = read_manifest(&mirror)?; // checks format, version and plain shard names
    let total: u64 = manifest.shards.iter().map(|s| s.bytes).sum();
    if total > cache.cap() {
        return Err(Error::invalid(format!(
            "{url} holds {total} bytes of shards, more than the local cache cap of {} bytes \
             ({}); random access maps every shard: raise the cache cap",
            cache.cap(),
            cache.dir().display()
        )));
    }
    for attempt in 0..2 {
        fill_all(&source, cache, &manifest, &mirror, read_ahead)?;
        match ShardDataset::open_with(&mirror, verify_records) {
            Err(Error::Io { source, .. })
                if attempt == 0 && source.kind() == std::io::ErrorKind::NotFound => {}
            other => return other,
        }
    }
    unreachable!("the second attempt returns")
}

/// Downloads every shard missing from the cache and links it into the mirror.
fn fill_all(
    source: &Arc<dyn ShardSource>,
    cache: &LocalCache,
    manifest: &Manifest,
    mirror: &Path,
    read_ahead: usize,
) -> Result<()> {
    let shards = Arc::new(manifest.shards.clone());
    let (src, c, list) = (Arc::clone(source), cache.clone(), Arc::clone(&shards));
    let mut ahead = ReadAhead::new(shards.len(), read_ahead, move |i| {
        let s = &list[i];
        let key = format!("{}/{}", src.url().trim_end_matches('/'), s.file);
        let got = c.get_or_fill(&key, &s.crc32c, s.bytes, |f| {
            src.download(&s.file, s.bytes, f)?;
            check_crc(f, &key, &s.crc32c)
        })?;
        Ok(got.path().to_path_buf())
    });
    for s in shards.iter() {
        let Some(path) = ahead.next() else { break };
        if let Err(e) = path.and_then(|p| link(&p, &mirror.join(&s.file))) {
            // The downloads still in flight end before the error is returned: none goes on
            // filling the cache after this call (a refused transfer's caller found another
            // shard's download still counted in the cache's bytes).
            ahead.settle();
            return Err(e);
        }
    }
    Ok(())
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

/// Points `at` (a name in the mirror) at the cache entry `entry`, atomically.
fn link(entry: &Path, at: &Path) -> Result<()> {
    if std::fs::read_link(at).ok().as_deref() == Some(entry) {
        return Ok(());
    }
    let tmp: PathBuf = atomic::temp_path(at);
    #[cfg(unix)]
    std::os::unix::fs::symlink(entry, &tmp).map_err(|e| Error::io(&tmp, e))?;
    #[cfg(not(unix))]
    return Err(Error::invalid(format!(
        "{}: the remote shard cache needs symlinks (Unix)",
        entry.display()
    )));
    std::fs::rename(&tmp, at).map_err(|e| Error::io(at, e))
}

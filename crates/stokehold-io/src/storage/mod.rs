//! The storage seam: every reader and writer of `stokehold-io` finds its bytes here, whether they
//! live in a local file or an object store.
//!
//! A location is a string: a local path, or a URL (`s3://bucket/key`, `gs://`, `az://`,
//! `http(s)://`). Local files keep their memory-mapped fast path ([`Source::Mapped`]): a local
//! read costs what it cost before the seam. Objects are read by range ([`Object::read_range`],
//! [`Object::read_ranges`], which coalesces neighbouring ranges) or whole, through the
//! `object_store` crate on a lazily started tokio runtime (cargo feature `remote`; without it a
//! URL is a clear error). Every range read of an [`Object`] is pinned to the version (ETag) seen
//! when it was opened, so an object replaced between two reads is an error, never a mix of two
//! versions.
//!
//! Paths keep their `Path` types in the readers' signatures: a URL is a valid `Path` whose
//! `join` appends `/name`, so `dir.join("manifest.json")` is the manifest's URL too.
//!
//! Hook for a cache: [`Object::fetch_to`] copies a whole object to a local file (atomically), and
//! [`set_object_cache`] installs a process-wide [`ObjectCache`] that [`open`] asks first, so a
//! cached remote shard opens as a local memory map.

use std::path::Path;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use stokehold_core::{Error, Result};

#[cfg(feature = "remote")]
pub mod aws_profile;
mod cache_hook;
pub mod folder;
mod local;
pub use self::local::{open_regular, read_regular};
pub mod local_cache;
mod meta;
mod object;
pub mod read_ahead;
#[cfg(feature = "remote")]
pub mod remote;
mod staging;
pub mod stream_ahead;
mod url;

pub use self::meta::Meta;
#[cfg(not(feature = "remote"))]
use self::object::no_remote;
pub use self::object::{Object, Source};
pub use self::staging::{remote_path, write_staged};
pub use self::url::{is_url, join, split_url};

/// A process-wide cache of remote objects as local files (installed by [`set_object_cache`]).
pub trait ObjectCache: Send + Sync {
    /// A local file holding exactly `object`'s bytes (same version), fetching it if needed; `None`
    /// to read the object remotely instead (e.g. larger than the cache's cap).
    fn local_copy(&self, object: &Object) -> Result<Option<std::path::PathBuf>>;
}

static CACHE: RwLock<Option<Arc<dyn ObjectCache>>> = RwLock::new(None);

/// Installs (or with `None` removes) the cache [`open`] consults for remote objects.
pub fn set_object_cache(cache: Option<Arc<dyn ObjectCache>>) {
    *CACHE.write().unwrap_or_else(|e| e.into_inner()) = cache;
}

fn object_cache() -> Option<Arc<dyn ObjectCache>> {
    CACHE.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Opens `location` for reading: a local path as a memory map, a URL as an [`Object`] (or as the
/// installed cache's local copy of it).
pub fn open(location: &Path) -> Result<Source> {
    match remote_url(location)? {
        None => local::map(location),
        Some(url) => {
            let object = Object::open_url(url)?;
            if let Some(cache) = object_cache() {
                if let Some(path) = cache.local_copy(&object)? {
                    return local::map(&path);
                }
            }
            Ok(Source::Remote(object))
        }
    }
}

/// Opens `location` as an [`Object`] (a local file is memory-mapped behind the same API).
pub fn open_object(location: &Path) -> Result<Object> {
    match remote_url(location)? {
        None => match local::map(location)? {
            Source::Mapped { data, .. } => Ok(Object::local(
                Meta {
                    location: location.to_string_lossy().into_owned(),
                    size: data.len() as u64,
                    version: None,
                },
                data,
            )),
            Source::Remote(o) => Ok(o),
        },
        Some(url) => Object::open_url(url),
    }
}

/// The whole file or object at `location` (a local file is read, not mapped).
pub fn read(location: &Path) -> Result<Bytes> {
    match remote_url(location)? {
        None => read_regular(location).map(Bytes::from),
        Some(url) => Object::open_url(url)?.read_all(),
    }
}

/// `Some(meta)` for an existing file or object at `location`, `None` when there is none.
pub fn head(location: &Path) -> Result<Option<Meta>> {
    match remote_url(location)? {
        None => local::head(location),
        #[cfg(feature = "remote")]
        Some(url) => remote::head(url),
        #[cfg(not(feature = "remote"))]
        Some(url) => Err(no_remote(url)),
    }
}

/// The files or objects matching the glob `pattern` (`*`, `?`, `[..]`, `**`), sorted. A URL
/// pattern lists the objects under its literal prefix and matches their keys.
pub fn list(pattern: &str) -> Result<Vec<Meta>> {
    if is_url(pattern) {
        #[cfg(feature = "remote")]
        return remote::list(pattern);
        #[cfg(not(feature = "remote"))]
        return Err(no_remote(pattern));
    }
    local::list(pattern)
}

/// Writes `data` as the whole file or object at `location`: a local file atomically (temporary
/// name, then rename), an object in one put or a multipart upload (an object store never shows a
/// partial object).
pub fn write(location: &Path, data: Bytes) -> Result<()> {
    match remote_url(location)? {
        None => crate::atomic::write_atomic(location, &data).map(drop),
        #[cfg(feature = "remote")]
        Some(url) => remote::put(url, data),
        #[cfg(not(feature = "remote"))]
        Some(url) => Err(no_remote(url)),
    }
}

/// Uploads the local file `src` to `location` (multipart for large files); a local `location` is
/// a copy.
pub fn upload(src: &Path, location: &Path) -> Result<()> {
    upload_with(src, location, &mut |_| {})
}

/// [`upload`], telling `sent` the bytes of each part as it is handed to the store.
pub fn upload_with(src: &Path, location: &Path, sent: &mut dyn FnMut(u64)) -> Result<()> {
    match remote_url(location)? {
        None => std::fs::copy(src, location)
            .map(&mut *sent)
            .map_err(|e| Error::io(location, e)),
        #[cfg(feature = "remote")]
        Some(url) => remote::upload_file(src, url, sent),
        #[cfg(not(feature = "remote"))]
        Some(url) => Err(no_remote(url)),
    }
}

/// A sequential reader of `location` from byte `offset`: a local file seeked there, or an object
/// read in [`READ_CHUNK`] ranged requests, the next one fetched while the current one is consumed.
pub fn reader(location: &Path, offset: u64) -> Result<Box<dyn std::io::Read + Send>> {
    use std::io::{Seek, SeekFrom};
    match remote_url(location)? {
        None => {
            let (mut f, _) = open_regular(location)?;
            if offset > 0 {
                f.seek(SeekFrom::Start(offset))
                    .map_err(|e| Error::io(location, e))?;
            }
            Ok(Box::new(f))
        }
        Some(url) => Ok(Box::new(ObjectRead::new(Object::open_url(url)?, offset))),
    }
}

/// Bytes per request of a sequential object read: large enough that a request's latency
/// (~1 ms on loopback, 20+ ms to S3) is small next to its transfer time.
pub const READ_CHUNK: u64 = 8 << 20;

/// [`reader`]'s object side: chunk `k + 1` is fetched on a helper thread while chunk `k` is read.
struct ObjectRead {
    object: Object,
    pos: u64,
    buf: Bytes,
    next: Option<std::thread::JoinHandle<Result<Bytes>>>,
}

impl ObjectRead {
    fn new(object: Object, pos: u64) -> Self {
        let mut r = ObjectRead {
            object,
            pos,
            buf: Bytes::new(),
            next: None,
        };
        r.next = r.spawn(pos);
        r
    }

    fn spawn(&self, at: u64) -> Option<std::thread::JoinHandle<Result<Bytes>>> {
        let end = (at + READ_CHUNK).min(self.object.size());
        if at >= end {
            return None;
        }
        let o = self.object.clone();
        Some(std::thread::spawn(move || o.read_range(at..end)))
    }
}

impl std::io::Read for ObjectRead {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.buf.is_empty() {
            let Some(h) = self.next.take() else {
                return Ok(0);
            };
            let chunk = h
                .join()
                .map_err(|_| std::io::Error::other("object read thread panicked"))?
                .map_err(std::io::Error::other)?;
            self.next = self.spawn(self.pos + chunk.len() as u64);
            self.buf = chunk;
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        self.buf = self.buf.slice(n..);
        self.pos += n as u64;
        Ok(n)
    }
}

/// What an upload reports: bytes handed to the store so far, and the bytes of the whole upload.
pub type UploadProgress = dyn Fn(u64, u64) + Send + Sync;

static UPLOAD_PROGRESS: RwLock<Option<Arc<UploadProgress>>> = RwLock::new(None);

/// Installs (or with `None` removes) the callback every staged upload (`write_shards`,
/// `write_tfrecord` and the CLI writing to a URL) reports its progress to; the CLI's byte bar.
pub fn set_upload_progress(progress: Option<Arc<UploadProgress>>) {
    *UPLOAD_PROGRESS.write().unwrap_or_else(|e| e.into_inner()) = progress;
}

fn upload_progress() -> Option<Arc<UploadProgress>> {
    UPLOAD_PROGRESS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// Options for the object stores built from now on: for `store` (`s3://bucket`) or, with `""`,
/// for every store (see `remote::set_options`). Without the `remote` feature there are no
/// object stores and this does nothing. A malformed endpoint or retry option is an error.
pub fn set_options(store: &str, options: Vec<(String, String)>) -> Result<()> {
    #[cfg(feature = "remote")]
    return remote::set_options(store, options);
    #[cfg(not(feature = "remote"))]
    {
        let _ = (store, options);
        Ok(())
    }
}

/// Whether `location` names an object store (a URL) rather than a local path.
pub fn is_remote(location: &Path) -> bool {
    location.to_str().is_some_and(is_url)
}

/// The URL in `location`, if it is one.
fn remote_url(location: &Path) -> Result<Option<&str>> {
    match location.to_str() {
        Some(s) if is_url(s) => Ok(Some(s)),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests;

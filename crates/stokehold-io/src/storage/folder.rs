//! A folder of files read whole, wherever it is: a local or mounted directory ([`FolderSource`])
//! or a prefix in an object store (`UrlSource`, cargo feature `remote`). What the local cache
//! copies a dataset folder from; it knows nothing of what the files hold (the shard reader's
//! cache, `shard::cached_shards`, reads a shard folder through it).
//!
//! A download from an object store is one `GET` pinned to the ETag its `HEAD` returned (resumed
//! where a body breaks off), its size checked against the size the caller expects first.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stokehold_core::{Error, Result};

/// Where a folder's files come from: a backend of the storage seam, or a test.
pub trait Folder: Send + Sync {
    /// The folder's URL (for cache keys and messages).
    fn url(&self) -> String;
    /// The whole file `name` (a name inside the folder).
    fn read(&self, name: &str) -> Result<Vec<u8>>;
    /// Writes the whole file `name` (`size` bytes, as the caller's listing says) into `out`.
    fn download(&self, name: &str, size: u64, out: &mut File) -> Result<()>;
}

/// A folder on a local or mounted file system (NFS, a FUSE-mounted bucket): reading it through
/// the cache copies its files to the cache's disk once.
#[derive(Debug, Clone)]
pub struct FolderSource {
    dir: PathBuf,
}

impl FolderSource {
    /// The folder `dir`.
    pub fn new(dir: impl AsRef<Path>) -> Self {
        FolderSource {
            dir: dir.as_ref().to_path_buf(),
        }
    }
}

impl Folder for FolderSource {
    fn url(&self) -> String {
        let abs = std::fs::canonicalize(&self.dir).unwrap_or_else(|_| self.dir.clone());
        format!("file://{}", abs.display())
    }

    fn read(&self, name: &str) -> Result<Vec<u8>> {
        super::read_regular(&self.dir.join(name))
    }

    fn download(&self, name: &str, _size: u64, out: &mut File) -> Result<()> {
        let p = self.dir.join(name);
        let (mut f, _) = super::open_regular(&p)?;
        std::io::copy(&mut f, out).map_err(|e| Error::io(&p, e))?;
        Ok(())
    }
}

/// The folder at an object-store URL.
#[cfg(feature = "remote")]
#[derive(Debug, Clone)]
pub struct UrlSource {
    url: String,
}

#[cfg(feature = "remote")]
impl UrlSource {
    /// The folder at `url` (`s3://bucket/prefix`; a trailing `/` is dropped).
    pub fn new(url: &str) -> Result<Self> {
        if !super::is_url(url) {
            return Err(Error::invalid(format!(
                "{url}: not an object-store URL (a local folder is read with FolderSource)"
            )));
        }
        Ok(UrlSource {
            url: url.trim_end_matches('/').to_string(),
        })
    }
}

#[cfg(feature = "remote")]
impl Folder for UrlSource {
    fn url(&self) -> String {
        self.url.clone()
    }

    fn read(&self, name: &str) -> Result<Vec<u8>> {
        super::read(Path::new(&super::join(&self.url, name))).map(|b| b.to_vec())
    }

    fn download(&self, name: &str, size: u64, out: &mut File) -> Result<()> {
        let url = super::join(&self.url, name);
        let object = super::open_object(Path::new(&url))?;
        if object.size() != size {
            return Err(Error::corrupt(
                &url,
                object.size().min(size),
                format!(
                    "the object holds {} bytes, the manifest says {size} (replaced or truncated)",
                    object.size()
                ),
            ));
        }
        object.copy_to(out).map(drop)
    }
}

/// The folder at `location`: an object-store URL (cargo feature `remote`) or a local or mounted
/// folder.
pub fn folder(location: &Path) -> Result<Arc<dyn Folder>> {
    match location.to_str() {
        #[cfg(feature = "remote")]
        Some(url) if super::is_url(url) => Ok(Arc::new(UrlSource::new(url)?)),
        #[cfg(not(feature = "remote"))]
        Some(url) if super::is_url(url) => Err(super::object::no_remote(url)),
        _ => Ok(Arc::new(FolderSource::new(location))),
    }
}

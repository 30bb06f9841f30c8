//! A shard folder in an object store as a [`ShardSource`] of the local shard cache
//! ([`super::cached_shards::open_cached`]), so random access and global shuffle over
//! `s3://bucket/train` run on local copies.
//!
//! The manifest is read from the store on every open (it says which shards, and their CRC32C,
//! which versions the cache entries). A shard is downloaded whole into its cache entry file by one
//! `GET` pinned to the ETag its `HEAD` returned (resumed where a body breaks off), its size checked
//! against the manifest first; `open_cached` then checks the copy's CRC32C before publishing it.

use std::fs::File;
use std::path::Path;

use stokehold_core::{Error, Result};

use super::cached_shards::ShardSource;
use crate::shard::format::MANIFEST_NAME;

/// The shard folder at an object-store URL.
#[derive(Debug, Clone)]
pub struct UrlSource {
    url: String,
}

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

impl ShardSource for UrlSource {
    fn url(&self) -> String {
        self.url.clone()
    }

    fn manifest(&self) -> Result<Vec<u8>> {
        let path = super::join(&self.url, MANIFEST_NAME);
        match super::read(Path::new(&path)) {
            Ok(b) => Ok(b.to_vec()),
            // No manifest: the reader's own words (an incomplete folder, or nothing at all
            // under the prefix, a missing bucket), then the read's error if it has none.
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                match crate::shard::reader::read_manifest(Path::new(&self.url)) {
                    Err(e) => Err(e),
                    Ok(_) => super::read(Path::new(&path)).map(|b| b.to_vec()),
                }
            }
            Err(e) => Err(e),
        }
    }

    fn download(&self, file: &str, size: u64, out: &mut File) -> Result<()> {
        let url = super::join(&self.url, file);
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

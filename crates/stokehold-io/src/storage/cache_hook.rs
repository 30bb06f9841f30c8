//! The local shard cache as the storage seam's [`ObjectCache`]: installed with
//! [`super::set_object_cache`], every remote object [`super::open`] opens is copied whole into the
//! [`LocalCache`] once (keyed by its URL, versioned by its ETag and size) and read as a local map.

use std::path::PathBuf;

use stokehold_core::Result;

use super::local_cache::LocalCache;
use super::{Object, ObjectCache};

impl ObjectCache for LocalCache {
    /// Local files are never copied (`None`). An object larger than the cap is an error (the
    /// cache's documented choice), not a silent remote read.
    fn local_copy(&self, object: &Object) -> Result<Option<PathBuf>> {
        if !object.is_remote() {
            return Ok(None);
        }
        let meta = object.meta();
        // No version (a server without ETags): the size alone keys the copy, so a same-size
        // rewrite could be served stale; S3, GCS and Azure always send one.
        let version = meta.version.clone().unwrap_or_default();
        let got = self.get_or_fill(&meta.location, &version, meta.size, |f| {
            object.copy_to(f).map(drop)
        })?;
        Ok(Some(got.path().to_path_buf()))
    }
}

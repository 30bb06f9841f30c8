//! Shard folders read through the local shard cache (`docs/CACHE.md`): a `#[pymethods]` block
//! of the native `Dataset` (`python/stokehold/shards.py` holds the API and its documentation).

use std::path::PathBuf;

use pyo3::prelude::*;
use stokehold_core::Dataset;
use stokehold_io::shard::cached_shards::{open_cached, shard_source, DEFAULT_READ_AHEAD};
use stokehold_io::storage::local_cache::LocalCache;

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

#[pymethods]
impl PyDataset {
    /// Opens the shard folder `path` (a folder or an object-store URL) through the cache folder
    /// `cache_dir` (cap `cache_bytes`).
    #[staticmethod]
    fn open_shards_cached(
        py: Python<'_>,
        path: PathBuf,
        verify: bool,
        cache_dir: PathBuf,
        cache_bytes: u64,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let r = py.detach(|| {
                let cache = LocalCache::open(&cache_dir, cache_bytes)?;
                let source = shard_source(&path)?;
                open_cached(source, &cache, verify, DEFAULT_READ_AHEAD)
            });
            ok(py, r).map(|d| PyDataset::from_dataset(Dataset::from_map(d)))
        })
    }
}

//! Shard folders, rank sharding, windowed shuffle and caches: a `#[pymethods]` block of the
//! native `Dataset`, and `verify_shards` (`python/stokehold/dataset.py` and `shards.py` hold the
//! API and its documentation).

use std::path::PathBuf;

use pyo3::prelude::*;
use stokehold_core::{Dataset, ShardPolicy};
use stokehold_io::shard as shards;
use stokehold_io::shard::{CacheExt, Compression, Progress, ShardDataset, WriteOptions};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};
use crate::options::Wrap;

fn wrap(ds: Dataset) -> PyDataset {
    PyDataset::from_dataset(ds)
}

/// Reads every byte of a shard folder (file and record checksums, decoding).
#[pyfunction]
fn verify_shards(py: Python<'_>, path: PathBuf) -> PyResult<()> {
    guard(|| {
        ok(
            py,
            py.detach(|| ShardDataset::open(&path).and_then(|d| d.verify())),
        )
    })
}

#[pymethods]
impl PyDataset {
    /// Opens a shard folder; `verify` checks each record's CRC32C as it is read.
    #[staticmethod]
    fn open_shards(py: Python<'_>, path: PathBuf, verify: bool) -> PyResult<PyDataset> {
        guard(|| {
            let r = py.detach(|| ShardDataset::open_with(&path, verify));
            ok(py, r).map(|d| wrap(Dataset::from_map(d)))
        })
    }

    /// Writes epoch 0 as a shard folder; returns the manifest as JSON text. `progress` is
    /// called with (records written, total or None) after every chunk.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (path, shard_bytes, compression, zstd_level, shuffle_seed, threads, overwrite, progress=None))]
    fn write_shards(
        &self,
        py: Python<'_>,
        path: PathBuf,
        shard_bytes: u64,
        compression: &str,
        zstd_level: i32,
        shuffle_seed: Option<u64>,
        threads: Option<usize>,
        overwrite: bool,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<String> {
        guard(|| {
            let mut opts = WriteOptions {
                shard_bytes,
                compression: ok(py, Compression::parse(compression))?,
                zstd_level,
                shuffle_seed,
                overwrite,
                ..WriteOptions::default()
            };
            if let Some(t) = threads {
                opts.threads = t.max(1);
            }
            let data = self.dataset().clone();
            // An exception in the progress callback aborts the write (nothing is left that opens
            // as a folder) and reaches the caller as itself.
            let cb = |p: &Progress| -> stokehold_core::Result<()> {
                let Some(f) = &progress else { return Ok(()) };
                Python::attach(|py| f.call1(py, (p.records, p.total)).map(drop)).map_err(|e| {
                    stokehold_core::Error::Callback {
                        op: "write_shards(progress)".into(),
                        index: p.records,
                        source: Box::new(e),
                    }
                })
            };
            let r = py.detach(|| shards::write_shards(&data, &path, opts, Some(&cb)));
            let m = ok(py, r)?;
            Ok(serde_json::to_string(&m).expect("manifest serialises"))
        })
    }

    /// `shard(num_shards, index, policy)` (or its elastic form).
    fn shard(
        &self,
        py: Python<'_>,
        num_shards: u64,
        index: u64,
        policy_name: Wrap<ShardPolicy>,
        elastic: bool,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let op = if elastic { "elastic_shard" } else { "shard" };
            let p = policy(py, op, policy_name)?;
            let d = self.dataset();
            let r = if elastic {
                d.elastic_shard(num_shards, index, p)
            } else {
                d.shard(num_shards, index, p)
            };
            ok(py, r).map(wrap)
        })
    }

    /// `worker_split(num_workers, worker)`.
    fn worker_split(&self, py: Python<'_>, num: u64, index: u64) -> PyResult<PyDataset> {
        guard(|| ok(py, self.dataset().worker_split(num, index)).map(wrap))
    }

    /// `window_shuffle(window, seed)`.
    fn window_shuffle(&self, py: Python<'_>, window: u64, seed: u64) -> PyResult<PyDataset> {
        guard(|| ok(py, self.dataset().window_shuffle(window, seed)).map(wrap))
    }

    /// `slice(start, stop)` of each epoch.
    fn slice(&self, start: u64, stop: u64) -> PyResult<PyDataset> {
        guard(|| Ok(wrap(self.dataset().slice(start, stop))))
    }

    /// `cache()` in memory, or `cache(path)` as a shard folder.
    #[pyo3(signature = (path=None))]
    fn cache(&self, py: Python<'_>, path: Option<PathBuf>) -> PyResult<PyDataset> {
        guard(|| {
            let d = self.dataset();
            let r = match path {
                None => d.cache(),
                Some(p) => d.cache_to(p),
            };
            ok(py, r).map(wrap)
        })
    }
}

fn policy(py: Python<'_>, op: &str, p: Wrap<ShardPolicy>) -> PyResult<ShardPolicy> {
    ok(py, p.get(op))
}

/// Adds the module functions (the dataset methods register themselves).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(verify_shards, m)?)
}

//! Shard folders, rank sharding, windowed shuffle and caches (`python/stokehold/shards.py` wraps
//! these with defaults and documentation).

use std::path::PathBuf;

use pyo3::prelude::*;
use stokehold_core::{Dataset, ShardPolicy};
use stokehold_io::shard as shards;
use stokehold_io::shard::{CacheExt, Compression, Progress, ShardDataset, WriteOptions};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

fn wrap(ds: Dataset) -> PyDataset {
    PyDataset::from_dataset(ds)
}

/// Opens a shard folder; `verify` checks each record's CRC32C as it is read.
#[pyfunction]
fn open_shards(py: Python<'_>, path: PathBuf, verify: bool) -> PyResult<PyDataset> {
    guard(|| {
        let r = py.detach(|| ShardDataset::open_with(&path, verify));
        ok(py, r).map(|d| wrap(Dataset::from_map(d)))
    })
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

/// Writes epoch 0 of `ds` as a shard folder; returns the manifest as JSON text. `progress` is
/// called with (records written, total or None) after every chunk.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (ds, path, shard_bytes, compression, zstd_level, shuffle_seed, threads, overwrite, progress=None))]
fn write_shards(
    py: Python<'_>,
    ds: PyRef<'_, PyDataset>,
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
        let data = ds.dataset().clone();
        let cb = |p: &Progress| {
            if let Some(f) = &progress {
                // A failing progress callback must not abort the write: its error is printed.
                Python::attach(|py| {
                    if let Err(e) = f.call1(py, (p.records, p.total)) {
                        e.print(py);
                    }
                });
            }
        };
        let r = py.detach(|| shards::write_shards(&data, &path, opts, Some(&cb)));
        let m = ok(py, r)?;
        Ok(serde_json::to_string(&m).expect("manifest serialises"))
    })
}

fn policy(py: Python<'_>, p: &str) -> PyResult<ShardPolicy> {
    ok(py, ShardPolicy::parse(p))
}

/// `shard(num_shards, index, policy)` (or its elastic form).
#[pyfunction]
fn shard(
    py: Python<'_>,
    ds: PyRef<'_, PyDataset>,
    num_shards: u64,
    index: u64,
    policy_name: &str,
    elastic: bool,
) -> PyResult<PyDataset> {
    guard(|| {
        let p = policy(py, policy_name)?;
        let d = ds.dataset();
        let r = if elastic {
            d.elastic_shard(num_shards, index, p)
        } else {
            d.shard(num_shards, index, p)
        };
        ok(py, r).map(wrap)
    })
}

/// `worker_split(num_workers, worker)`.
#[pyfunction]
fn worker_split(
    py: Python<'_>,
    ds: PyRef<'_, PyDataset>,
    num: u64,
    index: u64,
) -> PyResult<PyDataset> {
    guard(|| ok(py, ds.dataset().worker_split(num, index)).map(wrap))
}

/// `window_shuffle(window, seed)`.
#[pyfunction]
fn window_shuffle(
    py: Python<'_>,
    ds: PyRef<'_, PyDataset>,
    window: u64,
    seed: u64,
) -> PyResult<PyDataset> {
    guard(|| ok(py, ds.dataset().window_shuffle(window, seed)).map(wrap))
}

/// `slice(start, stop)` of each epoch.
#[pyfunction]
fn slice(ds: PyRef<'_, PyDataset>, start: u64, stop: u64) -> PyResult<PyDataset> {
    guard(|| Ok(wrap(ds.dataset().slice(start, stop))))
}

/// `cache()` in memory, or `cache(path)` as a shard folder.
#[pyfunction]
#[pyo3(signature = (ds, path=None))]
fn cache(py: Python<'_>, ds: PyRef<'_, PyDataset>, path: Option<PathBuf>) -> PyResult<PyDataset> {
    guard(|| {
        let d = ds.dataset();
        let r = match path {
            None => d.cache(),
            Some(p) => d.cache_to(p),
        };
        ok(py, r).map(wrap)
    })
}

/// Adds the shard functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open_shards, m)?)?;
    m.add_function(wrap_pyfunction!(verify_shards, m)?)?;
    m.add_function(wrap_pyfunction!(write_shards, m)?)?;
    m.add_function(wrap_pyfunction!(shard, m)?)?;
    m.add_function(wrap_pyfunction!(worker_split, m)?)?;
    m.add_function(wrap_pyfunction!(window_shuffle, m)?)?;
    m.add_function(wrap_pyfunction!(slice, m)?)?;
    m.add_function(wrap_pyfunction!(cache, m)?)?;
    Ok(())
}

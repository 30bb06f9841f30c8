//! WebDataset tar shards from Python (`python/stokehold/webdataset.py` holds the API and its
//! documentation). The GIL is released while the shards' member lists are read and while shards
//! are written.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use stokehold_core::Dataset;
use stokehold_io::webdataset::{
    write_webdataset, Decoders, Kind, WebDataset, WebDatasetOptions, WriteOptions,
};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

#[pymethods]
impl PyDataset {
    /// The samples of the tar shards `files`: `__key__`, `__url__` and one feature per member,
    /// named by extension (bytes, or decoded: webdataset's defaults when `decode_defaults`, and
    /// the kinds `decode` gives by extension); random access; index sidecars when `index`.
    #[staticmethod]
    fn read_webdataset(
        py: Python<'_>,
        files: Vec<PathBuf>,
        decode_defaults: bool,
        decode: Vec<(String, String)>,
        index: bool,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let mut decoders = Decoders {
                defaults: decode_defaults,
                ..Decoders::default()
            };
            for (ext, kind) in decode {
                decoders.by_ext.insert(ext, ok(py, Kind::parse(&kind))?);
            }
            let opts = WebDatasetOptions {
                decode: decoders,
                index,
            };
            let ds = ok(py, py.detach(|| WebDataset::open_with(&files, opts)))?;
            Ok(PyDataset::from_dataset(Dataset::from_map(ds)))
        })
    }

    /// Writes one epoch as tar shards named by `pattern` (`%06d`: the shard number), at most
    /// `maxcount` samples and `maxsize` member bytes each; `progress(samples, total)` now and
    /// then. Returns the shards' paths.
    fn write_webdataset(
        &self,
        py: Python<'_>,
        pattern: String,
        maxcount: u64,
        maxsize: u64,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Vec<String>> {
        guard(|| {
            let data = self.dataset().clone();
            let total = data.len();
            let opts = WriteOptions { maxcount, maxsize };
            let mut last = Instant::now();
            let mut cb_err: Option<PyErr> = None;
            let r = py.detach(|| {
                write_webdataset(&data, &pattern, opts, &mut |p| {
                    let done = total == Some(p.samples);
                    if progress.is_none() || cb_err.is_some() {
                        return;
                    }
                    if !done && last.elapsed() < Duration::from_millis(200) {
                        return;
                    }
                    last = Instant::now();
                    Python::attach(|py| {
                        if let Some(f) = &progress {
                            if let Err(e) = f.call1(py, (p.samples, total)) {
                                cb_err = Some(e);
                            }
                        }
                    });
                })
            });
            if let Some(e) = cb_err {
                return Err(e);
            }
            let paths = ok(py, r)?;
            Ok(paths
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect())
        })
    }
}

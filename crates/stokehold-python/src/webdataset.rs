//! WebDataset tar shards from Python (`python/stokehold/webdataset.py` holds the API and its
//! documentation). The GIL is released while the shards' member lists are read and while shards
//! are written.

use std::path::PathBuf;

use pyo3::prelude::*;
use stokehold_core::Dataset;
use stokehold_io::webdataset::{
    write_webdataset, Decoders, Kind, WebDataset, WebDatasetOptions, WriteOptions,
};

use crate::callbacks::Progress;
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
            let mut progress = Progress::new(progress);
            let r = py.detach(|| {
                write_webdataset(&data, &pattern, opts, &mut |p| {
                    progress.report(p.samples, total)
                })
            });
            progress.finish()?;
            let paths = ok(py, r)?;
            Ok(paths
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect())
        })
    }
}

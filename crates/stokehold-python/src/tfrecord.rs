//! TFRecord and tf.train.Example from Python (`python/stokehold/tfrecord.py` holds the API and its
//! documentation; these functions stay thin). The GIL is released around all reading, parsing
//! and writing.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use stokehold_core::{DType, Error, Tensor};
use stokehold_io::tfrecord::example::convert::{
    decode_example as decode, encode_example as encode,
};
use stokehold_io::tfrecord::{
    index::build_index_in, tfrecord_dataset as open_ds, Compression, OnCorrupt,
    ParseFeature as FeatureSpec, ParseSpec, Parser, ReadOptions, ShardOptions, TFRecordDataset,
    RECORD,
};

use crate::callbacks::Progress;
use crate::convert::{dict_to_example, example_to_dict};
use crate::dataset::PyDataset;
use crate::errors::{guard, ok, to_pyerr};
use crate::options::Wrap;

fn read_options(
    py: Python<'_>,
    op: &str,
    files: &[PathBuf],
    compression: &str,
    verify: bool,
    on_corrupt: Wrap<OnCorrupt>,
) -> PyResult<ReadOptions> {
    let compression = ok(py, Compression::resolve(op, compression, files))?;
    let on_corrupt = ok(py, on_corrupt.get(op))?;
    Ok(ReadOptions {
        compression,
        verify,
        on_corrupt,
    })
}

/// One feature spec from Python: (name, "fixed" | "var", shape, dtype, default values or None).
type SpecItem<'py> = (
    String,
    String,
    Vec<usize>,
    String,
    Option<Bound<'py, PyAny>>,
);

fn parse_spec(py: Python<'_>, items: Vec<SpecItem<'_>>) -> PyResult<ParseSpec> {
    let mut spec = ParseSpec::new();
    for (name, kind, shape, dtype, default) in items {
        let dtype: DType = ok(py, dtype.parse())?;
        let f = match kind.as_str() {
            "var" => FeatureSpec::var(dtype),
            _ => {
                let default = match default {
                    None => None,
                    Some(d) => Some(default_tensor(py, &name, dtype, &d)?),
                };
                FeatureSpec::FixedLen {
                    shape,
                    dtype,
                    default,
                }
            }
        };
        ok(py, spec.add(&name, f))?;
    }
    Ok(spec)
}

fn default_tensor(
    py: Python<'_>,
    name: &str,
    dtype: DType,
    d: &Bound<'_, PyAny>,
) -> PyResult<Tensor> {
    let bad = |e: PyErr| {
        let msg = format!("feature {name:?}: default must be a list of {dtype} values: {e}");
        to_pyerr(py, Error::invalid(msg), None)
    };
    Ok(match dtype {
        DType::I64 => {
            let v: Vec<i64> = d.extract().map_err(bad)?;
            ok(py, Tensor::from_vec(vec![v.len()], v))?
        }
        DType::F32 => {
            let v: Vec<f32> = d.extract().map_err(bad)?;
            ok(py, Tensor::from_vec(vec![v.len()], v))?
        }
        _ => {
            let v: Vec<Vec<u8>> = d.extract().map_err(bad)?;
            Tensor::strings(&v)
        }
    })
}

/// Writes the index sidecar of `file`; returns (records, skipped, index path).
#[pyfunction]
#[pyo3(signature = (file, skip_corrupt, side_folder=false))]
fn tfrecord_build_index(
    py: Python<'_>,
    file: PathBuf,
    skip_corrupt: bool,
    side_folder: bool,
) -> PyResult<(u64, u64, PathBuf)> {
    guard(|| {
        let on_corrupt = if skip_corrupt {
            OnCorrupt::Skip
        } else {
            OnCorrupt::Raise
        };
        let opts = ReadOptions {
            on_corrupt,
            compression: Compression::from_path(&file),
            verify: true,
        };
        let s = ok(py, py.detach(|| build_index_in(&file, opts, side_folder)))?;
        Ok((s.records, s.skipped, s.path))
    })
}

#[pymethods]
impl PyDataset {
    #[staticmethod]
    /// The records of `files` (`{"record": bytes}`): random access when every file has an index.
    /// Skipped corrupt records are in the dataset's skip log (`skipped()`).
    fn tfrecord_dataset(
        py: Python<'_>,
        files: Vec<PathBuf>,
        compression: &str,
        verify: bool,
        on_corrupt: Wrap<OnCorrupt>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let opts = read_options(
                py,
                "TFRecordDataset",
                &files,
                compression,
                verify,
                on_corrupt,
            )?;
            let (ds, _log) = ok(py, py.detach(|| open_ds(&files, opts)))?;
            Ok(PyDataset::from_dataset(ds))
        })
    }

    /// Batches of parsed Examples read straight from `files` (read and parse fused).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    fn tfrecord_parse_batches(
        py: Python<'_>,
        files: Vec<PathBuf>,
        compression: &str,
        verify: bool,
        on_corrupt: Wrap<OnCorrupt>,
        features: Vec<SpecItem<'_>>,
        batch_size: usize,
        drop_remainder: bool,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let opts = read_options(py, "read_tfrecord", &files, compression, verify, on_corrupt)?;
            let parser = Parser::new(parse_spec(py, features)?);
            let src = TFRecordDataset::new(&files, opts);
            let ds = ok(py, src.parse_batches(parser, batch_size, drop_remainder))?;
            Ok(PyDataset::from_dataset(ds))
        })
    }

    /// `ds` with its bytes feature `record` parsed: per batch when `batched`, per element when
    /// not, as each element holds them when `None` (a mismatch is an error naming both).
    fn parse_examples(
        &self,
        py: Python<'_>,
        features: Vec<SpecItem<'_>>,
        batched: Option<bool>,
        record: &str,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let parser = Parser::new(parse_spec(py, features)?);
            let f = parser.parse_fn(record, batched);
            let label = format!("parse_example[{}]", parser.spec().describe());
            Ok(PyDataset::from_dataset(self.dataset().map(&label, f)))
        })
    }

    /// Writes one epoch to TFRecord shards; `progress(records, total)` is called now and
    /// then (at most every 0.2 s, and at the end). Returns the shard paths as `str` (a
    /// `PathBuf` reaches Python as a `pathlib.Path`, which turns `s3://b/k` into `s3:/b/k`).
    #[pyo3(signature = (directory, prefix, suffix, num_shards, records_per_shard, bytes_per_shard, compression, seed, index, progress, index_side_folder=false))]
    #[allow(clippy::too_many_arguments)]
    fn write_tfrecord(
        &self,
        py: Python<'_>,
        directory: PathBuf,
        prefix: String,
        suffix: String,
        num_shards: Option<u64>,
        records_per_shard: Option<u64>,
        bytes_per_shard: Option<u64>,
        compression: &str,
        seed: Option<u64>,
        index: bool,
        progress: Option<Py<PyAny>>,
        index_side_folder: bool,
    ) -> PyResult<Vec<String>> {
        guard(|| {
            let compression: Compression = ok(py, compression.parse())?;
            let opts = ShardOptions {
                prefix,
                suffix,
                records_per_shard,
                bytes_per_shard,
                num_shards,
                compression,
                shuffle_seed: seed,
                write_index: index && compression == Compression::None,
                index_side_folder,
            };
            let data = self.dataset().clone();
            let mut progress = Progress::new(progress);
            let r = py.detach(|| {
                stokehold_io::tfrecord::write_tfrecord_shards(&data, &directory, &opts, &mut |p| {
                    progress.report(p.records, p.total)
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

/// Serializes a dict of arrays as a `tf.train.Example`.
#[pyfunction]
fn encode_example<'py>(
    py: Python<'py>,
    example: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    guard(|| {
        let e = dict_to_example(py, example)?;
        let b = ok(py, encode(&e))?;
        Ok(PyBytes::new(py, &b))
    })
}

/// Decodes a serialized `tf.train.Example` into a dict of 1-D arrays (sorted by name).
#[pyfunction]
fn decode_example<'py>(py: Python<'py>, record: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    guard(|| {
        let e = ok(py, decode(record))?;
        Ok(example_to_dict(py, e)?.into_any())
    })
}

/// `data` framed as one TFRecord record (length, masked CRCs): what appending a record to a
/// file takes (TensorBoard's event files are TFRecord files written this way).
#[pyfunction]
fn tfrecord_frame<'py>(py: Python<'py>, data: &[u8]) -> Bound<'py, PyBytes> {
    let mut out = Vec::new();
    stokehold_io::tfrecord::writer::frame_into(&mut out, data);
    PyBytes::new(py, &out)
}

/// Adds the TFRecord functions to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TFRECORD_RECORD", RECORD)?;
    m.add_function(wrap_pyfunction!(tfrecord_build_index, m)?)?;
    m.add_function(wrap_pyfunction!(encode_example, m)?)?;
    m.add_function(wrap_pyfunction!(decode_example, m)?)?;
    m.add_function(wrap_pyfunction!(tfrecord_frame, m)?)?;
    Ok(())
}

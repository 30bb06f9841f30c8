//! Images from Python: decode and augmentation ops of the native `Dataset` (their own
//! `#[pymethods]` block) and `probe_image`, a module function. `python/stokehold/dataset.py`
//! holds the API, the defaults and the argument checks; these stay thin. Everything runs in
//! Rust on the pipeline's threads: no GIL per image.

use std::sync::Arc;

use pyo3::prelude::*;
use stokehold_core::exec::Parallelism;
use stokehold_core::ops::on_error::{ErrorLog, OnError};
use stokehold_core::{DType, Dataset, Error, MapFn};
use stokehold_io::image::{self as im, DecodeOptions, ImageError, Interpolation, Layout, Size};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};

/// Elements an `on_error="skip"` decode left out: the count and the first few.
// Minimal on purpose: the lead unifies it with the other ops' skip logs.
#[pyclass(frozen, name = "SkipLog", module = "stokehold._native")]
pub struct PySkipLog {
    log: Arc<ErrorLog>,
}

#[pymethods]
impl PySkipLog {
    /// Elements skipped so far.
    #[getter]
    fn count(&self) -> u64 {
        self.log.count()
    }

    /// The first few as (element index, error message).
    #[getter]
    fn first(&self) -> Vec<(u64, String)> {
        self.log
            .first()
            .into_iter()
            .map(|s| (s.index, s.error))
            .collect()
    }
}

fn image_arg(e: ImageError) -> Error {
    Error::invalid(e.to_string())
}

fn interp(s: &str) -> stokehold_core::Result<Interpolation> {
    Interpolation::parse(s).map_err(image_arg)
}

/// The decode options from the Python arguments.
fn options(
    channels: u8,
    dtype: &str,
    layout: &str,
    max_pixels: u64,
) -> stokehold_core::Result<DecodeOptions> {
    let dtype = match dtype {
        "uint8" => DType::U8,
        "uint16" => DType::U16,
        _ => {
            return Err(Error::invalid(format!(
                "dtype={dtype:?}: must be \"uint8\" or \"uint16\""
            )))
        }
    };
    if !matches!(channels, 0 | 1 | 3 | 4) {
        return Err(Error::invalid(format!(
            "channels={channels}: must be 0 (as in the file), 1, 3 or 4"
        )));
    }
    Ok(DecodeOptions {
        channels,
        dtype,
        layout: Layout::parse(layout)?,
        max_pixels,
    })
}

/// Applies a decoder under the skip policy, on `par` threads when given (-1: AUTOTUNE). A raising
/// decoder over a random-access input stays random access under a `parallelize` stage, as
/// Python's `map(num_parallel_calls=...)` does.
fn apply(
    ds: &Dataset,
    label: &str,
    f: MapFn,
    on_error: &str,
    par: Option<i64>,
    deterministic: bool,
) -> stokehold_core::Result<(Dataset, Arc<ErrorLog>)> {
    let policy = OnError::parse(label, on_error)?;
    let par = par
        .map(|p| Parallelism::from_arg(label, "num_parallel_calls", p))
        .transpose()?;
    let log = Arc::new(ErrorLog::default());
    let out = match (policy, par) {
        (OnError::Raise, Some(p)) if ds.is_random_access() => {
            ds.map(label, f).parallelize(p, deterministic)
        }
        _ => ds.map_with_policy(
            label,
            f,
            policy,
            log.clone(),
            par.map(|p| (p, deterministic)),
        ),
    };
    Ok((out, log))
}

#[pymethods]
impl PyDataset {
    /// Decodes bytes feature `feature` into `out`; returns the dataset and its skip log.
    #[pyo3(signature = (feature, out, channels, dtype, layout, max_pixels, on_error, num_parallel_calls, deterministic))]
    fn decode_image(
        &self,
        py: Python<'_>,
        feature: &str,
        out: &str,
        channels: u8,
        dtype: &str,
        layout: &str,
        max_pixels: u64,
        on_error: &str,
        num_parallel_calls: Option<i64>,
        deterministic: bool,
    ) -> PyResult<(PyDataset, PySkipLog)> {
        guard(|| {
            let r = options(channels, dtype, layout, max_pixels).and_then(|o| {
                let f = im::decode_image_fn(feature, out, o);
                apply(
                    self.dataset(),
                    "decode_image",
                    f,
                    on_error,
                    num_parallel_calls,
                    deterministic,
                )
            });
            let (ds, log) = ok(py, r)?;
            Ok((PyDataset::from_dataset(ds), PySkipLog { log }))
        })
    }

    /// Reads and decodes the file named by feature `path` into `out`; dataset and skip log.
    #[pyo3(signature = (path, out, channels, dtype, layout, max_pixels, on_error, num_parallel_calls, deterministic))]
    fn load_image(
        &self,
        py: Python<'_>,
        path: &str,
        out: &str,
        channels: u8,
        dtype: &str,
        layout: &str,
        max_pixels: u64,
        on_error: &str,
        num_parallel_calls: Option<i64>,
        deterministic: bool,
    ) -> PyResult<(PyDataset, PySkipLog)> {
        guard(|| {
            let r = options(channels, dtype, layout, max_pixels).and_then(|o| {
                let f = im::load_image_fn(path, out, o);
                apply(
                    self.dataset(),
                    "load_image",
                    f,
                    on_error,
                    num_parallel_calls,
                    deterministic,
                )
            });
            let (ds, log) = ok(py, r)?;
            Ok((PyDataset::from_dataset(ds), PySkipLog { log }))
        })
    }

    /// Resizes `feature` to (height, width), or with `shorter` its shorter side to `height`.
    fn image_resize(
        &self,
        py: Python<'_>,
        feature: &str,
        height: usize,
        width: usize,
        shorter: bool,
        interpolation: &str,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let i = ok(py, interp(interpolation))?;
            let size = if shorter {
                Size::Shorter(height)
            } else {
                Size::Exact(height, width)
            };
            let label = format!("resize:{feature}:{height}x{width}:{interpolation}");
            Ok(PyDataset::from_dataset(
                self.dataset().map(&label, im::resize_fn(feature, size, i)),
            ))
        })
    }

    /// torchvision's CenterCrop of `feature` to (height, width).
    fn image_center_crop(&self, feature: &str, height: usize, width: usize) -> PyResult<PyDataset> {
        guard(|| {
            let label = format!("center_crop:{feature}:{height}x{width}");
            Ok(PyDataset::from_dataset(
                self.dataset()
                    .map(&label, im::center_crop_fn(feature, (height, width))),
            ))
        })
    }

    /// torchvision's RandomResizedCrop of `feature`.
    fn image_random_resized_crop(
        &self,
        py: Python<'_>,
        feature: &str,
        height: usize,
        width: usize,
        scale: (f64, f64),
        ratio: (f64, f64),
        interpolation: &str,
        seed: u64,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let i = ok(py, interp(interpolation))?;
            let label = format!("random_resized_crop:{feature}:{height}x{width}:seed={seed}");
            let f = im::random_resized_crop_fn(feature, (height, width), scale, ratio, i, seed);
            Ok(PyDataset::from_dataset(self.dataset().map(&label, f)))
        })
    }

    /// Mirrors `feature` left-right with probability `p`.
    fn image_random_flip(&self, feature: &str, p: f64, seed: u64) -> PyResult<PyDataset> {
        guard(|| {
            let label = format!("random_flip_left_right:{feature}:p={p}:seed={seed}");
            Ok(PyDataset::from_dataset(
                self.dataset()
                    .map(&label, im::random_flip_fn(feature, p, seed)),
            ))
        })
    }

    /// torchvision's ColorJitter (brightness, contrast, saturation; no hue).
    fn image_color_jitter(
        &self,
        feature: &str,
        brightness: f32,
        contrast: f32,
        saturation: f32,
        seed: u64,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let label =
                format!("color_jitter:{feature}:{brightness}:{contrast}:{saturation}:seed={seed}");
            let f = im::color_jitter_fn(feature, brightness, contrast, saturation, seed);
            Ok(PyDataset::from_dataset(self.dataset().map(&label, f)))
        })
    }

    /// `(x / 255 - mean) / std` as float32, laid out HWC or CHW.
    fn image_normalize(
        &self,
        py: Python<'_>,
        feature: &str,
        mean: Vec<f32>,
        std: Vec<f32>,
        layout: &str,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let chw = ok(py, Layout::parse(layout))? == Layout::Chw;
            let label = format!("normalize:{feature}:{mean:?}:{std:?}:{layout}");
            Ok(PyDataset::from_dataset(
                self.dataset()
                    .map(&label, im::normalize_fn(feature, &mean, &std, chw)),
            ))
        })
    }
}

/// Reads an image's header: (format, width, height, channels, bit depth).
#[pyfunction]
fn probe_image(py: Python<'_>, data: &[u8]) -> PyResult<(String, u32, u32, u8, u8)> {
    guard(|| {
        let r = py.detach(|| im::probe(data));
        let i = ok(
            py,
            r.map_err(|e| Error::schema("probe_image", e.to_string())),
        )?;
        Ok((
            i.format.name().to_string(),
            i.width,
            i.height,
            i.channels,
            i.bit_depth,
        ))
    })
}

/// Adds `probe_image` and `SkipLog` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySkipLog>()?;
    m.add_function(wrap_pyfunction!(probe_image, m)?)?;
    Ok(())
}

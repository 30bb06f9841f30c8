//! Images from Python: decode and augmentation ops of the native `Dataset` (their own
//! `#[pymethods]` block) and `probe_image`, a module function. `python/stokehold/dataset.py`
//! holds the API and the defaults; option strings arrive as `Wrap<T>` (`options.rs`), parsed
//! and checked by `stokehold_io::image`; these stay thin. Everything runs in
//! Rust on the pipeline's threads: no GIL per image.

use pyo3::prelude::*;
use stokehold_core::{Dataset, Error};
use stokehold_io::image::{self as im, DecodeOptions, Interpolation, Layout, SampleType, Size};
use stokehold_io::options::Choice;

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};
use crate::options::Wrap;
use crate::skips::map_on_error_par;

/// `decode_image` (`from_path` false: `source` is a bytes feature) or `load_image` (a path
/// feature) from their keyword arguments (options parsed and checked by io:
/// `DecodeOptions::from_args`), under the shared skip path: what `on_error="skip"` leaves out
/// is counted where `ds.skipped()` finds it.
#[allow(clippy::too_many_arguments)]
fn decode_op(
    py: Python<'_>,
    ds: &Dataset,
    from_path: bool,
    source: &str,
    out: &str,
    channels: u64,
    dtype: Wrap<SampleType>,
    layout: Wrap<Layout>,
    max_pixels: u64,
    on_error: &str,
    num_parallel_calls: Option<i64>,
    deterministic: Option<bool>,
) -> PyResult<PyDataset> {
    let op = if from_path {
        "load_image"
    } else {
        "decode_image"
    };
    let opts = (|| {
        let (dtype, layout) = (dtype.get(op)?, layout.get(op)?);
        DecodeOptions::from_args(op, channels, dtype, layout, max_pixels)
    })();
    let opts = ok(py, opts)?;
    let f = if from_path {
        im::load_image_fn(source, out, opts)
    } else {
        im::decode_image_fn(source, out, opts)
    };
    let det = deterministic.unwrap_or(true);
    map_on_error_par(py, ds, op, op, f, on_error, num_parallel_calls, det)
}

#[pymethods]
impl PyDataset {
    /// Decodes bytes feature `feature` into `out` (see `Dataset.decode_image`).
    #[pyo3(signature = (feature, out, *, channels, dtype, layout, max_pixels, on_error,
        num_parallel_calls, deterministic))]
    #[allow(clippy::too_many_arguments)]
    fn decode_image(
        &self,
        py: Python<'_>,
        feature: &str,
        out: &str,
        channels: u64,
        dtype: Wrap<SampleType>,
        layout: Wrap<Layout>,
        max_pixels: u64,
        on_error: &str,
        num_parallel_calls: Option<i64>,
        deterministic: Option<bool>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            decode_op(
                py,
                self.dataset(),
                false,
                feature,
                out,
                channels,
                dtype,
                layout,
                max_pixels,
                on_error,
                num_parallel_calls,
                deterministic,
            )
        })
    }

    /// Reads and decodes the file named by feature `feature` into `out`.
    #[pyo3(signature = (feature, out, *, channels, dtype, layout, max_pixels, on_error,
        num_parallel_calls, deterministic))]
    #[allow(clippy::too_many_arguments)]
    fn load_image(
        &self,
        py: Python<'_>,
        feature: &str,
        out: &str,
        channels: u64,
        dtype: Wrap<SampleType>,
        layout: Wrap<Layout>,
        max_pixels: u64,
        on_error: &str,
        num_parallel_calls: Option<i64>,
        deterministic: Option<bool>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            decode_op(
                py,
                self.dataset(),
                true,
                feature,
                out,
                channels,
                dtype,
                layout,
                max_pixels,
                on_error,
                num_parallel_calls,
                deterministic,
            )
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
        interpolation: Wrap<Interpolation>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let i = ok(py, interpolation.get("resize"))?;
            let size = if shorter {
                Size::Shorter(height)
            } else {
                Size::Exact(height, width)
            };
            let label = format!("resize:{feature}:{height}x{width}:{}", i.name());
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
        interpolation: Wrap<Interpolation>,
        seed: u64,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let i = ok(py, interpolation.get("random_resized_crop"))?;
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
        layout: Wrap<Layout>,
    ) -> PyResult<PyDataset> {
        guard(|| {
            let layout = ok(py, layout.get("normalize"))?;
            let chw = layout == Layout::Chw;
            let label = format!("normalize:{feature}:{mean:?}:{std:?}:{}", layout.name());
            Ok(PyDataset::from_dataset(self.dataset().map_batched(
                &label,
                im::normalize_fn(feature, &mean, &std, chw),
                im::normalize_batch_fn(feature, &mean, &std, chw),
            )))
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

/// Adds `probe_image` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(probe_image, m)?)?;
    Ok(())
}

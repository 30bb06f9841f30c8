//! Images from Python: decode and augmentation ops of the native `Dataset` (their own
//! `#[pymethods]` block) and `probe_image`, a module function. `python/stokehold/dataset.py`
//! holds the API, the defaults and the argument checks; these stay thin. Everything runs in
//! Rust on the pipeline's threads: no GIL per image.

use pyo3::prelude::*;
use stokehold_core::{DType, Dataset, Error, MapFn};
use stokehold_io::image::{self as im, DecodeOptions, ImageError, Interpolation, Layout, Size};

use crate::dataset::PyDataset;
use crate::errors::{guard, ok};
use crate::skips::map_on_error_par;

fn image_arg(e: ImageError) -> Error {
    Error::invalid(e.to_string())
}

fn interp(s: &str) -> stokehold_core::Result<Interpolation> {
    Interpolation::parse(s).map_err(image_arg)
}

/// The arguments `decode_image` and `load_image` share, one tuple in this order (checked by
/// `python/stokehold/image.py`'s `decode_args`): channels, dtype, layout, max_pixels, on_error,
/// num_parallel_calls, deterministic.
#[derive(FromPyObject)]
struct DecodeArgs(u8, String, String, u64, String, Option<i64>, bool);

impl DecodeArgs {
    /// The decode options (a bad value is an error naming it).
    fn options(&self) -> stokehold_core::Result<DecodeOptions> {
        let DecodeArgs(channels, dtype, layout, max_pixels, ..) = self;
        let dtype = match dtype.as_str() {
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
            channels: *channels,
            dtype,
            layout: Layout::parse(layout)?,
            max_pixels: *max_pixels,
        })
    }
}

/// A decoder's `MapFn` factory: (source feature, output feature, options).
type MakeFn = fn(&str, &str, DecodeOptions) -> MapFn;

/// `decode_image` (`from_path` false: `source` is a bytes feature) or `load_image` (a path
/// feature) under the shared skip path: what `on_error="skip"` leaves out is counted where
/// `ds.skipped()` finds it.
fn decode_op(
    py: Python<'_>,
    ds: &Dataset,
    from_path: bool,
    source: &str,
    out: &str,
    args: DecodeArgs,
) -> PyResult<PyDataset> {
    let (op, make): (&str, MakeFn) = if from_path {
        ("load_image", im::load_image_fn)
    } else {
        ("decode_image", im::decode_image_fn)
    };
    let f = make(source, out, ok(py, args.options())?);
    map_on_error_par(py, ds, op, op, f, &args.4, args.5, args.6)
}

#[pymethods]
impl PyDataset {
    /// Decodes bytes feature `feature` into `out` (see `Dataset.decode_image`).
    fn decode_image(
        &self,
        py: Python<'_>,
        feature: &str,
        out: &str,
        args: DecodeArgs,
    ) -> PyResult<PyDataset> {
        guard(|| decode_op(py, self.dataset(), false, feature, out, args))
    }

    /// Reads and decodes the file named by feature `path` into `out`.
    fn load_image(
        &self,
        py: Python<'_>,
        path: &str,
        out: &str,
        args: DecodeArgs,
    ) -> PyResult<PyDataset> {
        guard(|| decode_op(py, self.dataset(), true, path, out, args))
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

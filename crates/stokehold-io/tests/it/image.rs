//! Images (feature `image`): decoded values against the fixtures of `testdata/image` (made by
//! its `make_fixtures.py` with Pillow), hostile and broken inputs, the skip policy, keyed
//! augmentation and conformance of a decode + augment pipeline.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stokehold_core::ops::on_error::{ErrorLog, OnError};
use stokehold_core::{BatchOptions, DType, Dataset, Error, Example, Parallelism, Tensor};
use stokehold_io::files::{list_files, read_npy};
use stokehold_io::image::{
    self, decode, probe, DecodeOptions, Format, ImageError, Interpolation, Layout, Size,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/image")
        .join(name)
}

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap()
}

fn own_channels() -> DecodeOptions {
    DecodeOptions {
        channels: 0,
        ..DecodeOptions::default()
    }
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let mse: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum::<f64>()
        / a.len() as f64;
    if mse == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (255.0 * 255.0 / mse).log10()
    }
}

#[test]
fn png_pixels_exact() {
    for name in [
        "rgb8",
        "rgba8",
        "gray8",
        "la8",
        "palette",
        "palette_trns",
        "lossless",
        "alpha",
    ] {
        let ext = if name == "lossless" || name == "alpha" {
            "webp"
        } else {
            "png"
        };
        let want = read_npy(fixture(&format!("{name}.npy"))).unwrap();
        let got = decode(&bytes(&format!("{name}.{ext}")), &own_channels()).unwrap();
        assert_eq!(got.shape(), want.shape(), "{name}");
        assert_eq!(got.data(), want.data(), "{name}: pixels differ");
    }
}

#[test]
fn png_16_bit_exact_and_high_byte() {
    for name in ["gray16", "rgb16"] {
        let want = read_npy(fixture(&format!("{name}.npy"))).unwrap();
        let opts = DecodeOptions {
            dtype: DType::U16,
            ..own_channels()
        };
        let got = decode(&bytes(&format!("{name}.png")), &opts).unwrap();
        assert_eq!(got.dtype(), DType::U16);
        assert_eq!(got.to_vec::<u16>().unwrap(), want.to_vec::<u16>().unwrap());
        let as_u8 = decode(&bytes(&format!("{name}.png")), &own_channels()).unwrap();
        let high: Vec<u8> = want
            .to_vec::<u16>()
            .unwrap()
            .iter()
            .map(|v| (v >> 8) as u8)
            .collect();
        assert_eq!(as_u8.to_vec::<u8>().unwrap(), high, "{name} as uint8");
    }
}

/// Our JPEG decode (zune-jpeg) against Pillow's (libjpeg-turbo): the IDCT and chroma upsampling
/// differ in rounding, so the stated bound is a PSNR of at least 35 dB (measured: see the
/// assertion message).
#[test]
fn jpeg_and_lossy_webp_close_to_pillow() {
    for (file, reference) in [
        ("baseline.jpg", "baseline.pil.npy"),
        ("progressive.jpg", "progressive.pil.npy"),
        ("q444.jpg", "q444.pil.npy"),
        ("gray.jpg", "gray.pil.npy"),
        ("lossy.webp", "lossy.pil.npy"),
    ] {
        let want = read_npy(fixture(reference)).unwrap();
        let got = decode(&bytes(file), &own_channels()).unwrap();
        assert_eq!(got.shape(), want.shape(), "{file}");
        let p = psnr(got.data(), want.data());
        assert!(p >= 35.0, "{file}: PSNR {p:.1} dB vs Pillow");
    }
}

#[test]
fn channels_dtype_and_layout() {
    let rgb = read_npy(fixture("rgb8.npy")).unwrap();
    let data = bytes("rgb8.png");
    let chw = DecodeOptions {
        layout: Layout::Chw,
        ..DecodeOptions::default()
    };
    let t = decode(&data, &chw).unwrap();
    assert_eq!(t.shape(), &[3, 48, 64]);
    let v = t.to_vec::<u8>().unwrap();
    let w = rgb.to_vec::<u8>().unwrap();
    // Pixel (y=5, x=7), green channel.
    assert_eq!(v[48 * 64 + 5 * 64 + 7], w[(5 * 64 + 7) * 3 + 1]);
    let gray = decode(&bytes("gray8.png"), &DecodeOptions::default()).unwrap();
    assert_eq!(
        gray.shape(),
        &[48, 64, 3],
        "gray replicated to RGB by default"
    );
    let rgba = decode(
        &data,
        &DecodeOptions {
            channels: 4,
            ..DecodeOptions::default()
        },
    )
    .unwrap();
    assert_eq!(rgba.to_vec::<u8>().unwrap()[3], 255, "opaque alpha added");
    let bad = decode(
        &data,
        &DecodeOptions {
            channels: 2,
            ..DecodeOptions::default()
        },
    );
    assert!(matches!(bad, Err(ImageError::Argument(_))));
}

#[test]
fn probe_reads_headers() {
    for (name, format, channels, depth) in [
        ("baseline.jpg", Format::Jpeg, 3, 8),
        ("gray.jpg", Format::Jpeg, 1, 8),
        ("rgba8.png", Format::Png, 4, 8),
        ("palette.png", Format::Png, 3, 8),
        ("palette_trns.png", Format::Png, 4, 8),
        ("gray16.png", Format::Png, 1, 16),
        ("alpha.webp", Format::WebP, 4, 8),
        ("lossy.webp", Format::WebP, 3, 8),
    ] {
        let i = probe(&bytes(name)).unwrap();
        assert_eq!(
            (i.format, i.width, i.height, i.channels, i.bit_depth),
            (format, 64, 48, channels, depth),
            "{name}"
        );
    }
    // A header says what it says, however large: probing never allocates pixels.
    assert_eq!(probe(&bytes("huge.png")).unwrap().width, 100_000);
}

#[test]
fn hostile_headers_refused_before_allocating() {
    for name in ["huge.png", "huge.jpg", "huge.webp"] {
        let err = decode(&bytes(name), &DecodeOptions::default()).unwrap_err();
        // image-webp refuses a canvas over its own limit while reading the header.
        let msg = err.to_string();
        assert!(
            matches!(err, ImageError::Size { .. }) || msg.contains("WebP: Image too large"),
            "{name}: {err} ({err:?})"
        );
    }
    for name in ["zero.png", "zero.jpg"] {
        let err = decode(&bytes(name), &DecodeOptions::default()).unwrap_err();
        assert!(
            matches!(err, ImageError::Size { .. } | ImageError::Corrupt { .. }),
            "{name}: {err:?}"
        );
    }
    // The limit is an option: a tiny one refuses even the fixtures.
    let small = DecodeOptions {
        max_pixels: 100,
        ..DecodeOptions::default()
    };
    let err = decode(&bytes("rgb8.png"), &small).unwrap_err();
    assert!(err.to_string().contains("64x48"), "{err}");
}

#[test]
fn truncated_and_corrupt_files_error() {
    for name in [
        "baseline.jpg",
        "progressive.jpg",
        "rgb8.png",
        "gray16.png",
        "palette.png",
        "lossless.webp",
        "lossy.webp",
    ] {
        let full = bytes(name);
        for cut in [full.len() / 2, full.len() - 8, 20, 5] {
            let r = decode(&full[..cut], &DecodeOptions::default());
            assert!(r.is_err(), "{name} cut at {cut} decoded");
        }
        // Flip bytes in the middle of the data (CRCs and checksums, or entropy-coded data).
        let mut bad = full.clone();
        let mid = bad.len() / 2;
        for b in &mut bad[mid..mid + 16] {
            *b ^= 0x5A;
        }
        // JPEG and WebP data have no checksum: flipped bits may decode to other pixels. That
        // is fine (no panic is what must hold, and the fuzz targets check it); PNG's CRCs
        // refuse it.
        let r = decode(&bad, &DecodeOptions::default());
        if name.ends_with(".png") {
            assert!(r.is_err(), "{name} with flipped bytes decoded");
        }
    }
}

#[test]
fn unsupported_formats_named() {
    for (name, what) in [("tiny.gif", "GIF"), ("tiny.bmp", "BMP")] {
        let err = decode(&bytes(name), &DecodeOptions::default()).unwrap_err();
        assert!(
            err.to_string().contains(what) && err.to_string().contains("unsupported"),
            "{err}"
        );
    }
    let err = decode(b"", &DecodeOptions::default()).unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
}

fn write_folder(dir: &Path) {
    for (i, name) in ["baseline.jpg", "rgb8.png", "lossy.webp", "progressive.jpg"]
        .iter()
        .enumerate()
    {
        let ext = name.rsplit('.').next().unwrap();
        std::fs::write(dir.join(format!("img-{i}.{ext}")), bytes(name)).unwrap();
    }
    // A truncated JPEG and an unsupported file among them.
    let cut = bytes("baseline.jpg");
    std::fs::write(dir.join("img-4.jpg"), &cut[..cut.len() / 2]).unwrap();
    std::fs::write(dir.join("img-5.gif"), bytes("tiny.gif")).unwrap();
}

#[test]
fn load_image_errors_name_file_and_element_and_skip_counts() {
    let dir = tempfile::tempdir().unwrap();
    write_folder(dir.path());
    let pattern = dir.path().join("img-*").to_string_lossy().into_owned();
    let paths = list_files(&[pattern], None).unwrap();
    let f = image::load_image_fn("path", "image", DecodeOptions::default());
    let err = paths
        .map("load_image", f.clone())
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(
        msg.contains("img-4.jpg") && msg.contains("element 4") && msg.contains("load_image"),
        "{msg}"
    );
    let log = Arc::new(ErrorLog::default());
    let par = Some((Parallelism::Fixed(3), true));
    let ds = paths.map_with_policy("load_image", f, OnError::Skip, log.clone(), par);
    let got = ds.iter(0).unwrap().collect_all().unwrap();
    assert_eq!(got.len(), 4);
    assert_eq!(log.count(), 2);
    let first = log.first();
    assert_eq!(first[0].index, 4);
    assert!(first[1].error.contains("GIF"), "{:?}", first[1]);
}

#[test]
fn decode_from_bytes_feature_names_feature_and_element() {
    let good = bytes("rgb8.png");
    let ds = Dataset::from_columns(Example::new().with(
        "image",
        Tensor::strings(&[good.as_slice(), b"not an image"]),
    ))
    .unwrap();
    let err = ds
        .map(
            "decode_image",
            image::decode_image_fn("image", "image", DecodeOptions::default()),
        )
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("element 1") && err.contains("\"image\"") && err.contains("unsupported"),
        "{err}"
    );
}

/// decode -> random_resized_crop -> flip -> normalize -> batch: same output on 1 and 4 threads,
/// saves and restores (the conformance suite), and dense batches.
#[test]
fn augment_pipeline_conforms_and_batches() {
    let files: Vec<Vec<u8>> = ["baseline.jpg", "rgb8.png", "lossy.webp", "progressive.jpg"]
        .iter()
        .map(|n| bytes(n))
        .collect();
    let items: Vec<&[u8]> = (0..12).map(|i| files[i % 4].as_slice()).collect();
    let src = Dataset::from_columns(Example::new().with("image", Tensor::strings(&items))).unwrap();
    let ds = src
        .map(
            "decode",
            image::decode_image_fn("image", "image", DecodeOptions::default()),
        )
        .map(
            "rrc",
            image::random_resized_crop_fn(
                "image",
                (24, 20),
                (0.08, 1.0),
                (0.75, 4.0 / 3.0),
                Interpolation::Bilinear,
                5,
            ),
        )
        .map("flip", image::random_flip_fn("image", 0.5, 6));
    let (mean, std) = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]);
    // The batch form (normalised straight into the batch buffer) in both layouts: the
    // conformance suite checks its batches against the element path's stacked elements.
    let hwc = ds.map_batched(
        "norm",
        image::normalize_fn("image", &mean, &std, false),
        image::normalize_batch_fn("image", &mean, &std, false),
    );
    stokehold_core::testing::check("image augment, HWC", &hwc, 20);
    let ds = ds.map_batched(
        "norm",
        image::normalize_fn("image", &mean, &std, true),
        image::normalize_batch_fn("image", &mean, &std, true),
    );
    stokehold_core::testing::check("image augment", &ds, 20);
    let b = ds.batch_with(BatchOptions::new(4, false)).unwrap();
    let first = b.iter(0).unwrap().collect_all().unwrap();
    let t = first[0].tensor("t", "image").unwrap();
    assert_eq!(t.shape(), &[4, 3, 24, 20]);
    assert_eq!(t.dtype(), DType::F32);
    // Epochs differ (the crop is keyed by epoch too), the same epoch repeats exactly.
    let e1 = b.iter(1).unwrap().collect_all().unwrap();
    assert_ne!(first, e1);
    assert_eq!(first, b.iter(0).unwrap().collect_all().unwrap());
}

#[test]
fn resize_center_crop_flip_values() {
    let img = decode(&bytes("rgb8.png"), &DecodeOptions::default()).unwrap();
    let e = Example::new().with("x", img.clone());
    let ctx = stokehold_core::Ctx {
        op: "t",
        index: 0,
        epoch: 0,
    };
    let r = image::resize_fn("x", Size::Shorter(24), Interpolation::Area)(e.clone(), &ctx).unwrap();
    assert_eq!(r.tensor("t", "x").unwrap().shape(), &[24, 32, 3]);
    let c = image::center_crop_fn("x", (40, 60))(e.clone(), &ctx).unwrap();
    let c = c.tensor("t", "x").unwrap().to_vec::<u8>().unwrap();
    let full = img.to_vec::<u8>().unwrap();
    // Offsets round(8/2)=4 rows, round(4/2)=2 columns.
    assert_eq!(&c[..3], &full[(4 * 64 + 2) * 3..(4 * 64 + 2) * 3 + 3]);
    // p = 1 always flips; twice is the identity.
    let flip = image::random_flip_fn("x", 1.0, 0);
    let once = flip(e.clone(), &ctx).unwrap();
    let once_v = once.tensor("t", "x").unwrap().to_vec::<u8>().unwrap();
    assert_eq!(&once_v[..3], &full[63 * 3..64 * 3]);
    let twice = flip(once, &ctx).unwrap();
    assert_eq!(twice.tensor("t", "x").unwrap(), &img);
}

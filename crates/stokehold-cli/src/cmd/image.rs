//! `stokehold inspect` on image files (JPEG, PNG, WebP): format, size, channels and bit depth,
//! read from the header alone.

#[cfg(feature = "image")]
use std::io::Read;
use std::path::Path;

#[cfg(feature = "image")]
use anyhow::Context;
#[cfg(feature = "image")]
use stokehold_io::{image, storage};

/// Whether `path` starts with an image signature; read this many bytes to tell.
#[cfg(feature = "image")]
const SIGNATURE_BYTES: u64 = 16;

/// Whether `path` is a JPEG, PNG or WebP file, by its first bytes (a folder, or a URL that is no
/// object, is not).
#[cfg(feature = "image")]
fn is_image(path: &Path) -> anyhow::Result<bool> {
    if path.is_dir() {
        return Ok(false);
    }
    let mut head = Vec::new();
    if storage::is_remote(path) {
        // A URL that is no object (a shard folder's prefix) is for the other formats.
        let Some(meta) = storage::head(path)? else {
            return Ok(false);
        };
        let object = storage::open_object(path)?;
        head = object
            .read_range(0..SIGNATURE_BYTES.min(meta.size))?
            .to_vec();
    } else {
        let (f, _) = storage::open_regular(path)?;
        f.take(SIGNATURE_BYTES)
            .read_to_end(&mut head)
            .with_context(|| format!("reading {}", path.display()))?;
    }
    Ok(image::sniff(&head).is_ok())
}

/// `stokehold verify` on an image: `None` when `path` is no image or cannot be read (the caller
/// tries the other formats), else the outcome of decoding every pixel.
#[cfg(feature = "image")]
pub fn verify(path: &Path) -> Option<anyhow::Result<String>> {
    // A file that cannot be read is reported by the TFRecord path, once.
    if !is_image(path).unwrap_or(false) {
        return None;
    }
    let decode = || -> anyhow::Result<String> {
        let data = storage::read(path)?;
        let t = image::decode(&data, &image::DecodeOptions::default())?;
        let s = t.shape();
        Ok(format!(
            "ok, {}x{} image decoded (width x height)",
            s[1], s[0]
        ))
    };
    Some(decode())
}

/// Prints the image's header when `path` is a JPEG, PNG or WebP file and returns true; returns
/// false for anything else (the caller tries the other formats).
#[cfg(feature = "image")]
pub fn inspect(path: &Path) -> anyhow::Result<bool> {
    if !is_image(path)? {
        return Ok(false);
    }
    // Headers can sit behind large metadata segments (Exif, ICC): read the file.
    let data = storage::read(path).with_context(|| format!("reading {}", path.display()))?;
    let i = image::probe(&data).with_context(|| format!("inspecting {}", path.display()))?;
    println!(
        "{}: {} image, {}x{} (width x height), {} channel{}, {}-bit",
        path.display(),
        i.format,
        i.width,
        i.height,
        i.channels,
        if i.channels == 1 { "" } else { "s" },
        i.bit_depth
    );
    Ok(true)
}

/// Without the `image` feature: a file named as an image is an error saying how to get the
/// full command; anything else is left to the other formats.
#[cfg(not(feature = "image"))]
pub fn inspect(path: &Path) -> anyhow::Result<bool> {
    match named_image(path) {
        true => Err(super::not_built(path, "an image", "image")),
        false => Ok(false),
    }
}

/// See [`inspect`] (no feature).
#[cfg(not(feature = "image"))]
pub fn verify(path: &Path) -> Option<anyhow::Result<String>> {
    named_image(path).then(|| Err(super::not_built(path, "an image", "image")))
}

#[cfg(not(feature = "image"))]
fn named_image(path: &Path) -> bool {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    matches!(ext.as_deref(), Some("jpg" | "jpeg" | "png" | "webp"))
}

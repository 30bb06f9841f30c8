//! Decoding members by extension, as webdataset's default decoders do, through the native
//! decoders of this crate: images (`jpg`, `jpeg`, `png`, `webp`) with the image decoder
//! (`uint8` `[height, width, channels]`, as `decode_image`), audio (`wav`, `flac`, `mp3`, `ogg`)
//! with the audio decoder (`float32` `[channels, frames]`, as `decode_audio`, the rate in
//! `<ext>.sample_rate`), `npy` with the `.npy` reader, `cls`, `cls2`, `index`, `inx`, `id` as an
//! int64 scalar; anything else (`json`, `txt`, ...) stays bytes. As webdataset, the kind comes
//! from the extension's last dot-part (`seg.json`: `json`).
//!
//! A member that does not decode is [`Error::Corrupt`] naming the shard, the member and the
//! offset of its data. Images and audio need the crate's `image` / `audio` features; without
//! them such a member is an error saying so.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use stokehold_core::{Error, Result, Tensor};

/// How a member is decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// As is: a bytes scalar.
    Bytes,
    /// A decimal integer (surrounding whitespace allowed): an int64 scalar.
    Int,
    /// An encoded image (JPEG, PNG, WebP): `uint8` `[height, width, channels]`.
    Image,
    /// Encoded audio (WAV, FLAC, MP3, Ogg Vorbis): `float32` `[channels, frames]`.
    Audio,
    /// A `.npy` array: its dtype and shape.
    Npy,
}

/// The kinds' names, as `decode={ext: kind}` takes them.
pub const KINDS: &str = "'bytes', 'int', 'image', 'audio' or 'npy'";

impl Kind {
    /// The kind named `name` (one of [`KINDS`]).
    pub fn parse(name: &str) -> Result<Kind> {
        Ok(match name {
            "bytes" => Kind::Bytes,
            "int" => Kind::Int,
            "image" => Kind::Image,
            "audio" => Kind::Audio,
            "npy" => Kind::Npy,
            _ => {
                return Err(Error::invalid(format!(
                    "read_webdataset(decode=...): unknown kind {name:?}: must be {KINDS}"
                )))
            }
        })
    }

    /// The kind webdataset's default decoders give the extension `ext` (its last dot-part).
    pub fn default_for(ext: &str) -> Kind {
        match ext.rsplit('.').next().unwrap_or(ext) {
            "jpg" | "jpeg" | "png" | "webp" => Kind::Image,
            "wav" | "flac" | "mp3" | "ogg" => Kind::Audio,
            "npy" => Kind::Npy,
            "cls" | "cls2" | "index" | "inx" | "id" => Kind::Int,
            _ => Kind::Bytes,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Bytes => "bytes",
            Kind::Int => "int",
            Kind::Image => "image",
            Kind::Audio => "audio",
            Kind::Npy => "npy",
        }
    }
}

/// Which members are decoded, and how: nothing (every member bytes, the default), webdataset's
/// defaults ([`Kind::default_for`]), and kinds given per extension (a full extension such as
/// `seg.json`, or its last dot-part) over either.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoders {
    /// Use [`Kind::default_for`] where `by_ext` says nothing.
    pub defaults: bool,
    /// Kinds by extension.
    pub by_ext: BTreeMap<String, Kind>,
}

impl Decoders {
    /// webdataset's default decoders.
    pub fn defaults() -> Self {
        Decoders {
            defaults: true,
            by_ext: BTreeMap::new(),
        }
    }

    /// The kind of a member with extension `ext`.
    pub fn kind(&self, ext: &str) -> Kind {
        let last = ext.rsplit('.').next().unwrap_or(ext);
        match self.by_ext.get(ext).or_else(|| self.by_ext.get(last)) {
            Some(k) => *k,
            None if self.defaults => Kind::default_for(ext),
            None => Kind::Bytes,
        }
    }

    /// Refuses a kind this build cannot decode (`image` / `audio` without their features).
    pub fn check(&self) -> Result<()> {
        for (ext, kind) in &self.by_ext {
            if let Some(feature) = missing_feature(*kind) {
                return Err(Error::invalid(format!(
                    "read_webdataset(decode={{{ext:?}: {:?}}}): decoding {} needs stokehold built \
                     with the `{feature}` feature",
                    kind.name(),
                    kind.name()
                )));
            }
        }
        Ok(())
    }
}

/// The cargo feature `kind` needs that this build lacks.
fn missing_feature(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::Image if !cfg!(feature = "image") => Some("image"),
        Kind::Audio if !cfg!(feature = "audio") => Some("audio"),
        _ => None,
    }
}

/// A bytes scalar.
pub fn bytes_scalar(b: &[u8]) -> Tensor {
    Tensor::strings(&[b])
        .reshape(vec![])
        .expect("one string is a scalar")
}

/// The features member `key.ext` of `shard` (its data `data` at `offset`) adds to its sample,
/// decoded as `kind`: `(ext, value)`, and for audio also `(ext.sample_rate, rate)`.
pub fn decode_member(
    kind: Kind,
    data: Bytes,
    shard: &Path,
    (key, ext, offset): (&str, &str, u64),
) -> Result<Vec<(String, Tensor)>> {
    let bad = |why: String| {
        Error::corrupt(
            shard,
            offset,
            format!(
                "member {key}.{ext} does not decode as {}: {why}",
                kind.name()
            ),
        )
    };
    if let Some(feature) = missing_feature(kind) {
        return Err(Error::invalid(format!(
            "{}: member {key}.{ext} is {} data: decoding it needs stokehold built with the \
             `{feature}` feature (or read it as bytes: decode={{{ext:?}: 'bytes'}})",
            shard.display(),
            kind.name()
        )));
    }
    let one = |t: Tensor| Ok(vec![(ext.to_string(), t)]);
    match kind {
        Kind::Bytes => one(bytes_scalar(&data)),
        Kind::Int => {
            let text = std::str::from_utf8(&data).map_err(|e| bad(e.to_string()))?;
            let v: i64 = text
                .trim()
                .parse()
                .map_err(|_| bad(format!("{:?} is not an integer", trunc(text))))?;
            one(Tensor::scalar(v))
        }
        Kind::Npy => {
            let label = format!("{}:{key}.{ext}", shard.display());
            let t = crate::files::decode_npy(data, Path::new(&label))
                .map_err(|e| bad(e.to_string()))?;
            one(t)
        }
        Kind::Image => image(&data).map_err(bad).and_then(one),
        Kind::Audio => audio(data, ext, offset).map_err(bad),
    }
}

/// At most 40 characters of `s`, for messages.
fn trunc(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(feature = "image")]
fn image(data: &[u8]) -> std::result::Result<Tensor, String> {
    crate::image::decode::decode(data, &crate::image::decode::DecodeOptions::default())
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "image"))]
fn image(_: &[u8]) -> std::result::Result<Tensor, String> {
    unreachable!("refused by missing_feature")
}

/// The member's audio decoded as `decode_audio` decodes a bytes feature (its default options),
/// the rate in `<ext>.sample_rate`.
#[cfg(feature = "audio")]
fn audio(
    data: Bytes,
    ext: &str,
    offset: u64,
) -> std::result::Result<Vec<(String, Tensor)>, String> {
    use crate::audio::ops::{decode_audio_fn, DecodeOptions};
    let rate = format!("{ext}.sample_rate");
    let opts = DecodeOptions {
        rate_feature: Some(rate.clone()),
        ..Default::default()
    };
    let f = decode_audio_fn(ext, ext, opts);
    let e = stokehold_core::Example::new().with(ext, bytes_scalar(&data));
    let ctx = stokehold_core::ops::map::Ctx {
        op: "read_webdataset",
        index: offset,
        epoch: 0,
    };
    let mut e = f(e, &ctx).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for name in [ext.to_string(), rate] {
        let t = e
            .remove(&name)
            .and_then(|v| v.as_tensor("read_webdataset", &name).ok().cloned())
            .ok_or_else(|| format!("the audio decoder gave no {name:?}"))?;
        out.push((name, t));
    }
    Ok(out)
}

#[cfg(not(feature = "audio"))]
fn audio(_: Bytes, _: &str, _: u64) -> std::result::Result<Vec<(String, Tensor)>, String> {
    unreachable!("refused by missing_feature")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_extension_as_webdataset() {
        let d = Decoders::defaults();
        assert_eq!(d.kind("jpg"), Kind::Image);
        assert_eq!(d.kind("seg.json"), Kind::Bytes);
        assert_eq!(d.kind("x.cls"), Kind::Int);
        assert_eq!(Decoders::default().kind("jpg"), Kind::Bytes);
        let mut d = Decoders::defaults();
        d.by_ext.insert("jpg".into(), Kind::Bytes);
        d.by_ext.insert("seg.json".into(), Kind::Int);
        assert_eq!(
            (d.kind("jpg"), d.kind("seg.json")),
            (Kind::Bytes, Kind::Int)
        );
        assert!(Kind::parse("jpeg").is_err());
    }

    #[test]
    fn a_bad_int_names_shard_member_and_offset() {
        let err = decode_member(
            Kind::Int,
            Bytes::from_static(b"x1"),
            Path::new("s.tar"),
            ("k", "cls", 1536),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("s.tar") && err.contains("offset 1536") && err.contains("k.cls"),
            "{err}"
        );
        let t = decode_member(
            Kind::Int,
            Bytes::from_static(b" 7\n"),
            Path::new("s.tar"),
            ("k", "cls", 0),
        )
        .unwrap();
        assert_eq!(t[0].1.to_vec::<i64>().unwrap(), vec![7]);
    }
}

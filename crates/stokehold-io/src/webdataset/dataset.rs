//! [`WebDataset`]: tar shards read at random through the sample list their headers give.

use std::path::{Path, PathBuf};

use stokehold_core::{Example, MapDataset, Result};

use super::decode::{bytes_scalar, decode_member, Decoders};
use super::index::read_or_build;
use super::scan::{group, list_members, Sample};

/// How [`WebDataset::open`] reads its shards.
#[derive(Clone, Debug)]
pub struct WebDatasetOptions {
    /// Which members are decoded, and how (default: none, every member bytes).
    pub decode: Decoders,
    /// Use the shards' index sidecars (`<shard>.idx`, [`super::index`]): read a current one
    /// instead of the tar's headers, and write one beside a local shard that has none (default).
    /// `false`: read the headers every time, write nothing.
    pub index: bool,
}

impl Default for WebDatasetOptions {
    fn default() -> Self {
        WebDatasetOptions {
            decode: Decoders::default(),
            index: true,
        }
    }
}

/// WebDataset tar shards with random access: `len`, `get(i)`, global shuffle, checkpoints.
///
/// Each shard's member list comes from its index sidecar when it has a current one (one small
/// read per shard; a URL's shard is then read by range only), else from its headers (a local
/// shard is memory-mapped and its data skipped; a URL's shard is fetched whole), after which the
/// sidecar is written beside a local shard. `get(i)` reads only sample `i`'s members. Each
/// element holds `__key__` and `__url__` (the shard's path as given) as bytes, and one feature
/// per member, named by its extension: bytes as webdataset yields them, or decoded
/// ([`super::decode`]). Samples that lack a member hold fewer features (batch them after a map
/// that fills them in, or select the features every sample has).
pub struct WebDataset {
    files: Vec<PathBuf>,
    objects: Vec<crate::storage::Object>,
    samples: Vec<Vec<Sample>>,
    /// `cum[k]` = samples in shards before `k`; one more entry than shards.
    cum: Vec<u64>,
    decode: Decoders,
}

impl WebDataset {
    /// Opens the tar shards `files` (in order) with the default options (no decoding, index
    /// sidecars used and written).
    pub fn open<P: AsRef<Path>>(files: &[P]) -> Result<Self> {
        Self::open_with(files, WebDatasetOptions::default())
    }

    /// Opens the tar shards `files` (in order), reading each one's member list.
    pub fn open_with<P: AsRef<Path>>(files: &[P], opts: WebDatasetOptions) -> Result<Self> {
        opts.decode.check()?;
        let mut ds = WebDataset {
            files: Vec::new(),
            objects: Vec::new(),
            samples: Vec::new(),
            cum: vec![0],
            decode: opts.decode,
        };
        for f in files {
            let f = f.as_ref();
            let o = crate::storage::open_object(f)?;
            let listing = || match o.is_remote() {
                true => list_members(f, &o.read_all()?),
                false => list_members(f, &o.read_range(0..o.size())?),
            };
            let listed = if opts.index {
                read_or_build(f, o.size(), !o.is_remote(), listing)?.0
            } else {
                listing()?
            };
            let samples = group(f, &listed)?;
            ds.cum.push(ds.cum.last().unwrap() + samples.len() as u64);
            ds.samples.push(samples);
            ds.objects.push(o);
            ds.files.push(f.to_path_buf());
        }
        Ok(ds)
    }

    /// The samples of shard `k` (key and members).
    pub fn samples(&self, k: usize) -> &[Sample] {
        &self.samples[k]
    }

    /// The shards, as given.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }
}

impl MapDataset for WebDataset {
    fn len(&self) -> u64 {
        *self.cum.last().unwrap()
    }

    fn get(&self, index: u64) -> Result<Example> {
        let (_, i) = stokehold_core::checked::wrap_index(index, self.len(), || self.name())?;
        let (k, j) = stokehold_core::checked::locate(&self.cum, i);
        let s = &self.samples[k][j as usize];
        let url = self.files[k].to_string_lossy();
        let mut e = Example::new()
            .with("__key__", bytes_scalar(s.key.as_bytes()))
            .with("__url__", bytes_scalar(url.as_bytes()));
        for m in &s.members {
            let b = self.objects[k].read_range(m.offset..m.offset + m.len)?;
            let kind = self.decode.kind(&m.ext);
            let at = (s.key.as_str(), m.ext.as_str(), m.offset);
            for (name, t) in decode_member(kind, b, &self.files[k], at)? {
                e = e.with(&name, t);
            }
        }
        Ok(e)
    }

    fn name(&self) -> String {
        match self.files.as_slice() {
            [one] => format!("webdataset({})", one.display()),
            many => format!("webdataset({} shards)", many.len()),
        }
    }
}

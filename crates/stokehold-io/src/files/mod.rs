//! Files as a source: `list_files` (glob), whole-file bytes, and a native `.npy` loader, so a lazy
//! file pipeline (`list_files -> map(load) -> padded_batch -> parallelize`) runs with no Python on
//! its hot path. Nothing is read until an element is asked for: mapping a loader over 4000 paths
//! costs 4000 paths of memory, and each file is read when its element is computed.
//!
//! ```no_run
//! use stokehold_core::{BatchOptions, Dataset, DatasetIter, Parallelism};
//! use stokehold_io::files::{list_files, load_npy_fn};
//! let paths = list_files(&["data/*.npy"], Some(7)).unwrap();
//! let ds = paths
//!     .map("load", load_npy_fn("path", "x"))
//!     .batch_with(BatchOptions { padding: Some(Default::default()), ..BatchOptions::new(64, false) })
//!     .unwrap()
//!     .parallelize(Parallelism::Autotune, true);
//! let batches = ds.iter(0).unwrap().collect_all().unwrap();
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::{Ctx, Dataset, Error, Example, MapFn, Result, Tensor};

use crate::table::npy::parse_header;

/// The files matching any of `patterns` (glob syntax: `*`, `?`, `[..]`, `**`), sorted and
/// deduplicated, as a random-access dataset of one bytes feature `"path"`. With `shuffle =
/// Some(seed)` the order is a new seeded permutation each epoch (of the sorted list, so the same
/// seed gives the same order on every machine). A pattern that matches nothing is an error naming
/// it: an empty training set is almost always a typo. TFRecord index sidecars are left out where
/// their file is listed too (`train-*` lists `train-0.tfrecord`, not `train-0.tfrecord.idx`);
/// a pattern for the sidecars alone (`*.idx`) still lists them.
pub fn list_files(patterns: &[impl AsRef<str>], shuffle: Option<u64>) -> Result<Dataset> {
    if patterns.is_empty() {
        return Err(Error::invalid("list_files: no pattern given"));
    }
    let mut paths: Vec<PathBuf> = Vec::new();
    for pattern in patterns {
        let pattern = pattern.as_ref();
        // Local patterns through `glob` (files only, symlinks followed), URLs through the
        // store's listing: both in `storage::list`.
        let matches = crate::storage::list(pattern).map_err(|e| match e {
            Error::InvalidArgument(m) => Error::invalid(format!("list_files: {m}")),
            e => e,
        })?;
        if matches.is_empty() {
            return Err(Error::io(
                pattern,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no file matches this pattern"),
            ));
        }
        paths.extend(matches.into_iter().map(|m| PathBuf::from(m.location)));
    }
    paths.sort();
    paths.dedup();
    let listed: std::collections::HashSet<PathBuf> = paths.iter().cloned().collect();
    paths.retain(|p| {
        let s = p.as_os_str().to_string_lossy();
        !s.strip_suffix(".idx")
            .is_some_and(|data| listed.contains(Path::new(data)))
    });
    let names: Vec<String> = paths
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let ds = Dataset::from_columns(Example::new().with("path", Tensor::strings(&names)))?;
    Ok(match shuffle {
        Some(seed) => ds.try_shuffle(seed)?,
        None => ds,
    })
}

/// The path in feature `feature` of `e`, or a schema error.
fn path_of(e: &Example, feature: &str, ctx: &Ctx) -> Result<PathBuf> {
    let t = e.tensor(ctx.op, feature)?;
    let raw = t.string(0).filter(|_| t.len() == 1).ok_or_else(|| {
        Error::schema(
            ctx.op,
            format!(
                "element {}: feature {feature:?} must hold one path (a bytes scalar)",
                ctx.index
            ),
        )
    })?;
    Ok(PathBuf::from(String::from_utf8_lossy(raw).into_owned()))
}

/// Reads the whole file at `path`; errors name the file.
/// A URL (`s3://...`) is read through the storage seam.
pub fn read_bytes(path: &Path) -> Result<Bytes> {
    crate::storage::read(path)
}

/// A map function that reads the file named by feature `path_feature` into bytes feature `out`.
pub fn read_file_fn(path_feature: &str, out: &str) -> MapFn {
    let (pf, out) = (path_feature.to_string(), out.to_string());
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let path = path_of(&e, &pf, ctx)?;
        let data = read_bytes(&path)?;
        let len = data.len() as u64;
        let t = Tensor::strings_from_parts(vec![], data, vec![0, len].into())?;
        e.insert(&out, t);
        Ok(e)
    })
}

/// Decodes a whole `.npy` file held in `data` (read from `path`, named in errors). The tensor
/// shares `data`'s buffer: no copy after the read.
pub fn decode_npy(data: Bytes, path: &Path) -> Result<Tensor> {
    let h = parse_header(&data, path)?;
    let want = h.data_len().ok_or_else(|| {
        Error::corrupt(
            path,
            0,
            format!("shape {:?} overflows the address space", h.shape),
        )
    })?;
    let have = (data.len() - h.data_offset.min(data.len())) as u64;
    if have != want {
        return Err(Error::corrupt(
            path,
            h.data_offset as u64,
            format!(
                "{} {:?} needs {want} bytes of data after the header, the file has {have}",
                h.dtype, h.shape
            ),
        ));
    }
    Tensor::new(h.dtype, h.shape, data.slice(h.data_offset..))
}

/// Reads and decodes one `.npy` file.
pub fn read_npy(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    decode_npy(read_bytes(path)?, path)
}

/// A map function that loads the `.npy` file named by feature `path_feature` into feature `out`.
pub fn load_npy_fn(path_feature: &str, out: &str) -> MapFn {
    let (pf, out) = (path_feature.to_string(), out.to_string());
    Arc::new(move |mut e: Example, ctx: &Ctx| {
        let path = path_of(&e, &pf, ctx)?;
        let t = read_npy(&path)?;
        e.insert(&out, t);
        Ok(e)
    })
}

#[cfg(test)]
mod tests;

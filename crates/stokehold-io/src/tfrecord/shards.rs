//! Writing a dataset to TFRecord shards: `<prefix>-00000-of-00032<suffix>`.
//!
//! Shards are cut by a target number of records or of bytes (uncompressed), or split evenly into a
//! number of shards when the dataset's length is known. Every shard is written under a hidden
//! temporary name and renamed when complete; because the total appears in every name, shards are
//! renamed to their final names only after the last one is complete (each rename is atomic; a
//! run that fails leaves no file under a final name). Index sidecars follow the same path.
//!
//! An element that is exactly `{"record": bytes scalar}` (as [`super::TFRecordDataset`] yields)
//! is written as is; any other element is encoded as a `tf.train.Example`.

use std::path::{Path, PathBuf};

use stokehold_core::{DType, Dataset, Error, Example, Result, Value};

use super::compression::Compression;
use super::example::convert::encode_example;
use super::example::parse::RECORD;
use super::index::index_path;
use super::writer::RecordWriter;

/// Where and how to write shards. Every field documents its default.
#[derive(Clone, Debug)]
pub struct ShardOptions {
    /// Name prefix (default `"data"`): shards are `<prefix>-00000-of-00032<suffix>`.
    pub prefix: String,
    /// Name suffix (default `".tfrecord"`; add `.gz` yourself for GZIP if you like).
    pub suffix: String,
    /// Records per shard (default none).
    pub records_per_shard: Option<u64>,
    /// Target uncompressed bytes per shard (default 256 MiB, used when neither records_per_shard
    /// nor num_shards is set: shards of 100-300 MB stream well and give a file-level shuffle
    /// enough pieces).
    pub bytes_per_shard: Option<u64>,
    /// Split into this many shards of equal record counts (needs a dataset of known length).
    pub num_shards: Option<u64>,
    /// Compression (default none).
    pub compression: Compression,
    /// Write in a seeded, globally shuffled order (random-access datasets only; default none).
    pub shuffle_seed: Option<u64>,
    /// Write an index sidecar for each shard (default true; plain files only).
    pub write_index: bool,
    /// Put the indexes in the side folder `<dir>/.stokehold-idx/` instead of beside the shards
    /// (default false), so a glob over `dir` (tf.data's `list_files`) sees data files only.
    pub index_side_folder: bool,
}

impl Default for ShardOptions {
    fn default() -> Self {
        ShardOptions {
            prefix: "data".into(),
            suffix: ".tfrecord".into(),
            records_per_shard: None,
            bytes_per_shard: None,
            num_shards: None,
            compression: Compression::None,
            shuffle_seed: None,
            write_index: true,
            index_side_folder: false,
        }
    }
}

/// Progress of [`write_tfrecord_shards`], passed to the callback after every record.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteProgress {
    /// Records written.
    pub records: u64,
    /// Uncompressed bytes written.
    pub bytes: u64,
    /// Shards completed.
    pub shards: u64,
    /// Records to write, when known.
    pub total: Option<u64>,
}

/// The bytes of one record for an element (see the module doc).
pub fn element_record(e: &Example) -> Result<bytes::Bytes> {
    if let (1, Some(Value::Tensor(t))) = (e.len(), e.get(RECORD)) {
        if t.dtype() == DType::Bytes && t.shape().is_empty() {
            return Ok(t.data().clone());
        }
    }
    Ok(encode_example(e)?.into())
}

/// Writes `ds` (one epoch) to shards in `dir`; returns the final paths in order.
pub fn write_tfrecord_shards(
    ds: &Dataset,
    dir: &Path,
    opts: &ShardOptions,
    progress: &mut dyn FnMut(&WriteProgress),
) -> Result<Vec<PathBuf>> {
    if crate::storage::is_remote(dir) {
        // Written locally, then uploaded: each shard before its index, so a listed index's
        // file is always there (`storage::write_staged`).
        let mut staged = PathBuf::new();
        let local_paths = crate::storage::write_staged(dir, &[], |local| {
            staged = local.to_path_buf();
            write_tfrecord_shards(ds, local, opts, progress)
        })?;
        return Ok(local_paths
            .iter()
            .map(|p| crate::storage::remote_path(p, &staged, dir))
            .collect());
    }
    let ds = match opts.shuffle_seed {
        Some(seed) => ds.try_shuffle(seed)?,
        None => ds.clone(),
    };
    let total = ds.len();
    let per_shard = match (opts.records_per_shard, opts.num_shards) {
        (Some(r), _) if r > 0 => Some(r),
        (Some(_), _) => return Err(Error::invalid("records_per_shard must be > 0")),
        (None, Some(n)) if n > 0 => {
            let len = total.ok_or_else(|| {
                Error::invalid("num_shards needs a dataset of known length; use records_per_shard")
            })?;
            Some(len.div_ceil(n).max(1))
        }
        (None, Some(_)) => return Err(Error::invalid("num_shards must be > 0")),
        (None, None) => None,
    };
    let max_bytes = opts.bytes_per_shard.unwrap_or(256 << 20);
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    // Held to the end: a second writer into `dir` is refused; taking it removes what a killed run
    // left under temporary names.
    let _lock = crate::atomic::FolderLock::take(dir)?;
    let mut done: Vec<PathBuf> = Vec::new();
    let result = write_all(
        &ds, dir, opts, per_shard, max_bytes, total, &mut done, progress,
    );
    if let Err(e) = result {
        for p in &done {
            let _ = std::fs::remove_file(p);
            let _ = std::fs::remove_file(index_path(p));
        }
        return Err(e);
    }
    let n = done.len();
    let mut out = Vec::with_capacity(n);
    for (i, p) in done.iter().enumerate() {
        let name = format!("{}-{i:05}-of-{n:05}{}", opts.prefix, opts.suffix);
        let dst = dir.join(name);
        std::fs::rename(p, &dst).map_err(|e| Error::io(&dst, e))?;
        if opts.write_index {
            let a = index_path(p);
            let b = match opts.index_side_folder {
                false => index_path(&dst),
                true => {
                    let side = dir.join(super::index::SIDE_FOLDER);
                    std::fs::create_dir_all(&side).map_err(|e| Error::io(&side, e))?;
                    super::index::side_index_path(&dst)
                }
            };
            std::fs::rename(&a, &b).map_err(|e| Error::io(&b, e))?;
        }
        out.push(dst);
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn write_all(
    ds: &Dataset,
    dir: &Path,
    opts: &ShardOptions,
    per_shard: Option<u64>,
    max_bytes: u64,
    total: Option<u64>,
    done: &mut Vec<PathBuf>,
    progress: &mut dyn FnMut(&WriteProgress),
) -> Result<()> {
    let mut it = ds.iter(0)?;
    let mut p = WriteProgress {
        total,
        ..Default::default()
    };
    let mut w: Option<RecordWriter> = None;
    // Complete shards wait under temporary names of the one convention (the final names need the
    // shard count), so a killed run's are cleaned like any other.
    let open = |k: usize| -> Result<RecordWriter> {
        let path =
            crate::atomic::temp_path(&dir.join(format!("{}-{k:05}{}", opts.prefix, opts.suffix)));
        let nw = RecordWriter::create(&path, opts.compression)?;
        match opts.write_index {
            true => nw.with_index(opts.compression),
            false => Ok(nw),
        }
    };
    while let Some(e) = it.next()? {
        let rec = element_record(&e)?;
        let full = w.as_ref().is_some_and(|w| match per_shard {
            Some(n) => w.records() >= n,
            None => w.bytes() > 0 && w.bytes() + rec.len() as u64 > max_bytes,
        });
        if full {
            done.push(w.take().expect("checked").finish()?);
            p.shards += 1;
        }
        if w.is_none() {
            w = Some(open(done.len())?);
        }
        let wr = w.as_mut().expect("set above");
        wr.write(&rec)?;
        p.records += 1;
        p.bytes += rec.len() as u64 + 16;
        progress(&p);
    }
    // An empty dataset is one empty shard, as tf.data's writer leaves an empty file: a reader
    // of the folder then finds an empty dataset, not nothing.
    if w.is_none() && done.is_empty() {
        w = Some(open(0)?);
    }
    if let Some(wr) = w {
        done.push(wr.finish()?);
        p.shards += 1;
        progress(&p);
    }
    Ok(())
}

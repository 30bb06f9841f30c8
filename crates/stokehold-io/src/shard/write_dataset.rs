//! [`write_shards`]: any dataset to a shard folder, with parallel reading (random-access input),
//! encoding and compression, an optional seeded pre-shuffle and a progress callback.
//!
//! Records are handled in chunks: fetched in parallel (random access) or pulled in order
//! (streams), checked against the schema in order, encoded and compressed in parallel, then
//! appended in order. Shard boundaries depend only on the encoded sizes, so the folder is the
//! same byte for byte whatever the thread count.

use std::path::Path;

use stokehold_core::rng::{stream_key, Permutation, Stream};
use stokehold_core::{Dataset, Error, Example, Result, INFINITE};

use super::format::{Manifest, ShardFeature};
use super::writer::{encode_record, Encoded, Progress, ShardWriter, WriteOptions};

/// Bytes of examples held per chunk: large enough to keep every thread busy between the
/// in-order steps, small enough that images of a few MB do not pile up in memory.
const CHUNK_BYTES: usize = 32 << 20;
/// Records per chunk bounds (the first chunk uses the lower bound times the thread count).
const CHUNK_MIN: usize = 64;
const CHUNK_MAX: usize = 8192;

/// A progress callback (the CLI draws a bar with it). An error it returns aborts the write and
/// is returned as it is: the temporary files are removed and no manifest is written, so nothing
/// opens as a complete folder.
pub type ProgressFn<'a> = &'a (dyn Fn(&Progress) -> Result<()> + Sync);

/// Writes epoch 0 of `ds` into `dir` as a shard folder and returns its manifest.
pub fn write_shards(
    ds: &Dataset,
    dir: impl AsRef<Path>,
    opts: WriteOptions,
    progress: Option<ProgressFn<'_>>,
) -> Result<Manifest> {
    let dir = dir.as_ref();
    if crate::storage::is_remote(dir) {
        // Written locally, then uploaded with the manifest last (see `storage::write_staged`).
        let last = [super::format::MANIFEST_NAME];
        return crate::storage::write_staged(dir, &last, |local| {
            write_shards(ds, local, opts, progress)
        });
    }
    let total = ds.len();
    if total == Some(INFINITE) {
        return Err(Error::invalid(
            "cannot write an endless dataset; take(n) first",
        ));
    }
    if opts.shuffle_seed.is_some() && !ds.is_random_access() {
        return Err(Error::invalid(format!(
            "shuffle_seed needs a random-access input; {} is a stream",
            ds.name()
        )));
    }
    let threads = opts.threads.max(1);
    let mut opts = opts;
    opts.metadata
        .entry("source")
        .or_insert_with(|| ds.describe().into());
    let (compression, level, seed) = (opts.compression, opts.zstd_level, opts.shuffle_seed);
    let mut w = ShardWriter::create(dir, opts)?;
    let mut chunk = CHUNK_MIN * threads;
    let mut done = 0u64;
    let mut it = match ds {
        Dataset::Map(_) => None,
        Dataset::Iter(_) => Some(ds.iter(0)?),
    };
    loop {
        let examples = match (&mut it, ds.as_map()) {
            (Some(it), _) => pull(it, chunk)?,
            (None, Some(m)) => {
                let n = m.len();
                let end = n.min(done + chunk as u64);
                let perm =
                    seed.map(|s| Permutation::new(n, stream_key(s, Stream::WriteOrder, &[])));
                let idx: Vec<u64> = (done..end)
                    .map(|i| perm.as_ref().map_or(i, |p| p.apply(i)))
                    .collect();
                par_map(&idx, threads, |i| m.get(*i))?
            }
            (None, None) => unreachable!("a dataset is random access or a stream"),
        };
        if examples.is_empty() {
            break;
        }
        let mut schema: Vec<ShardFeature> = Vec::new();
        for e in &examples {
            schema = w.observe(e)?;
        }
        let encoded: Vec<std::result::Result<Encoded, String>> =
            par_map(&examples, threads, |e| {
                Ok(encode_record(e, &schema, compression, level))
            })?;
        let bytes: usize = examples.iter().map(Example::nbytes).sum();
        for (j, enc) in encoded.into_iter().enumerate() {
            let enc = enc.map_err(|r| {
                Error::schema("write_shards", format!("record {}: {r}", done + j as u64))
            })?;
            w.push_encoded(enc)?;
        }
        done += examples.len() as u64;
        if let Some(cb) = progress {
            cb(&w.progress(total))?;
        }
        let avg = (bytes / examples.len()).max(1);
        chunk = (CHUNK_BYTES / avg).clamp(threads.max(CHUNK_MIN / 8), CHUNK_MAX);
    }
    w.finish()
}

fn pull(it: &mut Box<dyn stokehold_core::DatasetIter>, n: usize) -> Result<Vec<Example>> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match it.next()? {
            Some(e) => out.push(e),
            None => break,
        }
    }
    Ok(out)
}

/// Applies `f` to every item on up to `threads` scoped threads, keeping the order.
fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    if threads <= 1 || items.len() < 2 {
        return items.iter().map(&f).collect();
    }
    let per = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|part| s.spawn(|| part.iter().map(&f).collect::<Result<Vec<R>>>()))
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for h in handles {
            let part = h
                .join()
                .map_err(|p| Error::from_panic("write_shards", p))??;
            out.extend(part);
        }
        Ok(out)
    })
}

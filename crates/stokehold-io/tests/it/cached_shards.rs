//! A shard folder read through the local shard cache from a source that is not the local reader:
//! here a folder served by copying (the object-store backends plug in the same way), counting
//! downloads. Equal to the direct read; a second open downloads nothing; a transfer that changes a
//! byte is refused; a dataset larger than the cap is refused; a rewritten dataset is read anew.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use stokehold_core::{Error, MapDataset, Result};
use stokehold_io::shard::cached_shards::{open_cached, ShardSource};
use stokehold_io::shard::{write_shards, Compression, ShardDataset, WriteOptions};
use stokehold_io::storage::local_cache::LocalCache;

use super::shard_format::{opts, sample};

struct Folder {
    dir: PathBuf,
    downloads: AtomicUsize,
    flip_byte: bool,
}

impl ShardSource for Folder {
    fn url(&self) -> String {
        format!("test://{}", self.dir.display())
    }
    fn manifest(&self) -> Result<Vec<u8>> {
        let p = self.dir.join("manifest.json");
        std::fs::read(&p).map_err(|e| Error::io(p, e))
    }
    fn download(&self, file: &str, size: u64, out: &mut File) -> Result<()> {
        self.downloads.fetch_add(1, Ordering::SeqCst);
        let p = self.dir.join(file);
        let mut bytes = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
        assert_eq!(bytes.len() as u64, size);
        if self.flip_byte {
            bytes[size as usize / 2] ^= 1;
        }
        out.write_all(&bytes).map_err(|e| Error::io(&p, e))
    }
}

fn source(dir: &std::path::Path, flip_byte: bool) -> Arc<Folder> {
    Arc::new(Folder {
        dir: dir.to_path_buf(),
        downloads: AtomicUsize::new(0),
        flip_byte,
    })
}

fn write(dir: &std::path::Path, n: u64) -> ShardDataset {
    let o = WriteOptions {
        overwrite: true,
        ..opts(2048, Compression::None)
    };
    write_shards(&sample(n), dir, o, None).unwrap();
    ShardDataset::open(dir).unwrap()
}

#[test]
fn cached_read_equals_local_and_warm_open_downloads_nothing() {
    let root = tempfile::tempdir().unwrap();
    let src_dir = root.path().join("src");
    let local = write(&src_dir, 300);
    let shards = local.manifest().shards.len();
    assert!(shards > 3, "want several shards, got {shards}");
    let cache = LocalCache::open(root.path().join("cache"), 1 << 30).unwrap();
    let src = source(&src_dir, false);
    let ds = open_cached(src.clone(), &cache, true, 3).unwrap();
    assert_eq!(ds.len(), local.len());
    for i in 0..ds.len() {
        assert_eq!(ds.get(i).unwrap(), local.get(i).unwrap(), "record {i}");
    }
    assert_eq!(src.downloads.load(Ordering::SeqCst), shards);
    let again = open_cached(src.clone(), &cache, true, 3).unwrap();
    assert_eq!(again.get(7).unwrap(), local.get(7).unwrap());
    assert_eq!(
        src.downloads.load(Ordering::SeqCst),
        shards,
        "warm: no downloads"
    );
    // A rewritten dataset (new manifest) is read anew, never from the old entries.
    let local2 = write(&src_dir, 120);
    let ds2 = open_cached(src.clone(), &cache, true, 3).unwrap();
    assert_eq!(ds2.len(), 120);
    assert_eq!(ds2.get(119).unwrap(), local2.get(119).unwrap());
}

#[test]
fn changed_bytes_in_transit_are_refused_and_not_cached() {
    let root = tempfile::tempdir().unwrap();
    let src_dir = root.path().join("src");
    write(&src_dir, 100);
    let cache = LocalCache::open(root.path().join("cache"), 1 << 30).unwrap();
    let err = open_cached(source(&src_dir, true), &cache, true, 2)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("checksum") && err.contains("test://"), "{err}");
    assert_eq!(cache.used_bytes(), 0);
    // A good transfer afterwards works.
    open_cached(source(&src_dir, false), &cache, true, 2).unwrap();
}

#[test]
fn dataset_larger_than_the_cap_is_refused_clearly() {
    let root = tempfile::tempdir().unwrap();
    let src_dir = root.path().join("src");
    write(&src_dir, 100);
    let cache = LocalCache::open(root.path().join("cache"), 4096).unwrap();
    let src = source(&src_dir, false);
    let err = open_cached(src.clone(), &cache, true, 2).err().unwrap();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("raise the cache cap"), "{err}");
    assert_eq!(src.downloads.load(Ordering::SeqCst), 0);
}

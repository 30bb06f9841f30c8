//! `cache(path)`: the first pass over a pipeline writes it to a shard folder as it goes; later
//! epochs read the folder.
//!
//! The folder is complete or absent, never half: records go through a [`ShardWriter`] (temporary
//! names, manifest last), only an iterator that runs the whole input from its first element
//! writes, and an iterator dropped early removes what it wrote. Like the in-memory `cache()`,
//! every epoch yields the input's epoch 0 (so random ops before the cache are frozen once), which
//! makes the output the same whether it comes from the input or from the folder, and a checkpoint
//! the same in both cases: `{"pos": n, "inner": <input state or null>}`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value as Json};
use stokehold_core::dataset::{state_field, state_u64};
use stokehold_core::{Dataset, DatasetIter, Error, Example, IterDataset, MapDataset, Result};

use super::format::MANIFEST_NAME;
use super::reader::{read_manifest, ShardDataset};
use super::writer::{ShardWriter, WriteOptions};

/// Adds `cache_to` to [`Dataset`].
pub trait CacheExt {
    /// Caches epoch 0 of this pipeline in the shard folder `dir` (see the module docs).
    fn cache_to(&self, dir: impl AsRef<Path>) -> Result<Dataset>;
}

impl CacheExt for Dataset {
    fn cache_to(&self, dir: impl AsRef<Path>) -> Result<Dataset> {
        Ok(Dataset::from_iter(DiskCache::new(
            self.clone(),
            dir.as_ref(),
        )?))
    }
}

struct Shared {
    complete: Option<Arc<ShardDataset>>,
    filling: bool,
}

/// The `cache(path)` op.
pub struct DiskCache {
    parent: Dataset,
    dir: PathBuf,
    tag: String,
    shared: Arc<Mutex<Shared>>,
}

impl DiskCache {
    /// Caches `parent` in `dir`; refuses a folder that holds some other complete dataset.
    pub fn new(parent: Dataset, dir: &Path) -> Result<Self> {
        let tag = format!("{:016x}", parent.fingerprint());
        let c = DiskCache {
            parent,
            dir: dir.to_path_buf(),
            tag,
            shared: Arc::new(Mutex::new(Shared {
                complete: None,
                filling: false,
            })),
        };
        c.lookup()?;
        Ok(c)
    }

    /// The complete cache, opening it if a previous run finished it.
    fn lookup(&self) -> Result<Option<Arc<ShardDataset>>> {
        let mut sh = self.shared.lock().expect("cache lock");
        if sh.complete.is_none() && self.dir.join(MANIFEST_NAME).exists() {
            let m = read_manifest(&self.dir)?;
            if m.metadata.get("cache_of").and_then(Json::as_str) != Some(self.tag.as_str()) {
                return Err(Error::invalid(format!(
                    "{} holds a dataset that is not a cache of this pipeline ({}); \
                     remove it or choose another folder",
                    self.dir.display(),
                    self.parent.describe()
                )));
            }
            sh.complete = Some(Arc::new(ShardDataset::open(&self.dir)?));
        }
        Ok(sh.complete.clone())
    }

    fn writer(&self) -> Result<Option<ShardWriter>> {
        let mut sh = self.shared.lock().expect("cache lock");
        if sh.filling || sh.complete.is_some() {
            return Ok(None); // another iterator is writing: this one only reads the input
        }
        let mut opts = WriteOptions::default();
        opts.metadata
            .insert("cache_of".into(), self.tag.clone().into());
        opts.metadata
            .insert("source".into(), self.parent.describe().into());
        let w = ShardWriter::create(&self.dir, opts)?;
        sh.filling = true;
        Ok(Some(w))
    }
}

impl IterDataset for DiskCache {
    fn iter(&self, _epoch: u64) -> Result<Box<dyn DatasetIter>> {
        let mut it = CacheIter {
            owner: self.shared.clone(),
            parent: self.parent.clone(),
            dir: self.dir.clone(),
            cached: self.lookup()?,
            inner: None,
            writer: None,
            pos: 0,
        };
        if it.cached.is_none() {
            it.inner = Some(self.parent.iter(0)?);
            it.writer = self.writer()?;
        }
        Ok(Box::new(it))
    }

    fn name(&self) -> String {
        "cache(disk)".into()
    }

    fn parents(&self) -> Vec<Dataset> {
        vec![self.parent.clone()]
    }

    fn len(&self) -> Option<u64> {
        self.parent.len()
    }
}

struct CacheIter {
    owner: Arc<Mutex<Shared>>,
    parent: Dataset,
    dir: PathBuf,
    cached: Option<Arc<ShardDataset>>,
    inner: Option<Box<dyn DatasetIter>>,
    writer: Option<ShardWriter>,
    pos: u64,
}

impl CacheIter {
    /// Abandons this iterator's write, if any.
    fn release(&mut self) {
        if self.writer.take().is_some() {
            if let Ok(mut sh) = self.owner.lock() {
                sh.filling = false;
            }
        }
    }
}

impl DatasetIter for CacheIter {
    fn next(&mut self) -> Result<Option<Example>> {
        if let Some(c) = &self.cached {
            if self.pos >= c.len() {
                return Ok(None);
            }
            self.pos += 1;
            return c.get(self.pos - 1).map(Some);
        }
        let inner = self.inner.as_mut().expect("reading the input");
        match inner.next()? {
            Some(e) => {
                if let Some(w) = &mut self.writer {
                    if let Err(err) = w.push(&e) {
                        self.release();
                        return Err(err);
                    }
                }
                self.pos += 1;
                Ok(Some(e))
            }
            None => {
                if let Some(w) = self.writer.take() {
                    let done = w.finish().and_then(|_| ShardDataset::open(&self.dir));
                    let mut sh = self.owner.lock().expect("cache lock");
                    sh.filling = false;
                    sh.complete = Some(Arc::new(done?));
                }
                Ok(None)
            }
        }
    }

    fn state(&self) -> Json {
        json!({ "pos": self.pos, "inner": self.inner.as_ref().map(|i| i.state()) })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let pos = state_u64(state, "pos")?;
        self.release(); // a restored iterator never writes: it has not seen the start
        if self.cached.is_some() {
            self.pos = pos;
            return Ok(());
        }
        let mut inner = self.parent.iter(0)?;
        match state_field(state, "inner")? {
            Json::Null => {
                // Saved while reading a cache that is gone: replay the input to the position.
                for _ in 0..pos {
                    inner.next()?;
                }
            }
            s => inner.set_state(s)?,
        }
        self.inner = Some(inner);
        self.pos = pos;
        Ok(())
    }
}

impl Drop for CacheIter {
    /// Dropped before the end: the writer removes its files and the folder stays absent.
    fn drop(&mut self) {
        self.release();
    }
}

//! [`ColumnarDataset`]: rows of columnar files (Parquet, Arrow IPC) read at random, block by
//! block, through a bounded cache of decoded blocks.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use serde_json::Value as Json;
use stokehold_core::checked::{locate, wrap_index};
use stokehold_core::{Error, Example, MapDataset, Result};

use super::convert::{self, Block, Plan};

/// A file cut into blocks of consecutive rows, each decoded on its own: a Parquet file's pages
/// (row groups without a page index), an Arrow IPC file's record batches.
pub trait Blocks: Send + Sync + 'static {
    /// The file, as given.
    fn path(&self) -> &Path;
    /// The schema of the columns read (the projection applied).
    fn schema(&self) -> &SchemaRef;
    /// Rows in each block, in order.
    fn block_rows(&self) -> &[u64];
    /// Block `b` decoded (the projection applied); an error names the file and where in it.
    fn load(&self, b: usize) -> Result<RecordBatch>;
    /// What a block is, for descriptions: `"page"`, `"row group"`, `"record batch"`.
    fn unit(&self) -> &'static str;
}

/// How to read columnar files.
#[derive(Clone, Debug, Default)]
pub struct ColumnarOptions {
    /// The columns to read, by name (a struct's child as `"a.b"`); `None`: every column.
    pub columns: Option<Vec<String>>,
    /// What a null row of a column holds (JSON, by feature name); without one a null is an error.
    pub defaults: Vec<(String, Json)>,
    /// Bytes of decoded blocks kept for later reads; `None`: the default memory budget
    /// ([`stokehold_core::exec::executor::DEFAULT_MEMORY_BUDGET`]). One block is always kept.
    pub cache_bytes: Option<usize>,
}

/// Decoded blocks kept under a byte limit, least recently used evicted first.
struct BlockCache {
    limit: usize,
    inner: Mutex<CacheInner>,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Default)]
struct CacheInner {
    map: HashMap<(usize, usize), (Arc<Block>, u64)>,
    bytes: usize,
    tick: u64,
}

impl BlockCache {
    fn get(&self, key: (usize, usize), load: impl FnOnce() -> Result<Block>) -> Result<Arc<Block>> {
        {
            let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            c.tick += 1;
            let t = c.tick;
            if let Some((b, used)) = c.map.get_mut(&key) {
                *used = t;
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(b.clone());
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let block = Arc::new(load()?);
        let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        c.tick += 1;
        let t = c.tick;
        if let Some((old, _)) = c.map.insert(key, (block.clone(), t)) {
            c.bytes -= old.nbytes();
        }
        c.bytes += block.nbytes();
        while c.bytes > self.limit && c.map.len() > 1 {
            let oldest = c
                .map
                .iter()
                .filter(|(k, _)| **k != key)
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| *k)
                .expect("more than one entry");
            let (gone, _) = c.map.remove(&oldest).expect("present");
            c.bytes -= gone.nbytes();
        }
        Ok(block)
    }
}

/// Rows of columnar files with random access: `len`, `get(i)` (global shuffle, sharding and
/// checkpoints through the core ops).
///
/// `get(i)` decodes the block that holds row `i` (a Parquet page range, or the whole row group of
/// a file without a page index; an Arrow record batch, mapped without a copy) and keeps it in a
/// cache of decoded blocks bounded by [`ColumnarOptions::cache_bytes`], so that the next rows of
/// that block cost a slice each. A global shuffle reads blocks in random order: it decodes each
/// block once while the decoded columns fit the cache, and up to once per row beyond that (then
/// `window_shuffle` with a window of a few blocks keeps reads local).
pub struct ColumnarDataset {
    op: &'static str,
    files: Vec<Box<dyn Blocks>>,
    plan: Plan,
    /// `cum[k]` = rows in files before `k`; one more entry than files.
    cum: Vec<u64>,
    /// Per file: the first row of each block, and one past the last.
    starts: Vec<Vec<u64>>,
    /// A row order over the files' rows (Hugging Face's indices mapping), if any.
    indices: Option<Arc<[u64]>>,
    cache: BlockCache,
}

impl ColumnarDataset {
    /// The dataset over `files` (already opened, projected alike), its features planned from the
    /// first file's schema; `op` names the reader in errors (`"read_parquet"`).
    pub fn new(
        op: &'static str,
        files: Vec<Box<dyn Blocks>>,
        opts: &ColumnarOptions,
    ) -> Result<Self> {
        let Some(first) = files.first() else {
            return Err(Error::invalid(format!("{op}: no files given")));
        };
        let plan = convert::plan(first.schema(), &opts.defaults)
            .map_err(|e| Error::schema(format!("{op}({})", first.path().display()), e))?;
        let plan = keep_asked(op, plan, opts.columns.as_deref())?;
        for f in &files[1..] {
            if f.schema().fields() != first.schema().fields() {
                return Err(Error::schema(
                    format!("{op}({})", f.path().display()),
                    format!(
                        "its columns differ from those of {}: {} vs {}",
                        first.path().display(),
                        f.schema(),
                        first.schema()
                    ),
                ));
            }
        }
        let mut cum = vec![0u64];
        let mut starts = Vec::with_capacity(files.len());
        let too_many = |f: &dyn Blocks| {
            Error::corrupt(
                f.path(),
                0,
                "its row counts add up past 2^64 rows".to_string(),
            )
        };
        for f in &files {
            let mut s = vec![0u64];
            for &r in f.block_rows() {
                let next = s.last().unwrap().checked_add(r);
                s.push(next.ok_or_else(|| too_many(f.as_ref()))?);
            }
            let next = cum.last().unwrap().checked_add(*s.last().unwrap());
            cum.push(next.ok_or_else(|| too_many(f.as_ref()))?);
            starts.push(s);
        }
        let limit = opts
            .cache_bytes
            .unwrap_or(stokehold_core::exec::executor::DEFAULT_MEMORY_BUDGET);
        Ok(ColumnarDataset {
            op,
            files,
            plan,
            cum,
            starts,
            indices: None,
            cache: BlockCache {
                limit,
                inner: Mutex::new(CacheInner::default()),
                hits: AtomicU64::new(0),
                misses: AtomicU64::new(0),
            },
        })
    }

    /// Reads rows in the order `indices` gives (each a row of the files, as Hugging Face's
    /// indices mapping after `shuffle` / `select`); an index past the rows is an error.
    pub fn with_indices(mut self, indices: Vec<u64>) -> Result<Self> {
        let rows = *self.cum.last().unwrap();
        if let Some((at, &bad)) = indices.iter().enumerate().find(|(_, &i)| i >= rows) {
            return Err(Error::invalid(format!(
                "{}: index {bad} (at position {at} of the indices mapping) is past the {rows} \
                 rows of the files",
                self.op
            )));
        }
        self.indices = Some(indices.into());
        Ok(self)
    }

    /// The features each element holds, in order.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// One line per feature: `name: dtype[shape] (arrow type)`.
    pub fn describe(&self) -> Vec<String> {
        convert::describe(&self.plan)
    }

    /// Rows in the files (before any indices mapping).
    pub fn rows(&self) -> u64 {
        *self.cum.last().unwrap()
    }

    /// Blocks per file and what a block is: `[(path, blocks, "page")]`.
    pub fn layout(&self) -> Vec<(PathBuf, usize, &'static str)> {
        self.files
            .iter()
            .map(|f| (f.path().to_path_buf(), f.block_rows().len(), f.unit()))
            .collect()
    }

    /// (hits, misses) of the decoded-block cache so far.
    pub fn cache_stats(&self) -> (u64, u64) {
        (
            self.cache.hits.load(Ordering::Relaxed),
            self.cache.misses.load(Ordering::Relaxed),
        )
    }

    /// Row `row` of the files (0-based over all of them).
    pub fn row(&self, row: u64) -> Result<Example> {
        let (k, local) = locate(&self.cum, row);
        let s = &self.starts[k];
        let (b, _) = locate(s, local);
        let f = &self.files[k];
        let block = self.cache.get((k, b), || {
            let batch = f.load(b)?;
            if batch.num_rows() as u64 != s[b + 1] - s[b] {
                return Err(Error::corrupt(
                    f.path(),
                    0,
                    format!(
                        "{} {b} decoded to {} rows where the file's metadata says {}",
                        f.unit(),
                        batch.num_rows(),
                        s[b + 1] - s[b]
                    ),
                ));
            }
            convert::block(&self.plan, &batch)
                .map_err(|e| Error::schema(format!("{}({})", self.op, f.path().display()), e))
        })?;
        let at = |r: usize| format!("row {} of {}", s[b] + r as u64, f.path().display());
        convert::element(&self.plan, &block, (local - s[b]) as usize, &at)
            .map_err(|e| Error::schema(self.op.to_string(), e))
    }
}

/// The plan's leaves that `asked` names (a leaf by its name, or every leaf under a struct named),
/// or an error naming a column that is not there and the ones that are.
fn keep_asked(op: &str, mut plan: Plan, asked: Option<&[String]>) -> Result<Plan> {
    let Some(asked) = asked else {
        return Ok(plan);
    };
    for a in asked {
        let hit = plan
            .leaves
            .iter()
            .any(|l| &l.name == a || l.name.starts_with(&format!("{a}.")));
        if !hit {
            let names: Vec<&str> = plan.leaves.iter().map(|l| l.name.as_str()).collect();
            return Err(Error::invalid(format!(
                "{op}: no column {a:?}; the files hold {}",
                names.join(", ")
            )));
        }
    }
    plan.leaves.retain(|l| {
        asked
            .iter()
            .any(|a| &l.name == a || l.name.starts_with(&format!("{a}.")))
    });
    Ok(plan)
}

/// The top-level columns (indices into `schema`) that `asked` needs, in schema order: a name is a
/// column, or a dotted path into a struct column; a name that is neither is an error listing the
/// names there are.
pub fn roots(
    schema: &SchemaRef,
    asked: Option<&[String]>,
) -> std::result::Result<Vec<usize>, String> {
    let all: Vec<usize> = (0..schema.fields().len()).collect();
    let Some(asked) = asked else {
        return Ok(all);
    };
    let names = convert::leaf_names(schema);
    for a in asked {
        if !names
            .iter()
            .any(|n| n == a || n.starts_with(&format!("{a}.")))
        {
            return Err(format!(
                "no column {a:?}; the files hold {}",
                names.join(", ")
            ));
        }
    }
    Ok(all
        .into_iter()
        .filter(|&i| {
            let n = schema.field(i).name();
            asked
                .iter()
                .any(|a| a == n || a.starts_with(&format!("{n}.")))
        })
        .collect())
}

impl MapDataset for ColumnarDataset {
    fn len(&self) -> u64 {
        match &self.indices {
            Some(ix) => ix.len() as u64,
            None => self.rows(),
        }
    }

    fn get(&self, index: u64) -> Result<Example> {
        let (_, i) = wrap_index(index, self.len(), || self.name())?;
        let row = match &self.indices {
            Some(ix) => ix[i as usize],
            None => i,
        };
        self.row(row)
    }

    fn name(&self) -> String {
        let files = match self.files.as_slice() {
            [one] => one.path().display().to_string(),
            many => format!("{} files", many.len()),
        };
        let cols: Vec<&str> = self.plan.leaves.iter().map(|l| l.name.as_str()).collect();
        format!("{}({files}, [{}])", self.op, cols.join(","))
    }
}

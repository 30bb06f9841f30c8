//! One Parquet file as [`Blocks`]: its row groups cut at the page boundaries of its offset index
//! (where it has one), each block decoded alone through a row selection.

use std::io::Read;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
};
use parquet::arrow::ProjectionMask;
use parquet::errors::ParquetError;
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::reader::{ChunkReader, Length};
use stokehold_core::{Error, Result};

use super::dataset::{roots, Blocks};
use crate::storage::Object;

/// Where a Parquet file's bytes are: an object of the storage seam (a memory-mapped local file,
/// or a URL read by range through the shard cache), or bytes in memory; as the parquet crate
/// reads them.
#[derive(Clone)]
pub enum ObjectReader {
    /// An opened object.
    Object(Object),
    /// Bytes in memory: a memory-mapped local file (or a cached copy of an object), a fuzz input.
    Memory(Bytes),
}

impl ObjectReader {
    fn size(&self) -> u64 {
        match self {
            ObjectReader::Object(o) => o.size(),
            ObjectReader::Memory(b) => b.len() as u64,
        }
    }

    fn read_range(&self, r: std::ops::Range<u64>) -> Result<Bytes> {
        match self {
            ObjectReader::Object(o) => o.read_range(r),
            ObjectReader::Memory(b) if r.start <= r.end && r.end <= b.len() as u64 => {
                Ok(b.slice(r.start as usize..r.end as usize))
            }
            ObjectReader::Memory(b) => Err(Error::corrupt(
                "the file",
                r.start,
                format!(
                    "range {}..{} past the end ({} bytes)",
                    r.start,
                    r.end,
                    b.len()
                ),
            )),
        }
    }
}

impl Length for ObjectReader {
    fn len(&self) -> u64 {
        self.size()
    }
}

fn external(e: Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

/// Reads an object from an offset on, 1 MiB per request.
pub struct ObjectRead {
    object: ObjectReader,
    pos: u64,
    buf: Bytes,
}

impl Read for ObjectRead {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.buf.is_empty() {
            let end = (self.pos + (1 << 20)).min(self.object.size());
            if self.pos >= end {
                return Ok(0);
            }
            self.buf = self
                .object
                .read_range(self.pos..end)
                .map_err(std::io::Error::other)?;
            self.pos = end;
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        let _ = self.buf.split_to(n);
        Ok(n)
    }
}

impl ChunkReader for ObjectReader {
    type T = ObjectRead;

    fn get_read(&self, start: u64) -> parquet::errors::Result<ObjectRead> {
        Ok(ObjectRead {
            object: self.clone(),
            pos: start.min(self.size()),
            buf: Bytes::new(),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let end = start
            .checked_add(length as u64)
            .ok_or_else(|| ParquetError::EOF(format!("range {start} + {length} overflows")))?;
        self.read_range(start..end).map_err(external)
    }
}

/// A Parquet file opened for reading at random.
pub struct ParquetFile {
    path: PathBuf,
    reader: ObjectReader,
    meta: ArrowReaderMetadata,
    mask: ProjectionMask,
    schema: SchemaRef,
    /// (row group, first row in it, rows) per block.
    blocks: Vec<(usize, u64, u64)>,
    rows: Vec<u64>,
    paged: bool,
}

/// The parquet crate's message for `e`, without its own `External` wrapper around ours.
fn message(e: &ParquetError) -> String {
    match e {
        ParquetError::External(inner) => inner.to_string(),
        other => other.to_string(),
    }
}

impl ParquetFile {
    /// Opens `path` (a path or URL) and reads its footer and page index, keeping `columns`
    /// (`None`: all; a name is a column or a dotted path into a struct column).
    pub fn open(path: &Path, columns: Option<&[String]>) -> Result<Self> {
        // `storage::open`: a URL's object, or the installed object cache's local copy of it.
        let reader = match crate::storage::open(path)? {
            crate::storage::Source::Mapped { data, .. } => ObjectReader::Memory(data),
            crate::storage::Source::Remote(object) => ObjectReader::Object(object),
        };
        Self::from_reader(path, reader, columns)
    }

    /// The file whose bytes `reader` reads, named `path` in errors.
    pub fn from_reader(
        path: &Path,
        reader: ObjectReader,
        columns: Option<&[String]>,
    ) -> Result<Self> {
        let size = reader.size();
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        let meta = ArrowReaderMetadata::load(&reader, options).map_err(|e| {
            Error::corrupt(
                path,
                size.saturating_sub(8),
                format!("not a readable Parquet file (its footer): {}", message(&e)),
            )
        })?;
        let full = meta.schema().clone();
        let keep = roots(&full, columns)
            .map_err(|e| Error::invalid(format!("read_parquet({}): {e}", path.display())))?;
        let schema = std::sync::Arc::new(full.project(&keep).map_err(|e| {
            Error::corrupt(path, size.saturating_sub(8), format!("its schema: {e}"))
        })?);
        let descr = meta.parquet_schema();
        let mask = ProjectionMask::roots(descr, keep.iter().copied());
        let leaves: Vec<usize> = (0..descr.num_columns())
            .filter(|&i| mask.leaf_included(i))
            .collect();
        let md = meta.metadata().clone();
        let mut blocks = Vec::new();
        let mut paged = md.page_index().is_some() && !leaves.is_empty();
        for (g, rg) in md.row_groups().iter().enumerate() {
            let n = u64::try_from(rg.num_rows()).map_err(|_| {
                Error::corrupt(
                    path,
                    0,
                    format!("row group {g} declares {} rows", rg.num_rows()),
                )
            })?;
            let pi = md.page_index_for_row_group(g);
            // The projected column with the fewest pages sets the blocks: every block holds whole
            // pages of it, and the other columns decode the pages that overlap.
            let cuts: Option<Vec<u64>> = leaves
                .iter()
                .map(|&c| pi.offset_index(c).map(|o| o.page_locations()))
                .collect::<Option<Vec<_>>>()
                .and_then(|all| all.into_iter().min_by_key(|p| p.len()))
                .map(|p| p.iter().map(|l| l.first_row_index.max(0) as u64).collect());
            match cuts {
                Some(mut cuts) if paged && !cuts.is_empty() => {
                    cuts.push(n);
                    if cuts[0] != 0 || cuts.windows(2).any(|w| w[0] >= w[1]) {
                        return Err(Error::corrupt(
                            path,
                            0,
                            format!("row group {g}: its offset index has pages out of order"),
                        ));
                    }
                    for w in cuts.windows(2) {
                        blocks.push((g, w[0], w[1] - w[0]));
                    }
                }
                _ => {
                    paged = false;
                    if n > 0 {
                        blocks.push((g, 0, n));
                    }
                }
            }
        }
        if !paged {
            // Some row group lacks an index: read every row group whole (one rule per file).
            blocks = md
                .row_groups()
                .iter()
                .enumerate()
                .filter(|(_, rg)| rg.num_rows() > 0)
                .map(|(g, rg)| (g, 0, rg.num_rows() as u64))
                .collect();
        }
        let rows = blocks.iter().map(|b| b.2).collect();
        Ok(ParquetFile {
            path: path.to_path_buf(),
            reader,
            meta,
            mask,
            schema,
            blocks,
            rows,
            paged,
        })
    }

    /// Whether blocks are page ranges (the file has an offset index) or whole row groups.
    pub fn paged(&self) -> bool {
        self.paged
    }

    /// The file's whole Arrow schema (before projection).
    pub fn file_schema(&self) -> &SchemaRef {
        self.meta.schema()
    }

    fn decode(&self, b: usize) -> std::result::Result<RecordBatch, ParquetError> {
        let (g, start, rows) = self.blocks[b];
        let rg_rows = self.meta.metadata().row_group(g).num_rows() as usize;
        let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(
            self.reader.clone(),
            self.meta.clone(),
        )
        .with_row_groups(vec![g])
        .with_projection(self.mask.clone())
        .with_batch_size((rows as usize).clamp(1, 8192));
        if rows as usize != rg_rows {
            let (a, z) = (start as usize, (start + rows) as usize);
            builder = builder.with_row_selection(RowSelection::from_consecutive_ranges(
                std::iter::once(a..z),
                rg_rows,
            ));
        }
        let batches = builder
            .build()?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        match batches.len() {
            1 => Ok(batches.into_iter().next().expect("one")),
            _ => Ok(arrow_select::concat::concat_batches(
                &self.schema,
                &batches,
            )?),
        }
    }
}

impl Blocks for ParquetFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn block_rows(&self) -> &[u64] {
        &self.rows
    }

    fn load(&self, b: usize) -> Result<RecordBatch> {
        self.decode(b).map_err(|e| {
            let (g, start, rows) = self.blocks[b];
            let rg = self.meta.metadata().row_group(g);
            let offset = rg
                .columns()
                .iter()
                .map(|c| c.byte_range().0)
                .min()
                .unwrap_or(0);
            Error::corrupt(
                &self.path,
                offset,
                format!(
                    "row group {g} (rows {start}..{} of it): {}",
                    start + rows,
                    message(&e)
                ),
            )
        })
    }

    fn unit(&self) -> &'static str {
        if self.paged {
            "page"
        } else {
            "row group"
        }
    }
}

//! One Arrow IPC file (the file format, `ARROW1` at both ends, or the stream format that Hugging
//! Face `datasets` writes into its cache and `save_to_disk` folders) as [`Blocks`]: its record
//! batches, decoded when opened straight over the memory-mapped file (no copy where the buffers
//! are aligned, as `arrow-ipc` reads them).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::convert::try_fb_to_schema;
use arrow_ipc::reader::{read_footer_length, FileDecoder, StreamDecoder};
use arrow_schema::{ArrowError, SchemaRef};
use stokehold_core::{Error, Result};

use super::dataset::{roots, Blocks};

const MAGIC: &[u8] = b"ARROW1";

/// An Arrow IPC file opened for reading at random.
pub struct IpcFile {
    path: PathBuf,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    rows: Vec<u64>,
    stream: bool,
}

impl IpcFile {
    /// Opens `path` (a path or URL: a URL is read whole) and decodes its batches' layout, keeping
    /// `columns` (`None`: all; a dotted name reaches into a struct column).
    pub fn open(path: &Path, columns: Option<&[String]>) -> Result<Self> {
        let data = match crate::storage::open(path)? {
            crate::storage::Source::Mapped { data, .. } => data,
            crate::storage::Source::Remote(object) => object.read_all()?,
        };
        Self::from_bytes(path, data, columns)
    }

    /// The IPC file or stream `data`, named `path` in errors.
    pub fn from_bytes(path: &Path, data: bytes::Bytes, columns: Option<&[String]>) -> Result<Self> {
        let buf = Buffer::from(data);
        let stream = !(buf.len() >= 2 * MAGIC.len() + 4 && buf.starts_with(MAGIC));
        let (schema, batches) = if stream {
            read_stream(&buf).map_err(|(at, e)| {
                Error::corrupt(path, at, format!("not a readable Arrow IPC stream: {e}"))
            })?
        } else {
            read_file(&buf).map_err(|(at, e)| {
                Error::corrupt(path, at, format!("not a readable Arrow IPC file: {e}"))
            })?
        };
        let keep = roots(&schema, columns)
            .map_err(|e| Error::invalid(format!("read_arrow({}): {e}", path.display())))?;
        let projected = Arc::new(
            schema
                .project(&keep)
                .map_err(|e| Error::corrupt(path, 0, format!("its schema: {e}")))?,
        );
        let batches = batches
            .into_iter()
            .filter(|b| b.num_rows() > 0)
            .map(|b| b.project(&keep))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::corrupt(path, 0, format!("a record batch: {e}")))?;
        let rows = batches.iter().map(|b| b.num_rows() as u64).collect();
        Ok(IpcFile {
            path: path.to_path_buf(),
            schema: projected,
            batches,
            rows,
            stream,
        })
    }

    /// Whether the file is in the stream format (else the file format).
    pub fn is_stream(&self) -> bool {
        self.stream
    }
}

type Decoded = std::result::Result<(SchemaRef, Vec<RecordBatch>), (u64, ArrowError)>;

fn read_stream(buf: &Buffer) -> Decoded {
    let mut dec = StreamDecoder::new();
    let mut rest = buf.clone();
    let mut out = Vec::new();
    while !rest.is_empty() {
        let at = (buf.len() - rest.len()) as u64;
        if let Some(b) = dec.decode(&mut rest).map_err(|e| (at, e))? {
            out.push(b);
        }
    }
    let schema = dec.schema().ok_or_else(|| {
        (
            0,
            ArrowError::IpcError("the stream ends before its schema".into()),
        )
    })?;
    dec.finish().map_err(|e| (buf.len() as u64, e))?;
    Ok((schema, out))
}

fn read_file(buf: &Buffer) -> Decoded {
    let n = buf.len();
    let bad = |at: usize, what: &str| (at as u64, ArrowError::IpcError(what.to_string()));
    let trailer: [u8; 10] = buf[n - 10..].try_into().expect("10 bytes");
    let footer_len = read_footer_length(trailer).map_err(|e| ((n - 10) as u64, e))?;
    let start = (n - 10)
        .checked_sub(footer_len)
        .filter(|&s| s >= MAGIC.len())
        .ok_or_else(|| bad(n - 10, "its footer length points before the file"))?;
    let footer = arrow_ipc::root_as_footer(&buf[start..n - 10]).map_err(|e| {
        (
            start as u64,
            ArrowError::IpcError(format!("its footer: {e}")),
        )
    })?;
    let fb_schema = footer
        .schema()
        .ok_or_else(|| bad(start, "its footer has no schema"))?;
    let schema = Arc::new(try_fb_to_schema(fb_schema).map_err(|e| (start as u64, e))?);
    let mut dec = FileDecoder::new(schema.clone(), footer.version());
    let slice = |b: &arrow_ipc::Block| {
        let off = usize::try_from(b.offset()).ok()?;
        let len = usize::try_from(b.metaDataLength())
            .ok()?
            .checked_add(usize::try_from(b.bodyLength()).ok()?)?;
        (off.checked_add(len)? <= start).then(|| buf.slice_with_length(off, len))
    };
    for b in footer.dictionaries().iter().flatten() {
        let data =
            slice(b).ok_or_else(|| bad(start, "a dictionary block lies outside the file"))?;
        dec.read_dictionary(b, &data)
            .map_err(|e| (b.offset().max(0) as u64, e))?;
    }
    let mut out = Vec::new();
    for b in footer.recordBatches().iter().flatten() {
        let data =
            slice(b).ok_or_else(|| bad(start, "a record batch block lies outside the file"))?;
        if let Some(rb) = dec
            .read_record_batch(b, &data)
            .map_err(|e| (b.offset().max(0) as u64, e))?
        {
            out.push(rb);
        }
    }
    Ok((schema, out))
}

impl Blocks for IpcFile {
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
        Ok(self.batches[b].clone())
    }

    fn unit(&self) -> &'static str {
        "record batch"
    }
}

//! Writing tables: rows appended to a temporary file that is renamed into place at the end, so a
//! reader never sees a half-written table and a table being read is never modified in place.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use stokehold_core::{DType, Error, Result, Tensor};

use super::npy::encode_header;
use super::Table;
use crate::atomic::TempFile;

/// Writes a `.npy` table row block by row block; the row count goes in the header at the end.
pub struct TableWriter {
    path: PathBuf,
    /// Removed when the writer is dropped unfinished.
    tmp: TempFile,
    out: Option<BufWriter<File>>,
    dtype: DType,
    row_shape: Vec<usize>,
    header_len: usize,
    rows: usize,
}

impl TableWriter {
    /// Starts a table of `dtype` rows of shape `row_shape` at `path` (written to a temporary
    /// name beside it until [`TableWriter::finish`]).
    pub fn create(path: impl AsRef<Path>, dtype: DType, row_shape: &[usize]) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if path.file_name().is_none() {
            return Err(Error::invalid(format!(
                "{}: not a file path",
                path.display()
            )));
        }
        // Reserve room for the longest row count so the final header fits in the same bytes.
        let mut widest = vec![usize::MAX];
        widest.extend_from_slice(row_shape);
        let header_len = encode_header(dtype, &widest, 0)?.len();
        let (tmp, file) = TempFile::create(&path)?;
        let mut w = TableWriter {
            path,
            tmp,
            out: Some(BufWriter::with_capacity(1 << 20, file)),
            dtype,
            row_shape: row_shape.to_vec(),
            header_len,
            rows: 0,
        };
        w.write(&vec![0u8; header_len])?;
        Ok(w)
    }

    /// Rows written so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Appends a block of rows: a tensor of shape `[k, row_shape...]` and the table's dtype.
    pub fn append(&mut self, block: &Tensor) -> Result<()> {
        let ok = block.dtype() == self.dtype && block.shape().get(1..) == Some(&self.row_shape[..]);
        if !ok {
            return Err(Error::invalid(format!(
                "{}: rows of {}{:?} do not fit a table of {} rows of shape {:?}",
                self.path.display(),
                block.dtype(),
                block.shape(),
                self.dtype,
                self.row_shape
            )));
        }
        self.append_bytes(block.data(), block.shape()[0])
    }

    /// Appends `rows` rows given as raw little-endian bytes (`rows * row_bytes` of them).
    pub fn append_bytes(&mut self, data: &[u8], rows: usize) -> Result<()> {
        // Checked: a row shape or count from input must not wrap into a size that matches.
        let rb = self
            .row_shape
            .iter()
            .try_fold(self.dtype.size().unwrap_or(0), |a, &d| a.checked_mul(d));
        let need = rb.and_then(|rb| rb.checked_mul(rows));
        if need != Some(data.len()) {
            return Err(Error::invalid(format!(
                "{}: {rows} rows of shape {:?} need {need:?} bytes, got {}",
                self.path.display(),
                self.row_shape,
                data.len()
            )));
        }
        self.write(data)?;
        self.rows += rows;
        Ok(())
    }

    fn write(&mut self, data: &[u8]) -> Result<()> {
        let out = self.out.as_mut().expect("writer open until finish");
        out.write_all(data)
            .map_err(|e| Error::io(self.tmp.path(), e))
    }

    /// Writes the header, syncs, renames the file into place and opens it as a table.
    pub fn finish(mut self) -> Result<Table> {
        let mut shape = vec![self.rows];
        shape.extend_from_slice(&self.row_shape);
        let header = encode_header(self.dtype, &shape, self.header_len)?;
        debug_assert_eq!(header.len(), self.header_len);
        let out = self.out.take().expect("writer open until finish");
        let io = |e: std::io::Error| Error::io(self.tmp.path(), e);
        let mut file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(&header).map_err(io)?;
        self.tmp.commit(Some(file))?;
        Table::open(&self.path)
    }
}

/// Concatenates the rows of `inputs` (`.npy` files of one dtype and row shape) into a new table
/// at `output`; `progress(bytes_done, bytes_total)` is called as data is copied.
pub fn concat_npy(
    inputs: &[PathBuf],
    output: &Path,
    mut progress: impl FnMut(u64, u64),
) -> Result<Table> {
    let first = inputs
        .first()
        .ok_or_else(|| Error::invalid("table write: no input files"))?;
    let tables = inputs.iter().map(Table::open).collect::<Result<Vec<_>>>()?;
    let t0 = &tables[0];
    for t in &tables[1..] {
        if t.dtype() != t0.dtype() || t.row_shape() != t0.row_shape() {
            return Err(Error::invalid(format!(
                "{} holds rows of {}{:?} but {} holds {}{:?}: all inputs need one dtype and row shape",
                t.path().display(),
                t.dtype(),
                t.row_shape(),
                first.display(),
                t0.dtype(),
                t0.row_shape()
            )));
        }
    }
    let total: u64 = tables.iter().map(|t| t.tensor().data().len() as u64).sum();
    let mut w = TableWriter::create(output, t0.dtype(), t0.row_shape())?;
    let (mut done, rb) = (0u64, t0.row_bytes().max(1));
    // Copy in blocks of whole rows (about 8 MiB) so progress moves and memory stays flat.
    let block_rows = ((8 << 20) / rb).max(1);
    progress(0, total);
    for t in &tables {
        let data = t.tensor().data();
        let n = t.len() as usize;
        for start in (0..n).step_by(block_rows) {
            let end = (start + block_rows).min(n);
            let trb = t.row_bytes();
            w.append_bytes(&data[start * trb..end * trb], end - start)?;
            done += ((end - start) * trb) as u64;
            progress(done, total);
        }
    }
    w.finish()
}

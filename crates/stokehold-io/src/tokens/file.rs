//! One token file, memory-mapped: a Megatron indexed dataset (`prefix.bin` + `prefix.idx`) or a
//! flat file of tokens (nanoGPT's raw uint16 `.bin`, a `.npy` with a header, or OLMo-core's
//! raw memmaps, which keep the `.npy` name without numpy's header).

use std::path::{Path, PathBuf};

use bytes::Bytes;
use stokehold_core::{DType, Error, Result};

use super::idx;

/// Tokens per piece of a flat file: a flat file has no document boundaries, so it is read as
/// consecutive pieces, which cut windows exactly as one document would (the walk crosses
/// boundaries) while each length stays an int32 as in megatron's indices.
const PIECE: u64 = 1 << 30;

/// An opened token file.
#[derive(Clone, Debug)]
pub struct TokenFile {
    path: PathBuf,
    dtype: DType,
    /// The `.bin` (or the flat file's data) mapped.
    data: Bytes,
    lengths: Vec<i32>,
    pointers: Vec<u64>,
    documents: Option<Vec<u64>>,
}

fn map(path: &Path) -> Result<Bytes> {
    if crate::storage::is_remote(path) {
        return Err(Error::invalid(format!(
            "read_tokens: {} is a URL; token files are read from local disk (copy them first)",
            path.display()
        )));
    }
    let (file, size) = crate::storage::open_regular(path)?;
    if size == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: read-only map of a file we do not modify (as for tables: the file must not be
    // truncated while mapped).
    let m = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    Ok(Bytes::from_owner(m))
}

/// The Megatron prefix of `path` (`data/x` for `data/x`, `data/x.bin`, `data/x.idx`) when its
/// `.idx` exists.
fn megatron_prefix(path: &Path) -> Option<PathBuf> {
    let s = path.to_str()?;
    let prefix = s
        .strip_suffix(".bin")
        .or_else(|| s.strip_suffix(".idx"))
        .unwrap_or(s);
    Path::new(&format!("{prefix}.idx"))
        .is_file()
        .then(|| PathBuf::from(prefix))
}

impl TokenFile {
    /// Opens `path`: a Megatron prefix (or its `.bin` / `.idx`), else a flat token file whose
    /// `dtype` is read from a `.npy` header, else taken from `dtype` (a raw `.bin` defaults to
    /// uint16, as nanoGPT writes it).
    pub fn open(path: impl AsRef<Path>, dtype: Option<DType>) -> Result<TokenFile> {
        let path = path.as_ref();
        match megatron_prefix(path) {
            Some(prefix) => Self::open_megatron(&prefix),
            None => Self::open_flat(path, dtype),
        }
    }

    fn open_megatron(prefix: &Path) -> Result<TokenFile> {
        let idx_path = PathBuf::from(format!("{}.idx", prefix.display()));
        let bin_path = PathBuf::from(format!("{}.bin", prefix.display()));
        let data = map(&bin_path)?;
        let index = idx::parse(&map(&idx_path)?, &idx_path, data.len() as u64)?;
        Ok(TokenFile {
            path: bin_path,
            dtype: index.dtype,
            data,
            lengths: index.lengths,
            pointers: index.pointers,
            documents: Some(index.documents),
        })
    }

    fn open_flat(path: &Path, dtype: Option<DType>) -> Result<TokenFile> {
        let all = map(path)?;
        let (dtype, data) = if all.starts_with(crate::table::npy::MAGIC) {
            let h = crate::table::npy::parse_header(&all[..all.len().min(1 << 20)], path)?;
            if h.shape.len() != 1 {
                return Err(Error::corrupt(
                    path,
                    0,
                    format!("a token .npy is 1-D; this one has shape {:?}", h.shape),
                ));
            }
            let end = h
                .data_len()
                .and_then(|n| n.checked_add(h.data_offset as u64));
            if end.is_none_or(|e| e > all.len() as u64) {
                return Err(Error::corrupt(
                    path,
                    all.len() as u64,
                    format!(
                    "truncated: {} tokens of {} need {} bytes after the header; the file has {}",
                    h.shape[0], h.dtype, h.data_len().unwrap_or(u64::MAX), all.len() - h.data_offset
                ),
                ));
            }
            (h.dtype, all.slice(h.data_offset..end.unwrap() as usize))
        } else {
            let raw_bin = path.extension().is_some_and(|e| e == "bin");
            let dtype = dtype.or(raw_bin.then_some(DType::U16)).ok_or_else(|| {
                Error::invalid(format!(
                    "read_tokens: {} has no .npy header and no .idx beside it: give its token \
                     type, dtype='uint16' or dtype='uint32'",
                    path.display()
                ))
            })?;
            (dtype, all)
        };
        let width = token_width(path, dtype)?;
        if data.len() % width != 0 {
            return Err(Error::corrupt(
                path,
                data.len() as u64,
                format!(
                "truncated: {} bytes is not a whole number of {dtype} tokens ({width} bytes each)",
                data.len()
            ),
            ));
        }
        let n = (data.len() / width) as u64;
        let (mut lengths, mut pointers) = (Vec::new(), Vec::new());
        let mut at = 0;
        while at < n {
            let len = PIECE.min(n - at);
            lengths.push(len as i32);
            pointers.push(at * width as u64);
            at += len;
        }
        Ok(TokenFile {
            path: path.to_path_buf(),
            dtype,
            data,
            lengths,
            pointers,
            documents: None,
        })
    }

    /// The data file (a Megatron file's `.bin`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Token type on disk.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Tokens per sequence (a flat file: consecutive pieces of at most 2^30 tokens).
    pub fn sequence_lengths(&self) -> &[i32] {
        &self.lengths
    }

    /// A Megatron file's document boundaries (first sequence of each document, then the count).
    pub fn document_indices(&self) -> Option<&[u64]> {
        self.documents.as_deref()
    }

    /// Total tokens.
    pub fn num_tokens(&self) -> u64 {
        self.lengths.iter().map(|&n| n.max(0) as u64).sum()
    }

    /// Appends tokens `offset .. offset + len` of sequence `seq` to `out`.
    pub fn read(&self, seq: usize, offset: u64, len: u64, out: &mut Vec<i64>) -> Result<()> {
        let have = self.lengths.get(seq).map_or(0, |&n| n.max(0) as u64);
        if seq >= self.lengths.len() || offset.checked_add(len).is_none_or(|e| e > have) {
            return Err(Error::invalid(format!(
                "read_tokens: {}: tokens {offset}..+{len} of sequence {seq} are past its {have}",
                self.path.display()
            )));
        }
        let w = self.dtype.size().unwrap();
        let start = self.pointers[seq] as usize + offset as usize * w;
        let bytes = &self.data[start..start + len as usize * w];
        decode(self.dtype, bytes, out).map_err(|i| {
            Error::corrupt(
                &self.path,
                (start + i * w) as u64,
                format!(
                    "sequence {seq}: a {} token that is not a whole number fits no token id",
                    self.dtype
                ),
            )
        })
    }
}

fn token_width(path: &Path, dtype: DType) -> Result<usize> {
    match dtype {
        DType::U8
        | DType::I8
        | DType::U16
        | DType::I16
        | DType::U32
        | DType::I32
        | DType::U64
        | DType::I64
        | DType::F32
        | DType::F64 => Ok(dtype.size().unwrap()),
        _ => Err(Error::invalid(format!(
            "read_tokens: {}: tokens of type {dtype} are not read; token files hold integers",
            path.display()
        ))),
    }
}

/// Little-endian tokens of `dtype` appended to `out` as int64; `Err(i)`: token `i` is a float
/// that is no whole number.
fn decode(dtype: DType, b: &[u8], out: &mut Vec<i64>) -> std::result::Result<(), usize> {
    macro_rules! ints {
        ($t:ty, $n:literal) => {
            out.extend(
                b.chunks_exact($n)
                    .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()) as i64),
            )
        };
    }
    macro_rules! floats {
        ($t:ty, $n:literal) => {
            for (i, c) in b.chunks_exact($n).enumerate() {
                let v = <$t>::from_le_bytes(c.try_into().unwrap()) as f64;
                if v.fract() != 0.0 || v.is_nan() || v.abs() >= 9.0e18 {
                    return Err(i);
                }
                out.push(v as i64);
            }
        };
    }
    match dtype {
        DType::U8 => out.extend(b.iter().map(|&x| x as i64)),
        DType::I8 => out.extend(b.iter().map(|&x| x as i8 as i64)),
        DType::U16 => ints!(u16, 2),
        DType::I16 => ints!(i16, 2),
        DType::U32 => ints!(u32, 4),
        DType::I32 => ints!(i32, 4),
        DType::U64 => ints!(u64, 8),
        DType::I64 => ints!(i64, 8),
        DType::F32 => floats!(f32, 4),
        DType::F64 => floats!(f64, 8),
        _ => unreachable!("token_width refused {dtype}"),
    }
    Ok(())
}

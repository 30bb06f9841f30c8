//! Tensors: a dtype, a shape and a shared byte buffer.
//!
//! The buffer is a [`bytes::Bytes`], so a tensor can be a zero-copy view into an arena, a
//! memory-mapped file or a numpy array handed over from Python, and cloning a tensor is O(1).
//!
//! ```
//! use stokehold_core::{DType, Tensor};
//! let t = Tensor::from_vec(vec![2, 3], (0..6).map(|x| x as f32).collect()).unwrap();
//! assert_eq!(t.dtype(), DType::F32);
//! assert_eq!(t.slice_rows(1, 2).unwrap().to_vec::<f32>().unwrap(), vec![3.0, 4.0, 5.0]);
//! ```

use std::sync::Arc;

use bytes::Bytes;

use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};

/// A dense n-dimensional array, or for [`DType::Bytes`] an array of byte strings.
///
/// Data is stored little-endian, C order. For `Bytes` tensors `data` holds the strings back to back
/// and `offsets` (one more than the element count) delimits them.
#[derive(Clone, PartialEq)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    data: Bytes,
    offsets: Option<Arc<[u64]>>,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor<{}{:?}, {} bytes>",
            self.dtype,
            self.shape,
            self.data.len()
        )
    }
}

/// Owns a `Vec<T>` and shows it as bytes, so a typed vector becomes a [`Bytes`] without a copy.
struct VecBytes<T: Scalar>(Vec<T>);

impl<T: Scalar> AsRef<[u8]> for VecBytes<T> {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `Scalar` types are plain old data without padding; the length is in bytes.
        unsafe {
            std::slice::from_raw_parts(
                self.0.as_ptr() as *const u8,
                std::mem::size_of_val(self.0.as_slice()),
            )
        }
    }
}

/// Vectors of at most this many bytes are copied into their `Bytes` instead of wrapped: one
/// small allocation instead of the vector's and the wrapper's (a scalar per element of a Python
/// map's result paid both, and their frees, `perf record`).
const COPY_SMALL: usize = 64;

/// Wraps a typed vector as bytes without copying (a small one is copied, see [`COPY_SMALL`]).
pub fn vec_to_bytes<T: Scalar>(v: Vec<T>) -> Bytes {
    let v = VecBytes(v);
    if v.as_ref().len() <= COPY_SMALL {
        return Bytes::copy_from_slice(v.as_ref());
    }
    Bytes::from_owner(v)
}

/// `b` as bytes in an 8-byte aligned buffer (typed views of a tensor need their dtype's
/// alignment; a `Vec<u8>` only promises 1). Copies `b` once.
pub fn aligned_bytes(b: Vec<u8>) -> Bytes {
    let len = b.len();
    let words: Vec<u64> = b
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();
    vec_to_bytes(words).slice(0..len)
}

impl Tensor {
    /// A dense tensor over `data`, which must hold exactly `prod(shape) * dtype.size()` bytes.
    pub fn new(dtype: DType, shape: Vec<usize>, data: Bytes) -> Result<Self> {
        let size = dtype.size().ok_or_else(|| {
            Error::invalid("Tensor::new takes a fixed-size dtype; use Tensor::strings for bytes")
        })?;
        let want = shape.iter().product::<usize>() * size;
        if data.len() != want {
            return Err(Error::invalid(format!(
                "tensor of {dtype}{shape:?} needs {want} bytes, got {}",
                data.len()
            )));
        }
        Ok(Tensor {
            dtype,
            shape,
            data,
            offsets: None,
        })
    }

    /// A dense tensor that takes ownership of `values` without copying.
    pub fn from_vec<T: Scalar>(shape: Vec<usize>, values: Vec<T>) -> Result<Self> {
        Tensor::new(T::DTYPE, shape, vec_to_bytes(values))
    }

    /// A scalar (rank 0) tensor.
    pub fn scalar<T: Scalar>(value: T) -> Self {
        Tensor::from_vec(vec![], vec![value]).expect("one element")
    }

    /// A `Bytes` tensor of the given strings (shape `[n]`).
    pub fn strings<S: AsRef<[u8]>>(items: &[S]) -> Self {
        let mut data = Vec::with_capacity(items.iter().map(|s| s.as_ref().len()).sum());
        let mut offsets = Vec::with_capacity(items.len() + 1);
        offsets.push(0u64);
        for s in items {
            data.extend_from_slice(s.as_ref());
            offsets.push(data.len() as u64);
        }
        Tensor::strings_from_parts(vec![items.len()], Bytes::from(data), offsets.into())
            .expect("consistent by construction")
    }

    /// A `Bytes` tensor from its buffer and its `n + 1` offsets.
    pub fn strings_from_parts(shape: Vec<usize>, data: Bytes, offsets: Arc<[u64]>) -> Result<Self> {
        let n: usize = shape.iter().product();
        let ok = offsets.len() == n + 1
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && offsets.last().copied() == Some(data.len() as u64);
        if !ok {
            return Err(Error::invalid(format!(
                "bytes tensor of shape {shape:?} needs {} non-decreasing offsets ending at {}",
                n + 1,
                data.len()
            )));
        }
        Ok(Tensor {
            dtype: DType::Bytes,
            shape,
            data,
            offsets: Some(offsets),
        })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape (empty for a scalar).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Its length along axis 0, 1 for a scalar: an element's length as `pack` and
    /// `sample_from_datasets(by="tokens")` count it.
    pub fn length(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }

    /// Number of elements (product of the shape).
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The raw buffer (little-endian, C order; strings back to back for `Bytes`).
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// String offsets of a `Bytes` tensor.
    pub fn offsets(&self) -> Option<&Arc<[u64]>> {
        self.offsets.as_ref()
    }

    /// Bytes of memory this tensor refers to.
    pub fn nbytes(&self) -> usize {
        self.data.len() + self.offsets.as_ref().map_or(0, |o| o.len() * 8)
    }

    /// The `i`-th string of a `Bytes` tensor.
    pub fn string(&self, i: usize) -> Option<&[u8]> {
        let o = self.offsets.as_ref()?;
        let (a, b) = (*o.get(i)? as usize, *o.get(i + 1)? as usize);
        Some(&self.data[a..b])
    }

    /// A copy of the values as a typed vector (checks the dtype).
    pub fn to_vec<T: Scalar>(&self) -> Result<Vec<T>> {
        self.check_dtype::<T>()?;
        let n = self.len();
        let mut out = Vec::<T>::with_capacity(n);
        // SAFETY: the buffer holds exactly n values of T (checked at construction); the copy is
        // bytewise, so the source alignment does not matter.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.data.as_ptr(),
                out.as_mut_ptr() as *mut u8,
                n * std::mem::size_of::<T>(),
            );
            out.set_len(n);
        }
        Ok(out)
    }

    /// The values as a typed slice, when the buffer is suitably aligned (it is for buffers that
    /// stokehold allocates); `None` when it is not.
    pub fn as_slice<T: Scalar>(&self) -> Result<Option<&[T]>> {
        self.check_dtype::<T>()?;
        let p = self.data.as_ptr();
        if !(p as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Ok(None);
        }
        // SAFETY: aligned, and the buffer holds exactly len() values of T.
        Ok(Some(unsafe {
            std::slice::from_raw_parts(p as *const T, self.len())
        }))
    }

    fn check_dtype<T: Scalar>(&self) -> Result<()> {
        if self.dtype != T::DTYPE {
            return Err(Error::invalid(format!(
                "tensor has dtype {}, asked for {}",
                self.dtype,
                T::DTYPE
            )));
        }
        Ok(())
    }

    /// Bytes in one row (one index along axis 0) of a dense tensor.
    pub fn row_bytes(&self) -> usize {
        self.shape.iter().skip(1).product::<usize>() * self.dtype.size().unwrap_or(0)
    }

    /// Rows `start..end` along axis 0, as a zero-copy view.
    pub fn slice_rows(&self, start: usize, end: usize) -> Result<Tensor> {
        let rows = *self
            .shape
            .first()
            .ok_or_else(|| Error::invalid("cannot slice a scalar"))?;
        if start > end || end > rows {
            return Err(Error::invalid(format!(
                "row range {start}..{end} outside 0..{rows}"
            )));
        }
        let mut shape = self.shape.clone();
        shape[0] = end - start;
        match &self.offsets {
            None => {
                let rb = self.row_bytes();
                Ok(Tensor {
                    shape,
                    data: self.data.slice(start * rb..end * rb),
                    ..self.clone()
                })
            }
            Some(off) => {
                let per_row: usize = self.shape.iter().skip(1).product();
                let (a, b) = (start * per_row, end * per_row);
                let base = off[a];
                let offsets: Arc<[u64]> = off[a..=b].iter().map(|o| o - base).collect();
                let data = self.data.slice(base as usize..off[b] as usize);
                Tensor::strings_from_parts(shape, data, offsets)
            }
        }
    }

    /// Row `i` along axis 0 as a zero-copy view of shape `shape[1..]` (one element of a batch; a
    /// bytes tensor's row shares the data, with its own offsets); `None` for a scalar or a row
    /// past the end.
    pub fn row_view(&self, i: usize) -> Option<Tensor> {
        let (&rows, inner) = self.shape.split_first()?;
        if i >= rows {
            return None;
        }
        let (data, offsets) = match &self.offsets {
            None => {
                let rb = self.row_bytes();
                (self.data.slice(i * rb..(i + 1) * rb), None)
            }
            // The row's strings share the data; only their offsets are rebased to it.
            Some(off) => {
                let per_row: usize = inner.iter().product();
                let off = off.get(i * per_row..=(i + 1) * per_row)?;
                let (start, end) = (off[0], off[per_row]);
                let data = self.data.slice(start as usize..end as usize);
                (data, Some(off.iter().map(|o| o - start).collect()))
            }
        };
        Some(Tensor {
            dtype: self.dtype,
            shape: inner.to_vec(),
            data,
            offsets,
        })
    }

    /// The same data with another shape of equal element count.
    pub fn reshape(&self, shape: Vec<usize>) -> Result<Tensor> {
        if shape.iter().product::<usize>() != self.len() {
            return Err(Error::invalid(format!(
                "cannot reshape {:?} to {shape:?}",
                self.shape
            )));
        }
        Ok(Tensor {
            shape,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_mismatch_is_rejected() {
        let e = Tensor::new(DType::F32, vec![3], Bytes::from(vec![0u8; 8])).unwrap_err();
        assert!(e.to_string().contains("needs 12 bytes"), "{e}");
    }

    #[test]
    fn a_bytes_row_view_shares_the_data_and_rebases_its_offsets() {
        let t = Tensor::strings(&["a", "bcd", "", "ef", "g", "hij"]);
        let r = t.row_view(1).unwrap();
        assert_eq!((r.shape(), r.string(0)), (&[][..], Some(&b"bcd"[..])));
        assert_eq!(
            r.data().as_ptr(),
            t.data()[1..].as_ptr(),
            "a view, not a copy"
        );
        let m = t.reshape(vec![3, 2]).unwrap();
        let r = m.row_view(1).unwrap();
        assert_eq!(r.shape(), &[2]);
        assert_eq!(
            (r.string(0), r.string(1)),
            (Some(&b""[..]), Some(&b"ef"[..]))
        );
        assert!(m.row_view(3).is_none() && Tensor::scalar(1i64).row_view(0).is_none());
    }

    #[test]
    fn strings_slice_and_read() {
        let t = Tensor::strings(&["a", "bcd", "", "ef"]);
        let s = t.slice_rows(1, 3).unwrap();
        assert_eq!(s.shape(), &[2]);
        assert_eq!(s.string(0), Some(&b"bcd"[..]));
        assert_eq!(s.string(1), Some(&b""[..]));
    }

    #[test]
    fn typed_views() {
        let t = Tensor::from_vec(vec![4], vec![1i64, 2, 3, 4]).unwrap();
        assert_eq!(t.as_slice::<i64>().unwrap().unwrap(), &[1, 2, 3, 4]);
        assert!(t.to_vec::<f32>().is_err());
        assert_eq!(t.reshape(vec![2, 2]).unwrap().shape(), &[2, 2]);
    }
}

//! Conversions between numpy and the core element model, zero-copy where the memory allows.
//!
//! In: a C-contiguous, native-endian numpy array becomes a [`Tensor`] whose [`Bytes`] owns a
//! reference to the array ([`ArrayOwner`]): no copy, and the array stays alive as long as any
//! tensor, slice or dataset refers to it. Out: a tensor becomes a numpy array made by numpy's C
//! API (`PyArray_NewFromDescr`, through the `numpy` crate) over the tensor's memory, with a
//! [`TensorBuf`] as its base that keeps the memory alive: one call per array, no copy.
//!
//! Why not the buffer protocol: the wheel targets the stable ABI of Python 3.9 (abi3-py39), and
//! `Py_buffer` (both `PyObject_GetBuffer` and `__getbuffer__`) is part of the stable ABI only from
//! Python 3.11. numpy's C API is numpy's own and works on every Python and numpy version.

use bytes::{Bytes, BytesMut};
use numpy::npyffi::{
    self, npy_intp, NpyTypes, NPY_ARRAY_ALIGNED, NPY_ARRAY_C_CONTIGUOUS, NPY_ARRAY_WRITEABLE,
    NPY_TYPES, PY_ARRAY_API,
};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use stokehold_core::{stack, DType, Error, Example, PadValue, Ragged, Tensor, Value};

use crate::errors::to_pyerr;

static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static RAGGED: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static BFLOAT16: PyOnceLock<Option<Py<PyAny>>> = PyOnceLock::new();
static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    NUMPY
        .get_or_try_init(py, || Ok(py.import("numpy")?.unbind()))
        .map(|m| m.bind(py))
}

/// `numpy.asarray`, looked up once (it runs once per feature of every element).
fn asarray(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    ASARRAY
        .get_or_try_init(py, || Ok(numpy(py)?.getattr("asarray")?.unbind()))
        .map(|m| m.bind(py))
}

/// The Python `stokehold.Ragged` class (imported lazily: the package imports this module).
fn ragged_class(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    RAGGED
        .get_or_try_init(py, || {
            Ok(py.import("stokehold.ragged")?.getattr("Ragged")?.unbind())
        })
        .map(|m| m.bind(py))
}

/// `ml_dtypes.bfloat16` when installed; bf16 tensors come out as raw uint16 bits otherwise.
fn bfloat16(py: Python<'_>) -> Option<&Bound<'_, PyAny>> {
    BFLOAT16
        .get_or_init(py, || {
            py.import("ml_dtypes")
                .and_then(|m| m.getattr("bfloat16"))
                .ok()
                .map(Bound::unbind)
        })
        .as_ref()
        .map(|t| t.bind(py))
}

fn invalid(py: Python<'_>, msg: String) -> PyErr {
    to_pyerr(py, Error::invalid(msg), None)
}

/// Keeps a numpy array alive while Rust reads its memory.
struct ArrayOwner {
    _array: Py<PyAny>,
    ptr: *const u8,
    len: usize,
}

// SAFETY: the pointer is into memory owned by `_array` (kept alive by the reference, and numpy
// refuses to resize an array that has other references); `Py<PyAny>` itself is Send + Sync.
unsafe impl Send for ArrayOwner {}
// SAFETY: as for Send; the memory is only read through `as_ref`, never written.
unsafe impl Sync for ArrayOwner {}

impl AsRef<[u8]> for ArrayOwner {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: see the Send impl; `len` is the array's `nbytes`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// A Python value (numpy array, scalar, bytes, str, nested list) as a tensor.
///
/// Numeric arrays that are C-contiguous and native-endian are not copied; others are copied
/// once by numpy. `S`/`U`/object arrays become [`DType::Bytes`] (str is UTF-8 encoded).
pub fn py_to_tensor(py: Python<'_>, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    match plain_array(py, obj, Small::Share)? {
        Some(t) => Ok(t),
        None => general_tensor(py, name, obj),
    }
}

/// A Python `bool`, `int`, `float`, `bytes` or `str` as numpy makes it (bool, int64, float64; a
/// bytes scalar, str UTF-8 encoded), without numpy: a map returning a label as a plain number
/// went down the general path, about 8 us an element where the whole sequential map of an array
/// costs about 1 us. `None` for anything else, and for an int outside int64 (numpy's rules for
/// those are the general path's).
fn python_scalar(obj: &Bound<'_, PyAny>) -> Option<Tensor> {
    let text = |b: &[u8]| {
        let data = Bytes::copy_from_slice(b);
        Tensor::strings_from_parts(vec![], data, vec![0, b.len() as u64].into()).ok()
    };
    if let Ok(b) = obj.cast_exact::<PyBytes>() {
        text(b.as_bytes())
    } else if let Ok(s) = obj.cast_exact::<PyString>() {
        text(s.to_cow().ok()?.as_bytes())
    } else if let Ok(b) = obj.cast_exact::<PyBool>() {
        Some(Tensor::scalar(b.is_true()))
    } else if let Ok(i) = obj.cast_exact::<PyInt>() {
        i.extract::<i64>().ok().map(Tensor::scalar)
    } else if let Ok(f) = obj.cast_exact::<PyFloat>() {
        Some(Tensor::scalar(f.value()))
    } else {
        None
    }
}

/// A Python scalar ([`python_scalar`]) or a numeric numpy scalar ([`numpy_scalar`]) as a 0-d
/// tensor; `None` for anything else.
fn scalar(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<Tensor>> {
    match python_scalar(obj) {
        Some(t) => Ok(Some(t)),
        None => numpy_scalar(py, obj),
    }
}

/// `numpy.asarray` of Python values (not an array), keeping bytes and str exactly: numpy would
/// make fixed-width `S`/`U` arrays of them, which drop trailing NUL bytes and characters
/// (`np.asarray([b"a\0"])[0] == b"a"`), so those become object arrays of the values themselves.
/// Also says whether numpy found the values rectangular (an object array of values that were not
/// all bytes or str is not: rows of different lengths, or other objects).
fn values_to_array<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, bool)> {
    let arr = asarray(py)?.call1((obj,))?;
    let kind = arr.cast::<PyUntypedArray>()?.dtype().kind();
    match kind {
        b'S' | b'U' => {
            let kw = [("dtype", "object")].into_py_dict(py)?;
            Ok((asarray(py)?.call((obj,), Some(&kw))?, true))
        }
        k => Ok((arr, k != b'O')),
    }
}

/// [`py_to_tensor`] for what [`plain_array`] declined: anything numpy can make an array of.
fn general_tensor(py: Python<'_>, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    if let Some(t) = scalar(py, obj)? {
        return Ok(t);
    }
    let arr = if obj.is_instance_of::<PyUntypedArray>() {
        obj.clone()
    } else {
        // A numpy scalar, a nested list, ...: the array numpy makes of it is ours alone, so a
        // plain one is read as any map result is (small ones copied).
        let arr = values_to_array(py, obj)?.0;
        if let Some(t) = plain_array(py, &arr, Small::Copy)? {
            return Ok(t);
        }
        arr
    };
    let (kind, shape) = {
        let a = arr.cast::<PyUntypedArray>()?;
        (a.dtype().kind(), a.shape().to_vec())
    };
    if matches!(kind, b'S' | b'U' | b'O') {
        return strings(py, name, &arr, shape);
    }
    // Byte-swapped or not C-contiguous: numpy makes the copy, which is ours alone and plain.
    let mut arr = arr;
    let dt = arr.getattr("dtype")?;
    if !dt.getattr("isnative")?.is_truthy()? {
        arr = arr.call_method1("astype", (dt.call_method1("newbyteorder", ("=",))?,))?;
    }
    if !arr.cast::<PyUntypedArray>()?.is_c_contiguous() {
        arr = arr.call_method1("copy", ("C",))?;
    }
    if let Some(t) = plain_array(py, &arr, Small::Copy)? {
        return Ok(t);
    }
    // What plain_array does not read: dtypes numpy names but has no type code of ours for
    // (bfloat16), unaligned memory.
    let dname: String = dt.getattr("name")?.extract()?;
    let dtype: DType = dname.parse().map_err(|e: Error| {
        let m = match e {
            Error::InvalidArgument(m) => m,
            other => other.to_string(),
        };
        invalid(py, format!("feature {name:?}: {m}"))
    })?;
    let len: usize = arr.getattr("nbytes")?.extract()?;
    let data = if len == 0 {
        Bytes::new()
    } else {
        let ptr: usize = arr
            .getattr("__array_interface__")?
            .get_item("data")?
            .get_item(0)?
            .extract()?;
        Bytes::from_owner(ArrayOwner {
            _array: arr.unbind(),
            ptr: ptr as *const u8,
            len,
        })
    };
    Tensor::new(dtype, shape, data).map_err(|e| to_pyerr(py, e, None))
}

/// The common case of [`py_to_tensor`] without a Python attribute read: a C-contiguous, aligned,
/// native-endian numeric array, read through numpy's C struct (the `numpy` crate's accessors,
/// right for numpy 1 and 2). A Python map function's result goes through here for every
/// element; `__array_struct__` made and freed a capsule for each (about 10 % of a sequential map
/// of a constant, `perf record`), the general path reads about ten attributes. `None` sends
/// anything else (not an array, byte-swapped, strided, strings, bfloat16, ...) down the general
/// path.
fn plain_array(py: Python<'_>, obj: &Bound<'_, PyAny>, small: Small) -> PyResult<Option<Tensor>> {
    let Ok(arr) = obj.cast::<PyUntypedArray>() else {
        return Ok(None);
    };
    let wanted = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED;
    // SAFETY: `arr` is an ndarray (the cast checked it), so its object is numpy's array struct.
    let (flags, data) = unsafe {
        let a = &*arr.as_array_ptr();
        (a.fields.flags, a.fields.data)
    };
    let dt = arr.dtype();
    if flags & wanted != wanted || dt.is_native_byteorder() == Some(false) {
        return Ok(None);
    }
    let (kind, size) = (dt.kind(), dt.itemsize());
    let Some(dtype) = numeric_dtype(kind, size) else {
        return Ok(None);
    };
    let shape = arr.shape().to_vec();
    let len = shape.iter().product::<usize>() * size;
    let data = if len == 0 {
        Bytes::new()
    } else if small == Small::Copy && len <= SMALL_COPY {
        // SAFETY: `data` is the array's memory, `len` (its nbytes) bytes, C-contiguous.
        Bytes::copy_from_slice(unsafe { std::slice::from_raw_parts(data as *const u8, len) })
    } else {
        Bytes::from_owner(ArrayOwner {
            _array: obj.clone().unbind(),
            ptr: data as *const u8,
            len,
        })
    };
    Tensor::new(dtype, shape, data)
        .map(Some)
        .map_err(|e| to_pyerr(py, e, None))
}

/// Our numeric dtype of numpy's kind and item size (`b'f'`, 4: float32); `None` for kinds we
/// have no dtype of (strings, complex, datetimes, records, bfloat16).
fn numeric_dtype(kind: u8, size: usize) -> Option<DType> {
    DType::ALL.iter().copied().find(|d| {
        d.numpy_typestr().is_some_and(|t| {
            let t = t.as_bytes();
            t[1] == kind && usize::from(t[2] - b'0') == size
        })
    })
}

/// A numpy scalar of a numeric dtype (`np.int64(3)`, `np.float32(x)`, and what arithmetic on a
/// 0-d array gives, `e["label"] + 1`) as a 0-d tensor of its dtype, its value read through numpy's
/// C API. It went down the general path, `numpy.asarray` and back: a map returning one such
/// label ran at half the rate of one returning a Python int. `None` for anything else (not a
/// numpy scalar; `np.bytes_`, `np.str_`, datetimes: the general path's).
fn numpy_scalar(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<Tensor>> {
    // SAFETY: numpy's C API under the GIL: its scalar base type, an isinstance check against it,
    // and for a numpy scalar a new reference to its dtype (null with a Python error set, which
    // `from_owned_ptr_or_err` takes).
    let descr = unsafe {
        let generic = npyffi::get_type_object(py, NpyTypes::PyGenericArrType_Type);
        if pyo3::ffi::PyObject_TypeCheck(obj.as_ptr(), generic) == 0 {
            return Ok(None);
        }
        let d = PY_ARRAY_API.PyArray_DescrFromScalar(py, obj.as_ptr());
        Bound::from_owned_ptr_or_err(py, d.cast())?.cast_into::<PyArrayDescr>()?
    };
    let size = descr.itemsize();
    let Some(dtype) = numeric_dtype(descr.kind(), size) else {
        return Ok(None);
    };
    let mut value = [0u8; 16];
    if size > value.len() {
        return Ok(None);
    }
    // SAFETY: `obj` is a numpy scalar of a fixed-size numeric dtype of `size` (<= 16) bytes:
    // numpy copies its value (native byte order) into `value`.
    unsafe { PY_ARRAY_API.PyArray_ScalarAsCtype(py, obj.as_ptr(), value.as_mut_ptr().cast()) };
    Tensor::new(dtype, vec![], Bytes::copy_from_slice(&value[..size]))
        .map(Some)
        .map_err(|e| to_pyerr(py, e, None))
}

fn strings(
    py: Python<'_>,
    name: &str,
    arr: &Bound<'_, PyAny>,
    shape: Vec<usize>,
) -> PyResult<Tensor> {
    let flat = arr.call_method1("reshape", (-1,))?.call_method0("tolist")?;
    let list = flat.cast::<PyList>()?;
    let mut data = Vec::new();
    let mut offsets = Vec::with_capacity(list.len() + 1);
    offsets.push(0u64);
    for (i, item) in list.iter().enumerate() {
        if let Ok(b) = item.cast::<PyBytes>() {
            data.extend_from_slice(b.as_bytes());
        } else if let Ok(s) = item.cast::<PyString>() {
            data.extend_from_slice(s.to_cow()?.as_bytes());
        } else {
            return Err(invalid(
                py,
                format!(
                    "feature {name:?}: an object array must hold bytes or str, item {i} is {}; \
                     convert numeric object arrays with .astype(...) first",
                    item.get_type().name()?
                ),
            ));
        }
        offsets.push(data.len() as u64);
    }
    Tensor::strings_from_parts(shape, Bytes::from(data), offsets.into())
        .map_err(|e| to_pyerr(py, e, None))
}

/// A Python value as a feature value: a `stokehold.Ragged` or anything [`py_to_tensor`] takes.
fn py_to_value(
    py: Python<'_>,
    name: &str,
    obj: &Bound<'_, PyAny>,
    small: Small,
) -> PyResult<Value> {
    if let Some(t) = plain_array(py, obj, small)? {
        return Ok(Value::Tensor(t));
    }
    // A Python or numpy scalar before the `Ragged` check (an isinstance against a Python
    // class), which such values, common in a map's result, never pass.
    if let Some(t) = scalar(py, obj)? {
        return Ok(Value::Tensor(t));
    }
    if obj.is_instance(ragged_class(py)?)? {
        let values = py_to_tensor(py, name, &obj.getattr("values")?)?;
        let splits: Vec<u64> = numpy(py)?
            .call_method1("asarray", (obj.getattr("row_splits")?,))?
            .call_method0("tolist")?
            .extract()?;
        let r = Ragged::new(values, splits.into()).map_err(|e| to_pyerr(py, e, None))?;
        return Ok(Value::Ragged(r));
    }
    Ok(Value::Tensor(general_tensor(py, name, obj)?))
}

/// A column of `from_arrays`: an array `[N, ...]` (zero-copy), a `Ragged`, or a list of `N` rows
/// (stacked into one arena: dense when all rows have one shape, ragged when only axis 0 differs).
pub fn py_to_column(py: Python<'_>, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    let items: Vec<Bound<'_, PyAny>> = if let Ok(l) = obj.cast::<PyList>() {
        l.iter().collect()
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        return py_to_value(py, name, obj, Small::Share);
    };
    if items.is_empty() {
        return Err(invalid(
            py,
            format!("feature {name:?} is an empty list; pass an array of shape [0, ...] for an empty column"),
        ));
    }
    let any_array = items.iter().any(|i| i.is_instance_of::<PyUntypedArray>());
    if !any_array {
        // Plain Python values: numpy builds the column in one go when it is rectangular.
        if let Ok((arr, true)) = values_to_array(py, obj) {
            return Ok(Value::Tensor(py_to_tensor(py, name, &arr)?));
        }
    }
    let rows = items
        .iter()
        .map(|i| py_to_tensor(py, name, i))
        .collect::<PyResult<Vec<_>>>()?;
    let name2 = name.to_string();
    let stacked = py.detach(move || {
        let refs: Vec<&Tensor> = rows.iter().collect();
        stack("from_arrays", &name2, &refs)
    });
    stacked.map_err(|e| to_pyerr(py, e, None))
}

/// Where a tensor's memory comes from on the Python side.
enum Keep {
    /// Memory shared with other tensors (a dataset's arena, an input array): read-only.
    Shared(#[allow(dead_code)] Bytes),
    /// Memory only this buffer refers to (a fresh batch): writable.
    Owned(BytesMut),
}

impl Drop for Keep {
    /// A batch that numpy owned alone goes back to the pool of large buffers when numpy frees
    /// it (`stokehold_core::alloc::reuse`), so the next batch of its size is written into
    /// pages already faulted in instead of fresh ones the kernel must zero.
    fn drop(&mut self) {
        // Smaller ones are not pooled: let them go as they are, without taking the Vec back.
        if let Keep::Owned(m) = self {
            if m.capacity() >= stokehold_core::alloc::HUGE_PAGE_MIN {
                stokehold_core::alloc::reuse(Vec::from(std::mem::take(m)));
            }
        }
    }
}

/// What keeps a tensor's memory alive under the numpy array made over it: the array's `base`.
///
/// Arrays that share memory with the dataset (elements of an in-memory dataset, arrays handed in)
/// are read-only, so that writing to one cannot change the cache; memory that nothing else refers
/// to (a fresh batch) is writable.
#[pyclass(frozen, module = "stokehold._native")]
pub struct TensorBuf {
    _keep: Keep,
    ptr: usize,
}

#[pymethods]
impl TensorBuf {
    /// Address of the first byte (to check zero-copy in tests).
    #[getter]
    fn address(&self) -> usize {
        self.ptr
    }
}

/// numpy's dtype for `d` (bfloat16's bits as uint16; bytes as objects).
fn descr(py: Python<'_>, d: DType) -> PyResult<Bound<'_, PyArrayDescr>> {
    Ok(match d {
        DType::Bool => PyArrayDescr::of::<bool>(py),
        DType::U8 => PyArrayDescr::of::<u8>(py),
        DType::I8 => PyArrayDescr::of::<i8>(py),
        DType::U16 | DType::BF16 => PyArrayDescr::of::<u16>(py),
        DType::I16 => PyArrayDescr::of::<i16>(py),
        DType::U32 => PyArrayDescr::of::<u32>(py),
        DType::I32 => PyArrayDescr::of::<i32>(py),
        DType::U64 => PyArrayDescr::of::<u64>(py),
        DType::I64 => PyArrayDescr::of::<i64>(py),
        DType::F32 => PyArrayDescr::of::<f32>(py),
        DType::F64 => PyArrayDescr::of::<f64>(py),
        DType::Bytes => PyArrayDescr::object(py),
        DType::F16 => {
            // SAFETY: numpy's C API, under the GIL: a new reference to a dtype, or null with a
            // Python error set, which `from_owned_ptr_or_err` takes.
            unsafe {
                let p = PY_ARRAY_API.PyArray_DescrFromType(py, NPY_TYPES::NPY_HALF as c_int);
                Bound::from_owned_ptr_or_err(py, p.cast())?
            }
            .cast_into()?
        }
    })
}

/// A C-order numpy array of `shape` over `data`, or over memory numpy allocates when `data` is
/// null (zeroed for the object dtype; always writeable). Over `data`, the caller sets a base that
/// keeps it alive.
///
/// # Safety
/// `data`, when not null, points to `shape`'s elements of `descr`'s type, valid (and, when
/// `writeable`, writable by numpy) for as long as the base set on the array lives.
unsafe fn new_array<'py>(
    py: Python<'py>,
    descr: Bound<'py, PyArrayDescr>,
    shape: &[usize],
    data: *mut c_void,
    writeable: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let mut dims: Vec<npy_intp> = shape.iter().map(|&d| d as npy_intp).collect();
    // Over null data numpy reads any nonzero flags as "Fortran order" (a [2, 3] array of bytes
    // made with the flags below came out transposed); 0 is C order, and writeable.
    let flags = match (data.is_null(), writeable) {
        (true, _) => 0,
        (false, true) => NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_WRITEABLE,
        (false, false) => NPY_ARRAY_C_CONTIGUOUS,
    };
    // SAFETY: numpy's C API under the GIL; `NewFromDescr` steals the reference to `descr` and
    // computes the strides, contiguity and alignment flags itself.
    unsafe {
        let subtype = npyffi::get_type_object(py, NpyTypes::PyArray_Type);
        let arr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            subtype,
            descr.into_ptr().cast(),
            dims.len() as c_int,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            data,
            flags,
            std::ptr::null_mut(),
        );
        Bound::from_owned_ptr_or_err(py, arr)
    }
}

/// A tensor as a numpy array: zero-copy for numeric dtypes (read-only when the memory is
/// shared), an object array of `bytes` for [`DType::Bytes`].
pub fn tensor_to_py(py: Python<'_>, t: Tensor) -> PyResult<Bound<'_, PyAny>> {
    to_py(py, t, Small::Share)
}

/// [`tensor_to_py`], with numeric tensors of at most [`SMALL_COPY`] bytes copied when `small`
/// says so.
fn to_py(py: Python<'_>, t: Tensor, small: Small) -> PyResult<Bound<'_, PyAny>> {
    let dtype = t.dtype();
    if dtype == DType::Bytes {
        // SAFETY: null data: numpy allocates the array's memory itself (zeroed: object arrays
        // need it), so no base is needed.
        let arr =
            unsafe { new_array(py, descr(py, dtype)?, t.shape(), std::ptr::null_mut(), true)? };
        // SAFETY: `arr` is a C-order object array just made: its data is `n` object slots.
        let slots = unsafe {
            (*arr.as_ptr().cast::<npyffi::PyArrayObject>())
                .fields
                .data
                .cast::<*mut pyo3::ffi::PyObject>()
        };
        let n: usize = t.shape().iter().product();
        for i in 0..n {
            let b = PyBytes::new(py, t.string(i).unwrap_or(b""));
            // SAFETY: `i < n`; the slot was zeroed (it holds no reference to drop) and takes the
            // new `bytes`'s one reference.
            unsafe { *slots.add(i) = b.into_ptr() };
        }
        return Ok(arr);
    }
    let arr = if small == Small::Copy && t.data().len() <= SMALL_COPY {
        small_array(py, &t)?
    } else {
        shared_array(py, t)?
    };
    if dtype == DType::BF16 {
        if let Some(bf) = bfloat16(py) {
            return arr.call_method1("view", (bf,));
        }
    }
    Ok(arr)
}

/// Arrays of at most this many bytes are copied across the boundary of a per-element Python
/// call (a map's input and its result, [`Small::Copy`]) instead of shared: a copy this small costs
/// less than the object that keeps shared memory alive (a `TensorBuf` base one way; the other, a
/// reference to the numpy array, whose release, off the GIL, waits in pyo3's pool for the next
/// time it is held). Everywhere else ([`Small::Share`]: datasets' elements and batches, columns
/// given to `from_arrays`) arrays are shared whatever their size.
const SMALL_COPY: usize = 1024;

/// Whether arrays of at most [`SMALL_COPY`] bytes are copied or shared.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Small {
    Share,
    Copy,
}

/// A numeric tensor copied into a new numpy array, read-only (as [`shared_array`] makes it)
/// unless the tensor held the only reference to its memory.
fn small_array<'py>(py: Python<'py>, t: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    let bytes = t.data();
    let writeable = bytes.is_unique();
    // SAFETY: null data: numpy allocates the array's memory itself (C order, `shape`'s elements
    // of the dtype: exactly `bytes.len()` bytes for a dense numeric tensor), which the copy then
    // fills in full.
    unsafe {
        let arr = new_array(
            py,
            descr(py, t.dtype())?,
            t.shape(),
            std::ptr::null_mut(),
            true,
        )?;
        let a = &mut *arr.as_ptr().cast::<npyffi::PyArrayObject>();
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), a.fields.data.cast::<u8>(), bytes.len());
        if !writeable {
            a.fields.flags &= !NPY_ARRAY_WRITEABLE;
        }
        Ok(arr)
    }
}

/// A numeric tensor as an array over its own memory (no copy), kept alive by the array's base.
fn shared_array(py: Python<'_>, t: Tensor) -> PyResult<Bound<'_, PyAny>> {
    let dtype = t.dtype();
    let shape = t.shape().to_vec();
    let data = t.data().clone();
    drop(t);
    let (keep, ptr, writeable) = match data.try_into_mut() {
        Ok(mut m) => {
            let p = m.as_mut_ptr() as usize;
            (Keep::Owned(m), p, true)
        }
        Err(b) => {
            let p = b.as_ptr() as usize;
            (Keep::Shared(b), p, false)
        }
    };
    let base = Bound::new(py, TensorBuf { _keep: keep, ptr })?;
    // SAFETY: `ptr` is the tensor's memory, `shape`'s elements of `dtype`; `base` owns it and
    // becomes the array's base (SetBaseObject steals that reference, also on failure), so the
    // memory lives as long as the array. Memory shared with others is exported read-only.
    let arr = unsafe {
        let arr = new_array(py, descr(py, dtype)?, &shape, ptr as *mut c_void, writeable)?;
        if PY_ARRAY_API.PyArray_SetBaseObject(py, arr.as_ptr().cast(), base.into_ptr()) < 0 {
            return Err(PyErr::fetch(py));
        }
        arr
    };
    Ok(arr)
}

/// A feature value as Python: a numpy array, or a `stokehold.Ragged`.
fn value_to_py(py: Python<'_>, v: Value, small: Small) -> PyResult<Bound<'_, PyAny>> {
    match v {
        Value::Tensor(t) => to_py(py, t, small),
        Value::Ragged(r) => {
            let values = r.values().clone();
            let splits: Vec<i64> = r.splits().iter().map(|&s| s as i64).collect();
            drop(r);
            let n = splits.len();
            let splits = Tensor::from_vec(vec![n], splits).map_err(|e| to_pyerr(py, e, None))?;
            ragged_class(py)?.call1((tensor_to_py(py, values)?, tensor_to_py(py, splits)?))
        }
    }
}

/// Feature names met lately, both ways, so that a map function's input and result dicts do not
/// convert every name of every element (a `String` and an `Arc<str>` in, a new `str` out: about
/// 7 % of a sequential map of a constant, `perf record`). A pipeline has few names and they come
/// back as the same objects: a dict literal's keys are one constant `str` at every call. At most
/// [`NAMES_MAX`] each way; names beyond convert each time. Only used with the GIL held and never
/// locked across a call into Python, so the lock is neither contended nor re-entered.
struct Names {
    /// A dict key met (held, so that its address is not reused by another object) and its name.
    keys: Vec<(Py<PyString>, Arc<str>)>,
    /// A name and its `str`.
    strs: Vec<(Arc<str>, Py<PyString>)>,
}

const NAMES_MAX: usize = 64;

static NAMES: Mutex<Names> = Mutex::new(Names {
    keys: Vec::new(),
    strs: Vec::new(),
});

fn names() -> MutexGuard<'static, Names> {
    NAMES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A dict key as a feature name.
fn key_name(key: &Bound<'_, PyAny>) -> PyResult<Arc<str>> {
    let known = names()
        .keys
        .iter()
        .find(|(k, _)| k.as_ptr() == key.as_ptr())
        .map(|(_, n)| n.clone());
    if let Some(n) = known {
        return Ok(n);
    }
    let s = key
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err("feature names must be str"))?;
    let n: Arc<str> = s.to_cow()?.into();
    let mut cache = names();
    if cache.keys.len() < NAMES_MAX {
        cache.keys.push((s.clone().unbind(), n.clone()));
    }
    Ok(n)
}

/// A feature name as a `str`.
fn name_str<'py>(py: Python<'py>, name: &Arc<str>) -> Bound<'py, PyString> {
    let known = names()
        .strs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, s)| s.clone_ref(py));
    if let Some(s) = known {
        return s.into_bound(py);
    }
    let s = PyString::new(py, name);
    let mut cache = names();
    if cache.strs.len() < NAMES_MAX {
        cache.strs.push((name.clone(), s.clone().unbind()));
    }
    s
}

/// An example as a dict of feature name to numpy array / `Ragged`, in feature order.
pub fn example_to_dict(py: Python<'_>, e: Example) -> PyResult<Bound<'_, PyDict>> {
    to_dict(py, e, Small::Share)
}

/// [`example_to_dict`] for the input of a Python function called once per element (a map):
/// small arrays are copies (see [`SMALL_COPY`]), read-only when the memory was shared.
pub fn map_input(py: Python<'_>, e: Example) -> PyResult<Bound<'_, PyDict>> {
    to_dict(py, e, Small::Copy)
}

fn to_dict(py: Python<'_>, e: Example, small: Small) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    // Taken out of the example, not cloned: memory only these values refer to stays unique.
    for (n, v) in e.into_features() {
        d.set_item(name_str(py, &n), value_to_py(py, v, small)?)?;
    }
    Ok(d)
}

/// A mapping of feature name to value (a map function's result) as an example; small arrays are
/// copied (see [`SMALL_COPY`]), larger ones shared.
pub fn dict_to_example(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Example> {
    let d = obj.cast::<PyDict>().map_err(|_| {
        let got = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        // tf.data users return tuples: say how to name the parts.
        let hint = if got == "tuple" || got == "list" {
            ": elements are dicts of named features, e.g. return {\"x\": x, \"y\": y}"
        } else {
            ""
        };
        PyTypeError::new_err(format!(
            "expected a dict of feature name -> array, got {got}{hint}"
        ))
    })?;
    let mut e = Example::new();
    for (k, v) in d.iter() {
        let name = key_name(&k)?;
        let value = py_to_value(py, &name, &v, Small::Copy)?;
        e.insert_shared(name, value);
    }
    Ok(e)
}

/// A padding value from Python as core's [`PadValue`], kept exact: a bool, an int (numpy's
/// too; `int64` or `uint64` range), a float, `bytes` or `str` (UTF-8). Converting it to a
/// feature's dtype is core's rule (`stokehold_core::cast::fill_value`).
pub(crate) fn pad_value(op: &str, v: &Bound<'_, PyAny>) -> PyResult<PadValue> {
    if v.is_instance_of::<PyBool>() {
        return Ok(PadValue::Bool(v.extract()?));
    }
    if v.is_instance_of::<PyBytes>() {
        return Ok(PadValue::Bytes(v.extract()?));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(PadValue::Bytes(v.extract::<String>()?.into_bytes()));
    }
    if !v.is_instance_of::<PyFloat>() && v.hasattr("__index__")? {
        if let Ok(i) = v.extract::<i64>() {
            return Ok(PadValue::Int(i));
        }
        return match v.extract::<u64>() {
            Ok(u) => Ok(PadValue::UInt(u)),
            Err(_) => Err(to_pyerr(
                v.py(),
                Error::invalid(format!(
                    "{op}: padding value {v} is outside the int64 and uint64 ranges"
                )),
                None,
            )),
        };
    }
    match v.extract::<f64>() {
        Ok(f) => Ok(PadValue::Float(f)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{op}: a padding value must be a number, a bool, bytes or str, not {}",
            v.get_type().name()?
        ))),
    }
}

/// `padding_values` as `padded_batch` and `bucket_by_sequence_length` take them: a value per
/// feature and one for the rest (`None`: each dtype's zero), each through [`pad_value`].
pub(crate) fn pad_values(
    op: &str,
    values: HashMap<String, Bound<'_, PyAny>>,
    default: Option<Bound<'_, PyAny>>,
) -> PyResult<(HashMap<String, PadValue>, Option<PadValue>)> {
    let values = values
        .into_iter()
        .map(|(k, v)| Ok((k, pad_value(op, &v)?)))
        .collect::<PyResult<_>>()?;
    Ok((values, default.map(|d| pad_value(op, &d)).transpose()?))
}

//! Typed options at the Python/Rust boundary, in one place: [`Wrap<T>`] converts a str argument
//! of a native method into its io option type through that type's one parser
//! ([`stokehold_io::options::Choice`]), as polars' `Wrap<T>` does. The Python layer passes the
//! value through unchecked; the spellings and the error live in io.

use pyo3::prelude::*;
use pyo3::types::PyString;
use stokehold_io::options::Choice;

/// An option spelled as a str in Python (`dtype="float32"`, `pad_mode="reflect"`): a native
/// method takes `dtype: Wrap<SampleType>` as a typed keyword argument. A value that is not a str
/// is pyo3's `TypeError` at extraction; a misspelling is kept and raised by [`Wrap::get`], which
/// knows the op's name (extraction does not), as `InvalidArgumentError`:
/// `load_audio(dtype='int8'): must be one of 'float32', 'int16'`.
pub struct Wrap<T>(Result<T, String>);

impl<T: Choice> Wrap<T> {
    /// The option, or the error naming `op`, the argument, the value and the valid spellings.
    pub fn get(self, op: &str) -> stokehold_core::Result<T> {
        self.0.or_else(|s| T::parse(op, &s))
    }
}

/// `Option<Wrap<T>>` (Python's `None` or a spelling) as `Option<T>`, naming `op` on a bad one.
pub fn get_opt<T: Choice>(w: Option<Wrap<T>>, op: &str) -> stokehold_core::Result<Option<T>> {
    w.map(|w| w.get(op)).transpose()
}

impl<T: Choice> FromPyObject<'_, '_> for Wrap<T> {
    type Error = PyErr;

    fn extract(ob: Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        let s = ob.cast::<PyString>()?;
        let s = s.to_cow()?;
        Ok(Wrap(T::from_name(&s).ok_or_else(|| s.into_owned())))
    }
}

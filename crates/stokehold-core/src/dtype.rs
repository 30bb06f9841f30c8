//! Element types of tensors.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The element type of a [`Tensor`](crate::Tensor).
///
/// `Bytes` tensors hold variable-length byte strings (one per element of the shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// One byte, 0 or 1.
    Bool,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 64-bit integer.
    U64,
    /// Signed 64-bit integer.
    I64,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
    /// Variable-length byte strings.
    Bytes,
}

impl DType {
    /// All dtypes, in a stable order (used by encoders that store a dtype as a byte).
    pub const ALL: [DType; 14] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::U32,
        DType::I32,
        DType::U64,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::Bytes,
    ];

    /// Size of one element in bytes; `None` for [`DType::Bytes`].
    pub fn size(self) -> Option<usize> {
        Some(match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
            DType::Bytes => return None,
        })
    }

    /// The numpy name of this dtype (`"float32"`, ...); bfloat16 and bytes have none in numpy
    /// proper and are named `"bfloat16"` and `"bytes"`.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::U16 => "uint16",
            DType::I16 => "int16",
            DType::U32 => "uint32",
            DType::I32 => "int32",
            DType::U64 => "uint64",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::Bytes => "bytes",
        }
    }

    /// numpy's array-interface type string (`"<f4"`, `"|u1"`, ...), also the `.npy` header descr;
    /// `None` where numpy has no such type (bfloat16, bytes).
    pub fn numpy_typestr(self) -> Option<&'static str> {
        Some(match self {
            DType::Bool => "|b1",
            DType::U8 => "|u1",
            DType::I8 => "|i1",
            DType::U16 => "<u2",
            DType::I16 => "<i2",
            DType::U32 => "<u4",
            DType::I32 => "<i4",
            DType::U64 => "<u8",
            DType::I64 => "<i8",
            DType::F16 => "<f2",
            DType::F32 => "<f4",
            DType::F64 => "<f8",
            DType::BF16 | DType::Bytes => return None,
        })
    }

    /// Stable one-byte code (position in [`DType::ALL`]).
    pub fn code(self) -> u8 {
        DType::ALL.iter().position(|d| *d == self).expect("in ALL") as u8
    }

    /// Inverse of [`DType::code`].
    pub fn from_code(code: u8) -> Option<DType> {
        DType::ALL.get(code as usize).copied()
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;

    /// Accepts numpy names and the short Rust names (`f32`, `i64`, `u8`, ...).
    fn from_str(s: &str) -> Result<Self> {
        let d = match s {
            "bool" => DType::Bool,
            "uint8" | "u8" => DType::U8,
            "int8" | "i8" => DType::I8,
            "uint16" | "u16" => DType::U16,
            "int16" | "i16" => DType::I16,
            "uint32" | "u32" => DType::U32,
            "int32" | "i32" => DType::I32,
            "uint64" | "u64" => DType::U64,
            "int64" | "i64" => DType::I64,
            "float16" | "f16" | "half" => DType::F16,
            "bfloat16" | "bf16" => DType::BF16,
            "float32" | "f32" | "float" => DType::F32,
            "float64" | "f64" | "double" => DType::F64,
            "bytes" | "string" | "str" => DType::Bytes,
            other => {
                return Err(Error::invalid(format!(
                    "unknown dtype {other:?}; expected one of {}",
                    DType::ALL
                        .iter()
                        .map(|d| d.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        };
        Ok(d)
    }
}

/// A Rust scalar type that has a [`DType`].
pub trait Scalar: Copy + Send + Sync + 'static {
    /// The dtype of this scalar.
    const DTYPE: DType;
}

macro_rules! scalar {
    ($($t:ty => $d:ident),*) => { $(impl Scalar for $t { const DTYPE: DType = DType::$d; })* };
}
scalar!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64,
        i64 => I64, half::f16 => F16, half::bf16 => BF16, f32 => F32, f64 => F64, bool => Bool);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            assert_eq!(DType::from_code(d.code()), Some(d));
        }
    }

    #[test]
    fn unknown_dtype_is_a_clear_error() {
        let e = "complex128".parse::<DType>().unwrap_err().to_string();
        assert!(e.contains("complex128") && e.contains("float32"), "{e}");
    }
}

//! Numeric conversions between dtypes: `cast` and padding values.
//!
//! Integers convert through `i128` with Rust `as` semantics (wrapping); floats to integers
//! saturate (NaN becomes 0); everything else goes through `f64`.

use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{aligned_bytes, Tensor};

#[derive(Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

fn read(dtype: DType, b: &[u8], i: usize) -> Num {
    macro_rules! at {
        ($t:ty) => {{
            const N: usize = std::mem::size_of::<$t>();
            <$t>::from_le_bytes(b[i * N..(i + 1) * N].try_into().unwrap())
        }};
    }
    match dtype {
        DType::Bool | DType::U8 => Num::Int(b[i] as i128),
        DType::I8 => Num::Int(b[i] as i8 as i128),
        DType::U16 => Num::Int(at!(u16) as i128),
        DType::I16 => Num::Int(at!(i16) as i128),
        DType::U32 => Num::Int(at!(u32) as i128),
        DType::I32 => Num::Int(at!(i32) as i128),
        DType::U64 => Num::Int(at!(u64) as i128),
        DType::I64 => Num::Int(at!(i64) as i128),
        DType::F16 => Num::Float(f16::from_bits(at!(u16)).to_f64()),
        DType::BF16 => Num::Float(bf16::from_bits(at!(u16)).to_f64()),
        DType::F32 => Num::Float(at!(f32) as f64),
        DType::F64 => Num::Float(at!(f64)),
        DType::Bytes => unreachable!("checked by callers"),
    }
}

fn write(dtype: DType, v: Num, out: &mut Vec<u8>) {
    // Integers wrap (`as` from i128); floats saturate to the target type and NaN becomes 0.
    macro_rules! put {
        ($t:ty) => {{
            let x: $t = match v {
                Num::Int(i) => i as $t,
                Num::Float(f) => f as $t,
            };
            out.extend_from_slice(&x.to_le_bytes());
        }};
    }
    let f = match v {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    };
    match dtype {
        DType::Bool => out.push((f != 0.0) as u8),
        DType::U8 => put!(u8),
        DType::I8 => put!(i8),
        DType::U16 => put!(u16),
        DType::I16 => put!(i16),
        DType::U32 => put!(u32),
        DType::I32 => put!(i32),
        DType::U64 => put!(u64),
        DType::I64 => put!(i64),
        DType::F16 => out.extend_from_slice(&f16::from_f64(f).to_bits().to_le_bytes()),
        DType::BF16 => out.extend_from_slice(&bf16::from_f64(f).to_bits().to_le_bytes()),
        DType::F32 => put!(f32),
        DType::F64 => put!(f64),
        DType::Bytes => unreachable!("checked by callers"),
    }
}

/// A padding value as the user gave it (an int, a float, a bool or a byte string), converted to a
/// feature's dtype exactly or refused: tf.data converts a padding value to the component's dtype
/// the same way (`2**53 + 1` pads an int64 feature with itself, `2.7` does not pad an int32 one).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum PadValue {
    /// `True` / `False`.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An integer above `i64::MAX` (a uint64 value).
    UInt(u64),
    /// A float.
    Float(f64),
    /// A byte string (pads bytes features).
    Bytes(Vec<u8>),
}

impl std::fmt::Display for PadValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PadValue::Bool(b) => write!(f, "{b}"),
            PadValue::Int(i) => write!(f, "{i}"),
            PadValue::UInt(u) => write!(f, "{u}"),
            PadValue::Float(x) => write!(f, "{x}"),
            PadValue::Bytes(b) => write!(f, "b{:?}", String::from_utf8_lossy(b)),
        }
    }
}

/// The range of an integer dtype, as `i128`.
fn int_range(dtype: DType) -> Option<(i128, i128)> {
    Some(match dtype {
        DType::Bool => (0, 1),
        DType::U8 => (0, u8::MAX as i128),
        DType::I8 => (i8::MIN as i128, i8::MAX as i128),
        DType::U16 => (0, u16::MAX as i128),
        DType::I16 => (i16::MIN as i128, i16::MAX as i128),
        DType::U32 => (0, u32::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        DType::U64 => (0, u64::MAX as i128),
        DType::I64 => (i64::MIN as i128, i64::MAX as i128),
        _ => return None,
    })
}

/// One element of `dtype` holding `value` (`None`: the dtype's zero, `b""` for bytes), or an
/// error naming `op` and `what` when the value does not convert exactly: a fraction or an
/// out-of-range integer into an integer dtype, a number into bytes, a string into a number.
pub fn fill_value(
    op: &str,
    what: impl std::fmt::Display,
    dtype: DType,
    value: Option<&PadValue>,
) -> Result<Vec<u8>> {
    let refuse = |v: &PadValue| {
        Error::invalid(format!(
            "{op}: padding value {v} does not convert to {dtype} exactly ({what})"
        ))
    };
    let num = match value {
        None if dtype == DType::Bytes => return Ok(Vec::new()),
        None => Num::Int(0),
        Some(PadValue::Bytes(b)) if dtype == DType::Bytes => return Ok(b.clone()),
        Some(v @ PadValue::Bytes(_)) => return Err(refuse(v)),
        Some(v) if dtype == DType::Bytes => return Err(refuse(v)),
        Some(PadValue::Bool(b)) => Num::Int(*b as i128),
        Some(PadValue::Int(i)) => Num::Int(*i as i128),
        Some(PadValue::UInt(u)) => Num::Int(*u as i128),
        Some(v @ PadValue::Float(x)) => match int_range(dtype) {
            // An integral float (`0.0`, `-1.0`) is that integer; a fraction or NaN is refused.
            Some(_) if x.fract() == 0.0 && x.abs() < 2f64.powi(64) => Num::Int(*x as i128),
            Some(_) => return Err(refuse(v)),
            None => Num::Float(*x),
        },
    };
    if let (Num::Int(i), Some((lo, hi))) = (num, int_range(dtype)) {
        if i < lo || i > hi {
            return Err(refuse(value.expect("a zero is in every range")));
        }
    }
    let mut out = Vec::with_capacity(8);
    write(dtype, num, &mut out);
    Ok(out)
}

/// `t` converted to `dtype`.
pub fn cast(t: &Tensor, dtype: DType) -> Result<Tensor> {
    if t.dtype() == dtype {
        return Ok(t.clone());
    }
    if t.dtype() == DType::Bytes || dtype == DType::Bytes {
        return Err(Error::invalid(format!(
            "cannot cast {} to {dtype}",
            t.dtype()
        )));
    }
    let n = t.len();
    if t.dtype() == DType::I16 && dtype == DType::F32 {
        // The audio fast path: avoids the generic per-element dispatch.
        let src = t.data();
        let v: Vec<f32> = src
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]) as f32)
            .collect();
        return Tensor::from_vec(t.shape().to_vec(), v);
    }
    let mut out = Vec::with_capacity(n * dtype.size().unwrap());
    let src = t.data();
    for i in 0..n {
        write(dtype, read(t.dtype(), src, i), &mut out);
    }
    Tensor::new(dtype, t.shape().to_vec(), aligned_bytes(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_between_kinds() {
        let t = Tensor::from_vec(vec![3], vec![-1i32, 2, 300]).unwrap();
        assert_eq!(
            cast(&t, DType::U8).unwrap().to_vec::<u8>().unwrap(),
            vec![255, 2, 44]
        );
        assert_eq!(
            cast(&t, DType::F64).unwrap().to_vec::<f64>().unwrap(),
            vec![-1.0, 2.0, 300.0]
        );
        let f = Tensor::from_vec(vec![2], vec![1.7f32, -1e10]).unwrap();
        assert_eq!(
            cast(&f, DType::I16).unwrap().to_vec::<i16>().unwrap(),
            vec![1, i16::MIN]
        );
        let a = Tensor::from_vec(vec![2], vec![-5i16, 7]).unwrap();
        assert_eq!(
            cast(&a, DType::F32).unwrap().to_vec::<f32>().unwrap(),
            vec![-5.0, 7.0]
        );
        assert!(cast(&Tensor::strings(&["x"]), DType::F32).is_err());
    }

    #[test]
    fn fill_values() {
        let fill = |d, v: PadValue| fill_value("pad", "x", d, Some(&v));
        assert_eq!(
            fill(DType::I16, PadValue::Float(-1.0)).unwrap(),
            (-1i16).to_le_bytes()
        );
        assert_eq!(
            fill(DType::F32, PadValue::Float(0.5)).unwrap(),
            0.5f32.to_le_bytes()
        );
        // Exact: an int64 past 2**53 stays itself; a fraction, an out-of-range integer or a
        // string into a number is refused, naming the value and the dtype.
        let big = (1i64 << 53) + 1;
        assert_eq!(
            fill(DType::I64, PadValue::Int(big)).unwrap(),
            big.to_le_bytes()
        );
        assert_eq!(
            fill(DType::U64, PadValue::UInt(u64::MAX)).unwrap(),
            u64::MAX.to_le_bytes()
        );
        let e = fill(DType::I32, PadValue::Float(2.7))
            .unwrap_err()
            .to_string();
        assert!(e.contains("2.7") && e.contains("int32"), "{e}");
        assert!(fill(DType::U8, PadValue::Int(-1)).is_err());
        assert!(fill(DType::I8, PadValue::Int(128)).is_err());
        assert!(fill(DType::F32, PadValue::Bytes(b"x".to_vec())).is_err());
        assert!(fill(DType::Bytes, PadValue::Int(0)).is_err());
        assert_eq!(
            fill(DType::Bytes, PadValue::Bytes(b"<pad>".to_vec())).unwrap(),
            b"<pad>"
        );
        assert_eq!(fill_value("pad", "x", DType::Bytes, None).unwrap(), b"");
        assert_eq!(
            fill_value("pad", "x", DType::F64, None).unwrap(),
            0f64.to_le_bytes()
        );
    }
}

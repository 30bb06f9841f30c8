//! Numeric conversions between dtypes: `cast` and padding values.
//!
//! Integers convert through `i128` with Rust `as` semantics (wrapping); floats to integers
//! saturate (NaN becomes 0); everything else goes through `f64`.

use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{vec_to_bytes, Tensor};

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

/// The bytes of `value` as one element of `dtype` (empty for bytes).
pub fn fill_value(dtype: DType, value: f64) -> Vec<u8> {
    if dtype == DType::Bytes {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(8);
    let v = if value.fract() == 0.0 && value.abs() < 1e18 {
        Num::Int(value as i128)
    } else {
        Num::Float(value)
    };
    write(dtype, v, &mut out);
    out
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
    // Keep the new buffer 8-byte aligned for typed views.
    let words: Vec<u64> = out
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();
    let len = out.len();
    let bytes = vec_to_bytes(words).slice(0..len);
    Tensor::new(dtype, t.shape().to_vec(), bytes)
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
        assert_eq!(fill_value(DType::I16, -1.0), (-1i16).to_le_bytes().to_vec());
        assert_eq!(fill_value(DType::F32, 0.5), 0.5f32.to_le_bytes().to_vec());
    }
}

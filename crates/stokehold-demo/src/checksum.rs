//! A fast, stable 64-bit checksum of an example (names, dtypes, shapes, splits and bytes), so two
//! runs can be compared by printing one number per batch instead of the batch.

use stokehold_core::rng::mix;
use stokehold_core::{Example, Tensor, Value};

fn fold_bytes(mut h: u64, bytes: &[u8]) -> u64 {
    h = mix(h ^ bytes.len() as u64);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        h = mix(h ^ u64::from_le_bytes(c.try_into().expect("8 bytes")));
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    mix(h ^ u64::from_le_bytes(tail))
}

fn fold_u64s(h: u64, values: impl IntoIterator<Item = u64>) -> u64 {
    values.into_iter().fold(h, |h, v| mix(h ^ v))
}

fn fold_tensor(mut h: u64, t: &Tensor) -> u64 {
    h = fold_bytes(h, t.dtype().to_string().as_bytes());
    h = fold_u64s(h, t.shape().iter().map(|&d| d as u64));
    if let Some(offsets) = t.offsets() {
        h = fold_u64s(h, offsets.iter().copied());
    }
    fold_bytes(h, t.data())
}

/// The checksum of `e`: equal for equal examples, different (with overwhelming probability) for
/// any change of a name, dtype, shape, row split or byte.
pub fn checksum(e: &Example) -> u64 {
    e.iter().fold(mix(0x5704_ce5c), |h, (name, value)| {
        let h = fold_bytes(h, name.as_bytes());
        match value {
            Value::Tensor(t) => fold_tensor(mix(h ^ 1), t),
            Value::Ragged(r) => {
                let h = fold_u64s(mix(h ^ 2), r.splits().iter().copied());
                fold_tensor(h, r.values())
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(v: Vec<i16>) -> Example {
        Example::new().with("audio", Tensor::from_vec(vec![v.len()], v).unwrap())
    }

    #[test]
    fn equal_examples_equal_sums() {
        assert_eq!(checksum(&ex(vec![1, 2, 3])), checksum(&ex(vec![1, 2, 3])));
    }

    #[test]
    fn any_change_changes_the_sum() {
        let base = checksum(&ex((0..101).collect()));
        let mut v: Vec<i16> = (0..101).collect();
        v[100] = 7; // in the tail that does not fill a whole word
        assert_ne!(base, checksum(&ex(v)));
        assert_ne!(base, checksum(&ex((0..100).collect())));
        let renamed = Example::new().with("x", ex((0..101).collect()).remove("audio").unwrap());
        assert_ne!(base, checksum(&renamed));
        let reshaped = Tensor::from_vec(vec![1, 101], (0..101).collect::<Vec<i16>>()).unwrap();
        assert_ne!(base, checksum(&Example::new().with("audio", reshaped)));
    }
}

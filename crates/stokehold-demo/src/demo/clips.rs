//! Synthetic audio clips, generated straight into one ragged int16 arena.
//!
//! Every clip is a seeded tone plus noise: its length and content are pure functions of
//! (seed, clip index), so two runs with one seed cache the same bytes. The arena is allocated once,
//! at its final size, and filled in place: no per-clip buffer is ever allocated, so the memory the
//! cache takes is the samples themselves plus one split per clip.

use indicatif::ProgressBar;
use stokehold_core::rng::Rng;
use stokehold_core::{Ragged, Result, Tensor};

/// Key parts that keep the length and content streams apart from each other and from the
/// pipeline's own seeds.
const LENGTH_STREAM: u64 = 0x1e;
const CONTENT_STREAM: u64 = 0xc0;

/// Clip lengths in samples, uniform in `min_samples..=max_samples`, seeded by `seed`.
pub fn lengths(clips: usize, min_samples: u64, max_samples: u64, seed: u64) -> Vec<u64> {
    let span = max_samples.saturating_sub(min_samples) + 1;
    (0..clips as u64)
        .map(|i| min_samples + Rng::keyed(seed, &[LENGTH_STREAM, i]).below(span))
        .collect()
}

/// Builds the ragged column of all clips: one `[total]` int16 values tensor and `clips + 1` row
/// splits. Advances `pb` by one per clip.
pub fn generate(lengths: &[u64], seed: u64, sample_rate: u32, pb: &ProgressBar) -> Result<Ragged> {
    let total: u64 = lengths.iter().sum();
    let mut arena: Vec<i16> = Vec::with_capacity(total as usize);
    let mut splits = Vec::with_capacity(lengths.len() + 1);
    splits.push(0u64);
    let table = sine_table();
    for (clip, &len) in lengths.iter().enumerate() {
        fill_clip(
            &mut arena,
            &table,
            len as usize,
            seed,
            clip as u64,
            sample_rate,
        );
        splits.push(arena.len() as u64);
        pb.inc(1);
    }
    // `from_vec` hands the vector over without copying; the capacity was exact, so nothing is
    // wasted either.
    let values = Tensor::from_vec(vec![arena.len()], arena)?;
    Ragged::new(values, splits.into())
}

/// One period of a sine at about a quarter of full scale, read by a phase accumulator.
const TABLE_BITS: u32 = 10;

fn sine_table() -> Vec<i16> {
    let n = 1usize << TABLE_BITS;
    (0..n)
        .map(|i| (8000.0 * (std::f64::consts::TAU * i as f64 / n as f64).sin()) as i16)
        .collect()
}

/// Appends one clip of `len` samples: a tone between 80 and 1000 Hz plus noise.
fn fill_clip(
    arena: &mut Vec<i16>,
    table: &[i16],
    len: usize,
    seed: u64,
    clip: u64,
    sample_rate: u32,
) {
    let mut rng = Rng::keyed(seed, &[CONTENT_STREAM, clip]);
    let freq = 80.0 + rng.next_f64() * 920.0;
    // A 32-bit phase accumulator: integer adds only, so every sample is independent of float
    // rounding along the clip and the loop has no long dependency chain.
    let inc = (freq / f64::from(sample_rate) * 4_294_967_296.0) as u32;
    let mut phase = rng.next_u64() as u32;
    let mut noise = 0u64;
    arena.extend((0..len).map(|i| {
        if i % 4 == 0 {
            noise = rng.next_u64();
        }
        let n = ((noise >> ((i % 4) * 16)) as u16 as i16) >> 6;
        let v = table[(phase >> (32 - TABLE_BITS)) as usize];
        phase = phase.wrapping_add(inc);
        v.saturating_add(n)
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_seeded_and_in_range() {
        let a = lengths(200, 80_000, 2_880_000, 7);
        assert_eq!(a, lengths(200, 80_000, 2_880_000, 7));
        assert_ne!(a, lengths(200, 80_000, 2_880_000, 8));
        assert!(a.iter().all(|&l| (80_000..=2_880_000).contains(&l)));
        assert_eq!(lengths(5, 10, 10, 1), vec![10; 5]);
    }

    #[test]
    fn arena_holds_every_clip_back_to_back() {
        let lens = lengths(6, 100, 900, 3);
        let pb = ProgressBar::hidden();
        let col = generate(&lens, 3, 16_000, &pb).unwrap();
        assert_eq!(col.rows(), 6);
        assert_eq!(pb.position(), 6);
        let total: u64 = lens.iter().sum();
        assert_eq!(col.values().shape(), &[total as usize]);
        assert_eq!(col.values().data().len() as u64, total * 2);
        for (i, &l) in lens.iter().enumerate() {
            assert_eq!(col.row(i).unwrap().shape(), &[l as usize]);
        }
        // Same seed, same bytes; another seed, other bytes.
        assert_eq!(col, generate(&lens, 3, 16_000, &pb).unwrap());
        assert_ne!(
            col.values(),
            generate(&lens, 4, 16_000, &pb).unwrap().values()
        );
    }

    #[test]
    fn clips_are_not_silent() {
        let col = generate(&[16_000], 1, 16_000, &ProgressBar::hidden()).unwrap();
        let v = col.values().to_vec::<i16>().unwrap();
        let peak = v.iter().map(|s| s.unsigned_abs()).max().unwrap();
        assert!(peak > 4000, "peak {peak}");
    }
}

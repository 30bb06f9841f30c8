//! Keyed randomness: every random choice is a pure function of (seed, stream, epoch, index), so
//! results never depend on which thread ran an element or in what order. [`stream_key`] is the
//! one derivation; [`Stream`] names each op family's stream; [`derive_seed`] gives an op without
//! a seed of its own one from a dataset-level seed.
//!
//! The algorithms are ours and pinned by golden tests, so outputs stay stable across releases of
//! any dependency. [`Permutation`] is a keyed bijection on `0..n` (a Feistel network with cycle
//! walking) used for global shuffles: O(1) memory whatever `n`, O(1) expected time per index.
//!
//! ```
//! use stokehold_core::rng::{stream_key, Permutation, Stream};
//! let p = Permutation::new(10, stream_key(42, Stream::Shuffle, &[0]));
//! let mut seen: Vec<u64> = (0..10).map(|i| p.apply(i)).collect();
//! seen.sort();
//! assert_eq!(seen, (0..10).collect::<Vec<_>>());
//! ```

use std::cell::RefCell;

/// The SplitMix64 finaliser: a fast, well-mixed 64-bit hash.
#[inline(always)]
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes a seed and a list of integers into one key: a chain in which each part is absorbed
/// into a state that already depends on the seed and on every part before it, at its position.
/// No two inputs play the same role (the earlier `mix(seed) ^ mix(part)` made seed 0 at epoch 1
/// equal seed 1 at epoch 0); for a fixed prefix, distinct last parts give distinct keys (each
/// step is a bijection of the part). Used for draws (through [`stream_key`]) and for stable
/// names and fingerprints.
pub fn key(seed: u64, parts: &[u64]) -> u64 {
    key_of(seed, parts.iter().copied())
}

fn key_of(seed: u64, parts: impl IntoIterator<Item = u64>) -> u64 {
    let mut h = mix(seed ^ 0x5851_F42D_4C95_7F2D);
    let mut n = 0u64;
    for p in parts {
        n += 1;
        h = mix(h.rotate_left(23) ^ mix(p.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15))));
    }
    mix(h ^ n)
}

/// The random streams of stokehold's ops: every op family draws from its own, so equal seeds
/// given to different kinds of op are independent (a crop and a flip with `seed=0` are not
/// correlated), while the same kind of op over two features with one seed draws the same numbers
/// (an image and its mask flipped together). Values are part of every golden output: never
/// reuse or renumber one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum Stream {
    /// `shuffle` (global permutation per epoch).
    Shuffle = 0x5348_0001,
    /// `shuffle(buffer_size=...)`.
    ShuffleBuffer = 0x5348_0002,
    /// `window_shuffle`: the order of the windows.
    WindowOrder = 0x5348_0003,
    /// `window_shuffle`: the order within a window.
    WithinWindow = 0x5348_0004,
    /// `window_shuffle`: where the short window goes.
    ShortWindow = 0x5348_0005,
    /// `sample_from_datasets`.
    Mix = 0x5348_0006,
    /// `random_crop` (tensor).
    Crop = 0x5348_0007,
    /// `random_flip_left_right`.
    Flip = 0x5348_0008,
    /// `random_resized_crop`.
    ResizedCrop = 0x5348_0009,
    /// `color_jitter`.
    ColorJitter = 0x5348_000a,
    /// `decode_audio` / `load_audio` with a random window.
    AudioWindow = 0x5348_000b,
    /// `random_map` (Python functions get a Philox key from it).
    RandomMap = 0x5348_000c,
    /// `pack`'s shuffled bins.
    Pack = 0x5348_000d,
    /// Writers' shuffled order (`write_shards(shuffle_seed=...)`).
    WriteOrder = 0x5348_000e,
    /// A seed derived from a dataset-level `seed()` for an op given none
    /// ([`derive_seed`]).
    Derived = 0x5348_0010,
}

impl Stream {
    /// Every stream (for tests that check them pairwise).
    pub const ALL: [Stream; 15] = [
        Stream::Shuffle,
        Stream::ShuffleBuffer,
        Stream::WindowOrder,
        Stream::WithinWindow,
        Stream::ShortWindow,
        Stream::Mix,
        Stream::Crop,
        Stream::Flip,
        Stream::ResizedCrop,
        Stream::ColorJitter,
        Stream::AudioWindow,
        Stream::RandomMap,
        Stream::Pack,
        Stream::WriteOrder,
        Stream::Derived,
    ];
}

/// The one keyed derivation of a random draw: the key of (seed, stream, parts...), parts being
/// the epoch and the element's index (or a step) for per-element draws.
pub fn stream_key(seed: u64, stream: Stream, parts: &[u64]) -> u64 {
    key_of(
        seed,
        std::iter::once(stream as u64).chain(parts.iter().copied()),
    )
}

/// The seed of an op given no seed of its own, under a dataset-level seed: keyed by the op's
/// kind and by where it sits in the plan (the data fingerprint of its input), so two random ops
/// of one pipeline draw from different streams and a rebuilt pipeline draws the same ones.
/// 63 bits, as seeds are everywhere.
pub fn derive_seed(dataset_seed: u64, op: &str, input_fingerprint: u64) -> u64 {
    let op_tag = key_of(0, op.bytes().map(u64::from));
    stream_key(dataset_seed, Stream::Derived, &[op_tag, input_fingerprint]) >> 1
}

/// A small deterministic generator (SplitMix64) seeded from a key.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for (seed, parts...), for draws that belong to no op (tests, fixtures).
    pub fn keyed(seed: u64, parts: &[u64]) -> Self {
        Rng {
            state: key(seed, parts),
        }
    }

    /// The generator of element `index` of epoch `epoch` in `stream` under `seed`: what every
    /// per-element random op draws from.
    pub fn for_element(seed: u64, stream: Stream, epoch: u64, index: u64) -> Self {
        Rng::for_stream(seed, stream, &[epoch, index])
    }

    /// The generator of (seed, stream, parts...) ([`stream_key`]).
    pub fn for_stream(seed: u64, stream: Stream, parts: &[u64]) -> Self {
        Rng {
            state: stream_key(seed, stream, parts),
        }
    }

    /// The generator's full state (for checkpoints).
    pub fn state(&self) -> u64 {
        self.state
    }

    /// A generator resumed from [`Rng::state`].
    pub fn from_state(state: u64) -> Self {
        Rng { state }
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift with rejection); `n` must be > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "Rng::below(0)");
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Fisher-Yates shuffle in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// A keyed pseudo-random bijection on `0..n`, keyed by a [`stream_key`].
///
/// A balanced Feistel network permutes `0..2^(2k)` (the smallest even power of two >= n); values
/// that land at or past `n` are encrypted again ("cycle walking") until they fall inside, which
/// keeps the map a bijection on `0..n`. Since `2^(2k) < 4n`, the expected number of walks is < 4.
/// Six rounds of SplitMix mixing give orders indistinguishable from uniform for shuffling
/// purposes (see the shuffle-quality bench).
#[derive(Clone, Copy, Debug)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; Permutation::ROUNDS],
}

impl Permutation {
    const ROUNDS: usize = 6;

    /// The permutation of `n` items keyed by `key` (a [`stream_key`]).
    pub fn new(n: u64, key: u64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mut keys = [0u64; Self::ROUNDS];
        for (r, k) in keys.iter_mut().enumerate() {
            *k = self::key(key, &[r as u64]);
        }
        Permutation { n, half_bits, keys }
    }

    /// [`Permutation::new`] through a small cache per thread: iterators ask for the same few
    /// (n, key) pairs element after element (a windowed shuffle alternates two), and
    /// building one costs 42 hashes (a global-shuffle epoch of 1M page-cached 1 KiB shard records
    /// ran at 0.88 M/s building it per call, 1.17 M/s cached; `shard_read_bench`).
    pub fn cached(n: u64, key: u64) -> Self {
        const SLOTS: usize = 4;
        type Slots = ([Option<((u64, u64), Permutation)>; SLOTS], usize);
        thread_local! {
            static CACHE: RefCell<Slots> = const { RefCell::new(([None; SLOTS], 0)) };
        }
        let k = (n, key);
        CACHE.with_borrow_mut(|(slots, next)| {
            if let Some((_, p)) = slots.iter().flatten().find(|(key, _)| *key == k) {
                return *p;
            }
            let p = Self::new(n, key);
            slots[*next] = Some((k, p));
            *next = (*next + 1) % SLOTS;
            p
        })
    }

    /// Number of items permuted.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// True for the empty permutation.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn encrypt(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = (x >> self.half_bits, x & mask);
        for k in &self.keys {
            let f = mix(r ^ k) & mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half_bits) | r
    }

    /// The image of `i` (which must be < n).
    pub fn apply(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        let mut x = self.encrypt(i);
        while x >= self.n {
            x = self.encrypt(x);
        }
        x
    }

    /// [`Permutation::apply`] of each of `xs` (each < n), appended to `out`, in order.
    ///
    /// Values go through in chunks of [`LANES`]: each round runs over the whole chunk (the
    /// rounds of one value depend on each other, those of different values do not, so the loops
    /// vectorize), and the values that landed at or past n are packed to the front and encrypted
    /// again, with no branch per value. The earlier form, eight values in flight with a branch
    /// per value and round trip, took 30-32 ns a value for n = 400k (2.6 encryptions each), this
    /// one 11.5-12 (`batch_speed` example); a global-shuffle epoch of 1 KiB shard records had
    /// spent 9 % of its worker's time there (`shard_read_bench`, `perf record`).
    pub fn apply_many(&self, xs: &[u64], out: &mut Vec<u64>) {
        debug_assert!(xs.iter().all(|&x| x < self.n));
        let base = out.len();
        out.extend_from_slice(xs);
        for chunk in out[base..].chunks_mut(LANES) {
            self.apply_chunk(chunk);
        }
    }

    /// [`Permutation::apply`] of each value of `chunk` (at most [`LANES`]), in place.
    fn apply_chunk(&self, chunk: &mut [u64]) {
        let mut vals = [0u64; LANES];
        // Where each walking value goes in `chunk`.
        let mut at = [0u16; LANES];
        let mut live = chunk.len();
        vals[..live].copy_from_slice(chunk);
        for (i, a) in at.iter_mut().enumerate() {
            *a = i as u16;
        }
        while live > 0 {
            self.encrypt_lanes(&mut vals[..live]);
            // Every value is written out; one still at or past n is kept (packed to the front)
            // and overwritten once it lands.
            let mut kept = 0;
            for i in 0..live {
                let v = vals[i];
                chunk[usize::from(at[i])] = v;
                vals[kept] = v;
                at[kept] = at[i];
                kept += usize::from(v >= self.n);
            }
            live = kept;
        }
    }

    /// [`Permutation::encrypt`] of each of `vals` (at most [`LANES`]) in place, with the
    /// widest vectors the CPU has: a 64-bit multiply per lane needs AVX-512 (AVX2 builds it of
    /// 32-bit ones), and a wheel built for plain x86-64 has neither unless asked at run time.
    /// For n = 400k, the `batch_speed` example's loop took 25.6 ns a value plain, 15.2 with AVX2,
    /// 12.1 with AVX-512 (a scratch build in which this function called one form; the example
    /// as committed prints the form this CPU is dispatched to).
    fn encrypt_lanes(&self, vals: &mut [u64]) {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512dq") && is_x86_feature_detected!("avx512vl") {
                // SAFETY: the CPU has the features the function is compiled for.
                return unsafe { self.encrypt_lanes_avx512(vals) };
            }
            if is_x86_feature_detected!("avx2") {
                // SAFETY: as above.
                return unsafe { self.encrypt_lanes_avx2(vals) };
            }
        }
        self.encrypt_lanes_plain(vals);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl")]
    fn encrypt_lanes_avx512(&self, vals: &mut [u64]) {
        self.encrypt_lanes_plain(vals);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn encrypt_lanes_avx2(&self, vals: &mut [u64]) {
        self.encrypt_lanes_plain(vals);
    }

    /// Two Feistel rounds in place are `l ^= F(r); r ^= F(l)`; the rounds count is even, so
    /// the halves end where they started. Inlined into each of the vector forms above.
    #[inline(always)]
    fn encrypt_lanes_plain(&self, vals: &mut [u64]) {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = ([0u64; LANES], [0u64; LANES]);
        let (l, r) = (&mut l[..vals.len()], &mut r[..vals.len()]);
        for i in 0..vals.len() {
            (l[i], r[i]) = (vals[i] >> self.half_bits, vals[i] & mask);
        }
        for k in self.keys.chunks_exact(2) {
            for (l, r) in l.iter_mut().zip(r.iter()) {
                *l ^= mix(r ^ k[0]) & mask;
            }
            for (r, l) in r.iter_mut().zip(l.iter()) {
                *r ^= mix(l ^ k[1]) & mask;
            }
        }
        for i in 0..vals.len() {
            vals[i] = (l[i] << self.half_bits) | r[i];
        }
    }
}

// `encrypt_lanes` runs the rounds in pairs.
const _: () = assert!(Permutation::ROUNDS.is_multiple_of(2));

/// Values [`Permutation::apply_many`] encrypts together.
const LANES: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_bijection_for_many_sizes() {
        for n in [1u64, 2, 3, 5, 16, 17, 100, 1000, 4097] {
            let p = Permutation::new(n, key(7, &[3]));
            let mut v: Vec<u64> = (0..n).map(|i| p.apply(i)).collect();
            v.sort_unstable();
            assert_eq!(v, (0..n).collect::<Vec<_>>(), "n={n}");
        }
    }

    #[test]
    fn epochs_and_seeds_differ() {
        let a: Vec<u64> = (0..50)
            .map(|i| Permutation::new(50, stream_key(1, Stream::Shuffle, &[0])).apply(i))
            .collect();
        let b: Vec<u64> = (0..50)
            .map(|i| Permutation::new(50, stream_key(1, Stream::Shuffle, &[1])).apply(i))
            .collect();
        let c: Vec<u64> = (0..50)
            .map(|i| Permutation::new(50, stream_key(2, Stream::Shuffle, &[0])).apply(i))
            .collect();
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn cached_permutations_equal_fresh_ones_whatever_the_order_of_requests() {
        // More distinct triples than cache slots, revisited out of order.
        let triples: Vec<(u64, u64)> = (0..7u64).map(|k| (50 + k, key(k % 3, &[k / 2]))).collect();
        for round in 0..3usize {
            for t in triples.iter().cycle().skip(round * 3).step_by(2).take(20) {
                let (c, f) = (Permutation::cached(t.0, t.1), Permutation::new(t.0, t.1));
                assert!((0..t.0).all(|i| c.apply(i) == f.apply(i)), "{t:?}");
            }
        }
    }

    #[test]
    fn apply_many_equals_apply_for_every_length_and_size() {
        for n in [1u64, 2, 3, 17, 1000, 4097, 200_000] {
            let p = Permutation::new(n, key(9, &[2]));
            for len in [0usize, 1, 7, 8, 9, 63, 300] {
                let xs: Vec<u64> = (0..len as u64).map(|k| (k * 7919 + 3) % n).collect();
                let mut got = vec![u64::MAX];
                p.apply_many(&xs, &mut got);
                let want: Vec<u64> = xs.iter().map(|&x| p.apply(x)).collect();
                assert_eq!(got[1..], want[..], "n={n} len={len}");
            }
        }
    }

    #[test]
    fn every_vector_form_encrypts_as_one_value_at_a_time() {
        for n in [2u64, 1000, 400_000, 1 << 40] {
            let p = Permutation::new(n, key(4, &[1]));
            let xs: Vec<u64> = (0..LANES as u64).map(|k| (k * 7919 + 3) % n).collect();
            let want: Vec<u64> = xs.iter().map(|&x| p.encrypt(x)).collect();
            let mut forms: Vec<(&str, Vec<u64>)> = vec![("plain", xs.clone())];
            p.encrypt_lanes_plain(&mut forms[0].1);
            #[cfg(target_arch = "x86_64")]
            {
                if is_x86_feature_detected!("avx2") {
                    let mut v = xs.clone();
                    // SAFETY: the CPU has AVX2.
                    unsafe { p.encrypt_lanes_avx2(&mut v) };
                    forms.push(("avx2", v));
                }
                if is_x86_feature_detected!("avx512dq") && is_x86_feature_detected!("avx512vl") {
                    let mut v = xs.clone();
                    // SAFETY: the CPU has AVX-512 F, DQ and VL.
                    unsafe { p.encrypt_lanes_avx512(&mut v) };
                    forms.push(("avx512", v));
                }
            }
            for (form, got) in forms {
                assert_eq!(got, want, "{form}, n={n}");
            }
        }
    }

    #[test]
    fn golden_values_are_pinned() {
        // Changing these changes every user's shuffle order: only with a state version bump
        // (`state::STATE_VERSION`).
        let p = Permutation::new(1000, stream_key(42, Stream::Shuffle, &[0]));
        let got: Vec<u64> = (0..5).map(|i| p.apply(i)).collect();
        let mut r = Rng::for_element(42, Stream::Crop, 0, 1);
        let draws: Vec<u64> = (0..3).map(|_| r.below(100)).collect();
        assert_eq!(
            (got, draws),
            (vec![257, 210, 87, 234, 810], vec![21, 34, 82])
        );
    }

    #[test]
    fn seed_and_parts_play_different_roles() {
        assert_ne!(key(0, &[1]), key(1, &[0]));
        assert_ne!(key(3, &[5, 7]), key(3, &[7, 5]));
        assert_ne!(key(3, &[5]), key(3, &[5, 0]));
        for s in Stream::ALL {
            assert_ne!(
                stream_key(0, s, &[1, 2]),
                stream_key(1, s, &[0, 2]),
                "{s:?}"
            );
        }
    }

    /// For seeds 0..99 and epochs 0..99, no two (seed, epoch) pairs share a shuffle order or a
    /// per-element draw (the epoch was once interchangeable with the seed).
    #[test]
    fn every_seed_and_epoch_pair_has_its_own_order_and_draws() {
        let mut orders = std::collections::HashSet::new();
        let mut draws = std::collections::HashSet::new();
        for seed in 0..100u64 {
            for epoch in 0..100u64 {
                let p = Permutation::new(1000, stream_key(seed, Stream::Shuffle, &[epoch]));
                let order: Vec<u64> = (0..1000).map(|i| p.apply(i)).collect();
                assert!(
                    orders.insert(order),
                    "seed {seed} epoch {epoch}: order seen before"
                );
                let d: Vec<u64> = (0..4)
                    .map(|i| Rng::for_element(seed, Stream::RandomMap, epoch, i).next_u64())
                    .collect();
                assert!(
                    draws.insert(d),
                    "seed {seed} epoch {epoch}: draws seen before"
                );
            }
        }
    }

    /// Pearson's r of `xs` and `ys`.
    fn correlation(xs: &[f64], ys: &[f64]) -> f64 {
        let n = xs.len() as f64;
        let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
        let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
        for (x, y) in xs.iter().zip(ys) {
            sxy += (x - mx) * (y - my);
            sxx += (x - mx) * (x - mx);
            syy += (y - my) * (y - my);
        }
        sxy / (sxx * syy).sqrt()
    }

    /// Equal seeds in two streams draw independent numbers: over 10,000 elements the first
    /// draws of every pair of streams correlate with |r| < 0.03, and so do a stream's draws under
    /// seeds 0 and 1.
    #[test]
    fn streams_with_one_seed_are_uncorrelated() {
        let n = 10_000u64;
        let first = |seed: u64, s: Stream| -> Vec<f64> {
            (0..n)
                .map(|i| Rng::for_element(seed, s, 0, i).next_f64())
                .collect()
        };
        let all: Vec<Vec<f64>> = Stream::ALL.iter().map(|&s| first(0, s)).collect();
        for a in 0..all.len() {
            for b in a + 1..all.len() {
                let r = correlation(&all[a], &all[b]);
                assert!(
                    r.abs() < 0.03,
                    "{:?} / {:?}: r = {r}",
                    Stream::ALL[a],
                    Stream::ALL[b]
                );
            }
            let r = correlation(&all[a], &first(1, Stream::ALL[a]));
            assert!(r.abs() < 0.03, "{:?}, seeds 0 / 1: r = {r}", Stream::ALL[a]);
        }
    }

    #[test]
    fn derived_seeds_differ_by_op_and_by_place() {
        let a = derive_seed(5, "random_flip_left_right", 1);
        assert_ne!(a, derive_seed(5, "random_flip_left_right", 2));
        assert_ne!(a, derive_seed(5, "random_crop", 1));
        assert_ne!(a, derive_seed(6, "random_flip_left_right", 1));
        assert_eq!(a, derive_seed(5, "random_flip_left_right", 1));
        assert!(a < 1 << 63);
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut r = Rng::keyed(1, &[]);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[r.below(10) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
    }
}

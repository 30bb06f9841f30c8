//! numpy's legacy `RandomState(seed)`: MT19937 seeded from a 32-bit integer, and the two draws
//! megatron-core's index building makes of it, `shuffle` of a 1-D array (Fisher-Yates from the
//! end, `j = random_interval(i)`) and nothing else. Bit-exact with numpy (checked against numpy's
//! own shuffles in `testdata/tokens/megatron_samples.json`), so that stokehold rebuilds
//! megatron's document and shuffle indices without Python.

/// numpy's legacy MT19937 state (`mt19937_state`: 624 words and a position).
pub struct RandomState {
    key: Box<[u32; 624]>,
    pos: usize,
}

impl RandomState {
    /// `numpy.random.RandomState(seed)` (`mt19937_seed`, Matsumoto and Nishimura's init_genrand).
    pub fn new(seed: u32) -> Self {
        let mut key = Box::new([0u32; 624]);
        let mut s = seed;
        for (i, k) in key.iter_mut().enumerate() {
            *k = s;
            s = 1_812_433_253u32
                .wrapping_mul(s ^ (s >> 30))
                .wrapping_add(i as u32 + 1);
        }
        RandomState { key, pos: 624 }
    }

    fn generate(&mut self) {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        const MATRIX_A: u32 = 0x9908_b0df;
        let k = &mut self.key;
        for i in 0..624 {
            let y = (k[i] & UPPER) | (k[(i + 1) % 624] & LOWER);
            let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
            k[i] = k[(i + 397) % 624] ^ (y >> 1) ^ mag;
        }
        self.pos = 0;
    }

    /// The next 32-bit output (`mt19937_next32`, tempered).
    pub fn next_u32(&mut self) -> u32 {
        if self.pos == 624 {
            self.generate();
        }
        let mut y = self.key[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// Two 32-bit outputs, the first high (`mt19937_next64`).
    fn next_u64(&mut self) -> u64 {
        let hi = self.next_u32() as u64;
        (hi << 32) | self.next_u32() as u64
    }

    /// A uniform integer in `0..=max` by masked rejection (`random_interval`): 32-bit draws while
    /// `max` fits 32 bits, 64-bit ones past it.
    pub fn interval(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        let mask = u64::MAX >> max.leading_zeros();
        if max <= 0xffff_ffff {
            loop {
                let v = self.next_u32() as u64 & mask;
                if v <= max {
                    return v;
                }
            }
        }
        loop {
            let v = self.next_u64() & mask;
            if v <= max {
                return v;
            }
        }
    }

    /// `RandomState.shuffle` of a 1-D array: for `i` from `n - 1` down to 1, swap item `i` with
    /// item `interval(i)`.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.interval(i as u64) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_outputs_match_the_reference_mt19937() {
        // init_genrand(5489), the reference implementation's default seed: its first outputs.
        let mut r = RandomState::new(5489);
        let got: Vec<u32> = (0..3).map(|_| r.next_u32()).collect();
        assert_eq!(got, [3_499_211_612, 581_869_302, 3_890_346_734]);
    }
}

//! Deterministic test data shared by the codec's integration tests.
// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

/// xorshift64: small, seedable, and the same on every platform.
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `len` pseudo-random bytes determined by `seed`.
pub fn data_of(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    (0..len).map(|_| (rng.next() >> 24) as u8).collect()
}

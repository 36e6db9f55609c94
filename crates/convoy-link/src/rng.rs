//! Seeded randomness and exact probabilities.
//!
//! The generator is xoshiro256** seeded through splitmix64, written here so
//! the link's behaviour depends on no external crate's version: a recorded
//! experiment must replay identically years later. Each random process of a
//! link (loss, jitter) owns its own stream, so enabling jitter never shifts
//! the loss pattern.

use crate::error::ConfigError;

/// Stream identifiers: fixed forever, because changing them changes every
/// recorded experiment.
pub(crate) const STREAM_LOSS: u64 = 0x6c6f_7373; // "loss"
pub(crate) const STREAM_JITTER: u64 = 0x6a69_7474; // "jitt"
pub(crate) const STREAM_BACKOFF: u64 = 0x6261_636b; // "back"

/// splitmix64 step: also used to derive independent seeds.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// xoshiro256** (Blackman and Vigna), deterministic from a `u64` seed.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator for `stream` of `seed`; distinct streams are independent.
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut sm = seed ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03);
        let mut s = [0u64; 4];
        for word in &mut s {
            *word = splitmix64(&mut sm);
        }
        // splitmix64 never yields four zero words from one state walk, but the
        // all-zero state is the one state xoshiro cannot leave, so be explicit.
        if s == [0; 4] {
            s[0] = 1;
        }
        Rng { s }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform integer in `0..=max`, by Lemire's multiply-and-reject, so the
    /// result is unbiased and uses integers only (no platform float maths).
    #[inline]
    pub fn uniform_inclusive(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            return self.next_u64();
        }
        let range = max + 1;
        let threshold = range.wrapping_neg() % range;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(range);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// One Bernoulli trial. Always consumes exactly one draw, so the stream's
    /// position depends only on how many trials were made.
    #[inline]
    pub fn chance(&mut self, p: Prob) -> bool {
        (self.next_u64() >> 11) < p.0
    }
}

/// A probability in 53-bit fixed point, so `0` never and `1` always happens,
/// exactly, and comparisons are integer-only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prob(u64);

const PROB_ONE: u64 = 1 << 53;

impl Prob {
    pub const ZERO: Prob = Prob(0);
    pub const ONE: Prob = Prob(PROB_ONE);

    /// `p` must lie in `[0, 1]`; `what` names the parameter in the error.
    pub fn new(p: f64, what: &'static str) -> Result<Prob, ConfigError> {
        if !(0.0..=1.0).contains(&p) {
            return Err(ConfigError::Probability { what, value: p });
        }
        // Multiplying by a power of two is exact; rounding to nearest keeps
        // e.g. 0.5 exactly 2^52.
        Ok(Prob((p * PROB_ONE as f64).round() as u64))
    }

    pub fn as_f64(self) -> f64 {
        self.0 as f64 / PROB_ONE as f64
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_differ_and_repeat() {
        let mut a = Rng::new(7, STREAM_LOSS);
        let mut b = Rng::new(7, STREAM_JITTER);
        let mut c = Rng::new(7, STREAM_LOSS);
        let xa: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xc);
        assert_ne!(xa, xb);
    }

    #[test]
    fn prob_edges_are_exact() {
        let mut r = Rng::new(1, 2);
        for _ in 0..10_000 {
            assert!(r.chance(Prob::ONE));
            assert!(!r.chance(Prob::ZERO));
        }
        assert!(Prob::new(1.5, "p").is_err());
        assert!(Prob::new(-0.1, "p").is_err());
        assert!(Prob::new(f64::NAN, "p").is_err());
        assert_eq!(Prob::new(0.5, "p").unwrap().as_f64(), 0.5);
    }

    #[test]
    fn uniform_covers_range_without_bias() {
        let mut r = Rng::new(3, 4);
        let mut counts = [0u32; 5];
        for _ in 0..50_000 {
            counts[r.uniform_inclusive(4) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        assert_eq!(r.uniform_inclusive(0), 0);
    }
}

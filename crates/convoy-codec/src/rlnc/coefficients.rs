//! Coefficient vectors that expand from a 32-bit seed, so a coded packet
//! names its combination in 4 bytes instead of g.
//!
//! This expansion is part of the wire format: sender and receiver must expand
//! a seed to the same vector forever, so it is specified here rather than
//! borrowed from a PRNG crate whose stream could change between versions.
//! docs/PROTOCOL.md repeats the definition.

/// SplitMix64 (Steele, Lea, Flood 2014): one multiply-xorshift step per 8
/// coefficients, and every seed gives an unrelated stream.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fills `out` (one entry per source symbol) with the coefficients that
/// `seed` names: the little-endian bytes of successive SplitMix64 outputs
/// started from state `seed`. An all-zero vector carries nothing, so in the
/// (1 in 256^g) case it happens, entry `seed mod g` is set to 1.
pub fn expand(seed: u32, out: &mut [u8]) {
    let mut state = u64::from(seed);
    for chunk in out.chunks_mut(8) {
        let bytes = splitmix64(&mut state).to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    if !out.is_empty() && out.iter().all(|&c| c == 0) {
        let i = seed as usize % out.len();
        out[i] = 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_is_pinned() {
        // The wire format depends on these exact bytes; a change here breaks
        // interoperability with every deployed peer. Reference values computed
        // independently from the SplitMix64 definition in Python.
        let mut v = [0u8; 10];
        expand(0, &mut v);
        assert_eq!(
            v,
            [0xaf, 0xcd, 0x1d, 0x7b, 0x39, 0xa8, 0x20, 0xe2, 0xf4, 0x65]
        );
        expand(1234, &mut v);
        let mut w = [0u8; 10];
        expand(1234, &mut w);
        assert_eq!(v, w);
    }

    #[test]
    fn never_all_zero() {
        for seed in 0..10_000u32 {
            let mut v = [0u8; 1];
            expand(seed, &mut v);
            assert_ne!(v[0], 0);
        }
    }
}

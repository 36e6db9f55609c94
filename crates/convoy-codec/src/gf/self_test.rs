//! A known-answer test each SIMD tier must pass before it is chosen
//! automatically. A tier can only be tested on a CPU that has it: the GFNI
//! tiers have not met one in CI yet, and the NEON tier has only met qemu's
//! emulation of aarch64, never a real core. Rather than trust untested code
//! with every coded byte, the first process on a new CPU checks the kernels
//! against the scalar reference (a few microseconds, once) and falls back to
//! the next tier down if they disagree.

use super::{mul_add_multi_with, mul_add_with, mul_region_with, Tier};

/// Lengths around every vector width and tail case up to 512-bit vectors.
const LENGTHS: [usize; 10] = [0, 1, 15, 16, 31, 33, 64, 127, 200, 1400];
const CONSTANTS: [u8; 5] = [0, 1, 2, 0x57, 0xff];

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// Whether `tier` computes what the scalar kernels compute on unaligned
/// regions of assorted lengths. An unsupported tier fails.
pub(super) fn passes(tier: Tier) -> bool {
    if !tier.is_supported() {
        return false;
    }
    if tier == Tier::Scalar {
        return true;
    }
    for (n, &len) in LENGTHS.iter().enumerate() {
        let offset = n % 7; // misaligned starts
        let src_buf = pattern(len + offset, 3);
        let src = &src_buf[offset..];
        let other = pattern(len, 101);
        for &c in &CONSTANTS {
            let mut want = pattern(len + offset, 7);
            let mut got = want.clone();
            let ok = mul_add_with(Tier::Scalar, &mut want[offset..], src, c).is_ok()
                && mul_add_with(tier, &mut got[offset..], src, c).is_ok();
            if !ok || want != got {
                return false;
            }
            let ok = mul_region_with(Tier::Scalar, &mut want[offset..], c).is_ok()
                && mul_region_with(tier, &mut got[offset..], c).is_ok();
            if !ok || want != got {
                return false;
            }
            let srcs = [src, &other[..]];
            let coeffs = [c, c ^ 0x1d];
            let ok = mul_add_multi_with(Tier::Scalar, &mut want[offset..], &srcs, &coeffs).is_ok()
                && mul_add_multi_with(tier, &mut got[offset..], &srcs, &coeffs).is_ok();
            if !ok || want != got {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_tier_passes_and_unsupported_ones_fail() {
        for tier in Tier::ALL {
            assert_eq!(passes(tier), tier.is_supported(), "{tier:?}");
        }
    }
}

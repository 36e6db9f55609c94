//! The bytes a simulated application sends: a pattern that any offset can
//! regenerate, so the reader verifies every byte without keeping a copy.

fn word(dir: u8, index: u64) -> u64 {
    // SplitMix64 of (direction, 8-byte word index).
    let mut z = index ^ (u64::from(dir) << 56) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn byte(dir: u8, offset: u64) -> u8 {
    word(dir, offset / 8).to_le_bytes()[(offset % 8) as usize]
}

/// Fills `out` with the pattern of direction `dir` from `offset`.
pub fn pattern_fill(dir: u8, offset: u64, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = byte(dir, offset + i as u64);
    }
}

/// The index of the first byte of `data` that differs from the pattern.
pub fn pattern_check(dir: u8, offset: u64, data: &[u8]) -> Option<usize> {
    data.iter()
        .enumerate()
        .position(|(i, &b)| b != byte(dir, offset + i as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_and_check_agree_and_directions_differ() {
        let mut a = [0u8; 100];
        pattern_fill(0, 13, &mut a);
        assert_eq!(pattern_check(0, 13, &a), None);
        assert!(pattern_check(1, 13, &a).is_some());
        a[50] ^= 1;
        assert_eq!(pattern_check(0, 13, &a), Some(50));
    }
}

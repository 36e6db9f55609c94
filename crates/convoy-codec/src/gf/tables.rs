//! Lookup tables for GF(2^8) mod 0x11D, all evaluated by `const fn` at compile
//! time so no kernel ever pays for lazy initialisation.

use super::POLY;

/// Carry-less "peasant" multiplication reduced mod [`POLY`]. Only used to seed
/// the tables (and as an independent reference in tests), never on a hot path.
pub(crate) const fn mul_slow(mut a: u8, mut b: u8) -> u8 {
    let mut acc = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            acc ^= a;
        }
        let carry = a & 0x80 != 0;
        a <<= 1;
        if carry {
            a ^= (POLY & 0xFF) as u8;
        }
        b >>= 1;
    }
    acc
}

/// `EXP[i] = 2^i`, stored twice over so `EXP[LOG[a] + LOG[b]]` needs no `% 255`.
pub(crate) static EXP: [u8; 512] = build_exp();
/// Discrete log base 2; `LOG[0]` is meaningless and must not be used.
pub(crate) static LOG: [u8; 256] = build_log();

const fn build_exp() -> [u8; 512] {
    let mut t = [0u8; 512];
    let mut x = 1u8;
    let mut i = 0;
    while i < 255 {
        t[i] = x;
        t[i + 255] = x;
        x = mul_slow(x, 2);
        i += 1;
    }
    // Indices 510/511 are only reachable with LOG[0]; keep them deterministic.
    t[510] = t[0];
    t[511] = t[1];
    t
}

const fn build_log() -> [u8; 256] {
    let exp = build_exp();
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 255 {
        t[exp[i] as usize] = i as u8;
        i += 1;
    }
    t
}

/// Full product table: one load per scalar multiply, and row `c` is the
/// 256-byte lookup the scalar region kernels and SIMD tails use.
#[repr(C, align(64))]
pub(crate) struct MulTable(pub(crate) [[u8; 256]; 256]);

pub(crate) static MUL: MulTable = MulTable(build_mul());

const fn build_mul() -> [[u8; 256]; 256] {
    // Built from EXP/LOG rather than `mul_slow` to stay far below the
    // compiler's long-running const-eval lint threshold.
    let exp = build_exp();
    let log = build_log();
    let mut t = [[0u8; 256]; 256];
    let mut a = 1;
    while a < 256 {
        let mut b = 1;
        while b < 256 {
            t[a][b] = exp[log[a] as usize + log[b] as usize];
            b += 1;
        }
        a += 1;
    }
    t
}

/// Multiplicative inverses; `INV[0] = 0` as a placeholder.
pub(crate) static INV: [u8; 256] = build_inv();

const fn build_inv() -> [u8; 256] {
    let exp = build_exp();
    let log = build_log();
    let mut t = [0u8; 256];
    let mut a = 1;
    while a < 256 {
        t[a] = exp[255 - log[a] as usize];
        a += 1;
    }
    t
}

/// Split-nibble tables for PSHUFB (x86) and TBL (ARM): entry `c` holds `c * i` for `i` in 0..16
/// (bytes 0..16) and `c * (i << 4)` (bytes 16..32). Since multiplication
/// distributes over XOR, `c*x = lo[x & 15] ^ hi[x >> 4]`.
/// Aligned so one entry never straddles a cache line.
#[repr(C, align(32))]
pub(crate) struct NibbleTables(pub(crate) [[u8; 32]; 256]);

#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
pub(crate) static NIBBLE: NibbleTables = NibbleTables(build_nibble());

const fn build_nibble() -> [[u8; 32]; 256] {
    let mut t = [[0u8; 32]; 256];
    let mut c = 0;
    while c < 256 {
        let mut i = 0;
        while i < 16 {
            t[c][i] = mul_slow(c as u8, i as u8);
            t[c][16 + i] = mul_slow(c as u8, (i << 4) as u8);
            i += 1;
        }
        c += 1;
    }
    t
}

/// 8x8 bit matrix for GF2P8AFFINEQB such that `affine(x, gfni_matrix(c), 0)
/// == c * x` in *our* field. GF2P8MULB is hard-wired to 0x11B, hence this.
///
/// The instruction computes result bit `i` as `parity(A.byte[7 - i] & x)`.
/// Writing `c*x = XOR_j x_j * (c * 2^j)`, bit `i` of the product is the parity
/// of `x & row_i` where bit `j` of `row_i` is bit `i` of `c * 2^j`; that row
/// goes into byte `7 - i` of the qword.
pub(crate) const fn gfni_matrix(c: u8) -> u64 {
    let mut m = 0u64;
    let mut i = 0;
    while i < 8 {
        let mut row = 0u8;
        let mut j = 0;
        while j < 8 {
            let col = mul_slow(c, 1u8 << j);
            row |= ((col >> i) & 1) << j;
            j += 1;
        }
        m |= (row as u64) << (8 * (7 - i));
        i += 1;
    }
    m
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) static GFNI_MATRIX: [u64; 256] = build_gfni();

const fn build_gfni() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = gfni_matrix(c as u8);
        c += 1;
    }
    t
}

/// Software model of GF2P8AFFINEQB on one byte, transcribed from the Intel
/// SDM pseudo-code. It lets the matrix construction be verified on CPUs that
/// cannot execute the instruction.
pub fn gf2p8affine_model(x: u8, matrix: u64, imm8: u8) -> u8 {
    let mut out = 0u8;
    for i in 0..8 {
        let row = (matrix >> (8 * (7 - i))) as u8;
        let bit = ((row & x).count_ones() as u8 & 1) ^ ((imm8 >> i) & 1);
        out |= bit << i;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_log_roundtrip() {
        for a in 1..=255u8 {
            assert_eq!(EXP[LOG[a as usize] as usize], a);
        }
    }

    #[test]
    fn nibble_tables_match_mul() {
        for c in 0..=255u8 {
            for x in 0..=255u8 {
                let e = &NIBBLE.0[c as usize];
                let v = e[(x & 15) as usize] ^ e[16 + (x >> 4) as usize];
                assert_eq!(v, mul_slow(c, x));
            }
        }
    }
}

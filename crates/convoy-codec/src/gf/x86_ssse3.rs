//! SSSE3 tier: split-nibble multiplication with 128-bit PSHUFB.
//!
//! `c*x = lo_c[x & 15] ^ hi_c[x >> 4]`, each half a 16-entry PSHUFB lookup.
//! Regions shorter than one vector go scalar; loop structure and the
//! treatment of the ragged ends: see `x86_region`.

use core::arch::x86_64::*;

use super::scalar;
use super::tables::NIBBLE;

/// Sources processed per pass over `dst` in `mul_add_multi`; with 2 tables
/// each, 4 sources plus accumulators still fit the 16 XMM registers.
const GROUP: usize = 4;

/// `c * v` for every byte of `v`.
macro_rules! mul16 {
    ($v:expr, $lo:expr, $hi:expr, $mask:expr) => {{
        let v = $v;
        let l = _mm_and_si128(v, $mask);
        let h = _mm_and_si128(_mm_srli_epi64(v, 4), $mask);
        _mm_xor_si128(_mm_shuffle_epi8($lo, l), _mm_shuffle_epi8($hi, h))
    }};
}

/// # Safety
/// Requires SSSE3. `c`'s table entry is 32-byte aligned, so aligned loads are fine.
#[inline]
#[target_feature(enable = "ssse3")]
unsafe fn load_tables(c: u8) -> (__m128i, __m128i) {
    let t = NIBBLE.0[c as usize].as_ptr();
    // SAFETY: the entry is 32 bytes, 32-byte aligned.
    unsafe {
        (
            _mm_load_si128(t as *const __m128i),
            _mm_load_si128(t.add(16) as *const __m128i),
        )
    }
}

/// # Safety
/// Requires SSSE3; `dst.len() == src.len()`.
#[target_feature(enable = "ssse3")]
pub(super) unsafe fn mul_add(dst: &mut [u8], src: &[u8], c: u8) {
    let n = dst.len();
    debug_assert_eq!(n, src.len());
    if n < 16 {
        return scalar::mul_add(dst, src, c);
    }
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    // SAFETY: the skeleton only touches offsets below n (n >= 16 checked
    // here); src has n bytes too; SSSE3 is enabled by the caller.
    unsafe {
        let (lo, hi) = load_tables(c);
        let mask = _mm_set1_epi8(0x0f);
        region128!(n, d, |i, dv| {
            let v = _mm_loadu_si128(s.add(i) as *const __m128i);
            _mm_xor_si128(dv, mul16!(v, lo, hi, mask))
        });
    }
}

/// # Safety
/// Requires SSSE3.
#[target_feature(enable = "ssse3")]
pub(super) unsafe fn mul_region(dst: &mut [u8], c: u8) {
    let n = dst.len();
    if n < 16 {
        return scalar::mul_region(dst, c);
    }
    let d = dst.as_mut_ptr();
    // SAFETY: as in `mul_add`.
    unsafe {
        let (lo, hi) = load_tables(c);
        let mask = _mm_set1_epi8(0x0f);
        region128!(n, d, |_i, dv| mul16!(dv, lo, hi, mask));
    }
}

/// `dst ^= src` (the `c == 1` case).
///
/// # Safety
/// Requires SSSE3; `dst.len() == src.len()`.
#[target_feature(enable = "ssse3")]
pub(super) unsafe fn xor(dst: &mut [u8], src: &[u8]) {
    let n = dst.len();
    debug_assert_eq!(n, src.len());
    if n < 16 {
        return scalar::xor(dst, src);
    }
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    // SAFETY: as in `mul_add`.
    unsafe {
        region128!(n, d, |i, dv| {
            _mm_xor_si128(dv, _mm_loadu_si128(s.add(i) as *const __m128i))
        });
    }
}

/// # Safety
/// Requires SSSE3; every source has `dst.len()` bytes; `coeffs.len() == srcs.len()`.
#[target_feature(enable = "ssse3")]
pub(super) unsafe fn mul_add_multi(dst: &mut [u8], srcs: &[&[u8]], coeffs: &[u8]) {
    dispatch_groups!(group, GROUP, dst, srcs, coeffs; 1 2 3);
}

/// `dst ^= Σ_{j<N} cs[j] * ptrs[j]`, loading and storing dst once.
///
/// # Safety
/// Requires SSSE3; `ptrs[..N]` valid for `dst.len()` reads, not overlapping dst.
#[inline]
#[target_feature(enable = "ssse3")]
unsafe fn group<const N: usize>(dst: &mut [u8], ptrs: &[*const u8; GROUP], cs: &[u8; GROUP]) {
    let len = dst.len();
    let d = dst.as_mut_ptr();
    let srcs = &ptrs[..N];
    let cs = &cs[..N];
    // SAFETY: the skeleton only touches offsets below len (>= 16), for dst
    // and for every source.
    unsafe {
        if len < 16 {
            return scalar::mul_add_multi_tail(d, srcs, cs, len);
        }
        let mask = _mm_set1_epi8(0x0f);
        region128!(len, d, |i, dv| {
            let mut acc = dv;
            for (&p, &c) in srcs.iter().zip(cs) {
                let (lo, hi) = load_tables(c);
                let v = _mm_loadu_si128(p.add(i) as *const __m128i);
                acc = _mm_xor_si128(acc, mul16!(v, lo, hi, mask));
            }
            acc
        });
    }
}

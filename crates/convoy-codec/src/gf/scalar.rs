//! Portable kernels: the reference every SIMD tier is tested against, the
//! fallback on other architectures, and the tail handler of the SIMD tiers.

use super::tables::MUL;

#[inline]
pub(super) fn mul_add(dst: &mut [u8], src: &[u8], c: u8) {
    debug_assert_eq!(dst.len(), src.len());
    let row = &MUL.0[c as usize];
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= row[*s as usize];
    }
}

#[inline]
pub(super) fn mul_region(dst: &mut [u8], c: u8) {
    let row = &MUL.0[c as usize];
    for d in dst.iter_mut() {
        *d = row[*d as usize];
    }
}

/// `inline(always)` so that SIMD tiers can wrap it in a `#[target_feature]`
/// function and get it auto-vectorised at their vector width.
#[inline(always)]
pub(super) fn xor(dst: &mut [u8], src: &[u8]) {
    debug_assert_eq!(dst.len(), src.len());
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= *s;
    }
}

pub(super) fn mul_add_multi(dst: &mut [u8], srcs: &[&[u8]], coeffs: &[u8]) {
    // Blocking keeps the dst slice hot in L1 while every source passes over
    // it, which matters once dst is larger than the cache.
    const BLOCK: usize = 4096;
    let mut off = 0;
    while off < dst.len() {
        let end = (off + BLOCK).min(dst.len());
        for (s, &c) in srcs.iter().zip(coeffs) {
            match c {
                0 => {}
                1 => xor(&mut dst[off..end], &s[off..end]),
                _ => mul_add(&mut dst[off..end], &s[off..end], c),
            }
        }
        off = end;
    }
}

/// `dsts[r] ^= Σ_j coeffs[r*K + j] * srcs[j]`, one row at a time.
pub(super) fn mul_add_matrix(dsts: &mut [&mut [u8]], srcs: &[&[u8]], coeffs: &[u8]) {
    if srcs.is_empty() {
        return;
    }
    for (d, row) in dsts.iter_mut().zip(coeffs.chunks_exact(srcs.len())) {
        mul_add_multi(d, srcs, row);
    }
}

/// Scalar tail shared by the SIMD tiers: `dst[i] ^= Σ c_j * src_j[i]` for the
/// last few bytes, reading sources through raw pointers.
///
/// # Safety
/// `dst` must be valid for `len` reads and writes, every `srcs[j]` for `len`
/// reads, and `dst` must not overlap any source.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline]
pub(super) unsafe fn mul_add_multi_tail(
    dst: *mut u8,
    srcs: &[*const u8],
    coeffs: &[u8],
    len: usize,
) {
    for i in 0..len {
        let mut acc = 0u8;
        for (s, &c) in srcs.iter().zip(coeffs) {
            // SAFETY: i < len and the caller guarantees `len` readable bytes.
            acc ^= MUL.0[c as usize][unsafe { *s.add(i) } as usize];
        }
        // SAFETY: as above for dst.
        unsafe { *dst.add(i) ^= acc };
    }
}

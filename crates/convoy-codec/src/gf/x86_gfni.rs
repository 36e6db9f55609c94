//! GFNI tiers: one GF2P8AFFINEQB per vector with the constant's 8x8 bit
//! matrix (`tables::gfni_matrix`). GF2P8MULB would be a single instruction
//! too, but it reduces mod 0x11B (AES), not our 0x11D.
//!
//! `_mm*_gf2p8affine_epi64_epi8(x, A, b)` computes `A·x ^ b` for each byte
//! of `x`, with `A` the matrix qword (Intel intrinsics guide), so the data
//! goes first and the broadcast matrix second.
//!
//! 256-bit tier: the `x86_region` skeletons, as in the AVX2 tier.
//! 512-bit tier: a masked head up to 64-byte alignment of dst, an aligned
//! main loop, and a masked tail. AVX-512BW masked loads/stores neither read
//! nor write (nor fault on) masked-out bytes, so nothing overlaps.

use core::arch::x86_64::*;

use super::scalar;
use super::tables::GFNI_MATRIX;

/// Sources per pass over `dst` in `mul_add_multi`: one matrix register per
/// source, so more fit than with the two nibble tables of AVX2.
const GROUP: usize = 8;

#[inline(always)]
fn matrix(c: u8) -> i64 {
    GFNI_MATRIX[c as usize] as i64
}

// ---------------------------------------------------------------- 256-bit

/// # Safety
/// Requires GFNI + AVX2; `dst.len() == src.len()`.
#[target_feature(enable = "gfni,avx,avx2")]
pub(super) unsafe fn mul_add_256(dst: &mut [u8], src: &[u8], c: u8) {
    let n = dst.len();
    debug_assert_eq!(n, src.len());
    if n < 16 {
        return scalar::mul_add(dst, src, c);
    }
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    // SAFETY: the skeletons only touch offsets below n (n >= their width,
    // checked here); src has n bytes too; the features are enabled by the caller.
    unsafe {
        let m = _mm256_set1_epi64x(matrix(c));
        if n >= 32 {
            region256!(n, d, |i, dv| {
                let v = _mm256_loadu_si256(s.add(i) as *const __m256i);
                _mm256_xor_si256(dv, _mm256_gf2p8affine_epi64_epi8(v, m, 0))
            });
        } else {
            let m = _mm256_castsi256_si128(m);
            region128!(n, d, |i, dv| {
                let v = _mm_loadu_si128(s.add(i) as *const __m128i);
                _mm_xor_si128(dv, _mm_gf2p8affine_epi64_epi8(v, m, 0))
            });
        }
    }
}

/// # Safety
/// Requires GFNI + AVX2.
#[target_feature(enable = "gfni,avx,avx2")]
pub(super) unsafe fn mul_region_256(dst: &mut [u8], c: u8) {
    let n = dst.len();
    if n < 16 {
        return scalar::mul_region(dst, c);
    }
    let d = dst.as_mut_ptr();
    // SAFETY: as in `mul_add_256`.
    unsafe {
        let m = _mm256_set1_epi64x(matrix(c));
        if n >= 32 {
            region256!(n, d, |_i, dv| _mm256_gf2p8affine_epi64_epi8(dv, m, 0));
        } else {
            let m = _mm256_castsi256_si128(m);
            region128!(n, d, |_i, dv| _mm_gf2p8affine_epi64_epi8(dv, m, 0));
        }
    }
}

/// # Safety
/// Requires GFNI + AVX2; every source has `dst.len()` bytes; `coeffs.len() == srcs.len()`.
#[target_feature(enable = "gfni,avx,avx2")]
pub(super) unsafe fn mul_add_multi_256(dst: &mut [u8], srcs: &[&[u8]], coeffs: &[u8]) {
    dispatch_groups!(group_256, GROUP, dst, srcs, coeffs; 1 2 3 4 5 6 7);
}

/// `dst ^= Σ_{j<N} cs[j] * ptrs[j]`, loading and storing dst once.
///
/// # Safety
/// Requires GFNI + AVX2; `ptrs[..N]` valid for `dst.len()` reads, not overlapping dst.
#[inline]
#[target_feature(enable = "gfni,avx,avx2")]
unsafe fn group_256<const N: usize>(dst: &mut [u8], ptrs: &[*const u8; GROUP], cs: &[u8; GROUP]) {
    let len = dst.len();
    let d = dst.as_mut_ptr();
    let srcs = &ptrs[..N];
    // SAFETY: the skeletons only touch offsets below len (>= their width),
    // for dst and for every source.
    unsafe {
        if len < 16 {
            return scalar::mul_add_multi_tail(d, srcs, &cs[..N], len);
        }
        let ms: [__m256i; N] = core::array::from_fn(|j| _mm256_set1_epi64x(matrix(cs[j])));
        if len >= 32 {
            region256!(len, d, |i, dv| {
                let mut acc = dv;
                for (&p, &m) in srcs.iter().zip(&ms) {
                    let v = _mm256_loadu_si256(p.add(i) as *const __m256i);
                    acc = _mm256_xor_si256(acc, _mm256_gf2p8affine_epi64_epi8(v, m, 0));
                }
                acc
            });
        } else {
            region128!(len, d, |i, dv| {
                let mut acc = dv;
                for (&p, &m) in srcs.iter().zip(&ms) {
                    let v = _mm_loadu_si128(p.add(i) as *const __m128i);
                    let m = _mm256_castsi256_si128(m);
                    acc = _mm_xor_si128(acc, _mm_gf2p8affine_epi64_epi8(v, m, 0));
                }
                acc
            });
        }
    }
}

// ---------------------------------------------------------------- 512-bit

/// Byte mask selecting the first `len` (1..=64) lanes.
#[inline(always)]
fn first_lanes(len: usize) -> __mmask64 {
    debug_assert!((1..=64).contains(&len));
    u64::MAX >> (64 - len)
}

/// 512-bit skeleton: `$body` computes the new dst vector from the old one
/// (`$dv`) at byte offset `$i`, loading sources with the lane mask `$k`
/// (`_mm512_maskz_loadu_epi8($k, ..)`) so the partial head and tail never
/// touch bytes outside the region. Run inside an `unsafe` AVX-512BW context.
macro_rules! region512 {
    ($n:expr, $d:expr, |$i:ident, $k:ident, $dv:ident| $body:expr) => {{
        let n: usize = $n;
        let d: *mut u8 = $d;
        let head = ((64 - (d as usize & 63)) & 63).min(n);
        if head > 0 {
            let $i: usize = 0;
            let $k = first_lanes(head);
            let $dv = _mm512_maskz_loadu_epi8($k, d as *const i8);
            _mm512_mask_storeu_epi8(d as *mut i8, $k, $body);
        }
        let mut i = head;
        while i + 256 <= n {
            let p = d.add(i) as *mut __m512i;
            let $k: __mmask64 = u64::MAX;
            let r0 = {
                let $i = i;
                let $dv = _mm512_load_si512(p);
                $body
            };
            let r1 = {
                let $i = i + 64;
                let $dv = _mm512_load_si512(p.add(1));
                $body
            };
            let r2 = {
                let $i = i + 128;
                let $dv = _mm512_load_si512(p.add(2));
                $body
            };
            let r3 = {
                let $i = i + 192;
                let $dv = _mm512_load_si512(p.add(3));
                $body
            };
            _mm512_store_si512(p, r0);
            _mm512_store_si512(p.add(1), r1);
            _mm512_store_si512(p.add(2), r2);
            _mm512_store_si512(p.add(3), r3);
            i += 256;
        }
        while i + 64 <= n {
            let p = d.add(i) as *mut __m512i;
            let $k: __mmask64 = u64::MAX;
            let r = {
                let $i = i;
                let $dv = _mm512_load_si512(p);
                $body
            };
            _mm512_store_si512(p, r);
            i += 64;
        }
        if i < n {
            let $i = i;
            let $k = first_lanes(n - i);
            let $dv = _mm512_maskz_loadu_epi8($k, d.add(i) as *const i8);
            _mm512_mask_storeu_epi8(d.add(i) as *mut i8, $k, $body);
        }
    }};
}

/// # Safety
/// Requires GFNI + AVX-512F/BW; `dst.len() == src.len()`.
#[target_feature(enable = "gfni,avx512f,avx512bw")]
pub(super) unsafe fn mul_add_512(dst: &mut [u8], src: &[u8], c: u8) {
    let n = dst.len();
    debug_assert_eq!(n, src.len());
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    // SAFETY: full vectors lie below n; partial ones are masked to the bytes
    // below n; src has n bytes; the features are enabled by the caller.
    unsafe {
        let m = _mm512_set1_epi64(matrix(c));
        region512!(n, d, |i, k, dv| {
            let v = _mm512_maskz_loadu_epi8(k, s.add(i) as *const i8);
            _mm512_xor_si512(dv, _mm512_gf2p8affine_epi64_epi8(v, m, 0))
        });
    }
}

/// # Safety
/// Requires GFNI + AVX-512F/BW.
#[target_feature(enable = "gfni,avx512f,avx512bw")]
pub(super) unsafe fn mul_region_512(dst: &mut [u8], c: u8) {
    let n = dst.len();
    let d = dst.as_mut_ptr();
    // SAFETY: as in `mul_add_512`.
    unsafe {
        let m = _mm512_set1_epi64(matrix(c));
        region512!(n, d, |_i, _k, dv| _mm512_gf2p8affine_epi64_epi8(dv, m, 0));
    }
}

/// `dst ^= src` (the `c == 1` case).
///
/// # Safety
/// Requires AVX-512F/BW; `dst.len() == src.len()`.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn xor_512(dst: &mut [u8], src: &[u8]) {
    let n = dst.len();
    debug_assert_eq!(n, src.len());
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    // SAFETY: as in `mul_add_512`.
    unsafe {
        region512!(n, d, |i, k, dv| {
            _mm512_xor_si512(dv, _mm512_maskz_loadu_epi8(k, s.add(i) as *const i8))
        });
    }
}

/// # Safety
/// Requires GFNI + AVX-512F/BW; every source has `dst.len()` bytes;
/// `coeffs.len() == srcs.len()`.
#[target_feature(enable = "gfni,avx512f,avx512bw")]
pub(super) unsafe fn mul_add_multi_512(dst: &mut [u8], srcs: &[&[u8]], coeffs: &[u8]) {
    dispatch_groups!(group_512, GROUP, dst, srcs, coeffs; 1 2 3 4 5 6 7);
}

/// `dst ^= Σ_{j<N} cs[j] * ptrs[j]`, loading and storing dst once.
///
/// # Safety
/// Requires GFNI + AVX-512F/BW; `ptrs[..N]` valid for `dst.len()` reads, not
/// overlapping dst.
#[inline]
#[target_feature(enable = "gfni,avx512f,avx512bw")]
unsafe fn group_512<const N: usize>(dst: &mut [u8], ptrs: &[*const u8; GROUP], cs: &[u8; GROUP]) {
    let len = dst.len();
    let d = dst.as_mut_ptr();
    let srcs = &ptrs[..N];
    // SAFETY: as in `mul_add_512`, for dst and every source.
    unsafe {
        let ms: [__m512i; N] = core::array::from_fn(|j| _mm512_set1_epi64(matrix(cs[j])));
        region512!(len, d, |i, k, dv| {
            let mut acc = dv;
            for (&p, &m) in srcs.iter().zip(&ms) {
                let v = _mm512_maskz_loadu_epi8(k, p.add(i) as *const i8);
                acc = _mm512_xor_si512(acc, _mm512_gf2p8affine_epi64_epi8(v, m, 0));
            }
            acc
        });
    }
}

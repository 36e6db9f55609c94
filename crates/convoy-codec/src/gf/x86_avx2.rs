//! AVX2 tier: split-nibble multiplication with 256-bit VPSHUFB.
//!
//! `c*x = lo_c[x & 15] ^ hi_c[x >> 4]`; the two 16-entry tables are broadcast
//! to both 128-bit lanes because VPSHUFB looks up within a lane. Regions of
//! 16..32 bytes use the same ops on XMM registers, shorter ones go scalar.
//! Loop structure and the treatment of the ragged ends: see `x86_region`.

use core::arch::x86_64::*;

use super::scalar;
use super::tables::NIBBLE;

/// Sources per pass over `dst` in `mul_add_multi`. The kernel is bound by
/// the shuffle/shift ports, so bigger groups only save dst loads/stores
/// (cheap in L1) while the table broadcasts start to spill.
const GROUP: usize = 4;

/// `c * v` for every byte of a YMM vector, given c's broadcast tables.
macro_rules! mul32 {
    ($v:expr, $lo:expr, $hi:expr, $mask:expr) => {{
        let v = $v;
        let l = _mm256_and_si256(v, $mask);
        let h = _mm256_and_si256(_mm256_srli_epi64(v, 4), $mask);
        _mm256_xor_si256(_mm256_shuffle_epi8($lo, l), _mm256_shuffle_epi8($hi, h))
    }};
}

/// The XMM counterpart of `mul32!`, taking the same YMM tables.
macro_rules! mul16 {
    ($v:expr, $lo:expr, $hi:expr, $mask:expr) => {{
        let v = $v;
        let m = _mm256_castsi256_si128($mask);
        let l = _mm_and_si128(v, m);
        let h = _mm_and_si128(_mm_srli_epi64(v, 4), m);
        _mm_xor_si128(
            _mm_shuffle_epi8(_mm256_castsi256_si128($lo), l),
            _mm_shuffle_epi8(_mm256_castsi256_si128($hi), h),
        )
    }};
}

/// # Safety
/// Requires AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load_tables(c: u8) -> (__m256i, __m256i) {
    let t = NIBBLE.0[c as usize].as_ptr();
    // SAFETY: the entry is 32 bytes, 32-byte aligned.
    unsafe {
        (
            _mm256_broadcastsi128_si256(_mm_load_si128(t as *const __m128i)),
            _mm256_broadcastsi128_si256(_mm_load_si128(t.add(16) as *const __m128i)),
        )
    }
}

/// # Safety
/// Requires AVX2; `dst.len() == src.len()`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn mul_add(dst: &mut [u8], src: &[u8], c: u8) {
    let n = dst.len();
    debug_assert_eq!(n, src.len());
    if n < 16 {
        return scalar::mul_add(dst, src, c);
    }
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    // SAFETY: the skeletons only touch offsets below n (they need n >= their
    // width, checked here); src has n bytes too; AVX2 is enabled by the caller.
    unsafe {
        let (lo, hi) = load_tables(c);
        let mask = _mm256_set1_epi8(0x0f);
        if n >= 32 {
            region256!(n, d, |i, dv| {
                let v = _mm256_loadu_si256(s.add(i) as *const __m256i);
                _mm256_xor_si256(dv, mul32!(v, lo, hi, mask))
            });
        } else {
            region128!(n, d, |i, dv| {
                let v = _mm_loadu_si128(s.add(i) as *const __m128i);
                _mm_xor_si128(dv, mul16!(v, lo, hi, mask))
            });
        }
    }
}

/// # Safety
/// Requires AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn mul_region(dst: &mut [u8], c: u8) {
    let n = dst.len();
    if n < 16 {
        return scalar::mul_region(dst, c);
    }
    let d = dst.as_mut_ptr();
    // SAFETY: as in `mul_add`.
    unsafe {
        let (lo, hi) = load_tables(c);
        let mask = _mm256_set1_epi8(0x0f);
        if n >= 32 {
            region256!(n, d, |_i, dv| mul32!(dv, lo, hi, mask));
        } else {
            region128!(n, d, |_i, dv| mul16!(dv, lo, hi, mask));
        }
    }
}

/// `dst ^= src` (the `c == 1` case).
///
/// # Safety
/// Requires AVX2; `dst.len() == src.len()`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn xor(dst: &mut [u8], src: &[u8]) {
    let n = dst.len();
    debug_assert_eq!(n, src.len());
    if n < 32 {
        return scalar::xor(dst, src);
    }
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    // SAFETY: as in `mul_add`.
    unsafe {
        region256!(n, d, |i, dv| {
            _mm256_xor_si256(dv, _mm256_loadu_si256(s.add(i) as *const __m256i))
        });
    }
}

/// # Safety
/// Requires AVX2; every source has `dst.len()` bytes; `coeffs.len() == srcs.len()`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn mul_add_multi(dst: &mut [u8], srcs: &[&[u8]], coeffs: &[u8]) {
    dispatch_groups!(group, GROUP, dst, srcs, coeffs; 1 2 3);
}

/// `dst ^= Σ_{j<N} cs[j] * ptrs[j]`, loading and storing dst once.
///
/// # Safety
/// Requires AVX2; `ptrs[..N]` valid for `dst.len()` reads, not overlapping dst.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn group<const N: usize>(dst: &mut [u8], ptrs: &[*const u8; GROUP], cs: &[u8; GROUP]) {
    let len = dst.len();
    let d = dst.as_mut_ptr();
    let srcs = &ptrs[..N];
    let cs = &cs[..N];
    // SAFETY: the skeletons only touch offsets below len (>= their width),
    // for dst and for every source.
    unsafe {
        let mask = _mm256_set1_epi8(0x0f);
        if len >= 32 {
            region256!(len, d, |i, dv| {
                let mut acc = dv;
                for (&p, &c) in srcs.iter().zip(cs) {
                    let (lo, hi) = load_tables(c);
                    let v = _mm256_loadu_si256(p.add(i) as *const __m256i);
                    acc = _mm256_xor_si256(acc, mul32!(v, lo, hi, mask));
                }
                acc
            });
        } else if len >= 16 {
            region128!(len, d, |i, dv| {
                let mut acc = dv;
                for (&p, &c) in srcs.iter().zip(cs) {
                    let (lo, hi) = load_tables(c);
                    let v = _mm_loadu_si128(p.add(i) as *const __m128i);
                    acc = _mm_xor_si128(acc, mul16!(v, lo, hi, mask));
                }
                acc
            });
        } else {
            scalar::mul_add_multi_tail(d, srcs, cs, len);
        }
    }
}

/// Rows per block in `mul_add_matrix`: each source vector is split into
/// nibbles once and used for this many destinations, which is where the
/// matrix form beats `ROWS` separate `mul_add_multi` calls (4 instead of 7
/// vector ops per source vector and destination, plus 3/ROWS for the split).
/// 4 rows x 2 vectors of accumulators still leave room for the split halves
/// and tables in the 16 YMM registers.
const ROWS: usize = 4;
/// Sources per pass in `mul_add_matrix`, bounding the on-stack table copy.
const COLS: usize = 32;

/// `dsts[r] ^= Σ_j coeffs[r*K + j] * srcs[j]` (K = `srcs.len()`).
///
/// # Safety
/// Requires AVX2; every dst and source has the same length;
/// `coeffs.len() == dsts.len() * srcs.len()`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn mul_add_matrix(dsts: &mut [&mut [u8]], srcs: &[&[u8]], coeffs: &[u8]) {
    let k = srcs.len();
    let n = dsts.first().map_or(0, |d| d.len());
    if k == 0 || n == 0 {
        return;
    }
    // SAFETY (all calls): the caller's contract, passed on row by row or
    // block by block.
    if n < 32 {
        for (d, row) in dsts.iter_mut().zip(coeffs.chunks_exact(k)) {
            unsafe { mul_add_multi(d, srcs, row) };
        }
        return;
    }
    for (block, cs) in dsts.chunks_mut(ROWS).zip(coeffs.chunks(ROWS * k)) {
        match block.len() {
            4 => unsafe { matrix_block::<4>(block, srcs, cs, n) },
            3 => unsafe { matrix_block::<3>(block, srcs, cs, n) },
            2 => unsafe { matrix_block::<2>(block, srcs, cs, n) },
            _ => unsafe { matrix_block::<1>(block, srcs, cs, n) },
        }
    }
}

/// Aligned because the pass loads its halves with aligned loads.
#[repr(C, align(32))]
struct PassTables([[u8; 32]; ROWS * COLS]);

/// `R` rows of `mul_add_matrix`, in passes of up to `COLS` sources.
///
/// # Safety
/// Requires AVX2; `block.len() == R`; all rows and sources have `n >= 32`
/// bytes; `coeffs.len() == R * srcs.len()`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn matrix_block<const R: usize>(
    block: &mut [&mut [u8]],
    srcs: &[&[u8]],
    coeffs: &[u8],
    n: usize,
) {
    debug_assert!(block.len() == R && n >= 32 && coeffs.len() == R * srcs.len());
    let k = srcs.len();
    let d: [*mut u8; R] = core::array::from_fn(|r| block[r].as_mut_ptr());
    // The pass's tables, copied in the order the inner loop reads them, so
    // it walks one pointer instead of indexing coefficients and NIBBLE
    // (which cost two extra instructions per product; the loop is
    // front-end bound otherwise).
    let mut tabs = core::mem::MaybeUninit::<PassTables>::uninit();
    let t = tabs.as_mut_ptr() as *mut [u8; 32];
    for (pass_no, pass_srcs) in srcs.chunks(COLS).enumerate() {
        let col0 = pass_no * COLS;
        for j in 0..pass_srcs.len() {
            for r in 0..R {
                let c = coeffs[r * k + col0 + j];
                // SAFETY: j * R + r < COLS * ROWS.
                unsafe { t.add(j * R + r).write(NIBBLE.0[c as usize]) };
            }
        }
        // SAFETY: the first pass_srcs.len() * R entries were just written;
        // the rest is the caller's contract.
        unsafe { matrix_pass::<R>(&d, pass_srcs, t, n) };
    }
}

/// One pass: `d[r] ^= Σ_j tables[j*R + r] * srcs[j]`, 64 bytes at a time.
/// The end of the rows is handled as in `x86_region`: the last (possibly
/// overlapping) block is computed from the original bytes before anything
/// is stored, so storing it last is exact.
///
/// # Safety
/// Requires AVX2; `d[r]` and `srcs[j]` valid for `n >= 32` bytes and not
/// overlapping; `t` holds `srcs.len() * R` tables.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn matrix_pass<const R: usize>(
    d: &[*mut u8; R],
    srcs: &[&[u8]],
    t: *const [u8; 32],
    n: usize,
) {
    // SAFETY: offsets stay below n for every row and source; table reads
    // stay within the srcs.len() * R written entries.
    unsafe {
        let mask = _mm256_set1_epi8(0x0f);
        // W = 1 or 2 vectors per row starting at byte i, from current dst.
        macro_rules! block {
            ($i:expr, $w:literal) => {{
                let i: usize = $i;
                let mut acc: [[__m256i; $w]; R] = core::array::from_fn(|r| {
                    core::array::from_fn(|v| {
                        _mm256_loadu_si256(d[r].add(i + 32 * v) as *const __m256i)
                    })
                });
                for (j, s) in srcs.iter().enumerate() {
                    let p = s.as_ptr().add(i);
                    let mut l = [mask; $w];
                    let mut h = [mask; $w];
                    for v in 0..$w {
                        let x = _mm256_loadu_si256(p.add(32 * v) as *const __m256i);
                        l[v] = _mm256_and_si256(x, mask);
                        h[v] = _mm256_and_si256(_mm256_srli_epi64(x, 4), mask);
                    }
                    let tj = t.add(j * R) as *const __m128i;
                    for (r, a) in acc.iter_mut().enumerate() {
                        let lo = _mm256_broadcastsi128_si256(_mm_load_si128(tj.add(2 * r)));
                        let hi = _mm256_broadcastsi128_si256(_mm_load_si128(tj.add(2 * r + 1)));
                        for v in 0..$w {
                            let p = _mm256_xor_si256(
                                _mm256_shuffle_epi8(lo, l[v]),
                                _mm256_shuffle_epi8(hi, h[v]),
                            );
                            a[v] = _mm256_xor_si256(a[v], p);
                        }
                    }
                }
                acc
            }};
        }
        macro_rules! store {
            ($i:expr, $acc:expr) => {{
                for (dp, a) in d.iter().zip($acc) {
                    for (v, x) in a.into_iter().enumerate() {
                        _mm256_storeu_si256(dp.add($i + 32 * v) as *mut __m256i, x);
                    }
                }
            }};
        }
        if n >= 64 {
            let tail = block!(n - 64, 2);
            let mut i = 0;
            while i + 64 <= n {
                store!(i, block!(i, 2));
                i += 64;
            }
            store!(n - 64, tail);
        } else {
            let (head, tail) = (block!(0, 1), block!(n - 32, 1));
            store!(0, head);
            store!(n - 32, tail);
        }
    }
}

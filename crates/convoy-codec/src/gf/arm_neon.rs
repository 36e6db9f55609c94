//! NEON tier (aarch64): split-nibble multiplication with `TBL`
//! (`vqtbl1q_u8`), the ARM twin of the SSSE3/AVX2 tiers.
//!
//! `c*x = lo_c[x & 15] ^ hi_c[x >> 4]`, each half one 16-entry table lookup
//! in the same `NIBBLE` tables the x86 tiers use. NEON shifts each byte on
//! its own (`USHR .16B`), so the high nibble needs no mask, unlike PSHUFB's
//! 64-bit shift; the low nibble does, since TBL turns indices >= 16 into 0.
//!
//! Loop structure: the scheme of `x86_region` (read it for why it is exact).
//! The ragged ends are one unaligned vector at each end, computed from the
//! original bytes before the main loop stores anything and stored after it;
//! the main loop runs on 16-byte aligned dst, 4 vectors per iteration. ARM
//! allows unaligned 128-bit accesses to normal memory, but one that crosses
//! a cache line is split in two on many cores; no board here measures what
//! aligning saves, and it costs nothing beyond the head vector the skeleton
//! computes anyway.
//! Regions shorter than one vector go scalar.

use core::arch::aarch64::*;

use super::scalar;
use super::tables::NIBBLE;

/// Sources per pass over `dst` in `mul_add_multi`. AArch64 has 32 vector
/// registers: 8 sources' 16 tables, the mask, the accumulator and the
/// operands of one product still fit, so each group saves the dst
/// loads/stores of 7 separate passes without spilling tables.
const GROUP: usize = 8;

/// 128-bit skeleton (see the module doc): `$body` computes the new dst
/// vector from the old one (`$dv`) at byte offset `$i` and must not write
/// memory. `$n >= 16` bytes at `$d`; run inside an `unsafe` NEON context.
macro_rules! region_neon {
    ($n:expr, $d:expr, |$i:ident, $dv:ident| $body:expr) => {{
        let n: usize = $n;
        let d: *mut u8 = $d;
        debug_assert!(n >= 16);
        let head = {
            let $i: usize = 0;
            let $dv = vld1q_u8(d);
            $body
        };
        let tail = {
            let $i: usize = n - 16;
            let $dv = vld1q_u8(d.add(n - 16));
            $body
        };
        let mut i = (16 - (d as usize & 15)) & 15;
        while i + 64 <= n {
            let p = d.add(i);
            let r0 = {
                let $i = i;
                let $dv = vld1q_u8(p);
                $body
            };
            let r1 = {
                let $i = i + 16;
                let $dv = vld1q_u8(p.add(16));
                $body
            };
            let r2 = {
                let $i = i + 32;
                let $dv = vld1q_u8(p.add(32));
                $body
            };
            let r3 = {
                let $i = i + 48;
                let $dv = vld1q_u8(p.add(48));
                $body
            };
            vst1q_u8(p, r0);
            vst1q_u8(p.add(16), r1);
            vst1q_u8(p.add(32), r2);
            vst1q_u8(p.add(48), r3);
            i += 64;
        }
        while i + 16 <= n {
            let p = d.add(i);
            let r = {
                let $i = i;
                let $dv = vld1q_u8(p);
                $body
            };
            vst1q_u8(p, r);
            i += 16;
        }
        vst1q_u8(d, head);
        vst1q_u8(d.add(n - 16), tail);
    }};
}

/// `c * v` for every byte of `v`, given c's two nibble tables.
macro_rules! mul16 {
    ($v:expr, $lo:expr, $hi:expr, $mask:expr) => {{
        let v = $v;
        veorq_u8(
            vqtbl1q_u8($lo, vandq_u8(v, $mask)),
            vqtbl1q_u8($hi, vshrq_n_u8::<4>(v)),
        )
    }};
}

/// c's low-nibble and high-nibble tables.
///
/// # Safety
/// Requires NEON.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn load_tables(c: u8) -> (uint8x16_t, uint8x16_t) {
    let t = NIBBLE.0[c as usize].as_ptr();
    // SAFETY: the entry is 32 bytes; LD1 has no alignment requirement.
    unsafe { (vld1q_u8(t), vld1q_u8(t.add(16))) }
}

/// # Safety
/// Requires NEON; `dst.len() == src.len()`.
#[target_feature(enable = "neon")]
pub(super) unsafe fn mul_add(dst: &mut [u8], src: &[u8], c: u8) {
    let n = dst.len();
    debug_assert_eq!(n, src.len());
    if n < 16 {
        return scalar::mul_add(dst, src, c);
    }
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    // SAFETY: the skeleton only touches offsets below n (n >= 16 checked
    // here); src has n bytes too; NEON is enabled by the caller.
    unsafe {
        let (lo, hi) = load_tables(c);
        let mask = vdupq_n_u8(0x0f);
        region_neon!(n, d, |i, dv| {
            let v = vld1q_u8(s.add(i));
            veorq_u8(dv, mul16!(v, lo, hi, mask))
        });
    }
}

/// # Safety
/// Requires NEON.
#[target_feature(enable = "neon")]
pub(super) unsafe fn mul_region(dst: &mut [u8], c: u8) {
    let n = dst.len();
    if n < 16 {
        return scalar::mul_region(dst, c);
    }
    let d = dst.as_mut_ptr();
    // SAFETY: as in `mul_add`.
    unsafe {
        let (lo, hi) = load_tables(c);
        let mask = vdupq_n_u8(0x0f);
        region_neon!(n, d, |_i, dv| mul16!(dv, lo, hi, mask));
    }
}

/// `dst ^= src` (the `c == 1` case).
///
/// # Safety
/// Requires NEON; `dst.len() == src.len()`.
#[target_feature(enable = "neon")]
pub(super) unsafe fn xor(dst: &mut [u8], src: &[u8]) {
    let n = dst.len();
    debug_assert_eq!(n, src.len());
    if n < 16 {
        return scalar::xor(dst, src);
    }
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    // SAFETY: as in `mul_add`.
    unsafe {
        region_neon!(n, d, |i, dv| veorq_u8(dv, vld1q_u8(s.add(i))));
    }
}

/// # Safety
/// Requires NEON; every source has `dst.len()` bytes; `coeffs.len() == srcs.len()`.
#[target_feature(enable = "neon")]
pub(super) unsafe fn mul_add_multi(dst: &mut [u8], srcs: &[&[u8]], coeffs: &[u8]) {
    dispatch_groups!(group, GROUP, dst, srcs, coeffs; 1 2 3 4 5 6 7);
}

/// `dst ^= Σ_{j<N} cs[j] * ptrs[j]`, loading and storing dst once.
///
/// # Safety
/// Requires NEON; `ptrs[..N]` valid for `dst.len()` reads, not overlapping dst.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn group<const N: usize>(dst: &mut [u8], ptrs: &[*const u8; GROUP], cs: &[u8; GROUP]) {
    let len = dst.len();
    let d = dst.as_mut_ptr();
    let srcs = &ptrs[..N];
    // SAFETY: the skeleton only touches offsets below len (>= 16), for dst
    // and for every source.
    unsafe {
        if len < 16 {
            return scalar::mul_add_multi_tail(d, srcs, &cs[..N], len);
        }
        // The tables are loaded once per call, not per vector: with 32
        // registers they stay in registers across the loop.
        let tabs: [(uint8x16_t, uint8x16_t); N] = core::array::from_fn(|j| load_tables(cs[j]));
        let mask = vdupq_n_u8(0x0f);
        region_neon!(len, d, |i, dv| {
            let mut acc = dv;
            for (&p, &(lo, hi)) in srcs.iter().zip(&tabs) {
                let v = vld1q_u8(p.add(i));
                acc = veorq_u8(acc, mul16!(v, lo, hi, mask));
            }
            acc
        });
    }
}

//! Loop skeletons shared by the x86 kernels (the grouping of sources for
//! `mul_add_multi` is in `groups`, shared with ARM).
//!
//! Each kernel is "new dst vector = f(offset, old dst vector)". The skeleton
//! aligns the dst pointer (split loads/stores on misaligned dst cost up to a
//! third of the throughput) and covers the ragged ends with one unaligned
//! vector at each end of the region, without a scalar loop:
//!
//! * head = f(0, dst[0..W]) and tail = f(n-W, dst[n-W..n]) are computed
//!   *before* the main loop stores anything, i.e. from the original bytes;
//! * the aligned main loop computes every vector from original bytes too;
//! * head and tail are stored after the loop. Where they overlap the loop's
//!   vectors they hold the very same values, so the overlap is harmless.
//!
//! Applying `f` twice to a byte (as a naive overlapping tail would) is wrong
//! for `dst ^= c*src`; computing it twice from the same original byte is not.
//! Loading everything the ends need up front also avoids store-forwarding
//! stalls from loads that partially overlap earlier stores.
//!
//! Requires `n >= W`; the caller handles shorter regions. `$body` must only
//! read `dst` through `$dv` and must not write memory.

/// 256-bit skeleton: 4 vectors per iteration, then single vectors.
/// `$n >= 32` bytes at `$d`; run inside an `unsafe` AVX2 context.
macro_rules! region256 {
    ($n:expr, $d:expr, |$i:ident, $dv:ident| $body:expr) => {{
        let n: usize = $n;
        let d: *mut u8 = $d;
        debug_assert!(n >= 32);
        let head = {
            let $i: usize = 0;
            let $dv = _mm256_loadu_si256(d as *const __m256i);
            $body
        };
        let tail = {
            let $i: usize = n - 32;
            let $dv = _mm256_loadu_si256(d.add(n - 32) as *const __m256i);
            $body
        };
        let mut i = (32 - (d as usize & 31)) & 31;
        while i + 128 <= n {
            let p = d.add(i) as *mut __m256i;
            let r0 = {
                let $i = i;
                let $dv = _mm256_load_si256(p);
                $body
            };
            let r1 = {
                let $i = i + 32;
                let $dv = _mm256_load_si256(p.add(1));
                $body
            };
            let r2 = {
                let $i = i + 64;
                let $dv = _mm256_load_si256(p.add(2));
                $body
            };
            let r3 = {
                let $i = i + 96;
                let $dv = _mm256_load_si256(p.add(3));
                $body
            };
            _mm256_store_si256(p, r0);
            _mm256_store_si256(p.add(1), r1);
            _mm256_store_si256(p.add(2), r2);
            _mm256_store_si256(p.add(3), r3);
            i += 128;
        }
        while i + 32 <= n {
            let p = d.add(i) as *mut __m256i;
            let r = {
                let $i = i;
                let $dv = _mm256_load_si256(p);
                $body
            };
            _mm256_store_si256(p, r);
            i += 32;
        }
        _mm256_storeu_si256(d as *mut __m256i, head);
        _mm256_storeu_si256(d.add(n - 32) as *mut __m256i, tail);
    }};
}

/// 128-bit skeleton, same scheme. `$n >= 16` bytes at `$d`; run inside an
/// `unsafe` context with SSE2 (plus whatever `$body` needs).
macro_rules! region128 {
    ($n:expr, $d:expr, |$i:ident, $dv:ident| $body:expr) => {{
        let n: usize = $n;
        let d: *mut u8 = $d;
        debug_assert!(n >= 16);
        let head = {
            let $i: usize = 0;
            let $dv = _mm_loadu_si128(d as *const __m128i);
            $body
        };
        let tail = {
            let $i: usize = n - 16;
            let $dv = _mm_loadu_si128(d.add(n - 16) as *const __m128i);
            $body
        };
        let mut i = (16 - (d as usize & 15)) & 15;
        while i + 64 <= n {
            let p = d.add(i) as *mut __m128i;
            let r0 = {
                let $i = i;
                let $dv = _mm_load_si128(p);
                $body
            };
            let r1 = {
                let $i = i + 16;
                let $dv = _mm_load_si128(p.add(1));
                $body
            };
            let r2 = {
                let $i = i + 32;
                let $dv = _mm_load_si128(p.add(2));
                $body
            };
            let r3 = {
                let $i = i + 48;
                let $dv = _mm_load_si128(p.add(3));
                $body
            };
            _mm_store_si128(p, r0);
            _mm_store_si128(p.add(1), r1);
            _mm_store_si128(p.add(2), r2);
            _mm_store_si128(p.add(3), r3);
            i += 64;
        }
        while i + 16 <= n {
            let p = d.add(i) as *mut __m128i;
            let r = {
                let $i = i;
                let $dv = _mm_load_si128(p);
                $body
            };
            _mm_store_si128(p, r);
            i += 16;
        }
        _mm_storeu_si128(d as *mut __m128i, head);
        _mm_storeu_si128(d.add(n - 16) as *mut __m128i, tail);
    }};
}

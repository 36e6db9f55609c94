//! The grouping of sources for the SIMD tiers' `mul_add_multi`, shared by
//! the x86 and ARM kernels: each tier multiplies a fixed number of sources
//! per pass over `dst`, so `dst` is loaded and stored once per group.

/// Collects the non-zero (source, coefficient) pairs of a `mul_add_multi`
/// call into groups of `$width` and hands each to `$group::<N>`, with N a
/// compile-time constant so the kernel keeps its tables in registers. The
/// listed `$rest` sizes (1 ..= $width - 1) cover the last, partial group.
/// Run inside the tier's `unsafe fn`; `$group` has the signature
/// `unsafe fn(&mut [u8], &[*const u8; $width], &[u8; $width])`.
macro_rules! dispatch_groups {
    ($group:ident, $width:expr, $dst:expr, $srcs:expr, $coeffs:expr; $($rest:literal)+) => {{
        let mut ptrs = [core::ptr::null::<u8>(); $width];
        let mut cs = [0u8; $width];
        let mut n = 0;
        // SAFETY (all group calls): the first N entries of ptrs/cs are live
        // sources of dst.len() bytes with non-zero coefficients.
        for (s, &c) in $srcs.iter().zip($coeffs) {
            if c == 0 {
                continue;
            }
            ptrs[n] = s.as_ptr();
            cs[n] = c;
            n += 1;
            if n == $width {
                unsafe { $group::<{ $width }>($dst, &ptrs, &cs) };
                n = 0;
            }
        }
        match n {
            $($rest => unsafe { $group::<$rest>($dst, &ptrs, &cs) },)+
            _ => {}
        }
    }};
}

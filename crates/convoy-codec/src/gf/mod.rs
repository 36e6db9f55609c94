//! GF(2^8) arithmetic with the polynomial x^8+x^4+x^3+x^2+1 (0x11D) and
//! region kernels selected at run time.
//!
//! Scalar ops ([`mul`], [`inv`], [`div`]) are table lookups. Region ops
//! ([`mul_add`], [`mul_region`], [`mul_add_multi`]) dispatch to the fastest
//! [`Tier`] the CPU supports: on x86-64 GFNI (512/256-bit, via
//! `GF2P8AFFINEQB` with a per-constant bit matrix since `GF2P8MULB` is fixed
//! to 0x11B), AVX2 or SSSE3 (split-nibble `PSHUFB`); on aarch64 NEON
//! (split-nibble `TBL`); elsewhere, or as the fallback, scalar. The choice is made once and cached as a
//! table of function pointers, so a call costs one predictable indirect call.
//! `CONVOY_GF_TIER=<name>` forces a lower tier, e.g. for benchmarking.

use std::sync::OnceLock;

use dispatch::{active, kernels_for, Kernels};

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[macro_use]
mod groups;
#[cfg(target_arch = "x86_64")]
#[macro_use]
mod x86_region;

#[cfg(target_arch = "aarch64")]
mod arm_neon;
mod dispatch;
mod scalar;
mod self_test;
mod tables;
#[cfg(target_arch = "x86_64")]
mod x86_avx2;
// GFNI/AVX-512 intrinsics are stable since Rust 1.89: the workspace's
// rust-version is 1.89 for this module.
#[cfg(target_arch = "x86_64")]
mod x86_gfni;
#[cfg(target_arch = "x86_64")]
mod x86_ssse3;

pub use tables::gf2p8affine_model;

/// The field's reduction polynomial x^8 + x^4 + x^3 + x^2 + 1.
pub const POLY: u16 = 0x11D;

/// Field multiplication.
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    tables::MUL.0[a as usize][b as usize]
}

/// Multiplicative inverse; `None` for 0.
#[inline]
pub fn inv(a: u8) -> Option<u8> {
    (a != 0).then(|| tables::INV[a as usize])
}

/// `a / b`; `None` if `b == 0`.
#[inline]
pub fn div(a: u8, b: u8) -> Option<u8> {
    inv(b).map(|ib| mul(a, ib))
}

/// `2^e` (2 generates the multiplicative group, of order 255).
#[inline]
pub fn exp(e: u8) -> u8 {
    tables::EXP[e as usize]
}

/// Discrete logarithm base 2; `None` for 0.
#[inline]
pub fn log(a: u8) -> Option<u8> {
    (a != 0).then(|| tables::LOG[a as usize])
}

/// The GF2P8AFFINEQB bit matrix that multiplies each byte by `c` in this
/// field (exposed so tests can check it against [`gf2p8affine_model`]).
#[inline]
pub fn gfni_matrix(c: u8) -> u64 {
    tables::GFNI_MATRIX[c as usize]
}

/// An implementation level of the region kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    Scalar,
    /// aarch64 only.
    Neon,
    Ssse3,
    Avx2,
    Gfni256,
    Gfni512,
}

impl Tier {
    /// Every tier; those one CPU supports come slowest to fastest.
    pub const ALL: [Tier; 6] = [
        Tier::Scalar,
        Tier::Neon,
        Tier::Ssse3,
        Tier::Avx2,
        Tier::Gfni256,
        Tier::Gfni512,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tier::Scalar => "scalar",
            Tier::Neon => "neon",
            Tier::Ssse3 => "ssse3",
            Tier::Avx2 => "avx2",
            Tier::Gfni256 => "gfni-256",
            Tier::Gfni512 => "gfni-512",
        }
    }

    /// Parses a [`Tier::name`].
    pub fn from_name(name: &str) -> Option<Tier> {
        Tier::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Whether this CPU can run the tier (std caches the CPUID and, on
    /// aarch64, the HWCAP results).
    pub fn is_supported(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Tier::Scalar => true,
                Tier::Neon => false,
                Tier::Ssse3 => is_x86_feature_detected!("ssse3"),
                Tier::Avx2 => is_x86_feature_detected!("avx2"),
                Tier::Gfni256 => {
                    is_x86_feature_detected!("gfni")
                        && is_x86_feature_detected!("avx")
                        && is_x86_feature_detected!("avx2")
                }
                Tier::Gfni512 => {
                    is_x86_feature_detected!("gfni")
                        && is_x86_feature_detected!("avx512f")
                        && is_x86_feature_detected!("avx512bw")
                }
            }
        }
        // Every AArch64 CPU that runs Linux has Advanced SIMD (the ABI
        // passes floats in its registers), but asking costs one cached load
        // and keeps the pattern of the x86 tiers: a build for a target without
        // NEON in its baseline (a soft-float or `-neon` target spec) would
        // still pick scalar at run time instead of faulting.
        #[cfg(target_arch = "aarch64")]
        {
            match self {
                Tier::Scalar => true,
                Tier::Neon => std::arch::is_aarch64_feature_detected!("neon"),
                Tier::Ssse3 | Tier::Avx2 | Tier::Gfni256 | Tier::Gfni512 => false,
            }
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            self == Tier::Scalar
        }
    }

    /// The tier used by [`mul_add`] and friends: the fastest supported tier
    /// that passes a known-answer test against scalar (see `self_test.rs`),
    /// unless `CONVOY_GF_TIER` names another tier that does. Decided once.
    pub fn best() -> Tier {
        static BEST: OnceLock<Tier> = OnceLock::new();
        *BEST.get_or_init(|| {
            let fastest = Tier::ALL
                .into_iter()
                .rev()
                .filter(|t| t.is_supported())
                .find(|&t| {
                    let ok = self_test::passes(t);
                    if !ok {
                        eprintln!(
                            "convoy-codec: the {} GF(2^8) kernels disagree with scalar on this CPU; not using them",
                            t.name()
                        );
                    }
                    ok
                })
                .unwrap_or(Tier::Scalar);
            match std::env::var("CONVOY_GF_TIER") {
                Ok(name) => match Tier::from_name(name.trim()) {
                    Some(t) if t.is_supported() && self_test::passes(t) => t,
                    Some(t) => {
                        eprintln!(
                            "convoy-codec: CONVOY_GF_TIER={} is not supported by this CPU or failed its self-test; using {}",
                            t.name(),
                            fastest.name()
                        );
                        fastest
                    }
                    None => {
                        eprintln!(
                            "convoy-codec: unknown CONVOY_GF_TIER={name:?} (expected one of {}); using {}",
                            Tier::ALL.map(Tier::name).join(", "),
                            fastest.name()
                        );
                        fastest
                    }
                },
                Err(_) => fastest,
            }
        })
    }
}

/// A region kernel was requested with a tier this CPU cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("GF kernel tier {0:?} is not supported by this CPU")]
pub struct UnsupportedTier(pub Tier);

/// The SIMD-relevant CPU features present, for benchmark reports.
pub fn detected_features() -> Vec<&'static str> {
    #[allow(unused_mut)]
    let mut v = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! probe {
            ($($f:tt),*) => {$(
                if is_x86_feature_detected!($f) {
                    v.push($f);
                }
            )*};
        }
        probe!("ssse3", "avx", "avx2", "gfni", "avx512f", "avx512bw", "avx512vl");
    }
    #[cfg(target_arch = "aarch64")]
    {
        // NEON carries the kernels; the crypto extensions (AES, PMULL) and
        // SVE say how far AES-GCM and a future wider tier could go on the
        // same board.
        macro_rules! probe {
            ($($f:tt),*) => {$(
                if std::arch::is_aarch64_feature_detected!($f) {
                    v.push($f);
                }
            )*};
        }
        probe!("neon", "aes", "pmull", "sha2", "sve", "sve2");
    }
    v
}

#[cold]
#[inline(never)]
#[track_caller]
fn len_mismatch(dst: usize, src: usize) -> ! {
    panic!("source slice length ({src}) does not match destination slice length ({dst})")
}

#[inline]
fn run_mul_add(k: &Kernels, dst: &mut [u8], src: &[u8], c: u8) {
    // SAFETY: `k` belongs to a supported tier and the lengths were checked.
    match c {
        0 => {}
        1 => unsafe { (k.xor)(dst, src) },
        _ => unsafe { (k.mul_add)(dst, src, c) },
    }
}

#[inline]
fn run_mul_region(k: &Kernels, dst: &mut [u8], c: u8) {
    match c {
        0 => dst.fill(0),
        1 => {}
        // SAFETY: `k` belongs to a supported tier.
        _ => unsafe { (k.mul_region)(dst, c) },
    }
}

#[inline]
#[track_caller]
fn check_multi(dst: &[u8], srcs: &[&[u8]], coeffs: &[u8]) {
    assert_eq!(
        srcs.len(),
        coeffs.len(),
        "mul_add_multi: {} sources but {} coefficients",
        srcs.len(),
        coeffs.len()
    );
    for s in srcs {
        if s.len() != dst.len() {
            len_mismatch(dst.len(), s.len());
        }
    }
}

#[inline]
#[track_caller]
fn check_matrix(dsts: &[&mut [u8]], srcs: &[&[u8]], coeffs: &[u8]) {
    assert_eq!(
        coeffs.len(),
        dsts.len() * srcs.len(),
        "mul_add_matrix: {} coefficients for {} x {} matrix",
        coeffs.len(),
        dsts.len(),
        srcs.len()
    );
    let Some(n) = dsts.first().map(|d| d.len()) else {
        return;
    };
    for len in dsts
        .iter()
        .map(|d| d.len())
        .chain(srcs.iter().map(|s| s.len()))
    {
        if len != n {
            len_mismatch(n, len);
        }
    }
}

#[inline]
fn run_mul_add_multi(k: &Kernels, dst: &mut [u8], srcs: &[&[u8]], coeffs: &[u8]) {
    match srcs.len() {
        0 => {}
        1 => run_mul_add(k, dst, srcs[0], coeffs[0]),
        // SAFETY: `k` belongs to a supported tier and the lengths were checked.
        _ => unsafe { (k.mul_add_multi)(dst, srcs, coeffs) },
    }
}

/// `dst ^= c * src`, with [`Tier::best`].
///
/// # Panics
/// If `dst.len() != src.len()`.
#[inline]
#[track_caller]
pub fn mul_add(dst: &mut [u8], src: &[u8], c: u8) {
    if dst.len() != src.len() {
        len_mismatch(dst.len(), src.len());
    }
    run_mul_add(active(), dst, src, c);
}

/// `dst = c * dst`, with [`Tier::best`].
#[inline]
pub fn mul_region(dst: &mut [u8], c: u8) {
    run_mul_region(active(), dst, c);
}

/// `dst ^= Σ coeffs[i] * srcs[i]`, with [`Tier::best`]. Cheaper than repeated
/// [`mul_add`] because `dst` is loaded and stored once per group of sources.
///
/// # Panics
/// If a source's length differs from `dst.len()` or `coeffs.len() != srcs.len()`.
#[inline]
#[track_caller]
pub fn mul_add_multi(dst: &mut [u8], srcs: &[&[u8]], coeffs: &[u8]) {
    check_multi(dst, srcs, coeffs);
    run_mul_add_multi(active(), dst, srcs, coeffs);
}

/// `dsts[r] ^= Σ_j coeffs[r * srcs.len() + j] * srcs[j]` for every row `r`:
/// a (dsts × srcs) coefficient matrix, row-major, applied to the sources.
/// Covers RLNC encoding (coded = C · sources) and decoding (sources =
/// C⁻¹ · received). On AVX2 each source vector is split into nibbles once
/// for several rows, which makes this ~1.5x faster per product than
/// [`mul_add_multi`] row by row.
///
/// # Panics
/// If the buffers' lengths differ or `coeffs.len() != dsts.len() * srcs.len()`.
#[inline]
#[track_caller]
pub fn mul_add_matrix(dsts: &mut [&mut [u8]], srcs: &[&[u8]], coeffs: &[u8]) {
    check_matrix(dsts, srcs, coeffs);
    // SAFETY: the active kernels belong to a supported tier; lengths checked.
    unsafe { (active().mul_add_matrix)(dsts, srcs, coeffs) }
}

/// [`mul_add_matrix`] with an explicit tier.
#[track_caller]
pub fn mul_add_matrix_with(
    tier: Tier,
    dsts: &mut [&mut [u8]],
    srcs: &[&[u8]],
    coeffs: &[u8],
) -> Result<(), UnsupportedTier> {
    check_matrix(dsts, srcs, coeffs);
    let k = kernels_for(tier)?;
    // SAFETY: `k` belongs to a supported tier; lengths checked.
    unsafe { (k.mul_add_matrix)(dsts, srcs, coeffs) };
    Ok(())
}

/// [`mul_add`] with an explicit tier.
#[track_caller]
pub fn mul_add_with(tier: Tier, dst: &mut [u8], src: &[u8], c: u8) -> Result<(), UnsupportedTier> {
    if dst.len() != src.len() {
        len_mismatch(dst.len(), src.len());
    }
    run_mul_add(kernels_for(tier)?, dst, src, c);
    Ok(())
}

/// [`mul_region`] with an explicit tier.
pub fn mul_region_with(tier: Tier, dst: &mut [u8], c: u8) -> Result<(), UnsupportedTier> {
    run_mul_region(kernels_for(tier)?, dst, c);
    Ok(())
}

/// [`mul_add_multi`] with an explicit tier.
#[track_caller]
pub fn mul_add_multi_with(
    tier: Tier,
    dst: &mut [u8],
    srcs: &[&[u8]],
    coeffs: &[u8],
) -> Result<(), UnsupportedTier> {
    check_multi(dst, srcs, coeffs);
    run_mul_add_multi(kernels_for(tier)?, dst, srcs, coeffs);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfni_matrices_match_model() {
        for c in 0..=255u8 {
            let m = gfni_matrix(c);
            for x in 0..=255u8 {
                assert_eq!(gf2p8affine_model(x, m, 0), mul(c, x), "c={c} x={x}");
            }
        }
    }

    #[test]
    fn tier_names_roundtrip() {
        for t in Tier::ALL {
            assert_eq!(Tier::from_name(t.name()), Some(t));
        }
        assert!(Tier::Scalar.is_supported());
        assert!(Tier::best().is_supported());
    }
}

//! Per-tier tables of kernel function pointers, and the cached choice.

use std::sync::OnceLock;

#[cfg(target_arch = "aarch64")]
use super::arm_neon;
use super::{scalar, Tier, UnsupportedTier};
#[cfg(target_arch = "x86_64")]
use super::{x86_avx2, x86_gfni, x86_ssse3};

/// Function pointers of one tier. Only ever built for a tier that
/// `is_supported()`, which is what makes calling them sound.
/// Kernel contract (checked by the public wrappers): every source, and every
/// row for the matrix form, has the destination's length; `coeffs` has
/// `srcs.len()` entries (`dsts.len() * srcs.len()` for the matrix). Kernels
/// accept any coefficient, but the wrappers send `c` = 0 and 1 of the
/// single-source forms to the no-op / `xor` / `fill` fast paths.
pub(super) struct Kernels {
    pub(super) mul_add: unsafe fn(&mut [u8], &[u8], u8),
    pub(super) mul_region: unsafe fn(&mut [u8], u8),
    pub(super) xor: unsafe fn(&mut [u8], &[u8]),
    pub(super) mul_add_multi: unsafe fn(&mut [u8], &[&[u8]], &[u8]),
    pub(super) mul_add_matrix: MatrixKernel,
}

type MatrixKernel = unsafe fn(&mut [&mut [u8]], &[&[u8]], &[u8]);

/// `mul_add_matrix` as one `mul_add_multi` per row, for tiers where sharing
/// work between rows buys little (GFNI: one instruction per product anyway)
/// or has not been written yet (NEON).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
macro_rules! matrix_by_rows {
    ($name:ident, $multi:path) => {
        /// # Safety
        /// As for `Kernels::mul_add_matrix` of the tier of `$multi`.
        unsafe fn $name(dsts: &mut [&mut [u8]], srcs: &[&[u8]], coeffs: &[u8]) {
            if srcs.is_empty() {
                return;
            }
            for (d, row) in dsts.iter_mut().zip(coeffs.chunks_exact(srcs.len())) {
                // SAFETY: the caller's contract, row by row.
                unsafe { $multi(d, srcs, row) };
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
matrix_by_rows!(ssse3_matrix, x86_ssse3::mul_add_multi);
#[cfg(target_arch = "x86_64")]
matrix_by_rows!(gfni256_matrix, x86_gfni::mul_add_multi_256);
#[cfg(target_arch = "x86_64")]
matrix_by_rows!(gfni512_matrix, x86_gfni::mul_add_multi_512);
#[cfg(target_arch = "aarch64")]
matrix_by_rows!(neon_matrix, arm_neon::mul_add_multi);

static SCALAR: Kernels = Kernels {
    mul_add: scalar::mul_add,
    mul_region: scalar::mul_region,
    xor: scalar::xor,
    mul_add_multi: scalar::mul_add_multi,
    mul_add_matrix: scalar::mul_add_matrix,
};

#[cfg(target_arch = "aarch64")]
static NEON: Kernels = Kernels {
    mul_add: arm_neon::mul_add,
    mul_region: arm_neon::mul_region,
    xor: arm_neon::xor,
    mul_add_multi: arm_neon::mul_add_multi,
    mul_add_matrix: neon_matrix,
};

#[cfg(target_arch = "x86_64")]
static SSSE3: Kernels = Kernels {
    mul_add: x86_ssse3::mul_add,
    mul_region: x86_ssse3::mul_region,
    xor: x86_ssse3::xor,
    mul_add_multi: x86_ssse3::mul_add_multi,
    mul_add_matrix: ssse3_matrix,
};

#[cfg(target_arch = "x86_64")]
static AVX2: Kernels = Kernels {
    mul_add: x86_avx2::mul_add,
    mul_region: x86_avx2::mul_region,
    xor: x86_avx2::xor,
    mul_add_multi: x86_avx2::mul_add_multi,
    mul_add_matrix: x86_avx2::mul_add_matrix,
};

#[cfg(target_arch = "x86_64")]
static GFNI256: Kernels = Kernels {
    mul_add: x86_gfni::mul_add_256,
    mul_region: x86_gfni::mul_region_256,
    xor: x86_avx2::xor,
    mul_add_multi: x86_gfni::mul_add_multi_256,
    mul_add_matrix: gfni256_matrix,
};

#[cfg(target_arch = "x86_64")]
static GFNI512: Kernels = Kernels {
    mul_add: x86_gfni::mul_add_512,
    mul_region: x86_gfni::mul_region_512,
    xor: x86_gfni::xor_512,
    mul_add_multi: x86_gfni::mul_add_multi_512,
    mul_add_matrix: gfni512_matrix,
};

pub(super) fn kernels_for(tier: Tier) -> Result<&'static Kernels, UnsupportedTier> {
    if !tier.is_supported() {
        return Err(UnsupportedTier(tier));
    }
    #[cfg(target_arch = "x86_64")]
    {
        Ok(match tier {
            Tier::Scalar => &SCALAR,
            Tier::Ssse3 => &SSSE3,
            Tier::Avx2 => &AVX2,
            Tier::Gfni256 => &GFNI256,
            Tier::Gfni512 => &GFNI512,
            // Unreachable: is_supported() is false for it here.
            Tier::Neon => return Err(UnsupportedTier(tier)),
        })
    }
    #[cfg(target_arch = "aarch64")]
    {
        match tier {
            Tier::Scalar => Ok(&SCALAR),
            Tier::Neon => Ok(&NEON),
            // Unreachable: is_supported() is false for them here.
            Tier::Ssse3 | Tier::Avx2 | Tier::Gfni256 | Tier::Gfni512 => Err(UnsupportedTier(tier)),
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        Ok(&SCALAR)
    }
}

#[inline]
pub(super) fn active() -> &'static Kernels {
    static ACTIVE: OnceLock<&'static Kernels> = OnceLock::new();
    ACTIVE.get_or_init(|| kernels_for(Tier::best()).unwrap_or(&SCALAR))
}

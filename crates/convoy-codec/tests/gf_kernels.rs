//! GF(2^8) field checks and every runtime kernel tier against a scalar
//! reference.
//!
//! Region-kernel coverage, per supported tier and per operation: every length
//! 0..=4100. `mul_add` and `mul_region` run two cases per length, one with a
//! special constant (cycling 0, 1, 255, 2) and one with a random constant,
//! each with independent random src/dst start offsets in 0..64 (misaligned
//! pointers: with 16-byte aligned allocations every residue mod 64, so every
//! head case of the 128-, 256- and 512-bit kernels, is reached). `mul_add_multi` takes
//! one of the two cases per length and 0..=17 sources (around and across the
//! 4- and 8-source groups of the SIMD kernels), each source at its own
//! offset, ~1/4 of coefficients 0 or 1. Destination buffers carry guard bytes
//! that must come back untouched. Each test takes under 3 s in a debug build
//! and well under 1 s in release.

use std::io::Write;

use convoy_codec::gf::{self, Tier, UnsupportedTier};

const MAX_LEN: usize = 4100;
const GUARD: usize = 64;
const SPECIAL: [u8; 4] = [0, 1, 255, 2];
/// Source counts cycled through by the multi test: around and across the
/// 4-source (SSSE3/AVX2) and 8-source (GFNI, NEON) groups of the SIMD kernels.
const SOURCE_COUNTS: [usize; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 17];
const MAX_SOURCES: usize = 17;

/// splitmix64: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
    fn coeff(&mut self) -> u8 {
        match self.below(8) {
            0 => 0,
            1 => 1,
            _ => self.byte(),
        }
    }
}

/// Independent reference: shift-and-add multiplication reduced mod 0x11D.
fn peasant(mut a: u8, mut b: u8) -> u8 {
    let mut acc = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            acc ^= a;
        }
        let hi = a & 0x80 != 0;
        a <<= 1;
        if hi {
            a ^= 0x1D;
        }
        b >>= 1;
    }
    acc
}

/// The tiers this CPU can run, announcing the others so a green run on a
/// machine without GFNI/AVX-512 (or on x86, NEON) does not read as if those
/// were tested.
fn supported_tiers(test: &str) -> Vec<Tier> {
    let (yes, no): (Vec<Tier>, Vec<Tier>) = Tier::ALL.into_iter().partition(|t| t.is_supported());
    let names = |ts: &[Tier]| ts.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ");
    let mut msg = format!("{test}: testing tiers: {}", names(&yes));
    if !no.is_empty() {
        msg += &format!(
            "; SKIPPED (unsupported on this CPU): {}; CPU features: {:?}",
            names(&no),
            gf::detected_features()
        );
    }
    // Straight to the stderr handle: libtest captures `eprintln!` of passing
    // tests, and the skip notice should be visible in every run.
    let _ = writeln!(std::io::stderr(), "{msg}");
    yes
}

/// Random bytes that cases slice their sources from (only dst needs to be
/// fresh per case, since only dst is written).
struct Pool(Vec<Vec<u8>>);

impl Pool {
    fn new(rng: &mut Rng) -> Self {
        Pool(
            (0..MAX_SOURCES)
                .map(|_| {
                    let mut v = vec![0u8; MAX_LEN + 64];
                    rng.fill(&mut v);
                    v
                })
                .collect(),
        )
    }
    fn src(&self, j: usize, off: usize, len: usize) -> &[u8] {
        &self.0[j][off..off + len]
    }
}

/// A random destination buffer: guard bytes, then `len` bytes at `off`.
fn dst_buffer(rng: &mut Rng, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; off + len + GUARD];
    rng.fill(&mut v);
    v
}

/// Two cases per length: (len, constant, src offset, dst offset).
fn cases(rng: &mut Rng) -> Vec<(usize, u8, usize, usize)> {
    (0..=MAX_LEN)
        .flat_map(|len| {
            let special = SPECIAL[len % SPECIAL.len()];
            let random = rng.byte();
            let offs = [rng.below(64), rng.below(64), rng.below(64), rng.below(64)];
            [
                (len, special, offs[0], offs[1]),
                (len, random, offs[2], offs[3]),
            ]
        })
        .collect()
}

/// Runs `op` on a copy of `dst` for every tier and compares with `want`.
fn check_tiers(
    tiers: &[Tier],
    dst: &[u8],
    want: &[u8],
    what: impl Fn() -> String,
    op: impl Fn(Tier, &mut [u8]),
) {
    for &tier in tiers {
        let mut got = dst.to_vec();
        op(tier, &mut got);
        assert!(got == want, "{}: {}", tier.name(), what());
    }
}

#[test]
fn mul_matches_peasant_for_all_pairs() {
    assert_eq!(gf::POLY, 0x11D);
    for a in 0..=255u8 {
        for b in 0..=255u8 {
            assert_eq!(gf::mul(a, b), peasant(a, b), "{a} * {b}");
        }
    }
}

#[test]
fn inverses_and_division() {
    assert_eq!(gf::inv(0), None);
    assert_eq!(gf::div(7, 0), None);
    assert_eq!(gf::div(0, 7), Some(0));
    for a in 1..=255u8 {
        let ia = gf::inv(a).unwrap();
        assert_eq!(gf::mul(a, ia), 1, "inv({a})");
        for b in 1..=255u8 {
            let q = gf::div(a, b).unwrap();
            assert_eq!(gf::mul(q, b), a, "{a} / {b}");
        }
    }
}

#[test]
fn two_generates_the_multiplicative_group() {
    let mut x = 1u8;
    let mut seen = [false; 256];
    for e in 0..255u32 {
        assert!(!seen[x as usize], "2^{e} repeats, order < 255");
        seen[x as usize] = true;
        assert_eq!(gf::exp(e as u8), x);
        assert_eq!(gf::log(x), Some(e as u8));
        x = gf::mul(x, 2);
    }
    assert_eq!(x, 1, "2^255 must be 1");
    assert_eq!(gf::log(0), None);
}

#[test]
fn field_axioms_spot_checks() {
    let mut rng = Rng(7);
    for _ in 0..20_000 {
        let (a, b, c) = (rng.byte(), rng.byte(), rng.byte());
        assert_eq!(gf::mul(a, b), gf::mul(b, a));
        assert_eq!(gf::mul(gf::mul(a, b), c), gf::mul(a, gf::mul(b, c)));
        assert_eq!(gf::mul(a, b ^ c), gf::mul(a, b) ^ gf::mul(a, c));
    }
}

/// The GFNI tiers cannot run on every CPU, so the part that is easy to get
/// wrong -- the per-constant bit matrix and its bit/byte order -- is checked
/// through a software model of GF2P8AFFINEQB for all (c, x).
#[test]
fn gfni_matrices_reproduce_field_multiplication() {
    for c in 0..=255u8 {
        let m = gf::gfni_matrix(c);
        for x in 0..=255u8 {
            assert_eq!(gf::gf2p8affine_model(x, m, 0), peasant(c, x), "c={c} x={x}");
        }
    }
    // The model itself: the identity matrix (0x0102040810204080 in SDM
    // layout) maps x to x, and imm8 is XORed in.
    assert_eq!(gf::gfni_matrix(1), 0x0102_0408_1020_4080);
    for x in 0..=255u8 {
        assert_eq!(
            gf::gf2p8affine_model(x, 0x0102_0408_1020_4080, 0x5A),
            x ^ 0x5A
        );
    }
}

#[test]
fn mul_add_every_tier_matches_reference() {
    let tiers = supported_tiers("mul_add");
    let mut rng = Rng(0x1234_5678);
    let pool = Pool::new(&mut rng);
    for (len, c, so, dof) in cases(&mut rng) {
        let src = pool.src(0, so, len);
        let dst = dst_buffer(&mut rng, dof, len);
        let mut want = dst.clone();
        let row: Vec<u8> = (0..=255).map(|x| gf::mul(c, x)).collect();
        for (w, s) in want[dof..dof + len].iter_mut().zip(src) {
            *w ^= row[*s as usize];
        }
        let what = || format!("mul_add len={len} c={c} src_off={so} dst_off={dof}");
        check_tiers(&tiers, &dst, &want, what, |tier, d| {
            gf::mul_add_with(tier, &mut d[dof..dof + len], src, c).unwrap()
        });
    }
}

#[test]
fn mul_region_every_tier_matches_reference() {
    let tiers = supported_tiers("mul_region");
    let mut rng = Rng(0x9876_5432);
    for (len, c, _, dof) in cases(&mut rng) {
        let dst = dst_buffer(&mut rng, dof, len);
        let mut want = dst.clone();
        let row: Vec<u8> = (0..=255).map(|x| gf::mul(c, x)).collect();
        for w in &mut want[dof..dof + len] {
            *w = row[*w as usize];
        }
        let what = || format!("mul_region len={len} c={c} dst_off={dof}");
        check_tiers(&tiers, &dst, &want, what, |tier, d| {
            gf::mul_region_with(tier, &mut d[dof..dof + len], c).unwrap()
        });
    }
}

#[test]
fn mul_add_multi_every_tier_matches_reference() {
    let tiers = supported_tiers("mul_add_multi");
    let mut rng = Rng(0xC0FF_EE00);
    let pool = Pool::new(&mut rng);
    // One of the two cases per length (alternating in blocks of four lengths,
    // so every special constant still shows up) keeps debug builds quick.
    let cases = cases(&mut rng)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % 2 == (i / 8) % 2);
    for (case, (len, c, so, dof)) in cases.map(|(_, c)| c).enumerate() {
        let k = SOURCE_COUNTS[case % SOURCE_COUNTS.len()];
        // Sources start at different offsets from each other too.
        let srcs: Vec<&[u8]> = (0..k).map(|j| pool.src(j, (so + j) % 8, len)).collect();
        // The case's constant leads so 0/1/255 appear as multi coefficients too.
        let coeffs: Vec<u8> = (0..k)
            .map(|j| if j == 0 { c } else { rng.coeff() })
            .collect();
        let dst = dst_buffer(&mut rng, dof, len);
        let mut want = dst.clone();
        for (s, &cf) in srcs.iter().zip(&coeffs) {
            let row: Vec<u8> = (0..=255).map(|x| gf::mul(cf, x)).collect();
            for (w, x) in want[dof..dof + len].iter_mut().zip(s.iter()) {
                *w ^= row[*x as usize];
            }
        }
        let what =
            || format!("mul_add_multi len={len} coeffs={coeffs:?} src_off={so} dst_off={dof}");
        check_tiers(&tiers, &dst, &want, what, |tier, d| {
            gf::mul_add_multi_with(tier, &mut d[dof..dof + len], &srcs, &coeffs).unwrap()
        });
    }
}

/// `mul_add_matrix` (an addition to the API): every length up to 600
/// and every 11th beyond, up to 4100; 1..=6 rows (around the AVX2 kernel's
/// 4-row blocks), 0..=5 sources, random offsets and coefficients.
#[test]
fn mul_add_matrix_every_tier_matches_reference() {
    let tiers = supported_tiers("mul_add_matrix");
    let mut rng = Rng(0x5EED_0001);
    let pool = Pool::new(&mut rng);
    let lens = (0..=600)
        .chain((601..=MAX_LEN).step_by(11))
        .chain([MAX_LEN]);
    for (case, len) in lens.enumerate() {
        let rows = 1 + case % 6;
        let k = (case / 6) % 6;
        let srcs: Vec<&[u8]> = (0..k).map(|j| pool.src(j, rng.below(64), len)).collect();
        let coeffs: Vec<u8> = (0..rows * k).map(|_| rng.coeff()).collect();
        let offs: Vec<usize> = (0..rows).map(|_| rng.below(64)).collect();
        let dsts: Vec<Vec<u8>> = offs.iter().map(|&o| dst_buffer(&mut rng, o, len)).collect();
        let mut want = dsts.clone();
        for ((w, &o), cs) in want.iter_mut().zip(&offs).zip(coeffs.chunks(k.max(1))) {
            for (s, &cf) in srcs.iter().zip(cs) {
                for (w, x) in w[o..o + len].iter_mut().zip(s.iter()) {
                    *w ^= gf::mul(cf, *x);
                }
            }
        }
        for &tier in &tiers {
            let mut got = dsts.clone();
            let mut views: Vec<&mut [u8]> = got
                .iter_mut()
                .zip(&offs)
                .map(|(g, &o)| &mut g[o..o + len])
                .collect();
            gf::mul_add_matrix_with(tier, &mut views, &srcs, &coeffs).unwrap();
            assert!(
                got == want,
                "{}: mul_add_matrix len={len} rows={rows} k={k} coeffs={coeffs:?}",
                tier.name()
            );
        }
    }
}

/// The dispatched entry points (whatever `Tier::best()` picked) agree with
/// the explicit scalar tier.
#[test]
fn dispatched_entry_points_match_scalar() {
    eprintln!("Tier::best() = {}", Tier::best().name());
    assert!(Tier::best().is_supported());
    let mut rng = Rng(42);
    for len in [0, 1, 15, 16, 31, 33, 127, 129, 1400, 4099] {
        let srcs: Vec<Vec<u8>> = (0..6)
            .map(|_| dst_buffer(&mut rng, 0, len)[..len].to_vec())
            .collect();
        let views: Vec<&[u8]> = srcs.iter().map(|s| s.as_slice()).collect();
        let coeffs: Vec<u8> = (0..6).map(|_| rng.coeff()).collect();
        let base = dst_buffer(&mut rng, 0, len)[..len].to_vec();
        for c in [0u8, 1, 3, 255] {
            let (mut a, mut b) = (base.clone(), base.clone());
            gf::mul_add(&mut a, &srcs[0], c);
            gf::mul_add_with(Tier::Scalar, &mut b, &srcs[0], c).unwrap();
            assert_eq!(a, b);
            gf::mul_region(&mut a, c);
            gf::mul_region_with(Tier::Scalar, &mut b, c).unwrap();
            assert_eq!(a, b);
        }
        let (mut a, mut b) = (base.clone(), base);
        gf::mul_add_multi(&mut a, &views, &coeffs);
        gf::mul_add_multi_with(Tier::Scalar, &mut b, &views, &coeffs).unwrap();
        assert_eq!(a, b);
        let (mut a2, mut b2) = (a.clone(), b.clone());
        let m: Vec<u8> = coeffs.iter().rev().copied().collect();
        gf::mul_add_matrix(&mut [&mut a, &mut a2], &views[..3], &m);
        gf::mul_add_matrix_with(Tier::Scalar, &mut [&mut b, &mut b2], &views[..3], &m).unwrap();
        assert_eq!((a, a2), (b, b2));
    }
}

/// `Tier::best()` is decided once per process, so the override is checked in
/// child processes running `env_override_child`.
#[test]
fn env_override_selects_tier() {
    let fastest = Tier::ALL
        .into_iter()
        .rev()
        .find(|t| t.is_supported())
        .unwrap();
    let mut cases = vec![("scalar", "scalar"), ("no-such-tier", fastest.name())];
    if !Tier::Gfni512.is_supported() {
        cases.push(("gfni-512", fastest.name()));
    }
    if Tier::Ssse3.is_supported() {
        cases.push(("ssse3", "ssse3"));
    }
    if Tier::Neon.is_supported() {
        cases.push(("neon", "neon"));
    } else {
        cases.push(("neon", fastest.name()));
    }
    for (set, expect) in cases {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "env_override_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CONVOY_GF_TIER", set)
            .env("CONVOY_GF_TIER_EXPECT", expect)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "CONVOY_GF_TIER={set}: child failed\n{stderr}"
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "CONVOY_GF_TIER={set}: child test did not run"
        );
        if set != expect {
            assert!(
                stderr.contains("CONVOY_GF_TIER"),
                "no warning for {set}: {stderr}"
            );
        }
    }
}

#[test]
fn env_override_child() {
    if let Ok(expect) = std::env::var("CONVOY_GF_TIER_EXPECT") {
        assert_eq!(Tier::best().name(), expect);
        let mut d = [3u8; 40];
        gf::mul_add(&mut d, &[5u8; 40], 7);
        assert_eq!(d, [3 ^ gf::mul(5, 7); 40]);
    }
}

#[test]
fn unsupported_tiers_are_refused() {
    for tier in Tier::ALL {
        let mut d = [0u8; 4];
        let r = gf::mul_add_with(tier, &mut d, &[1, 2, 3, 4], 5);
        if tier.is_supported() {
            assert_eq!(r, Ok(()));
        } else {
            assert_eq!(r, Err(UnsupportedTier(tier)));
            assert_eq!(
                gf::mul_region_with(tier, &mut d, 5),
                Err(UnsupportedTier(tier))
            );
            assert_eq!(
                gf::mul_add_multi_with(tier, &mut d, &[&[1, 2, 3, 4]], &[5]),
                Err(UnsupportedTier(tier))
            );
        }
    }
    assert_eq!(
        UnsupportedTier(Tier::Gfni512).to_string(),
        "GF kernel tier Gfni512 is not supported by this CPU"
    );
    assert_eq!(
        Tier::ALL.map(Tier::name),
        ["scalar", "neon", "ssse3", "avx2", "gfni-256", "gfni-512"]
    );
}

#[test]
#[should_panic(expected = "does not match destination slice length")]
fn mul_add_length_mismatch_panics() {
    let mut dst = [0u8; 8];
    gf::mul_add(&mut dst, &[1u8; 7], 3);
}

#[test]
#[should_panic(expected = "does not match destination slice length")]
fn mul_add_with_length_mismatch_panics_even_for_trivial_constants() {
    let mut dst = [0u8; 8];
    gf::mul_add_with(Tier::Scalar, &mut dst, &[1u8; 9], 0).unwrap();
}

#[test]
#[should_panic(expected = "does not match destination slice length")]
fn mul_add_multi_source_length_mismatch_panics() {
    let mut dst = [0u8; 8];
    gf::mul_add_multi(&mut dst, &[&[1u8; 8], &[1u8; 5]], &[2, 3]);
}

#[test]
#[should_panic(expected = "does not match destination slice length")]
fn mul_add_matrix_length_mismatch_panics() {
    let (mut a, mut b) = ([0u8; 8], [0u8; 9]);
    gf::mul_add_matrix(&mut [&mut a, &mut b], &[&[1u8; 8]], &[2, 3]);
}

#[test]
#[should_panic(expected = "coefficients")]
fn mul_add_matrix_coefficient_count_mismatch_panics() {
    let mut a = [0u8; 8];
    gf::mul_add_matrix(&mut [&mut a], &[&[1u8; 8], &[2u8; 8]], &[2, 3, 4]);
}

#[test]
#[should_panic(expected = "coefficients")]
fn mul_add_multi_coefficient_count_mismatch_panics() {
    let mut dst = [0u8; 8];
    gf::mul_add_multi(&mut dst, &[&[1u8; 8]], &[2, 3]);
}

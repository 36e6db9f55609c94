//! Quick throughput check of the GF(2^8) region kernels against memcpy.
//!
//! `cargo run --release -p convoy-codec --example gf_speed`
//!
//! GB/s counts the bytes of `dst` processed per second, so `mul_add` and
//! memcpy of one size compare directly. For the multi-source forms it counts
//! source bytes times destinations (one "product" per byte), so all columns
//! of the RLNC table compare too; divide by g for coded output per second.
//! Each figure is the best of 40 short runs, to be robust on a busy machine.
//! Set `CONVOY_GF_TIER` to see the dispatched (`best`) paths on a lower tier.

use std::hint::black_box;
use std::time::{Duration, Instant};

use convoy_codec::gf::{self, Tier};

/// Best-of-40 bytes per second of `f`, which processes `bytes` per call.
fn rate(bytes: usize, mut f: impl FnMut()) -> f64 {
    let mut iters = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        if t.elapsed() > Duration::from_millis(3) {
            break;
        }
        iters *= 2;
    }
    let best = (0..40)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed()
        })
        .min()
        .unwrap();
    (bytes as f64 * iters as f64) / best.as_secs_f64() / 1e9
}

fn main() {
    let tiers: Vec<Tier> = Tier::ALL.into_iter().filter(|t| t.is_supported()).collect();
    println!("CPU features: {:?}", gf::detected_features());
    println!("best tier: {}", Tier::best().name());
    let skipped: Vec<_> = Tier::ALL
        .iter()
        .filter(|t| !t.is_supported())
        .map(|t| t.name())
        .collect();
    println!("unsupported here: {skipped:?}\n");

    println!(
        "{:<22}{:>10}{:>10}{:>10}",
        "GB/s", "8 KiB", "256 KiB", "64 MiB"
    );
    let sizes = [8 << 10, 256 << 10, 64 << 20];
    let src: Vec<u8> = (0..sizes[2]).map(|i| (i * 131 + 7) as u8).collect();
    let mut dst = vec![0u8; sizes[2]];

    let row = |name: String, f: &mut dyn FnMut(usize) -> f64| {
        let r: Vec<String> = sizes.iter().map(|&n| format!("{:>10.1}", f(n))).collect();
        println!("{name:<22}{}", r.concat());
    };
    row("memcpy".into(), &mut |n| {
        rate(n, || {
            black_box(&mut dst[..n]).copy_from_slice(black_box(&src[..n]))
        })
    });
    for &t in &tiers {
        row(format!("mul_add {}", t.name()), &mut |n| {
            rate(n, || {
                gf::mul_add_with(t, black_box(&mut dst[..n]), &src[..n], 0x53).unwrap()
            })
        });
    }
    for &t in &tiers {
        row(format!("mul_region {}", t.name()), &mut |n| {
            rate(n, || {
                gf::mul_region_with(t, black_box(&mut dst[..n]), 0x53).unwrap()
            })
        });
    }
    row("xor (c=1) best".into(), &mut |n| {
        rate(n, || gf::mul_add(black_box(&mut dst[..n]), &src[..n], 1))
    });

    // The RLNC shape: 1400-byte symbols, generation size 32.
    const SYM: usize = 1400;
    const G: usize = 32;
    let syms: Vec<&[u8]> = (0..G).map(|j| &src[j * SYM..(j + 1) * SYM]).collect();
    let coeffs: Vec<u8> = (0..G).map(|j| (j * 37 + 11) as u8 | 2).collect();
    let mut out = vec![0u8; SYM];
    println!("\n1400-byte symbols, g = 32 (GB/s of source bytes x coded symbols):");
    for &t in &tiers {
        let single = rate(G * SYM, || {
            for (s, &c) in syms.iter().zip(&coeffs) {
                gf::mul_add_with(t, black_box(&mut out), s, c).unwrap();
            }
        });
        let multi = rate(G * SYM, || {
            gf::mul_add_multi_with(t, black_box(&mut out), &syms, &coeffs).unwrap()
        });
        // A whole generation: 32 coded symbols = (32x32 matrix) x sources.
        let mut coded = vec![0u8; G * SYM];
        let matrix: Vec<u8> = (0..G * G).map(|j| (j * 73 + 5) as u8 | 1).collect();
        let matrix_rate = rate(G * G * SYM, || {
            let mut rows: Vec<&mut [u8]> = coded.chunks_mut(SYM).collect();
            gf::mul_add_matrix_with(t, black_box(&mut rows), &syms, &matrix).unwrap()
        });
        println!(
            "{:<9} 32 x mul_add {single:>5.1}  mul_add_multi {multi:>5.1}  mul_add_matrix {matrix_rate:>5.1}  \
             => {:.2} GB/s of coded output",
            t.name(),
            multi.max(matrix_rate) / G as f64
        );
    }
}

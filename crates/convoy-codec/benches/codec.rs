//! `cargo bench -p convoy-codec`: the same workloads as `convoy bench codec`,
//! with criterion's statistics. The CLI prints the one-table summary; this is
//! for watching a change move one number.

use std::hint::black_box;
use std::time::Duration;

use convoy_codec::gf::{self, Tier};
use convoy_codec::workload::LossyBlock;
use convoy_codec::CodeKind;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn kernels(c: &mut Criterion) {
    let mut group = c.benchmark_group("gf_region");
    for bytes in [8 << 10, 256 << 10] {
        let src: Vec<u8> = (0..bytes).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; bytes];
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function(BenchmarkId::new("memcpy", bytes), |b| {
            b.iter(|| dst.copy_from_slice(black_box(&src)))
        });
        for tier in Tier::ALL.into_iter().filter(|t| t.is_supported()) {
            let id = BenchmarkId::new(format!("mul_add/{}", tier.name()), bytes);
            group.bench_function(id, |b| {
                b.iter(|| gf::mul_add_with(tier, &mut dst, black_box(&src), 0x57).unwrap())
            });
        }
    }
    group.finish();
}

fn codes(c: &mut Criterion) {
    for code in [CodeKind::Rlnc, CodeKind::RaptorQ] {
        let mut group = c.benchmark_group(code.name());
        for g in [10, 32, 128] {
            let block = LossyBlock::new(code, g, 1400, 0.1, 7).unwrap();
            let mut out = vec![0u8; 1400];
            group.throughput(Throughput::Bytes(block.data_len() as u64));
            group.bench_function(BenchmarkId::new("encode/loss10", g), |b| {
                b.iter(|| block.encode_round(&mut out).unwrap())
            });
            group.bench_function(BenchmarkId::new("decode/loss10", g), |b| {
                b.iter(|| black_box(block.decode_round().unwrap()))
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = kernels, codes
}
criterion_main!(benches);

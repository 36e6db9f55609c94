//! `cargo bench -p convoy-link --bench link`: packets per second through one
//! `LinkDirection` on one core, for the workloads of `convoy_link::workload`.

use std::path::PathBuf;
use std::sync::Arc;

use convoy_link::workload::Workload;
use convoy_link::MahimahiTrace;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

const PACKETS: u64 = 100_000;

/// The TMobile LTE downlink trace from ../shared/traces, or a synthetic
/// trace of similar mean rate if the shared folder is missing.
fn lte_trace() -> MahimahiTrace {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces/TMobile-LTE-short.down"
    ));
    MahimahiTrace::from_file(&path).unwrap_or_else(|e| {
        eprintln!("{e}; using a synthetic trace");
        let ms: Vec<u64> = (1..=10_000u64).map(|i| i * 7 / 10).collect();
        MahimahiTrace::from_millis(&ms, "synthetic").expect("valid synthetic trace")
    })
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("link_direction");
    group.throughput(Throughput::Elements(PACKETS));
    for w in [
        Workload::constant_gbit(),
        Workload::mahimahi(Arc::new(lte_trace())),
    ] {
        group.bench_function(w.id, |b| {
            b.iter_batched_ref(
                || w.link().expect("valid workload"),
                |link| w.run(link, PACKETS),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

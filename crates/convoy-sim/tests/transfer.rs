//! Transfers in virtual time over convoy-link: delivery is byte-exact and
//! goodput meets the targets.

use std::time::Duration;

use convoy_link::{Dur, LinkConfig, LossModel, QueueLimit};
use convoy_proto::{CodeKind, Config, Keypair};
use convoy_sim::{run, TransferReport, TransferSpec};

const RATE: u64 = 20_000_000;

fn link(loss: LossModel, seed: u64) -> LinkConfig {
    LinkConfig::constant(RATE)
        .with_delay(Dur::from_millis(25))
        .with_loss(loss)
        .with_queue(QueueLimit::Packets(300))
        .with_seed(seed)
}

fn configs(code: CodeKind, seed: u64) -> (Config, Config) {
    let mut c = Config::new(Keypair::generate()).with_code(code);
    let mut s = Config::new(Keypair::generate()).with_code(code);
    c.seed = Some(seed);
    s.seed = Some(seed + 1);
    (c, s)
}

fn both_ways(loss: LossModel, bytes: u64, code: CodeKind, seed: u64) -> TransferReport {
    let (c, s) = configs(code, seed);
    let mut spec = TransferSpec::new(link(loss.clone(), seed), link(loss, seed + 7), c, s);
    spec.upload = bytes;
    spec.download = bytes;
    spec.time_limit = Duration::from_secs(120);
    run(spec).expect("simulation runs")
}

fn check_goodput(r: &TransferReport, p: f64) {
    for (name, d) in [("upload", &r.upload), ("download", &r.download)] {
        assert_eq!(
            d.delivered, d.bytes,
            "{name}: every byte delivered ({r:#?})"
        );
        let ideal = RATE as f64 * (1.0 - p);
        let ratio = d.goodput_bps / ideal;
        eprintln!(
            "{name}: loss {p}: goodput {:.2} Mbit/s = {ratio:.3} of ideal",
            d.goodput_bps / 1e6
        );
        assert!(
            ratio >= 0.90,
            "{name}: goodput ratio {ratio:.3} below 0.90 ({r:#?})"
        );
        if std::env::var("SIM_DEBUG").is_ok() {
            eprintln!("{r:#?}");
        }
    }
}

#[test]
fn ten_megabytes_each_way_without_loss() {
    let r = both_ways(LossModel::None, 10_000_000, CodeKind::RaptorQ, 1);
    check_goodput(&r, 0.0);
}

fn margin_from_env(r: &mut Config) {
    if let Ok(z) = std::env::var("SIM_Z") {
        r.coding.margin_z = z.parse().unwrap();
    }
}

fn lossy(p: f64, code: CodeKind) -> TransferReport {
    let (mut c, mut s) = configs(code, 11);
    margin_from_env(&mut c);
    margin_from_env(&mut s);
    let loss = LossModel::Bernoulli { p };
    let mut spec = TransferSpec::new(link(loss.clone(), 3), link(loss, 5), c, s);
    spec.upload = 10_000_000;
    spec.download = 10_000_000;
    run(spec).expect("simulation runs")
}

#[test]
fn bernoulli_5_percent() {
    check_goodput(&lossy(0.05, CodeKind::RaptorQ), 0.05);
}

#[test]
fn bernoulli_10_percent() {
    check_goodput(&lossy(0.10, CodeKind::RaptorQ), 0.10);
}

#[test]
fn bernoulli_30_percent() {
    check_goodput(&lossy(0.30, CodeKind::RaptorQ), 0.30);
}

//! The CI scenario: 100 vehicles, 60 s, every application; and the
//! determinism promise: the same scenario and seed give byte-identical
//! records, even though snow draws its handshake keys from the OS.

use std::path::Path;

use convoy_fleet::{run, Scenario};

fn ci() -> Scenario {
    Scenario::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/ci-100.toml")).unwrap()
}

#[test]
fn ci_scenario_runs_every_application() {
    let dir = std::env::temp_dir().join(format!("convoy-fleet-ci-{}", std::process::id()));
    let out = run(ci(), 1, Some(&dir), |_, _| {}).unwrap();
    let s = &out.summary;
    assert_eq!(s.vehicles, 100);
    let sensing = s.sensing.as_ref().unwrap();
    assert!(sensing.bundles > 100, "{sensing:?}");
    assert!(sensing.delivery_ratio > 0.2, "{sensing:?}");
    // No routing loops: bundles reach an RSU in a few hops.
    assert!(sensing.mean_hops < 8.0, "{sensing:?}");
    let up = s.uploads.as_ref().unwrap();
    assert!(up.completed >= 5, "{up:?}");
    assert_eq!(up.corrupt, 0);
    let edge = s.edge.as_ref().unwrap();
    assert!(
        edge.answered > 100 && edge.mean_latency_ms > 30.0,
        "{edge:?}"
    );
    let cl = s.clusters.as_ref().unwrap();
    assert!(cl.expected > 0 && cl.delivery_ratio > 0.0, "{cl:?}");
    for f in [
        "nodes.csv",
        "cells.csv",
        "bundles.csv",
        "uploads.csv",
        "requests.csv",
        "cams.csv",
        "summary.json",
    ] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(text.lines().count() > 1, "{f} is empty");
    }
    // Every data row of a CSV has as many fields as its header.
    let bundles = std::fs::read_to_string(dir.join("bundles.csv")).unwrap();
    let width = bundles.lines().next().unwrap().split(',').count();
    assert!(bundles.lines().all(|l| l.split(',').count() == width));
    let max_hops = bundles
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(5).unwrap().parse::<u32>().unwrap())
        .max();
    assert!(max_hops.unwrap() < 32, "a bundle looped: {max_hops:?} hops");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn same_seed_same_records_other_seed_other_records() {
    let a = run(ci(), 7, None, |_, _| {}).unwrap();
    let b = run(ci(), 7, None, |_, _| {}).unwrap();
    assert_eq!(a.summary.records_hash, b.summary.records_hash);
    assert_eq!(a.tables, b.tables);
    let c = run(ci(), 8, None, |_, _| {}).unwrap();
    assert_ne!(a.summary.records_hash, c.summary.records_hash);
}

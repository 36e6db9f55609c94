//! The whole multipath grid: every scenario of `multipath_grid` at initial
//! windows {16, 24, 32, 40, 48, 64} × seeds 1-10 × link rates ×{0.25, 1, 4}
//! (1620 runs; about 20 minutes on two cores). Ignored by `cargo test`;
//! `make multipath-sweep` runs it, prints the spread of every figure and
//! fails on the worst point of any bound. `SWEEP_WINDOWS`, `SWEEP_SEEDS`
//! and `SWEEP_SCALES` (comma-separated) run a part of it.

#[allow(dead_code)]
mod harness;
#[allow(dead_code)]
mod multipath_grid;

/// A comma-separated list from the environment, or the default.
fn list<T: std::str::FromStr + Clone>(var: &str, default: &[T]) -> Vec<T> {
    match std::env::var(var) {
        Ok(text) => text
            .split(',')
            .map(|v| {
                v.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{var}: {v:?} is not a number"))
            })
            .collect(),
        Err(_) => default.to_vec(),
    }
}

#[test]
#[ignore = "the full grid takes about 20 minutes: make multipath-sweep"]
fn every_bound_holds_over_the_whole_grid() {
    let windows = list("SWEEP_WINDOWS", &[16, 24, 32, 40, 48, 64]);
    let seeds = list("SWEEP_SEEDS", &(1..=10).collect::<Vec<u64>>());
    let scales = list("SWEEP_SCALES", &[0.25, 1.0, 4.0]);
    let points = multipath_grid::grid(&windows, &seeds, &scales);
    println!(
        "multipath grid: windows {windows:?} x seeds {seeds:?} x rate scales {scales:?}, {} points",
        points.len()
    );
    let failures = multipath_grid::run_and_report(&points);
    assert!(failures.is_empty(), "{failures:#?}");
}

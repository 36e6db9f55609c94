//! `convoy sim fleet` and `convoy sim sweep` as a user meets them: records
//! on disk, sweeps whose runs.csv is the same bytes whatever the number of
//! workers, the run list for external engines, the benchmark's JSON, and
//! clear errors on bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn convoy() -> Command {
    Command::new(env!("CARGO_BIN_EXE_convoy"))
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(out: Output, needle: &str) {
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(needle), "stderr lacks {needle:?}: {err}");
    assert!(err.lines().count() <= 3, "more than a short message: {err}");
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("convoy-sim-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const SCENARIO: &str = "name = \"tiny\"\nduration_s = 15\nrsu = [{ x = 200, y = 200 }]\nenodeb = [{ x = 200, y = 200 }]\n\
    [mobility]\ngrid = { blocks = 2, vehicles = 20, buildings = true }\n\
    [sensing]\nprotocol = \"ave\"\nmean_interval_s = 5\n\
    [edge]\nworkload = \"game\"\nshare = 0.5\nedge_share = 0.5\nplacement = \"pgw\"\ncapacity = 4\n";

fn scenario(d: &Path) -> PathBuf {
    let p = d.join("tiny.toml");
    std::fs::write(&p, SCENARIO).unwrap();
    p
}

#[test]
fn fleet_writes_records_and_a_summary_line() {
    let d = tmp("fleet");
    let s = scenario(&d);
    let line = ok(convoy()
        .args(["sim", "fleet"])
        .arg(&s)
        .args(["--seed", "3", "--out"])
        .arg(d.join("out"))
        .output()
        .unwrap());
    assert!(
        line.contains("tiny seed 3")
            && line.contains("bundles delivered")
            && line.contains("edge:"),
        "{line}"
    );
    for f in [
        "nodes.csv",
        "bundles.csv",
        "requests.csv",
        "cells.csv",
        "summary.json",
    ] {
        assert!(d.join("out").join(f).is_file(), "{f}");
    }
    let json = ok(convoy()
        .args(["sim", "fleet"])
        .arg(&s)
        .args(["--seed", "3", "--json", "--set", "sensing.protocol=spray"])
        .output()
        .unwrap());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["sensing"]["protocol"], "spray");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn sweep_is_the_same_bytes_with_one_or_two_workers() {
    let d = tmp("sweep");
    let s = scenario(&d);
    let run = |jobs: &str, out: &str| {
        ok(convoy()
            .args(["sim", "sweep"])
            .arg(&s)
            .args([
                "--seeds",
                "1-2",
                "--param",
                "sensing.protocol=ave,dymo",
                "--jobs",
                jobs,
                "--out",
            ])
            .arg(d.join(out))
            .output()
            .unwrap());
        std::fs::read(d.join(out).join("runs.csv")).unwrap()
    };
    let one = run("1", "one");
    let two = run("2", "two");
    assert_eq!(one, two, "runs.csv differs between 1 and 2 workers");
    let text = String::from_utf8(one).unwrap();
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(text.starts_with("point,seed,param.sensing.protocol,"));
    // --list names each run; --collect rebuilds the same runs.csv.
    let list = ok(convoy()
        .args(["sim", "sweep"])
        .arg(&s)
        .args([
            "--seeds",
            "1-2",
            "--param",
            "sensing.protocol=ave,dymo",
            "--list",
            "--out",
        ])
        .arg(d.join("one"))
        .output()
        .unwrap());
    let lines: Vec<serde_json::Value> = list
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[1]["argv"][0], "sim");
    std::fs::remove_file(d.join("one/runs.csv")).unwrap();
    ok(convoy()
        .args(["sim", "sweep"])
        .arg(&s)
        .args([
            "--seeds",
            "1-2",
            "--param",
            "sensing.protocol=ave,dymo",
            "--collect",
            "--out",
        ])
        .arg(d.join("one"))
        .output()
        .unwrap());
    assert_eq!(
        std::fs::read_to_string(d.join("one/runs.csv")).unwrap(),
        text
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn bench_prints_the_figures_as_json() {
    let v: serde_json::Value = serde_json::from_str(&ok(convoy()
        .args([
            "sim",
            "fleet",
            "--bench",
            "--vehicles",
            "60",
            "--duration",
            "3",
            "--json",
        ])
        .output()
        .unwrap()))
    .unwrap();
    let r = &v["runs"][0];
    assert_eq!(r["vehicles"], 60);
    for k in [
        "events_per_s",
        "packets_per_s",
        "sim_per_wall",
        "sim_per_cpu",
        "peak_mb",
        "kb_per_vehicle",
    ] {
        assert!(r[k].as_f64().unwrap() > 0.0, "{k}: {r}");
    }
}

#[test]
fn bad_input_is_one_clear_line() {
    let d = tmp("bad");
    let s = scenario(&d);
    let missing = convoy()
        .args(["sim", "fleet", "/nonexistent/x.toml"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&missing.stderr).into_owned();
    // The I/O error once, not again as the error's source.
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    fails(missing, "/nonexistent/x.toml");
    fails(
        convoy()
            .args(["sim", "fleet"])
            .arg(&s)
            .args(["--set", "novalue"])
            .output()
            .unwrap(),
        "KEY=VALUE",
    );
    fails(
        convoy()
            .args(["sim", "fleet"])
            .arg(&s)
            .args(["--set", "sensing.protocol=olsr"])
            .output()
            .unwrap(),
        "olsr",
    );
    fails(
        convoy()
            .args(["sim", "sweep"])
            .arg(&s)
            .args(["--seeds", "5-1", "--out"])
            .arg(d.join("o"))
            .output()
            .unwrap(),
        "5-1",
    );
    // 1,000 seeds × 101 values is past the 100,000 runs a sweep makes.
    let many = format!(
        "duration_s={}",
        (1..=101)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    for (seeds, params, needle) in [
        ("1-1000000000", "duration_s=1", "more than 100000 seeds"),
        ("1-x", "duration_s=1", "1-x"),
        ("1-1000", many.as_str(), "more than 100000 runs"),
    ] {
        fails(
            convoy()
                .args(["sim", "sweep"])
                .arg(&s)
                .args(["--seeds", seeds, "--param", params, "--out"])
                .arg(d.join("o"))
                .output()
                .unwrap(),
            needle,
        );
    }
    fails(
        convoy()
            .args(["sim", "sweep"])
            .arg(&s)
            .args(["--param", "edge.placement=pgw,moon", "--out"])
            .arg(d.join("o"))
            .output()
            .unwrap(),
        "moon",
    );
    fails(
        convoy()
            .args(["sim", "sweep"])
            .arg(&s)
            .args(["--collect", "--out"])
            .arg(d.join("empty"))
            .output()
            .unwrap(),
        "no summary",
    );
    std::fs::remove_dir_all(&d).unwrap();
}

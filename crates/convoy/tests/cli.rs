//! The `convoy` command as a user meets it: help, bad input, and the codec
//! benchmark's JSON shape.

use std::process::Command;

fn convoy() -> Command {
    Command::new(env!("CARGO_BIN_EXE_convoy"))
}

/// Runs a command that must succeed and print one JSON document.
fn json_of(cmd: &mut Command) -> serde_json::Value {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn bench_codec_json_has_every_cell() {
    let report = json_of(convoy().args(["bench", "codec", "--json", "--quick"]));
    let kernels = report["kernels"].as_array().unwrap();
    for level in ["L1", "L2", "DRAM"] {
        for op in ["memcpy", "mul_add scalar"] {
            assert!(
                kernels.iter().any(|r| r["level"] == level && r["op"] == op),
                "missing {op} at {level}"
            );
        }
    }
    for code in ["rlnc", "raptorq"] {
        let rows = report[code].as_array().unwrap();
        assert_eq!(rows.len(), 15, "{code}: 5 generations x 3 loss rates");
        for row in rows {
            assert!(row["encode_mb_per_s"].as_f64().unwrap() > 0.0);
            assert!(row["decode_mb_per_s"].as_f64().unwrap() > 0.0);
            let g = row["generation"].as_u64().unwrap();
            let needed = row["symbols_to_decode"].as_u64().unwrap();
            assert!(
                needed >= g && needed <= g + 8,
                "{code} g={g} needed {needed}"
            );
            if code == "rlnc" {
                assert_eq!(needed, g, "RLNC decodes from exactly g symbols here");
            }
        }
    }
    assert_eq!(report["targets"].as_array().unwrap().len(), 3);
    let cost = &report["cost"];
    for kind in ["copy", "coding", "aead", "syscall"] {
        assert!(
            cost["steps"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["kind"] == kind && s["ns_per_byte"].as_f64().unwrap() > 0.0),
            "no {kind} step in the per-byte cost"
        );
    }
    assert!(cost["sender_ns_per_byte"].as_f64().unwrap() > 0.0);
}

#[test]
fn bad_arguments_fail_with_one_line() {
    let out = convoy()
        .args(["bench", "codec", "--budget-ms", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let out = convoy().args(["bench", "nonsense"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nonsense"));
}

#[test]
fn help_explains_the_benchmark() {
    let out = convoy()
        .args(["bench", "codec", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--json"));
    assert!(help.contains("RaptorQ"));
}

fn shared_trace(name: &str) -> std::path::PathBuf {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces")
        .join(name);
    assert!(
        path.is_file(),
        "expected the shared traces at {}",
        path.display()
    );
    path
}

#[test]
fn bench_link_json_reports_both_workloads() {
    let trace = shared_trace("ATT-LTE-driving-2016.up");
    let report = json_of(
        convoy()
            .args(["bench", "link", "--json", "--packets", "20000", "--trace"])
            .arg(&trace),
    );
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert_eq!(row["packets"], 20000);
        let delivered = row["delivered"].as_u64().unwrap();
        let dropped = row["lost"].as_u64().unwrap() + row["tail_dropped"].as_u64().unwrap();
        assert!(delivered > 0 && delivered + dropped <= 20000);
    }
}

#[test]
fn bench_link_names_the_bad_line_of_a_malformed_trace() {
    let dir = std::env::temp_dir().join(format!("convoy-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.trace");
    std::fs::write(&bad, "1\n2\nthree\n").unwrap();
    let out = convoy()
        .args(["bench", "link", "--packets", "10", "--trace"])
        .arg(&bad)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.trace:3"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one-line error: {err}");
}

#[test]
fn simulate_json_reports_goodput_against_the_ideal() {
    let r = json_of(convoy().args(["simulate", "--loss", "10%", "--size", "2MB", "--json"]));
    assert_eq!(r["delivered"], 2_000_000);
    assert_eq!(r["ideal_bps"].as_f64().unwrap().round(), 18e6);
    let ratio = r["ratio"].as_f64().unwrap();
    assert!(ratio > 0.5 && ratio < 1.0, "ratio {ratio}");
    // Every byte on the air, both ways, per byte delivered: at least what
    // the loss took, and not far above it plus headers and feedback.
    let air = r["air_per_payload"].as_f64().unwrap();
    assert!(air > 1.0 / 0.9 && air < 1.35, "air per payload {air}");
    for key in [
        "delay_p50_ms",
        "delay_p95_ms",
        "packets_sent",
        "packets_lost",
        "cpu_seconds",
    ] {
        assert!(r[key].is_number(), "missing {key}");
    }
}

#[test]
fn a_lost_credit_update_does_not_stall_rlnc_bbr() {
    // Seed 1 at 30 % loss loses a MAX_DATA update while the sender has
    // nothing in flight; it used to wait for the 10 s keep-alive (ratio
    // 0.649). Now it asks for credit again after a PTO (0.92).
    let r = json_of(convoy().args([
        "simulate", "--mode", "rlnc-bbr", "--loss", "30%", "--size", "40MB", "--seed", "1",
        "--json",
    ]));
    assert_eq!(r["delivered"], 40_000_000);
    let ratio = r["ratio"].as_f64().unwrap();
    assert!(ratio > 0.85, "ratio {ratio}");
}

#[test]
fn simulate_runs_the_background_priority() {
    // The scavenger keeps the queue within a few milliseconds where the
    // default mode holds its tens (docs/PROTOCOL.md, "Background priority").
    let run = |priority: &str| {
        json_of(convoy().args([
            "simulate",
            "--rate",
            "10mbit",
            "--delay",
            "30ms",
            "--duration",
            "10s",
            "--priority",
            priority,
            "--json",
        ]))
    };
    let (normal, background) = (run("normal"), run("background"));
    let q = |r: &serde_json::Value| r["queue_delay_p50_ms"].as_f64().unwrap();
    assert!(
        q(&background) < 10.0 && q(&normal) > 20.0,
        "{} {}",
        q(&background),
        q(&normal)
    );
    assert!(background["ratio"].as_f64().unwrap() > 0.85);
}

#[test]
fn simulate_rejects_bad_input_in_one_line() {
    for args in [
        &["--mode", "tcp"][..],
        &["--loss", "2"],
        &["--size", "3 parsecs"],
        &["--trace", "/no/such/file"],
        &["--duration", "0s"],
        &["--time-limit", "0ms"],
        &["--priority", "urgent"],
    ] {
        let out = convoy().arg("simulate").args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    let out = convoy()
        .args(["simulate", "--mode", "tcp"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("valid modes are") && err.contains("rcdp") && err.contains("rlnc-bbr"),
        "{err}"
    );
}

#[test]
fn simulate_cut_before_the_handshake_says_so_and_fails() {
    // 1 ms of virtual time is less than the handshake's round trip.
    let out = convoy()
        .args(["simulate", "--time-limit", "1ms", "--size", "1MB"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("no handshake") && !text.contains("NaN"),
        "{text}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did not finish"), "{err}");
}

#[test]
fn bench_can_reports_each_stage_and_a_broken_dbc_by_line() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let report = json_of(convoy().current_dir(root).args([
        "bench", "can", "--json", "--frames", "2000", "--passes", "1",
    ]));
    assert_eq!(report["messages"], 100);
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for r in rows {
        assert_eq!(r["frames"], 2000, "{r}");
    }
    // The cantools log decodes whole: 400 frames, every one known.
    let report = json_of(convoy().current_dir(root).args([
        "bench",
        "can",
        "--json",
        "--passes",
        "1",
        "--dbc",
        "crates/convoy-agent/tests/data/can/vehicle.dbc",
        "--log",
        "crates/convoy-agent/tests/data/can/drive.log",
    ]));
    assert_eq!(report["rows"][1]["frames"], 400);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bad = dir.join("bad.dbc");
    std::fs::write(
        &bad,
        "VERSION \"\"\n\nBO_ 1 M: 8 E\n SG_ S : 0|8@1+ (1,0 [0|1] \"\" E\n",
    )
    .unwrap();
    let out = convoy()
        .args(["bench", "can", "--dbc"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.dbc") && err.contains("not a valid DBC file") && err.contains("4:"),
        "{err}"
    );
}

#[test]
fn trace_scale_writes_a_twin_and_refuses_a_factor_it_cannot_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let input = dir.join("thousand.trace");
    let text: String = (1..=1000).map(|ms| format!("{ms}\n")).collect();
    std::fs::write(&input, text).unwrap();
    let half = dir.join("half.trace");
    let report = json_of(
        convoy()
            .args(["trace", "scale", "--json", "--factor", "0.5"])
            .arg(&input)
            .arg(&half),
    );
    assert_eq!(report["format"], "mahimahi");
    let lines = std::fs::read_to_string(&half).unwrap().lines().count();
    assert_eq!(lines, 500);
    // 1,000 opportunities × 3 million is past the bound: one line, no file,
    // not an allocation of the whole twin that takes the process down. A
    // twin of under 100 lines cannot keep the rate asked for (0.05 would be
    // 50 lines).
    for factor in ["3e6", "0", "1e300", "0.05", "1e-7"] {
        let out_path = dir.join(format!("x{factor}.trace"));
        let out = convoy()
            .args(["trace", "scale", "--factor", factor])
            .arg(&input)
            .arg(&out_path)
            .output()
            .unwrap();
        assert!(!out.status.success(), "--factor {factor} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{factor}: {err}");
        assert!(err.contains("--factor"), "{err}");
        assert!(!out_path.exists(), "--factor {factor} left {out_path:?}");
    }
}

#[test]
fn trace_lte_up_writes_a_mahimahi_uplink_with_its_handover_gaps() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let out = dir.join("up.trace");
    let run = convoy()
        .args([
            "trace",
            "lte",
            "--direction",
            "up",
            "--uplink-fit",
            "tmobile",
        ])
        .args(["--seconds", "30", "--handover-every", "10"])
        .args(["--handover-interruption-ms", "60", "--seed", "4", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let t = convoy_link::MahimahiTrace::from_file(&out).unwrap();
    assert_eq!(t.period(), convoy_link::Dur::from_millis(30_000));
    let mbps = t.mean_rate_bps() / 1e6;
    assert!(mbps > 3.0 && mbps < 40.0, "{mbps} Mbit/s");
    // Handovers at 10 s and 20 s: nothing for 60 ms from each.
    let ms = t.opportunities_ms();
    for at in [10_000, 20_000] {
        assert!(!ms.iter().any(|m| (at..at + 60).contains(m)), "at {at}");
    }
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("2 handovers"), "{err}");
    let _ = std::fs::remove_file(&out);
}

#[test]
fn trace_lte_rejects_bad_uplink_and_loss_settings_in_one_line() {
    for args in [
        &["--direction", "up", "--uplink-fit", "sprint"][..],
        &["--direction", "up", "--loss", "typical"],
        &["--csq", "19", "--loss", "rate=0.5,bad=0.1"],
        &["--csq", "19", "--loss", "often"],
        &["--csq", "19", "--handover-every", "0"],
        &["--csq", "19", "--handover-interruption-ms", "1500"],
        // Three years of uplink: refused at once, not generated until
        // memory runs out.
        &["--direction", "up", "--seconds", "100000000"],
    ] {
        let out = convoy().args(["trace", "lte"]).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

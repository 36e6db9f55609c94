//! Small versions of the fleet benchmarks (seconds each): `convoy bench
//! load` with 100 connections on a 2-worker server and with 200 idle ones,
//! `convoy bench load --fleet` with 40 registered vehicles speaking the
//! agent's upload protocol to a fleet server, and `convoy bench
//! flood` (root only: raw sockets). The full runs and their figures are in
//! docs/NET.md.

use std::process::Command;

fn convoy() -> Command {
    Command::new(env!("CARGO_BIN_EXE_convoy"))
}

fn json(out: &std::process::Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): stdout {text}\nstderr {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn a_hundred_connections_on_two_workers_deliver_everything() {
    let out = convoy()
        .args([
            "bench",
            "load",
            "--connections",
            "100",
            "--time",
            "2",
            "--ramp",
            "1",
            "--bulk",
            "4",
            "--bulk-size",
            "300kB",
            "--workers",
            "2",
            "--client-threads",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    let v = json(&out);
    assert!(out.status.success(), "{v:#}");
    let c = &v["client"];
    assert_eq!(c["established"], 100, "{v:#}");
    assert_eq!(c["failed"], 0, "{v:#}");
    assert_eq!(
        c["telemetry_bytes_confirmed"], c["telemetry_bytes_sent"],
        "{v:#}"
    );
    assert_eq!(c["bulk_stored"], 4, "{v:#}");
    assert_eq!(v["server"]["workers"], 2);
    // Nothing reached a worker that did not hold its connection.
    assert!(
        v["server"]["endpoint"]["unknown_connection"]
            .as_u64()
            .unwrap()
            < 50,
        "{v:#}"
    );
}

/// Idle connections held open: each side's CPU and the server's memory
/// (the full run, 10,000 connections, is in docs/NET.md).
#[test]
fn idle_connections_cost_the_server_little_memory_and_cpu() {
    let out = convoy()
        .args([
            "bench",
            "load",
            "--connections",
            "200",
            "--idle",
            "10",
            "--ramp",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    let v = json(&out);
    assert!(out.status.success(), "{v:#}");
    assert_eq!(v["established"], 200, "{v:#}");
    let base = v["server_base_rss_kib"].as_u64().unwrap();
    let rss = v["server_rss_kib"].as_u64().unwrap();
    let peak = v["server_peak_rss_kib"].as_u64().unwrap();
    assert!(base > 0 && rss > base && peak >= rss, "{v:#}");
    assert_eq!(v["memory_target_met"], true, "{v:#}");
}

/// Forty registered vehicles upload a telemetry segment a second each, with
/// the agent's protocol, to a real `convoy serve --fleet`: every segment
/// made is confirmed, stored once and indexed once (the server's own
/// `stored` and `indexed` events), and the catalog keeps up.
#[test]
fn forty_vehicles_on_the_agents_protocol_lose_nothing_and_are_indexed_once() {
    let out = convoy()
        .args([
            "bench",
            "load",
            "--fleet",
            "--connections",
            "40",
            "--every",
            "1",
            "--time",
            "3",
            "--ramp",
            "1",
            "--client-threads",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    let v = json(&out);
    assert!(out.status.success(), "{v:#}");
    assert_eq!(v["client"]["connected"], 40, "{v:#}");
    assert_eq!(v["client"]["failed"], 0, "{v:#}");
    let s = &v["segments"];
    let made = s["made"].as_u64().unwrap();
    // Each vehicle sends for 2-3 s after the ramp.
    assert!(made >= 40 * 2, "{v:#}");
    assert_eq!(s["confirmed"], made, "{v:#}");
    assert_eq!(s["stored_by_server"], made, "{v:#}");
    assert_eq!(s["indexed"], made, "{v:#}");
    for k in [
        "lost",
        "duplicated",
        "not_indexed",
        "not_stored",
        "index_failed",
    ] {
        assert_eq!(s[k], 0, "{k}: {v:#}");
    }
    assert!(v["index"]["lag_p99_s"].as_f64().unwrap() < 5.0, "{v:#}");
    assert!(v["server"]["peak_rss_kib"].as_u64().unwrap() > 0, "{v:#}");
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_short_flood_is_refused_cheaply_and_real_clients_get_in() {
    if !is_root() {
        eprintln!("skipped: the flood needs root (raw sockets)");
        return;
    }
    let out = convoy()
        .args([
            "bench",
            "flood",
            "--time",
            "2",
            "--initials",
            "3000",
            "--garbage",
            "1000",
            "--replays",
            "500",
            "--legit",
            "10",
            "--workers",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    let v = json(&out);
    let e = &v["server"]["endpoint"];
    let f = &v["flood"];
    assert_eq!(v["legit"]["failed"], 0, "{v:#}");
    assert_eq!(v["legit"]["telemetry_streams_confirmed"], 10, "{v:#}");
    assert!(e["retries_sent"].as_u64().unwrap() > 1000, "{v:#}");
    assert!(e["accepted"].as_u64().unwrap() < 10 + 64 + 3 * 500, "{v:#}");
    assert!(v["server_peak_rss_mb"].as_f64().unwrap() <= 64.0, "{v:#}");
    assert!(f["worst_source_ratio"].as_f64().unwrap() <= 3.0, "{v:#}");
    let drops = v["server"]["driver"]["receive_drops"].as_u64().unwrap();
    if f["replays"].as_u64().unwrap() > 0 {
        assert!(
            e["replays"].as_u64().unwrap() + drops >= f["replays"].as_u64().unwrap() * 9 / 10,
            "{v:#}"
        );
    }
}

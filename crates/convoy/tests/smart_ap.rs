//! The smart access point and FQ-CoDel on kernel Cubic flows over
//! `convoy emu` (SPEC S4): unmodified iperf3 downloads through a 10 Mbit/s,
//! 250-packet AP. Needs root, /dev/net/tun and iperf3 (CI has them);
//! otherwise each test says so and passes without running. About a minute.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn can_run(test: &str) -> bool {
    // SAFETY: plain syscall.
    let root = unsafe { libc::geteuid() } == 0;
    let tun = Path::new("/dev/net/tun").exists();
    let iperf = Command::new("sh")
        .args(["-c", "command -v iperf3"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !(root && tun && iperf) {
        eprintln!("{test}: skipped: needs root, /dev/net/tun and iperf3 (CI has them)");
    }
    root && tun && iperf
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("convoy-ap-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `convoy emu` with one link and the given server and client
/// commands, keeping records in `dir`.
fn emu(dir: &Path, link: &str, server: &str, client: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_convoy"))
        .args(["emu", "--records"])
        .arg(dir)
        .args(["--link", link, "--server", server, "--", "sh", "-c", client])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "convoy emu failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// (queueing delay p50 and p95 in ms, IP rate in Mbit/s) of the full-sized
/// packets the link delivered in direction `dir`, from `skip_s` on.
fn link_figures(records: &Path, skip_s: f64) -> (f64, f64, f64) {
    let text = std::fs::read_to_string(records).unwrap();
    let mut delays = Vec::new();
    let (mut bytes, mut first, mut last) = (0u64, None, 0u64);
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f[1] != "dlv" || f[3].parse::<u32>().unwrap() < 1000 {
            continue;
        }
        let t: u64 = f[0].parse().unwrap();
        let start = *first.get_or_insert(t);
        if (t - start) as f64 / 1e9 < skip_s {
            continue;
        }
        delays.push(f[4].parse::<f64>().unwrap() / 1e6);
        bytes += f[3].parse::<u64>().unwrap();
        last = t;
    }
    delays.sort_by(|a, b| a.total_cmp(b));
    let span = (last - first.unwrap()) as f64 / 1e9 - skip_s;
    (
        delays[delays.len() / 2],
        delays[delays.len() * 95 / 100],
        bytes as f64 * 8.0 / span / 1e6,
    )
}

/// One Cubic download per AP: without a policy it fills the 250-packet
/// queue (300 ms at 10 Mbit/s); every policy keeps the queue to a few
/// milliseconds at (nearly) the same rate, as Palazzi's figures show.
#[test]
fn ap_policies_keep_the_queue_empty_under_kernel_cubic() {
    let _guard = serial();
    if !can_run("ap_policies_keep_the_queue_empty_under_kernel_cubic") {
        return;
    }
    let mut table = Vec::new();
    for extra in [
        "",
        ",ap=sap-law",
        ",ap=sap-law-rtt",
        ",ap=voap",
        ",queue=fq_codel",
    ] {
        let dir = scratch(&format!("policy{}", extra.replace([',', '='], "_")));
        let queue = if extra.contains("fq_codel") {
            ""
        } else {
            ",queue=250"
        };
        let link = format!("wifi:rate=10mbit,delay=30ms{queue}{extra}");
        emu(
            &dir,
            &link,
            "exec iperf3 -s -1 >/dev/null",
            "iperf3 -c 10.7.0.2 -R -t 7 -C cubic >/dev/null",
        );
        let (p50, p95, mbit) = link_figures(&dir.join("wifi.down.csv"), 2.0);
        eprintln!("{link}: queue delay p50 {p50:.1} ms, p95 {p95:.1} ms, {mbit:.2} Mbit/s");
        table.push((extra, p50, p95, mbit));
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (_, none_p50, _, none_mbit) = table[0];
    assert!(
        none_p50 > 100.0,
        "plain FIFO: cubic should fill it, p50 {none_p50} ms"
    );
    assert!(none_mbit > 9.0);
    for &(policy, p50, p95, mbit) in &table[1..] {
        // VoAP may hold up to β = 10 ms; FQ-CoDel's target is 5 ms.
        assert!(p50 < 12.0 && p95 < 25.0, "{policy}: p50 {p50} p95 {p95} ms");
        assert!(
            mbit > 0.85 * none_mbit,
            "{policy}: {mbit} Mbit/s vs {none_mbit}"
        );
    }
}

/// Three Cubic downloads at 30, 50 and 100 ms round trip through one AP:
/// RTT-fair SAP-LAW gives them equal rates (the target: within 10 %),
/// where a plain FIFO favours the short one.
#[test]
fn rtt_fair_sap_law_equalises_30_50_100_ms_flows() {
    let _guard = serial();
    if !can_run("rtt_fair_sap_law_equalises_30_50_100_ms_flows") {
        return;
    }
    let dir = scratch("fair");
    let client = format!(
        "sleep 0.5; for p in 5201 5202 5203; do iperf3 -c 10.7.0.2 -p $p -R -t 12 -C cubic -J \
         > {}/$p.json & done; wait",
        dir.display()
    );
    emu(
        &dir,
        "wifi:rate=12mbit,delay=15ms,queue=250,port-delay=5202:10ms/5203:35ms,ap=sap-law-rtt",
        "iperf3 -s -1 -p 5201 >/dev/null & iperf3 -s -1 -p 5202 >/dev/null & \
         exec iperf3 -s -1 -p 5203 >/dev/null",
        &client,
    );
    let mut rates = Vec::new();
    for port in [5201, 5202, 5203] {
        let text = std::fs::read_to_string(dir.join(format!("{port}.json"))).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        // Seconds 4 to 12: all three flows under way.
        let (mut bytes, mut secs) = (0.0, 0.0);
        for iv in doc["intervals"].as_array().unwrap().iter().skip(4) {
            bytes += iv["sum"]["bytes"].as_f64().unwrap();
            secs += iv["sum"]["seconds"].as_f64().unwrap();
        }
        rates.push(bytes * 8.0 / secs / 1e6);
    }
    eprintln!("sap-law-rtt, 30/50/100 ms flows: {rates:.2?} Mbit/s");
    let (lo, hi) = (
        rates.iter().cloned().fold(f64::MAX, f64::min),
        rates.iter().cloned().fold(0.0, f64::max),
    );
    assert!(hi / lo < 1.1, "rates {rates:?}");
    assert!(rates.iter().sum::<f64>() > 10.0, "rates {rates:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

//! `convoy perf` over two emulated links (LTE and Wi-Fi) as real
//! processes in `convoy emu`: both paths carry data and the JSON's
//! per-path figures add up; a Wi-Fi outage, or its interface going down
//! and up, does not break the transfer; a backup path stands by; a new
//! interface carries data within 1 RTT + 50 ms. Needs root and /dev/net/tun (CI
//! has both); without them the emulator tests say so and pass without
//! running. Each emulator is ended by a guard, even when an assertion
//! fails, and takes its namespaces with it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn convoy() -> &'static str {
    env!("CARGO_BIN_EXE_convoy")
}

fn can_emulate(test: &str) -> bool {
    // SAFETY: plain syscall.
    let root = unsafe { libc::geteuid() } == 0;
    let tun = Path::new("/dev/net/tun").exists();
    if !(root && tun) {
        let _ = writeln!(
            std::io::stderr(),
            "{test}: skipped: needs root and /dev/net/tun (CI has both)"
        );
    }
    root && tun
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("convoy-mp-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `convoy emu`, ended (SIGTERM, then SIGKILL) if still running
/// when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: plain syscall on our own child.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = self.0.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

struct Run {
    ok: bool,
    stderr: String,
    /// The client's `--json` document.
    client: Value,
    /// The server's `perf_done` event.
    server: Value,
}

/// `convoy perf --server --once --json` on the server side and `convoy
/// perf SERVER --json CLIENT_ARGS` on the client side of `links`, after
/// `before` (a shell line) on the client. SERVER is the server's address
/// on the first link, or `$TO` if `before` sets it.
fn perf_over(dir: &Path, links: &[&str], before: &str, client_args: &str) -> Run {
    let key = dir.join("server.key");
    let out = Command::new(convoy())
        .args(["keygen", "--out"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut cmd = Command::new(convoy());
    cmd.arg("emu");
    for l in links {
        cmd.args(["--link", l]);
    }
    let server = format!(
        "exec {} perf --server --once --json --listen 0.0.0.0:4433 --key {}",
        convoy(),
        key.display()
    );
    let client = format!(
        "{before} sleep 0.3; exec {} perf ${{TO:-$CONVOY_EMU_SERVER}} --server-key {}.pub --json {client_args}",
        convoy(),
        key.display()
    );
    let child = cmd
        .args(["--server", &server, "--", "sh", "-c", &client])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let running = Running(child);
    let out = wait_output(running, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let docs: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let find = |f: &dyn Fn(&Value) -> bool| docs.iter().find(|v| f(v)).cloned();
    Run {
        ok: out.status.success(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        client: find(&|v| v.get("paths").is_some()).unwrap_or(Value::Null),
        server: find(&|v| v["event"] == "perf_done").unwrap_or(Value::Null),
    }
}

fn wait_output(mut r: Running, limit: Duration) -> std::process::Output {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(Some(_)) = r.0.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        matches!(r.0.try_wait(), Ok(Some(_))),
        "convoy emu did not finish within {limit:?}"
    );
    let child = std::mem::replace(
        &mut r.0,
        Command::new("true").spawn().expect("a placeholder child"),
    );
    child.wait_with_output().unwrap()
}

fn path<'a>(client: &'a Value, interface: &str) -> &'a Value {
    client["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["interface"] == interface)
        .unwrap_or_else(|| panic!("no {interface} path in {client}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn both_links_carry_data_and_the_per_path_figures_add_up() {
    let _g = serial();
    if !can_emulate("both_links_carry_data_and_the_per_path_figures_add_up") {
        return;
    }
    let dir = Scratch::new("two");
    let r = perf_over(
        &dir.0,
        &["lte:rate=10mbit,delay=20ms", "wifi:rate=20mbit,delay=5ms"],
        "",
        "--time 3",
    );
    assert!(r.ok, "perf failed: {}", r.stderr);
    let (c, s) = (&r.client, &r.server);
    let (lte, wifi) = (path(c, "lte"), path(c, "wifi"));
    assert_eq!(
        lte["id"], 0,
        "the handshake path is LTE's (the route to the server)"
    );
    assert!(lte["local"].as_str().unwrap().starts_with("10.7.0.1:"));
    assert!(wifi["local"].as_str().unwrap().starts_with("10.7.1.1:"));
    for p in [lte, wifi] {
        assert!(u(&p["bytes_sent"]) > 100_000, "{p} carried too little");
        assert!(u(&p["bytes_received"]) > 0, "{p} heard nothing");
    }
    // The paths sent what the server read, plus headers and repair.
    let sent: u64 = c["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| u(&p["bytes_sent"]))
        .sum();
    let bytes = u(&c["bytes"]);
    assert!(
        sent >= bytes && sent < bytes * 2,
        "paths sent {sent} for {bytes} bytes"
    );
    // The intervals' per-path bytes add up to each path's total.
    for p in c["paths"].as_array().unwrap() {
        let id = &p["id"];
        let over_intervals: u64 = c["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|iv| iv["paths"].as_array().unwrap())
            .filter(|q| &q["id"] == id)
            .map(|q| u(&q["bytes_sent"]))
            .sum();
        // Exact but for the last turn's flush (an acknowledgment or two),
        // which leaves after the last interval closed.
        let total = u(&p["bytes_sent"]);
        assert!(
            over_intervals <= total && total - over_intervals <= 3000,
            "path {id}: intervals {over_intervals}, total {total}"
        );
    }
    // The server's figures: its timeline sums to what it read, which is
    // what the client reports, and the client's address is LTE's.
    assert_eq!(u(&s["bytes"]), bytes);
    let timeline: u64 = s["timeline"].as_array().unwrap().iter().map(u).sum();
    assert_eq!(timeline, bytes);
    assert!(s["peer"].as_str().unwrap().starts_with("10.7.0.1:"));
    assert!(s["stalls"].is_array() && s["goodput_bps"].as_f64().unwrap() > 0.0);
    // Wi-Fi was opened once the handshake was done and became active.
    let events = c["path_events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["interface"] == "wifi" && e["state"] == "active"),
        "{events:?}"
    );
}

#[test]
fn a_wifi_outage_does_not_break_the_transfer() {
    let _g = serial();
    if !can_emulate("a_wifi_outage_does_not_break_the_transfer") {
        return;
    }
    let dir = Scratch::new("outage");
    let r = perf_over(
        &dir.0,
        &[
            "lte:rate=10mbit,delay=20ms",
            "wifi:rate=20mbit,delay=5ms,outage=1s-2s",
        ],
        "",
        "--time 3",
    );
    assert!(r.ok, "perf failed: {}", r.stderr);
    assert!(u(&r.server["bytes"]) > 500_000, "{}", r.server);
    assert!(u(&path(&r.client, "lte")["bytes_sent"]) > 0);
}

#[test]
fn an_interface_going_down_abandons_its_path_and_coming_back_revives_it() {
    let _g = serial();
    if !can_emulate("an_interface_going_down_abandons_its_path_and_coming_back_revives_it") {
        return;
    }
    let dir = Scratch::new("down");
    let stamp = dir.0.join("down-at");
    // In the background, Wi-Fi goes down 1.3 s into the run (the times
    // before and after `ip link set down` are written down) and comes back
    // a second later; the route its address had is put back as the
    // emulator set it.
    // The client dials the server's Wi-Fi address, so Wi-Fi is path 0
    // (the kernel's route) and the server's feedback keeps it active.
    let flap = format!(
        "TO=$CONVOY_EMU_WIFI_SERVER; (sleep 1.3; date +%s.%N > {0}; ip link set wifi down; date +%s.%N >> {0}; sleep 1; \
         ip link set wifi up; ip route replace default dev wifi table 101 2>/dev/null) &",
        stamp.display()
    );
    let r = perf_over(
        &dir.0,
        &["lte:rate=10mbit,delay=20ms", "wifi:rate=20mbit,delay=5ms"],
        &flap,
        "--time 4",
    );
    assert!(r.ok, "perf failed: {}", r.stderr);
    let stamps: Vec<f64> = std::fs::read_to_string(&stamp)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse::<f64>().unwrap() * 1e3)
        .collect();
    let (down_begun, down_done) = (stamps[0], stamps[1]);
    let events: Vec<(&str, f64)> = r.client["path_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["interface"] == "wifi")
        .map(|e| (e["state"].as_str().unwrap(), e["unix_ms"].as_f64().unwrap()))
        .collect();
    // The state Wi-Fi was in when its link went down.
    let before = events.iter().rev().find(|(_, t)| *t < down_begun);
    let after: Vec<&(&str, f64)> = events.iter().filter(|(_, t)| *t >= down_begun).collect();
    // (No event yet: path 0 as the handshake left it, active.)
    if before.is_none_or(|(s, _)| *s != "abandoned") {
        // The OS said so: abandoned in the turn that read the netlink
        // message (a few ms; 40 allows for a busy machine), not after the
        // protocol's silence timeout (3 PTO, at least 75 ms here).
        let (_, at) = after
            .iter()
            .find(|(s, _)| *s == "abandoned")
            .unwrap_or_else(|| panic!("wifi not abandoned when it went down: {events:?}"));
        let _ = writeln!(
            std::io::stderr(),
            "interface down: wifi abandoned {:.1} ms after `ip link set down` began, \
             {:.1} ms after it returned",
            at - down_begun,
            at - down_done
        );
        assert!(
            *at - down_done < 40.0,
            "wifi abandoned {:.1} ms after `ip link set down` returned",
            at - down_done
        );
    }
    assert!(
        after.iter().any(|(s, _)| *s == "validating"),
        "wifi not probed again after coming back: {events:?}"
    );
}

#[test]
fn a_backup_path_stands_by() {
    let _g = serial();
    if !can_emulate("a_backup_path_stands_by") {
        return;
    }
    let dir = Scratch::new("backup");
    let r = perf_over(
        &dir.0,
        &["lte:rate=10mbit,delay=20ms", "wifi:rate=20mbit,delay=5ms"],
        "",
        "--time 3 --path wifi --backup lte",
    );
    assert!(r.ok, "perf failed: {}", r.stderr);
    let (lte, wifi) = (path(&r.client, "lte"), path(&r.client, "wifi"));
    assert_eq!(wifi["id"], 0);
    assert_eq!(lte["backup"], true);
    assert_eq!(lte["state"], "standby", "{lte}");
    // Standby probing only: well under 1 % of what Wi-Fi carried.
    assert!(
        u(&lte["bytes_sent"]) * 100 < u(&wifi["bytes_sent"]),
        "{lte}"
    );
}

#[test]
fn a_new_interface_carries_data_within_an_rtt_and_50_ms() {
    let _g = serial();
    if !can_emulate("a_new_interface_carries_data_within_an_rtt_and_50_ms") {
        return;
    }
    let dir = Scratch::new("new");
    let stamp = dir.0.join("usable-at");
    // Wi-Fi has no address at the start (which also takes its routes);
    // 1.3 s in it gets both back, and the time just before the route that
    // makes it usable is written down.
    let flap = format!(
        "ip addr del 10.7.1.1/24 dev wifi; (sleep 1.3; ip addr add 10.7.1.1/24 dev wifi; \
         date +%s.%N > {0}; ip route add default dev wifi table 101; date +%s.%N >> {0}) &",
        stamp.display()
    );
    let r = perf_over(
        &dir.0,
        &["lte:rate=10mbit,delay=20ms", "wifi:rate=20mbit,delay=5ms"],
        &flap,
        "--time 3",
    );
    assert!(r.ok, "perf failed: {}", r.stderr);
    // Before and after `ip route add`: the route appeared in between.
    let stamps: Vec<f64> = std::fs::read_to_string(&stamp)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse::<f64>().unwrap() * 1e3)
        .collect();
    let (usable_ms, route_added_ms) = (stamps[0], stamps[1]);
    let active = r.client["path_events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["interface"] == "wifi" && e["state"] == "active")
        .unwrap_or_else(|| panic!("wifi never active: {}", r.client["path_events"]));
    let after = active["unix_ms"].as_f64().unwrap() - usable_ms;
    let wifi = path(&r.client, "wifi");
    assert!(u(&wifi["bytes_sent"]) > 100_000, "{wifi}");
    let opened = r.client["path_events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["interface"] == "wifi")
        .unwrap()["unix_ms"]
        .as_f64()
        .unwrap();
    let _ = writeln!(
        std::io::stderr(),
        "new interface: `ip route add` took {:.1} ms; the path opened {:.1} ms and was \
         active {after:.1} ms after it began",
        route_added_ms - usable_ms,
        opened - usable_ms
    );
    // 1 RTT (10 ms) + 50 ms from the route, which appeared at the latest
    // when `ip route add` returned.
    let limit = 60.0 + (route_added_ms - usable_ms);
    assert!(
        after < limit,
        "wifi active {after:.1} ms after `ip route add` began (limit {limit:.1} ms)"
    );
}

#[test]
fn an_unknown_path_is_one_line_and_exit_1() {
    let dir = Scratch::new("unknown");
    let key = dir.0.join("k");
    assert!(Command::new(convoy())
        .args(["keygen", "--out"])
        .arg(&key)
        .output()
        .unwrap()
        .status
        .success());
    // A documentation address (never routed): the check is local.
    let out = Command::new(convoy())
        .args([
            "perf",
            "192.0.2.1",
            "--time",
            "1",
            "--path",
            "nosuch9",
            "--server-key",
        ])
        .arg(dir.0.join("k.pub"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err:?}");
    assert!(err.contains("nosuch9"), "{err}");
}

/// `convoy send` and `convoy get` over LTE and Wi-Fi at once: their
/// `--json` documents carry the progress reports, each with every path's
/// interface, state, rate, RTT, bytes and share, the shares adding up to
/// 1, and both links carrying part of each transfer.
#[test]
fn send_and_get_report_per_path_progress() {
    let _g = serial();
    if !can_emulate("send_and_get_report_per_path_progress") {
        return;
    }
    let dir = Scratch::new("progress");
    let key = dir.0.join("server.key");
    let out = Command::new(convoy())
        .args(["keygen", "--out"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success());
    let store = dir.0.join("store");
    std::fs::create_dir_all(&store).unwrap();
    let file = dir.0.join("drive.log");
    // Pseudo-random, so no layer below can shrink it: ~2 s over both.
    let data: Vec<u8> = (0..6_000_000u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&file, &data).unwrap();
    let server = format!(
        "exec {} serve --open --listen 0.0.0.0:4433 --dir {} --key {}",
        convoy(),
        store.display(),
        key.display()
    );
    let client = format!(
        "sleep 0.3; {c} send {f} $CONVOY_EMU_SERVER --server-key {k}.pub --json && \
         {c} get drive.log $CONVOY_EMU_SERVER --server-key {k}.pub --json -o {b}",
        c = convoy(),
        f = file.display(),
        k = key.display(),
        b = dir.0.join("back.log").display()
    );
    let child = Command::new(convoy())
        .args(["emu", "--link", "lte:rate=10mbit,delay=20ms"])
        .args(["--link", "wifi:rate=20mbit,delay=5ms"])
        .args(["--server", &server, "--", "sh", "-c", &client])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_output(Running(child), Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "send/get failed: {stderr}");
    assert_eq!(std::fs::read(dir.0.join("back.log")).unwrap(), data);
    let docs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &Value| v.get("progress").is_some())
        .collect();
    assert_eq!(
        docs.len(),
        2,
        "one document each from send and get: {docs:?}"
    );
    for (doc, what, carried) in [
        (&docs[0], "send", "bytes_sent"),
        (&docs[1], "get", "bytes_received"),
    ] {
        let reports = doc["progress"].as_array().unwrap();
        assert!(
            reports.len() >= 3,
            "{what}: {} progress reports",
            reports.len()
        );
        for r in reports {
            assert!(
                r["t_s"].as_f64().is_some() && r["done"].as_u64().is_some(),
                "{what}: {r}"
            );
            let paths = r["paths"].as_array().unwrap();
            for p in paths {
                assert!(p["interface"].is_string(), "{what}: {p}");
                for f in ["rate_bps", "bytes_sent", "bytes_received", "id"] {
                    assert!(p[f].as_u64().is_some(), "{what}: no {f} in {p}");
                }
                for f in ["srtt_ms", "share"] {
                    assert!(p[f].as_f64().is_some(), "{what}: no {f} in {p}");
                }
                assert!(p["state"].is_string(), "{what}: {p}");
            }
            let shares: f64 = paths.iter().map(|p| p["share"].as_f64().unwrap()).sum();
            let moved: u64 = paths.iter().map(|p| u(&p[carried])).sum();
            assert!(
                moved == 0 || (shares - 1.0).abs() < 1e-6,
                "{what}: shares {shares}"
            );
        }
        // By the last report both links carry part of the transfer.
        let last = reports.last().unwrap()["paths"].as_array().unwrap().clone();
        for name in ["lte", "wifi"] {
            let p = last
                .iter()
                .find(|p| p["interface"] == name)
                .unwrap_or_else(|| panic!("{what}: no {name} path in {last:?}"));
            assert!(
                p["share"].as_f64().unwrap() > 0.05,
                "{what}: {name} carried too little: {p}"
            );
            assert!(p["srtt_ms"].as_f64().unwrap() > 0.0, "{what}: {p}");
        }
    }
}

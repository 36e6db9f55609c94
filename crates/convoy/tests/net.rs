//! convoy keygen/serve/send/get/perf as real processes on loopback:
//! round trips in both modes, resume after a killed client, a restarted
//! server and a 60 s network cut, and every bad input of issue 6.
//! All in one test binary so the slow cases run in parallel.

mod net_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use net_support::*;

fn send_cmd(file: &Path, addr: &str, pubkey: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.arg("send")
        .arg(file)
        .arg(addr)
        .arg("--server-key")
        .arg(pubkey);
    c.args(extra);
    c
}

fn assert_identical(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert_eq!(x.len(), y.len(), "{} vs {}", a.display(), b.display());
    assert!(x == y, "{} and {} differ", a.display(), b.display());
}

/// One line on stderr, non-zero exit, and the message contains `what`.
fn assert_clear_failure(out: &std::process::Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "should fail: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line expected: {err:?}");
    assert!(err.contains(what), "{err:?} should mention {what:?}");
}

#[test]
fn keygen_writes_private_0600_and_public() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("keygen");
    let key = dir.path().join("k");
    let out = Command::new(bin())
        .args(["keygen", "--json", "--out"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v = json_of(&out);
    let public = std::fs::read_to_string(dir.path().join("k.pub")).unwrap();
    assert_eq!(v["public"].as_str().unwrap(), public.trim());
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // Never overwrites a key.
    let again = Command::new(bin())
        .args(["keygen", "--out"])
        .arg(&key)
        .output()
        .unwrap();
    assert_clear_failure(&again, "exists");
}

#[test]
fn upload_and_download_round_trip_in_both_modes() {
    let Site {
        dir,
        key,
        pubkey,
        store,
    } = site("roundtrip");
    let port = free_port();
    let _server = serve(port, &store, &key, &[]);
    let addr = format!("127.0.0.1:{port}");
    for (i, mode) in ["tide", "rcdp", "rlnc-bbr"].iter().enumerate() {
        let name = format!("log-{mode}.bin");
        let src = dir.path().join(&name);
        make_file(&src, 8_000_000 + i * 12_345, 7 + i as u64);
        let out = send_cmd(&src, &addr, &pubkey, &["--json", "--mode", mode])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v = json_of(&out);
        assert_eq!(v["files"][0]["resumed_from"], 0);
        assert_identical(&src, &store.join(&name));
        let back = dir.path().join(format!("back-{mode}"));
        let out = Command::new(bin())
            .args([
                "get",
                &name,
                &addr,
                "--json",
                "--mode",
                mode,
                "--server-key",
            ])
            .arg(&pubkey)
            .arg("--out")
            .arg(&back)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_identical(&src, &back);
        assert_eq!(json_of(&out)["blake3"], v["files"][0]["blake3"]);
    }
    assert_eq!(partial_size(&store), 0, "no partial files left");
}

/// A `perf --server --once` on a free loopback port with fresh keys in
/// `dir`: the public key, the port and the running server.
fn perf_server_once(dir: &TempDir) -> (PathBuf, u16, Proc) {
    let (key, pubkey) = keygen(dir.path());
    let port = free_port();
    let server = spawn(
        &[
            "perf",
            "--server",
            "--once",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--key",
        ],
        &[&key],
    );
    wait_port_bound(port);
    (pubkey, port, server)
}

#[test]
fn perf_reports_json_with_intervals_and_cpu() {
    let dir = TempDir::new("perf");
    let (pubkey, port, mut server) = perf_server_once(&dir);
    let out = Command::new(bin())
        .args([
            "perf",
            &format!("127.0.0.1:{port}"),
            "--bytes",
            "20MB",
            "--json",
            "--aead",
            "chacha20-poly1305",
            "--server-key",
        ])
        .arg(&pubkey)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    assert_eq!(v["bytes"], 20_000_000);
    assert_eq!(v["mode"], "tide");
    // The client did not offer AES-256-GCM, whatever the server offered.
    assert_eq!(v["aead"], "chacha20-poly1305");
    assert!(v["goodput_mbps"].as_f64().unwrap() > 1.0);
    assert!(v["cpu_seconds"].as_f64().unwrap() > 0.0);
    assert!(v["server_cpu_seconds"].as_f64().unwrap() > 0.0);
    assert!(v["rtt_ms"]["min"].as_f64().unwrap() > 0.0);
    assert!(!v["intervals"].as_array().unwrap().is_empty());
    assert!(v["packets_sent"].as_u64().unwrap() > 13_000);
    // --once: the server leaves by itself after its client.
    let s = server.wait_output(Duration::from_secs(10));
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
}

#[test]
fn a_timed_perf_ends_on_time_and_reports_write_to_read_latency() {
    let dir = TempDir::new("perf-time");
    let (pubkey, port, mut server) = perf_server_once(&dir);
    let started = std::time::Instant::now();
    let out = Command::new(bin())
        .args([
            "perf",
            &format!("127.0.0.1:{port}"),
            "--time",
            "2",
            "--mode",
            "tide",
            "--json",
            "--aead",
            "aes-256-gcm",
            "--server-key",
        ])
        .arg(&pubkey)
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    // The server counts what arrived in the 2 s after the request and
    // answers at once; the client does not drain a send buffer after it.
    assert_eq!(v["seconds"].as_f64(), Some(2.0));
    assert!(v["bytes"].as_u64().unwrap() > 0);
    assert!(v["latency_ms"]["samples"].as_u64().unwrap() > 0);
    assert!(v["latency_ms"]["p50"].as_f64().unwrap() > 0.0);
    // The server (--aead auto) offers AES-256-GCM where the CPU has AES
    // instructions; the client offered it whatever the CPU.
    let aes = cpu_flags().contains(&"aes".to_owned());
    assert_eq!(
        v["aead"],
        if aes {
            "aes-256-gcm"
        } else {
            "chacha20-poly1305"
        }
    );
    // Generous for a loaded machine (process start, handshake); before
    // the bounded send side a timed run drained what it had buffered.
    assert!(took < Duration::from_secs(6), "took {took:?}");
    let s = server.wait_output(Duration::from_secs(10));
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
}

/// The CPU feature words of /proc/cpuinfo (x86 "flags", arm "Features").
fn cpu_flags() -> Vec<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find(|l| l.starts_with("flags") || l.starts_with("Features"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, words)| words.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

#[test]
fn an_unknown_aead_is_a_one_line_error() {
    let out = Command::new(bin())
        .args([
            "perf",
            "127.0.0.1:9",
            "--server-key",
            "00",
            "--aead",
            "rot13",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("expected auto, chacha20-poly1305 or aes-256-gcm"),
        "{err}"
    );
}

/// Runs `convoy ARGS EXTRA` to the end, killing it after `limit` so a hung
/// re-run fails the test instead of hanging it.
fn run_within(args: &[&str], extra: &[&Path], limit: Duration) -> std::process::Output {
    spawn(args, extra).wait_output(limit)
}

/// The re-run succeeded, resumed from at least `from` bytes, and the
/// stored file is the source, byte for byte.
fn assert_resumed(out: &std::process::Output, src: &Path, store: &Path, from: u64) {
    assert!(
        out.status.success(),
        "re-run failed: {}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server_log(store)
    );
    let v = json_of(out);
    let resumed = v["files"][0]["resumed_from"].as_u64().unwrap();
    assert!(
        resumed >= from.max(1),
        "resumed from {resumed}, expected >= {from}: {v}"
    );
    assert_identical(src, &store.join("drive.log"));
    assert_eq!(partial_size(store), 0, "no partial file left");
}

/// Uploads `size` bytes, interrupts with `interrupt` once the server has
/// `at` bytes, then re-runs the same command and checks it resumed.
fn resume_case(
    tag: &str,
    size: usize,
    at: u64,
    interrupt: impl FnOnce(&Path, &mut Proc, &mut Proc, u16),
) {
    let Site {
        dir,
        key,
        pubkey,
        store,
    } = site(tag);
    let src = dir.path().join("drive.log");
    make_file(&src, size, 42);
    let port = free_port();
    let mut server = serve(port, &store, &key, &[]);
    let addr = format!("127.0.0.1:{port}");
    let args = [
        "send",
        src.to_str().unwrap(),
        &addr,
        "--json",
        "--idle-timeout",
        "10",
        "--server-key",
    ];
    let mut client = spawn(&args, &[&pubkey]);
    wait_partial(&store, at, Duration::from_secs(60));
    interrupt(&store, &mut client, &mut server, port);
    assert!(
        !store.join("drive.log").exists(),
        "no file under the final name yet"
    );
    let out = run_within(&args, &[&pubkey], Duration::from_secs(120));
    assert_resumed(&out, &src, &store, at);
}

#[test]
fn resume_after_client_killed() {
    resume_case(
        "kill-client",
        120_000_000,
        15_000_000,
        |_store, client, _server, _| client.kill(),
    );
}

#[test]
fn resume_after_server_restarted() {
    resume_case(
        "restart-server",
        120_000_000,
        15_000_000,
        |store, client, server, port| {
            server.kill();
            let key = store.parent().unwrap().join("server.key");
            *server = serve(port, store, &key, &[]);
            // The client cannot reach its old connection; it gives up.
            let out = client.wait_output(Duration::from_secs(30));
            assert!(!out.status.success());
        },
    );
}

/// The network between client and server is cut for 60 s (a relay drops
/// every datagram both ways). The client gives up with a clear error at
/// its 30 s idle timeout, the server's side of the connection times out
/// too and keeps the partial file, and once the network is back the same
/// command resumes from exactly what the server holds.
#[test]
fn resume_after_network_cut_for_60_seconds() {
    const CUT: Duration = Duration::from_secs(60);
    let Site {
        dir,
        key,
        pubkey,
        store,
    } = site("cut");
    let src = dir.path().join("drive.log");
    make_file(&src, 32_000_000, 3);
    let port = free_port();
    let _server = serve(port, &store, &key, &[]);
    let relay = Relay::new(format!("127.0.0.1:{port}").parse().unwrap());
    let addr = relay.addr.to_string();
    let args = [
        "send",
        src.to_str().unwrap(),
        &addr,
        "--json",
        "--server-key",
    ];
    let mut client = spawn(&args, &[&pubkey]);
    wait_partial(&store, 4_000_000, Duration::from_secs(60));
    let cut_at = std::time::Instant::now();
    relay.cut.store(true, std::sync::atomic::Ordering::Relaxed);
    // Default idle timeout (30 s): the client gives up during the cut.
    let out = client.wait_output(CUT - Duration::from_secs(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the client should give up during the cut: {err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line expected: {err:?}");
    assert!(err.contains("idle timeout"), "{err}");
    std::thread::sleep(CUT.saturating_sub(cut_at.elapsed()));
    // The server's side timed out during the cut too: nothing more is
    // written, and the re-run must resume from exactly this.
    let log = server_log(&store);
    assert!(
        log.lines()
            .any(|l| l.contains(" closed ") && l.contains("reason=\"idle timeout")),
        "server log:\n{log}"
    );
    let held = partial_size(&store);
    assert!(held >= 4_000_000, "{held}");
    relay.cut.store(false, std::sync::atomic::Ordering::Relaxed);
    let out = run_within(&args, &[&pubkey], Duration::from_secs(60));
    assert_resumed(&out, &src, &store, held);
    assert_eq!(
        json_of(&out)["files"][0]["resumed_from"].as_u64(),
        Some(held)
    );
}

#[test]
fn bad_input_missing_file() {
    let dir = TempDir::new("missing");
    let (_, pubkey) = keygen(dir.path());
    let out = send_cmd(&dir.path().join("nope.bin"), "127.0.0.1:9", &pubkey, &[])
        .output()
        .unwrap();
    assert_clear_failure(&out, "nope.bin");
}

#[test]
fn bad_input_unusable_directory() {
    let dir = TempDir::new("baddir");
    let (key, _) = keygen(dir.path());
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    for (d, what) in [
        (file.clone(), "not a directory"),
        (dir.path().join("absent"), "No such file"),
    ] {
        let out = Command::new(bin())
            .args([
                "serve",
                "--open",
                "--listen",
                &format!("127.0.0.1:{}", free_port()),
                "--dir",
            ])
            .arg(&d)
            .arg("--key")
            .arg(&key)
            .output()
            .unwrap();
        assert_clear_failure(&out, what);
    }
}

#[test]
fn bad_input_port_in_use() {
    let dir = TempDir::new("port");
    let (key, _) = keygen(dir.path());
    let holder = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let out = Command::new(bin())
        .args([
            "serve",
            "--open",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--dir",
        ])
        .arg(dir.path())
        .arg("--key")
        .arg(&key)
        .output()
        .unwrap();
    assert_clear_failure(&out, "in use");
}

#[test]
fn bad_input_wrong_key() {
    let Site {
        dir,
        key,
        pubkey: _,
        store,
    } = site("wrongkey");
    let port = free_port();
    let _server = serve(port, &store, &key, &[]);
    let src = dir.path().join("f");
    make_file(&src, 1000, 1);
    let wrong = "11".repeat(32);
    let out = Command::new(bin())
        .arg("send")
        .arg(&src)
        .arg(format!("127.0.0.1:{port}"))
        .args(["--server-key", &wrong])
        .output()
        .unwrap();
    assert_clear_failure(&out, "key");
    assert!(!store.join("f").exists());
}

#[test]
fn bad_input_unreachable_host() {
    let dir = TempDir::new("unreach");
    let (_, pubkey) = keygen(dir.path());
    let src = dir.path().join("f");
    make_file(&src, 1000, 1);
    let out = send_cmd(&src, &format!("127.0.0.1:{}", free_port()), &pubkey, &[])
        .output()
        .unwrap();
    assert_clear_failure(&out, "nothing is listening");
}

#[test]
fn bad_input_disk_full() {
    let dir = TempDir::new("diskfull");
    let (key, pubkey) = keygen(dir.path());
    let store = dir.path().join("small");
    let Some(_tmpfs) = Tmpfs::mount(&store, "4m") else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    let port = free_port();
    let _server = serve(port, &store, &key, &[]);
    let src = dir.path().join("big.log");
    make_file(&src, 8_000_000, 5);
    let out = send_cmd(&src, &format!("127.0.0.1:{port}"), &pubkey, &[])
        .output()
        .unwrap();
    assert_clear_failure(&out, "No space left");
    assert!(
        !store.join("big.log").exists(),
        "no file under the final name"
    );
    assert_eq!(
        partial_size(&store),
        0,
        "the partial file is removed to free the disk"
    );
}

#[test]
fn send_with_background_priority_round_trips() {
    let Site {
        dir,
        key,
        pubkey,
        store,
    } = site("background");
    let port = free_port();
    let _server = serve(port, &store, &key, &[]);
    let addr = format!("127.0.0.1:{port}");
    for mode in ["rcdp", "rlnc-bbr"] {
        let name = format!("bg-{mode}.bin");
        let src = dir.path().join(&name);
        make_file(&src, 3_000_000, 11);
        let out = send_cmd(
            &src,
            &addr,
            &pubkey,
            &["--json", "--mode", mode, "--priority", "background"],
        )
        .output()
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_identical(&src, &store.join(&name));
    }
    let src = dir.path().join("x.bin");
    make_file(&src, 10, 1);
    let out = send_cmd(&src, &addr, &pubkey, &["--priority", "low"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("normal, background"),
        "{err}"
    );
}

#[test]
fn send_with_several_files_overlaps_them_and_stores_each() {
    let Site {
        dir,
        key,
        pubkey,
        store,
    } = site("several");
    let port = free_port();
    let _server = serve(port, &store, &key, &[]);
    let addr = format!("127.0.0.1:{port}");
    // A directory of small segments and one larger file, as an agent's
    // spool or a drive's logs are.
    let mut files: Vec<PathBuf> = (0..40)
        .map(|i| {
            let f = dir.path().join(format!("seg{i:03}.jsonl"));
            make_file(&f, 500 + i * 37, i as u64);
            f
        })
        .collect();
    let big = dir.path().join("cam0.mcap");
    make_file(&big, 3_000_000, 99);
    files.insert(20, big);
    let mut args: Vec<String> = vec!["send".into()];
    args.extend(files.iter().map(|f| f.to_str().unwrap().to_owned()));
    args.extend([
        addr.clone(),
        "--prefix".into(),
        "2026-11-25".into(),
        "--server-key".into(),
        pubkey.to_str().unwrap().into(),
    ]);
    let out = Command::new(bin()).args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert_identical(f, &store.join("2026-11-25").join(name));
        assert!(
            text.contains(&format!("stored as 2026-11-25/{name} ")),
            "{name} missing from {text}"
        );
    }
    assert!(text.contains("41 files stored"), "{text}");

    // Again with --json: everything was stored already, and each file
    // is reported in the order given.
    args.push("--json".into());
    let out = Command::new(bin()).args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    let names: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = files
        .iter()
        .map(|f| format!("2026-11-25/{}", f.file_name().unwrap().to_str().unwrap()))
        .collect();
    assert_eq!(names, expected);
}

/// An upload abandoned mid-way leaves its partial file; a server started
/// after the partial's age limit sweeps it at start-up (the same sweep runs
/// every minute after), so no partial outlives its limit once swept.
#[test]
fn an_abandoned_partial_is_swept_once_older_than_its_limit() {
    let Site {
        dir,
        key,
        pubkey,
        store,
    } = site("age-out");
    let src = dir.path().join("drive.log");
    make_file(&src, 60_000_000, 9);
    let port = free_port();
    let mut server = serve(port, &store, &key, &[]);
    let addr = format!("127.0.0.1:{port}");
    let mut client = spawn(
        &[
            "send",
            src.to_str().unwrap(),
            &addr,
            "--json",
            "--server-key",
        ],
        &[&pubkey],
    );
    wait_partial(&store, 4_000_000, Duration::from_secs(60));
    client.kill();
    server.kill();
    assert!(partial_size(&store) > 0, "the abandoned upload's partial");
    // 0.001 h = 3.6 s: the partial is older than that by the restart.
    std::thread::sleep(Duration::from_secs(4));
    let _server = serve(port, &store, &key, &["--partial-max-age", "0.001"]);
    let start = std::time::Instant::now();
    while partial_size(&store) > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "a partial older than --partial-max-age outlived the start-up sweep"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

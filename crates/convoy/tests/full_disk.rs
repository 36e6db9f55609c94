//! Issue 17's full disks, with real processes: the agent's spool on a
//! small tmpfs that fills while the server is away, and the server's store
//! on a small tmpfs that fills under a live stream. Each gets a clear log
//! line, loses nothing acknowledged and stores nothing twice. Mounting
//! needs root: without it the tests say so and pass.

mod net_support;
mod service_support;

use std::collections::HashSet;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use net_support::{bin, server_log_with, Proc, TempDir, Tmpfs};
use service_support::{stored_sample_times, Fleet};

/// Telemetry into the agent's socket: each fix is three samples (latitude,
/// longitude, speed) 10 ms after the last, with values that compress
/// about as badly as real sensor noise, so a small disk fills quickly.
struct Feeder {
    sock: UnixStream,
    t0_ns: i64,
    sent: Vec<i64>,
    x: u64,
}

impl Feeder {
    fn new(path: &Path) -> Feeder {
        let t0_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            - 3600;
        Feeder {
            sock: UnixStream::connect(path).unwrap(),
            t0_ns: t0_s * 1_000_000_000,
            sent: Vec::new(),
            x: 0x9e37_79b9_7f4a_7c15,
        }
    }

    fn noise(&mut self) -> f64 {
        self.x ^= self.x << 13;
        self.x ^= self.x >> 7;
        self.x ^= self.x << 17;
        (self.x >> 11) as f64 / (1u64 << 53) as f64
    }

    fn send(&mut self, fixes: usize) {
        let mut s = String::new();
        for _ in 0..fixes {
            let t = self.t0_ns + self.sent.len() as i64 * 10_000_000;
            let (lat, lon, v) = (
                45.0 + self.noise(),
                7.0 + self.noise(),
                100.0 * self.noise(),
            );
            s += &format!(
                "{{\"t_ns\":{t},\"path\":\"Vehicle.CurrentLocation.Latitude\",\"value\":{lat}}}\n\
                 {{\"t_ns\":{t},\"path\":\"Vehicle.CurrentLocation.Longitude\",\"value\":{lon}}}\n\
                 {{\"t_ns\":{t},\"path\":\"Vehicle.Speed\",\"value\":{v}}}\n"
            );
            self.sent.push(t);
        }
        self.sock.write_all(s.as_bytes()).unwrap();
    }
}

/// `convoy agent` with its log in `log` (each line stamped with the
/// seconds since the agent started), once its socket accepts.
fn start_agent(cfg: &Path, sock: &Path, log: &Path) -> Proc {
    let mut child = Command::new(bin())
        .args(["agent", "--config"])
        .arg(cfg)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let mut out = std::fs::File::create(log).unwrap();
    let start = Instant::now();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = writeln!(out, "{:7.2} {line}", start.elapsed().as_secs_f64());
        }
    });
    let p = Proc(Some(child));
    let t = Instant::now();
    while UnixStream::connect(sock).is_err() {
        assert!(t.elapsed() < Duration::from_secs(10), "agent socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    p
}

fn agent_status(cfg: &Path) -> serde_json::Value {
    let out = Command::new(bin())
        .args(["agent", "status", "--json", "--config"])
        .arg(cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "convoy agent status: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn acked_names(spool: &Path) -> Vec<String> {
    convoy_agent::spool::Spool::open_readonly(spool)
        .unwrap()
        .acked_names()
        .unwrap()
}

/// Waits until the spool is empty and the last sample sent is stored.
fn wait_drained(f: &Fleet, cfg: &Path, feed: &Feeder, log: &Path, limit: Duration) {
    let last = *feed.sent.last().unwrap();
    let t = Instant::now();
    loop {
        let s = agent_status(cfg);
        if s["spool_bytes"] == 0 && stored_sample_times(&f.store, "v1").contains(&last) {
            return;
        }
        assert!(
            t.elapsed() < limit,
            "not drained in {limit:?}: agent {s}\nagent log:\n{}\nserver log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default(),
            net_support::server_log(&f.store)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn wait_stored(f: &Fleet, n: usize, limit: Duration) {
    let t = Instant::now();
    while stored_sample_times(&f.store, "v1").len() < n {
        assert!(t.elapsed() < limit, "never stored {n} samples");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every stored sample was sent, and none is stored twice.
fn check_no_duplicates(stored: &[i64], sent: &[i64]) {
    let unique: HashSet<i64> = stored.iter().copied().collect();
    assert_eq!(unique.len(), stored.len(), "a sample was stored twice");
    let sent: HashSet<i64> = sent.iter().copied().collect();
    assert!(
        unique.is_subset(&sent),
        "a sample stored that was never sent"
    );
}

fn socket_config(f: &Fleet, spool: &Path, sock: &Path) -> PathBuf {
    f.agent_config(
        "v1",
        spool,
        &format!("[segments]\nmax_seconds = 0.2\n[[source]]\nkind = \"socket\"\npath = {sock:?}\n"),
    )
}

#[test]
fn a_full_spool_disk_is_logged_applies_the_overflow_rule_and_loses_nothing_acknowledged() {
    // Declared first, dropped last: after the agent and the server.
    let disk = TempDir::new("fullspool-disk");
    let spool = disk.path().join("spool");
    let Some(_tmpfs) = Tmpfs::mount(&spool, "2m") else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    let mut f = Fleet::start("fullspool", &["v1"], &[]);
    let sock = f.dir.path().join("tele.sock");
    let cfg = socket_config(&f, &spool, &sock);
    let log = disk.path().join("agent.log");
    let mut agent = start_agent(&cfg, &sock, &log);
    let mut feed = Feeder::new(&sock);

    // 1. The server acknowledges what the agent segments.
    feed.send(600);
    wait_stored(&f, 600, Duration::from_secs(30));

    // 2. The server is gone and telemetry keeps coming until the spool's
    //    2 MB are full, then for 2 s more.
    f.server.kill();
    let t = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains("spool disk full")
    {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the spool never filled: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        feed.send(200);
        std::thread::sleep(Duration::from_millis(5));
    }
    let full_after = feed.sent.len();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) {
        feed.send(200);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        agent.0.as_mut().unwrap().try_wait().unwrap().is_none(),
        "the agent died on a full disk"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let full: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("spool disk full"))
        .collect();
    assert_eq!(full.len(), 1, "one line, not one per sample: {text}");
    assert!(
        (full[0].contains("No space left on device") || full[0].contains("disk is full"))
            && full[0].contains("dropping the oldest waiting segments"),
        "{}",
        full[0]
    );
    let s = agent_status(&cfg);
    assert_eq!(s["running"], true, "{s}");
    assert!(
        s["classes"][1]["dropped"].as_u64().unwrap() > 0,
        "the overflow rule dropped nothing: {s}\n{text}"
    );
    assert!(
        s["agent"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("spool disk full")),
        "{s}"
    );

    // 3. The server is back: the rest drains, and new samples follow.
    f.restart();
    let back_at = feed.sent.len();
    feed.send(600);
    wait_drained(&f, &cfg, &feed, &log, Duration::from_secs(60));

    let stored = stored_sample_times(&f.store, "v1");
    check_no_duplicates(&stored, &feed.sent);
    let have: HashSet<i64> = stored.iter().copied().collect();
    let missing: Vec<usize> = (0..feed.sent.len())
        .filter(|i| !have.contains(&feed.sent[*i]))
        .collect();
    // Only samples from while the server was away, by the overflow rule:
    // none acknowledged before, none after it came back.
    assert!(
        missing.iter().all(|i| (600..back_at).contains(i)),
        "lost outside the full-disk period: {:?}",
        &missing[..missing.len().min(20)]
    );
    for name in acked_names(&spool) {
        assert!(
            f.store.join("v1").join(&name).exists(),
            "acknowledged but not stored: {name}"
        );
    }
    let runs = missing.windows(2).filter(|w| w[1] != w[0] + 1).count() + 1;
    let s = agent_status(&cfg);
    eprintln!(
        "full spool: {} fixes sent ({} before the disk filled), {} stored, {} dropped by the \
         overflow rule ({} segments; {runs} runs from fix {:?} to {:?}), {} samples found no room",
        feed.sent.len(),
        full_after,
        stored.len(),
        missing.len(),
        s["classes"][1]["dropped"],
        missing.first(),
        missing.last(),
        s["agent"]["samples_lost"]
    );
}

#[test]
fn a_full_server_disk_acknowledges_nothing_until_it_has_room_then_the_backlog_drains() {
    let disk = TempDir::new("fullstore-disk");
    let store = disk.path().join("store");
    let Some(tmpfs) = Tmpfs::mount(&store, "8m") else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    let f = Fleet::start_at("fullstore", &["v1"], &[], Some(&store));
    let spool = f.dir.path().join("spool");
    let sock = f.dir.path().join("tele.sock");
    let cfg = socket_config(&f, &spool, &sock);
    let log = f.dir.path().join("agent.log");
    let _agent = start_agent(&cfg, &sock, &log);
    let mut feed = Feeder::new(&sock);

    // 1. Stored and indexed while there is room.
    feed.send(300);
    wait_stored(&f, 300, Duration::from_secs(30));
    f.wait_uploads("indexed", |r| {
        !r.is_empty() && r.iter().all(|x| x["state"] == "indexed")
    });

    // 2. Another program fills the disk; the stream goes on for 3 s.
    let filler = tmpfs.fill(".filler");
    let acked = acked_names(&spool).len();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        feed.send(50);
        std::thread::sleep(Duration::from_millis(50));
    }
    let log_text = server_log_with(&f.store, "No space left on device", Duration::from_secs(15));
    assert!(
        log_text
            .lines()
            .any(|l| l.contains("vehicle=\"v1\" peer=127.0.0.1")
                && l.contains("No space left on device")),
        "the server's log names neither the vehicle nor the full disk:\n{log_text}"
    );
    assert_eq!(
        acked_names(&spool).len(),
        acked,
        "an upload was acknowledged on a full disk"
    );
    let s = agent_status(&cfg);
    assert!(
        s["spool_bytes"].as_u64().unwrap() > 0,
        "nothing queued: {s}"
    );

    // 3. Room again: the backlog drains, every sample once.
    std::fs::remove_file(store.join(".filler")).unwrap();
    wait_drained(&f, &cfg, &feed, &log, Duration::from_secs(60));
    let stored = stored_sample_times(&f.store, "v1");
    check_no_duplicates(&stored, &feed.sent);
    assert_eq!(stored.len(), feed.sent.len(), "samples lost");
    for name in acked_names(&spool) {
        assert!(f.store.join("v1").join(&name).exists(), "{name}");
    }
    let rows = f.wait_uploads("all indexed", |r| r.iter().all(|x| x["state"] == "indexed"));
    let indexed: i64 = rows.iter().map(|r| r["samples"].as_i64().unwrap()).sum();
    assert_eq!(indexed as usize, 3 * stored.len());
    eprintln!(
        "full store: {} fixes sent, {} stored, {} acknowledged segments, filler {filler} bytes",
        feed.sent.len(),
        stored.len(),
        acked_names(&spool).len()
    );
}

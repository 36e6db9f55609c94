//! A `convoy serve` child process for the load and flood benchmarks: a
//! fresh key and storage directory, its address read from its first JSON
//! line, its memory read from /proc while it runs, and its counters and
//! CPU time collected when it is stopped. Everything is removed (and the
//! process killed) on drop, also when the benchmark fails.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use convoy_proto::Keypair;

/// Sees each line of the server's stdout; `true`: the line is its own.
pub type LineTap = std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Removes a directory unless disarmed (a server that failed to start).
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

pub struct SpawnedServer {
    child: Option<Child>,
    pub addr: SocketAddr,
    pub public_key: [u8; 32],
    pub dir: PathBuf,
    lines: mpsc::Receiver<String>,
}

/// What the server said and used by the time it exited.
#[derive(Debug, Default)]
pub struct ServerOutcome {
    /// Its final `{"event":"driver",...}` line.
    pub summary: serde_json::Value,
    pub cpu_seconds: f64,
    /// Peak resident memory (VmHWM), KiB.
    pub peak_rss_kib: u64,
}

impl SpawnedServer {
    /// Starts `convoy serve` on 127.0.0.1 with `extra` arguments.
    pub fn start(extra: &[String]) -> Result<SpawnedServer> {
        SpawnedServer::start_with(extra, true, |_| Ok(()), None)
    }

    /// [`SpawnedServer::start`], open (`--open`) or not (a fleet server
    /// whose registry `prepare` writes into its storage directory before
    /// it starts), with `tap` shown each line of its stdout first: a line
    /// it returns `true` for is its own (not kept for [`SpawnedServer::stop`]).
    pub fn start_with(
        extra: &[String],
        open: bool,
        prepare: impl FnOnce(&std::path::Path) -> Result<()>,
        tap: Option<LineTap>,
    ) -> Result<SpawnedServer> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("convoy-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(dir.join("store")).context("temporary directory")?;
        let mut guard = RemoveOnDrop(Some(dir.clone()));
        prepare(&dir.join("store"))?;
        let kp = Keypair::generate();
        let key = dir.join("server.key");
        convoy_net::write_keypair(&key, &kp)?;
        let exe = std::env::current_exe().context("own executable")?;
        let mut cmd = Command::new(exe);
        cmd.arg("serve");
        if open {
            cmd.arg("--open");
        }
        cmd.args(["--listen", "127.0.0.1:0", "--json", "--dir"])
            .arg(dir.join("store"))
            .arg("--key")
            .arg(&key)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().context("starting convoy serve")?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tap.as_ref().is_some_and(|t| t(&line)) {
                    continue;
                }
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        guard.0 = None;
        let mut s = SpawnedServer {
            child: Some(child),
            addr: "127.0.0.1:0".parse().expect("valid"),
            public_key: kp.public,
            dir,
            lines,
        };
        // A fleet server says what it holds first, then where it listens.
        let v = loop {
            let line = s
                .lines
                .recv_timeout(Duration::from_secs(10))
                .context("convoy serve did not start")?;
            let v: serde_json::Value = serde_json::from_str(&line).context("serve's first line")?;
            if open || v["event"] == "listening" {
                break v;
            }
        };
        s.addr = v["addr"]
            .as_str()
            .and_then(|a| a.parse().ok())
            .context("serve did not say its address")?;
        Ok(s)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// A field of /proc/PID/status, in KiB (VmRSS, VmHWM).
    pub fn status_kib(&self, field: &str) -> u64 {
        proc_status_kib(self.pid(), field).unwrap_or(0)
    }

    /// Stops the server (SIGTERM), waits for it and collects its counters.
    pub fn stop(mut self) -> Result<ServerOutcome> {
        let peak_rss_kib = self.status_kib("VmHWM");
        let mut child = self.child.take().expect("running");
        // SAFETY: kill with the pid of our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let mut status = 0;
        // SAFETY: wait4 on our own child; rusage is written by the kernel.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let pid = child.id() as libc::pid_t;
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        // std's Child must not wait again on a reaped pid.
        std::mem::forget(child.stdin.take());
        std::mem::forget(child);
        if r != pid {
            bail!("could not wait for the server");
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        let mut summary = serde_json::Value::Null;
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                if v["event"] == "driver" {
                    summary = v;
                }
            }
        }
        Ok(ServerOutcome {
            summary,
            cpu_seconds: tv(ru.ru_utime) + tv(ru.ru_stime),
            peak_rss_kib,
        })
    }
}

/// A field of a process's /proc/PID/status, in KiB (VmRSS, VmHWM); `None`
/// if the process is gone or the field is missing.
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// CPU seconds (user + system) a process, or with `task`, one of its
/// threads, has used: /proc/PID[/task/TID]/stat fields 14 and 15.
pub fn proc_cpu_seconds(pid: u32, task: Option<u32>) -> Option<f64> {
    let path = match task {
        Some(tid) => format!("/proc/{pid}/task/{tid}/stat"),
        None => format!("/proc/{pid}/stat"),
    };
    let text = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) may hold spaces: count from its ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: plain sysconf query.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 / hz)
}

/// Samples a process's resident memory (VmRSS) every 100 ms until
/// stopped; `finish` gives the peak in KiB.
pub struct RssSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl RssSampler {
    pub fn start(pid: u32) -> RssSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0u64;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(v) = proc_status_kib(pid, "VmRSS") {
                    peak = peak.max(v);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            peak
        });
        RssSampler { stop, thread }
    }

    pub fn finish(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}

/// The load average, for the reports.
pub fn load_avg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

impl Drop for SpawnedServer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

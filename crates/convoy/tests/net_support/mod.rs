//! Helpers for the real-process network tests: temporary directories and
//! child processes that are cleaned up even when a test fails, free
//! loopback ports, test files, and a UDP relay that can cut the network.

#![allow(dead_code)]

pub mod netns;

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_convoy")
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "convoy-net-{tag}-{}-{:?}",
            std::process::id(),
            Instant::now()
        ));
        let p = PathBuf::from(p.to_string_lossy().replace([' ', '{', '}', ':', ','], ""));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process killed and reaped on drop.
pub struct Proc(pub Option<Child>);

impl Proc {
    pub fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    /// Waits for exit (up to `limit`); returns its status and stderr.
    pub fn wait_output(&mut self, limit: Duration) -> Output {
        let start = Instant::now();
        let mut c = self.0.take().expect("running");
        loop {
            if c.try_wait().unwrap().is_some() || start.elapsed() > limit {
                let _ = c.kill();
                return c.wait_with_output().unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Makes a key pair in `dir`; returns (private key file, public key file).
pub fn keygen(dir: &Path) -> (PathBuf, PathBuf) {
    let key = dir.join("server.key");
    let out = Command::new(bin())
        .args(["keygen", "--out"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (key.clone(), dir.join("server.key.pub"))
}

/// `size` bytes of deterministic pseudo-random content.
/// A test's directory with a server key pair and an empty store.
pub struct Site {
    pub dir: TempDir,
    pub key: PathBuf,
    pub pubkey: PathBuf,
    pub store: PathBuf,
}

pub fn site(tag: &str) -> Site {
    let dir = TempDir::new(tag);
    let (key, pubkey) = keygen(dir.path());
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    Site {
        dir,
        key,
        pubkey,
        store,
    }
}

pub fn make_file(path: &Path, size: usize, seed: u64) {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(size + 8);
    while v.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(size);
    std::fs::write(path, v).unwrap();
}

/// A tmpfs mounted for a test (a small disk that fills) and unmounted on
/// drop, so that even a failing test leaves no mount behind. Drop it
/// after the processes that use it (declare it before them).
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount -o size=`, e.g. "2m") on `dir`,
    /// created if need be; `None` if that fails (mounting needs root).
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).ok()?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .ok()?;
        out.status.success().then(|| Tmpfs(dir.to_owned()))
    }

    /// Fills the free space with `name` (until ENOSPC); returns its size.
    pub fn fill(&self, name: &str) -> u64 {
        use std::io::Write;
        let mut f = std::fs::File::create(self.0.join(name)).unwrap();
        let mut n = 0u64;
        for chunk in [1 << 16, 4096, 1] {
            let buf = vec![0x5a_u8; chunk];
            while f.write_all(&buf).is_ok() {
                n += chunk as u64;
            }
        }
        let _ = f.sync_all();
        n
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Still busy (a child not yet reaped): detach it now, the
            // kernel frees it when the last user goes.
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Makes the child get SIGKILL when the thread that spawned it (the test)
/// goes away, so a test process that is killed or aborts, and so never
/// runs its Drop guards, still leaves no server or client behind.
fn die_with_test(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        })
    }
}

/// Starts `cmd` (its output as set), killed with the test.
pub fn spawn_command(cmd: &mut Command) -> Proc {
    Proc(Some(die_with_test(cmd).spawn().unwrap()))
}

pub fn spawn(args: &[&str], extra: &[&Path]) -> Proc {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Proc(Some(die_with_test(&mut cmd).spawn().unwrap()))
}

/// Starts `convoy serve` on 127.0.0.1:port and waits until it listens.
/// Its log is appended to [`server_log`]`(dir)`, for failure messages.
pub fn serve(port: u16, dir: &Path, key: &Path, extra: &[&str]) -> Proc {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(server_log_path(dir))
        .unwrap();
    let mut cmd = Command::new(bin());
    cmd.args([
        "serve",
        "--open",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--dir",
    ])
    .arg(dir)
    .arg("--key")
    .arg(key)
    .args(extra)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(log);
    let mut p = Proc(Some(die_with_test(&mut cmd).spawn().unwrap()));
    // A server that exited, or never bound, says why in its log.
    wait_port_bound_or(port, || {
        let exited = p.0.as_mut().and_then(|c| c.try_wait().unwrap());
        exited.map(|s| format!("{s}: {}", server_log(dir)))
    });
    p
}

/// Beside the store rather than in it, so it is never taken for an upload.
fn server_log_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_owned();
    name.push(".server.log");
    dir.with_file_name(name)
}

/// What the servers started with [`serve`] on `dir` have logged.
pub fn server_log(dir: &Path) -> String {
    std::fs::read_to_string(server_log_path(dir)).unwrap_or_default()
}

/// What the servers on `dir` have logged, once it contains `needle` (or
/// after `limit`): a server logs an event when it has acted on it, which
/// may be just after the client saw the result and exited.
pub fn server_log_with(dir: &Path, needle: &str, limit: Duration) -> String {
    let start = Instant::now();
    loop {
        let log = server_log(dir);
        if log.contains(needle) || start.elapsed() >= limit {
            return log;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls until something holds UDP `port` on loopback.
pub fn wait_port_bound(port: u16) {
    wait_port_bound_or(port, || None);
}

/// [`wait_port_bound`], failing at once when `gone()` says why the
/// server will never bind.
fn wait_port_bound_or(port: u16, mut gone: impl FnMut() -> Option<String>) {
    let start = Instant::now();
    while !udp_port_bound(port) {
        if let Some(why) = gone() {
            panic!("server never bound {port}: {why}");
        }
        assert!(
            // Generous: a loaded 2-core machine starts servers slowly.
            start.elapsed() < Duration::from_secs(60),
            "server never bound {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a socket holds UDP `port` on any local address, read from the
/// kernel's socket tables. Binding the port to find out held it for a
/// moment every 20 ms, and a server that bound it at that moment failed
/// with "Address already in use" (`make test` on a loaded 2-core VM).
/// Where the tables cannot be read (not Linux), that probe is the answer.
fn udp_port_bound(port: u16) -> bool {
    let suffix = format!(":{port:04X}");
    let mut readable = false;
    for table in ["/proc/net/udp", "/proc/net/udp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        readable = true;
        // Each row after the header: "sl local_address rem_address ...",
        // the local address as HEXADDR:HEXPORT.
        let bound = text.lines().skip(1).any(|row| {
            row.split_whitespace()
                .nth(1)
                .is_some_and(|local| local.ends_with(&suffix))
        });
        if bound {
            return true;
        }
    }
    !readable && UdpSocket::bind(("127.0.0.1", port)).is_err()
}

/// The size of the (only) partial upload under DIR/.convoy-partial.
pub fn partial_size(store: &Path) -> u64 {
    std::fs::read_dir(store.join(".convoy-partial"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".part"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// Waits until the partial upload holds at least `bytes`.
pub fn wait_partial(store: &Path, bytes: u64, limit: Duration) {
    let start = Instant::now();
    while partial_size(store) < bytes {
        assert!(
            start.elapsed() < limit,
            "upload never reached {bytes} bytes"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// 8 MB socket buffers, so the relay itself does not drop bursts. The
/// FORCE options need root; without it the plain ones get what
/// net.core.rmem_max/wmem_max allow, as convoy's own sockets do.
fn grow_buffers(s: &UdpSocket) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 8 << 20;
    let set = |opt| {
        // SAFETY: passes a live c_int and its size to setsockopt.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &size as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            ) == 0
        }
    };
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if !set(force) {
            set(plain);
        }
    }
}

/// A UDP relay between clients and one server that can drop everything.
pub struct Relay {
    pub addr: SocketAddr,
    pub cut: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Relay {
    pub fn new(server: SocketAddr) -> Relay {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        back.connect(server).unwrap();
        for s in [&front, &back] {
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            grow_buffers(s);
        }
        let addr = front.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let client: Arc<Mutex<Option<SocketAddr>>> = Arc::new(Mutex::new(None));
        let (f2, b2) = (front.try_clone().unwrap(), back.try_clone().unwrap());
        let up = {
            let (cut, stop, client) = (cut.clone(), stop.clone(), client.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((n, from)) = front.recv_from(&mut buf) {
                        *client.lock().unwrap() = Some(from);
                        if !cut.load(Ordering::Relaxed) {
                            let _ = back.send(&buf[..n]);
                        }
                    }
                }
            })
        };
        let down = {
            let (cut, stop) = (cut.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(n) = b2.recv(&mut buf) {
                        let to = *client.lock().unwrap();
                        if let (Some(to), false) = (to, cut.load(Ordering::Relaxed)) {
                            let _ = f2.send_to(&buf[..n], to);
                        }
                    }
                }
            })
        };
        Relay {
            addr,
            cut,
            stop,
            threads: vec![up, down],
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

pub fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): stdout {:?} stderr {:?}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

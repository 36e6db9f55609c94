//! Helpers for the in-process library tests: temporary directories that
//! are removed even when a test fails, test files, a server on a thread of
//! its own (in a network namespace if asked), and a UDP relay that goes
//! silent after a byte budget (to stop an upload midway, however fast the
//! machine is).

#![allow(dead_code)]

/// Network namespaces deleted on drop: the `convoy` command's tests' own
/// helper, shared rather than copied.
#[path = "../../../convoy/tests/net_support/netns.rs"]
pub mod netns;

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use convoy_net::{NetError, Server, ServerEvent, ServerOptions};
use convoy_proto::Keypair;

/// A directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "convoy-net-lib-{tag}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
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

/// A blocking server on 127.0.0.1 (a port the system picks) running on a
/// thread of its own, stopped and joined on drop.
pub struct ServerThread {
    pub addr: SocketAddr,
    pub key: [u8; 32],
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), NetError>>>,
}

/// Moves the calling thread (only: a network namespace is per thread)
/// into the namespace named `ns` (`ip netns`'s); the sockets it opens from
/// then on are in it, and so are the threads it starts.
pub fn enter(ns: &str) {
    let path = format!("/run/netns/{ns}");
    let f = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    // SAFETY: plain syscall on a descriptor we hold open.
    let r = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
}

impl ServerThread {
    /// A server storing into `store`, with a fresh key and whatever
    /// `configure` sets on its options.
    pub fn start(store: &Path, configure: impl FnOnce(&mut ServerOptions)) -> ServerThread {
        ServerThread::start_in(None, store, configure)
    }

    /// [`ServerThread::start`], with the server's events sent to the
    /// returned receiver as they happen.
    pub fn with_events(
        store: &Path,
        configure: impl FnOnce(&mut ServerOptions),
    ) -> (ServerThread, std::sync::mpsc::Receiver<ServerEvent>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let server = ServerThread::spawn(None, store, configure, Some(tx));
        (server, rx)
    }

    /// [`ServerThread::start`] in network namespace `ns` (its thread
    /// enters it before binding).
    pub fn start_in(
        ns: Option<&netns::Netns>,
        store: &Path,
        configure: impl FnOnce(&mut ServerOptions),
    ) -> ServerThread {
        ServerThread::spawn(ns, store, configure, None)
    }

    fn spawn(
        ns: Option<&netns::Netns>,
        store: &Path,
        configure: impl FnOnce(&mut ServerOptions),
        events: Option<std::sync::mpsc::Sender<ServerEvent>>,
    ) -> ServerThread {
        let ns_name = ns.map(|n| n.name.clone());
        let keypair = Keypair::generate();
        let key = keypair.public;
        let mut opts = ServerOptions::new("127.0.0.1:0".parse().unwrap(), keypair);
        opts.open = true;
        opts.dir = Some(store.to_owned());
        configure(&mut opts);
        let (tx, rx) = std::sync::mpsc::channel();
        // The server is not Send (its event callback need not be), so it
        // is bound on the thread that runs it.
        let thread = std::thread::spawn(move || {
            if let Some(name) = ns_name {
                enter(&name);
            }
            let mut server = Server::bind(opts)?;
            if let Some(events) = events {
                server.on_event(move |e| {
                    let _ = events.send(e.clone());
                });
            }
            tx.send((server.local_addr().unwrap(), server.stop_flag()))
                .unwrap();
            server.run()
        });
        let (addr, stop) = rx.recv().unwrap();
        ServerThread {
            addr,
            key,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let result = t.join();
            // A second panic while a failing test unwinds would abort,
            // and skip the other guards' clean-up (a namespace's).
            if !std::thread::panicking() {
                result.unwrap().unwrap();
            }
        }
    }
}

/// `size` bytes of deterministic pseudo-random content (xorshift), so
/// no two test files share blocks.
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

/// Panics unless the two files hold the same bytes.
pub fn assert_identical(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert_eq!(x.len(), y.len(), "{} vs {}", a.display(), b.display());
    assert!(x == y, "{} and {} differ", a.display(), b.display());
}

/// The size of the largest partial upload under DIR/.convoy-partial.
pub fn partial_size(store: &Path) -> u64 {
    largest_partial(store, "")
}

/// How much of the upload named `name` the server at `store` holds: its
/// size once stored, else its partial file's length (partial files carry
/// a tag of the name, see `Store::partial_path`), else 0.
pub fn held_of(store: &Path, name: &str, size: u64) -> u64 {
    if store.join(name).exists() {
        return size;
    }
    let tag = blake3::hash(name.as_bytes()).to_hex();
    largest_partial(store, &format!(".{}.", &tag.as_str()[..24]))
}

/// The largest partial file under DIR/.convoy-partial whose name holds
/// `part` (0 if none).
fn largest_partial(store: &Path, part: &str) -> u64 {
    std::fs::read_dir(store.join(".convoy-partial"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().contains(part))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// A UDP relay between one client and a server that forwards the
/// client's first `budget` bytes, then drops everything both ways until
/// [`Relay::restore`].
pub struct Relay {
    pub addr: SocketAddr,
    /// Bytes the client may still send; `None` once spent (silent).
    budget: Arc<Mutex<Option<u64>>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Relay {
    pub fn new(server: SocketAddr, budget: u64) -> Relay {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        back.connect(server).unwrap();
        for s in [&front, &back] {
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        }
        let addr = front.local_addr().unwrap();
        let budget = Arc::new(Mutex::new(Some(budget)));
        let stop = Arc::new(AtomicBool::new(false));
        let client: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let (front2, back2) = (front.try_clone().unwrap(), back.try_clone().unwrap());
        let up = {
            let (budget, stop, client) = (budget.clone(), stop.clone(), client.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, from)) = front.recv_from(&mut buf) else {
                        continue;
                    };
                    *client.lock().unwrap() = Some(from);
                    let pass = {
                        let mut b = budget.lock().unwrap();
                        match *b {
                            Some(left) if left >= n as u64 => {
                                *b = Some(left - n as u64);
                                true
                            }
                            _ => {
                                *b = None;
                                false
                            }
                        }
                    };
                    if pass {
                        let _ = back.send(&buf[..n]);
                    }
                }
            })
        };
        let down = {
            let (budget, stop) = (budget.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    let Ok(n) = back2.recv(&mut buf) else {
                        continue;
                    };
                    let to = *client.lock().unwrap();
                    if let (Some(to), true) = (to, budget.lock().unwrap().is_some()) {
                        let _ = front2.send_to(&buf[..n], to);
                    }
                }
            })
        };
        Relay {
            addr,
            budget,
            stop,
            threads: vec![up, down],
        }
    }

    /// True once the budget is spent and the relay drops everything.
    pub fn is_silent(&self) -> bool {
        self.budget.lock().unwrap().is_none()
    }

    /// Forwards everything again, without limit.
    pub fn restore(&self) {
        *self.budget.lock().unwrap() = Some(u64::MAX);
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

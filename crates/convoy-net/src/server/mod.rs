//! The server: accepts connections, runs one [`Session`](crate::session)
//! per stream, and stores uploads durably (see [`crate::store`]).
//!
//! With `workers > 1` it binds one SO_REUSEPORT socket per worker on the
//! same port, each served by its own thread, endpoint and sessions, and
//! the kernel hands each datagram to the worker its connection id names
//! ([`crate::steer`]). Worker 0 runs on the thread that calls
//! [`Server::run`] and reports every worker's events.

mod app;
mod claims;
pub(crate) mod committer;
mod control;
pub mod figures;
mod identified;
mod offload;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use convoy_proto::cid::Routing;
use convoy_proto::endpoint::EndpointStats;
use convoy_proto::{AeadChoice, Config, Endpoint, Keypair, Mode};

use crate::auth::{Authorizer, CommitHook};
use crate::driver::{Driver, DriverConfig};
use crate::error::NetError;
use crate::session::ServerEvent;
use crate::socket::NetSocket;
use crate::stats::DriverStats;
use crate::store::Store;
use crate::wake::Waker;
use app::{Access, ServerApp, Sink};
use claims::Claims;

/// Where to listen, with which key, and where to store uploads.
#[derive(Clone)]
pub struct ServerOptions {
    /// The UDP address to listen on (port 0: the system picks one).
    pub listen: SocketAddr,
    /// The server's static key pair; clients are given its public half.
    pub keypair: Keypair,
    /// Where uploads are stored; `None` serves perf only.
    pub dir: Option<PathBuf>,
    /// Rate control for what the server sends (downloads); the code is the
    /// one each client proposes.
    pub mode: Mode,
    /// Exit after the first client's connection ends (one worker).
    pub once: bool,
    /// Drop a client after this long without hearing from it (30 s).
    pub idle_timeout: Duration,
    /// Pacing, batching and timestamp settings of the driver.
    pub driver: DriverConfig,
    /// Which packet AEADs the handshake offers (AES-256-GCM where this CPU
    /// has AES instructions, by default).
    pub aead: AeadChoice,
    /// Worker threads, each with its own socket on the port (1).
    pub workers: usize,
    /// This server's id in its fleet, carried in every connection id so a
    /// load balancer routes by it (QUIC-LB, `convoy_proto::cid`).
    pub server_id: u16,
    /// Who may connect, and their namespaces (`None`: anyone holding the
    /// server's public key, one flat store; see [`crate::auth`]).
    pub authorizer: Option<Arc<dyn Authorizer>>,
    /// Runs after each upload is durable, before it is acknowledged.
    pub commit_hook: Option<Arc<dyn CommitHook>>,
    /// Takes vehicles' control streams (requests from the cloud,
    /// [`crate::control`]); without it they are refused.
    pub control_hook: Option<Arc<dyn crate::control::ControlHook>>,
    /// Requests announcing more bytes than this are refused before a
    /// partial file is made (64 GiB).
    pub max_upload: u64,
    /// Partial files, and the bytes they may grow to (their announced
    /// sizes), one identity may hold at once (1 024 files, 64 GiB).
    pub partial_quota: crate::partials::Quota,
    /// Partial files not written to for this long are removed, at start-up
    /// and every minute after (7 days: a vehicle away for a long weekend
    /// still resumes).
    pub partial_max_age: Duration,
    /// Without an authorizer: let any client in, also over XX (no server
    /// key needed), to read and write every file in `dir`. Without
    /// either, `bind` refuses to start: an open server must be asked for.
    pub open: bool,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("listen", &self.listen)
            .field("dir", &self.dir)
            .field("mode", &self.mode)
            .field("once", &self.once)
            .field("idle_timeout", &self.idle_timeout)
            .field("workers", &self.workers)
            .field("server_id", &self.server_id)
            .field("authorizer", &self.authorizer.is_some())
            .field("commit_hook", &self.commit_hook.is_some())
            .field("open", &self.open)
            .finish_non_exhaustive()
    }
}

impl ServerOptions {
    /// Defaults for everything but the address and key: perf only (no
    /// `dir`), Tide, not `once`, a 30 s idle timeout, one worker.
    pub fn new(listen: SocketAddr, keypair: Keypair) -> ServerOptions {
        ServerOptions {
            listen,
            keypair,
            dir: None,
            mode: Mode::Tide,
            once: false,
            idle_timeout: Duration::from_secs(30),
            driver: DriverConfig::default(),
            aead: AeadChoice::Auto,
            workers: 1,
            server_id: 0,
            authorizer: None,
            commit_hook: None,
            control_hook: None,
            max_upload: crate::store::DEFAULT_MAX_UPLOAD,
            partial_quota: crate::partials::Quota::default(),
            partial_max_age: DEFAULT_PARTIAL_MAX_AGE,
            open: false,
        }
    }
}

/// Receive buffer of each server socket: at 1,000 connections (~15,000
/// datagrams/s, ~35 MB/s of kernel buffer) 8 MB lasted ~0.2 s of a worker
/// being descheduled on a loaded 2-core machine, and datagrams were dropped.
const SERVER_RECEIVE_BUFFER: libc::c_int = 32 << 20;

/// How long an abandoned partial file is kept (see
/// [`ServerOptions::partial_max_age`]).
pub const DEFAULT_PARTIAL_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// What every worker measured, summed, once `run` has returned.
#[derive(Clone, Debug, Default)]
pub struct ServerStats {
    pub driver: DriverStats,
    pub endpoint: EndpointStats,
    pub workers: usize,
}

/// A worker waiting for its thread: its socket and configuration.
struct Pending {
    socket: NetSocket,
    cfg: Config,
    store: Option<Store>,
}

/// A blocking server: stores uploads, serves downloads and perf runs, on
/// the thread that calls [`Server::run`] (and `workers - 1` more).
pub struct Server {
    driver: Driver,
    app: ServerApp,
    others: Vec<Pending>,
    driver_cfg: DriverConfig,
    cookie_key: [u8; 32],
    claims: Claims,
    access: Access,
    stats: Option<ServerStats>,
}

impl Server {
    /// Opens the storage directory and binds the sockets; errors here are
    /// the operator's (bad directory, port in use).
    pub fn bind(opts: ServerOptions) -> Result<Server, NetError> {
        if opts.authorizer.is_none() && !opts.open {
            return Err(NetError::Config(
                "no authorizer: give the server a fleet registry, or set `open` to let \
                 anyone read and write"
                    .into(),
            ));
        }
        // One store for every worker: they share its hash cache and the
        // ledger of each identity's partial files.
        let store = opts
            .dir
            .as_deref()
            .map(|d| {
                Store::open(d).map(|mut s| {
                    s.max_upload = opts.max_upload;
                    s.partials.quota = opts.partial_quota;
                    s
                })
            })
            .transpose()?;
        let workers = if opts.once {
            1
        } else {
            opts.workers.clamp(1, 64)
        };
        let config = |worker: usize| {
            let mut cfg = Config::for_mode(opts.keypair.clone(), opts.mode);
            cfg.idle_timeout = opts.idle_timeout;
            cfg.aead = opts.aead;
            if opts.authorizer.is_some() {
                // Registered keys only: nothing of a connection is read
                // until the registry knows its key, and XX (which any key
                // can complete) is refused before its DH.
                cfg.authorize_before_data = true;
                cfg.accept_xx = false;
            }
            cfg.routing = Routing {
                rotation: 0,
                server_id: opts.server_id,
                worker: worker as u8,
            };
            cfg
        };
        let bind_err = |err| NetError::Bind {
            addr: opts.listen,
            err,
        };
        let mut sockets = Vec::new();
        if workers == 1 {
            sockets.push(NetSocket::bind(opts.listen, None).map_err(bind_err)?);
        } else {
            let first = NetSocket::bind_reuseport(opts.listen).map_err(bind_err)?;
            // The others join the port the first one got (port 0 picks one).
            let addr = first.local_addr().map_err(bind_err)?;
            sockets.push(first);
            for _ in 1..workers {
                sockets.push(NetSocket::bind_reuseport(addr).map_err(bind_err)?);
            }
            crate::steer::attach(sockets[0].raw_fd(), workers as u32).map_err(bind_err)?;
        }
        for s in &sockets {
            s.set_receive_buffer(SERVER_RECEIVE_BUFFER);
        }
        let cookie_key: [u8; 32] = rand_key();
        let mut sockets = sockets.into_iter();
        let mut endpoint =
            Endpoint::new(config(0), true).map_err(|e| NetError::Config(e.to_string()))?;
        endpoint.set_cookie_key(cookie_key);
        let driver = Driver::new(endpoint, sockets.next().expect("one socket"), opts.driver);
        let mut others = Vec::new();
        for (i, socket) in sockets.enumerate() {
            others.push(Pending {
                socket,
                cfg: config(i + 1),
                store: store.clone(),
            });
        }
        let claims = Claims::default();
        let access = Access {
            auth: opts.authorizer.clone(),
            hook: opts.commit_hook.clone(),
            control: opts.control_hook.clone(),
            figures: Arc::new(figures::ServerFigures {
                in_progress: claims.live(),
                ..Default::default()
            }),
        };
        if let Some(s) = &store {
            s.sweep_partials(opts.partial_max_age);
        }
        let mut app = ServerApp::new(
            store,
            opts.once,
            Arc::new(AtomicBool::new(false)),
            claims.clone(),
            access.clone(),
        );
        // Worker 0 sweeps for all: they share the directory.
        app.partial_max_age = Some(opts.partial_max_age);
        Ok(Server {
            driver,
            app,
            others,
            driver_cfg: opts.driver,
            cookie_key,
            claims,
            access,
            stats: None,
        })
    }

    /// Uploads in progress and commit latencies, shared by every worker
    /// (for metrics; read at any time, also while `run` runs).
    pub fn figures(&self) -> Arc<figures::ServerFigures> {
        self.access.figures.clone()
    }

    /// The address the sockets are bound to.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.driver.local_addr()
    }

    /// Setting this flag (e.g. from a signal handler) makes `run` return.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.app.stop.clone()
    }

    /// Called for every upload stored, download sent, perf run and error,
    /// from every worker, on the thread that runs the server.
    pub fn on_event(&mut self, f: impl FnMut(&ServerEvent) + 'static) {
        self.app.sink = Sink::Local(Box::new(f));
    }

    /// Serves until stopped (or, with `once`, until the first client leaves).
    pub fn run(&mut self) -> Result<(), NetError> {
        let waker = match self.driver.waker() {
            Some(w) => w,
            None => {
                let w = Arc::new(Waker::new().map_err(NetError::Socket)?);
                self.driver.set_waker(w.clone());
                w
            }
        };
        self.app.set_waker(waker.clone());
        let (tx, rx) = mpsc::channel();
        self.app.inbox = Some(rx);
        let stop = self.app.stop.clone();
        let mut threads = Vec::new();
        for (i, p) in self.others.drain(..).enumerate() {
            let (tx, waker, stop) = (tx.clone(), waker.clone(), stop.clone());
            let (driver_cfg, key, claims) = (self.driver_cfg, self.cookie_key, self.claims.clone());
            let access = self.access.clone();
            let t = std::thread::Builder::new()
                .name(format!("convoy-worker-{}", i + 1))
                .spawn(move || -> Result<(DriverStats, EndpointStats), NetError> {
                    let mut endpoint =
                        Endpoint::new(p.cfg, true).map_err(|e| NetError::Config(e.to_string()))?;
                    endpoint.set_cookie_key(key);
                    let mut driver = Driver::new(endpoint, p.socket, driver_cfg);
                    let mut app = ServerApp::new(p.store, false, stop.clone(), claims, access);
                    // Its own, for its commit thread's answers.
                    let own = Arc::new(Waker::new().map_err(NetError::Socket)?);
                    driver.set_waker(own.clone());
                    app.set_waker(own);
                    app.sink = Sink::Forward(tx, waker.clone());
                    let r = driver.run(&mut app);
                    // One worker failing stops the server.
                    stop.store(true, Ordering::Relaxed);
                    waker.wake();
                    r.map(|()| (driver.stats().clone(), driver.endpoint.totals()))
                })
                .map_err(|e| NetError::Socket(std::io::Error::other(e)))?;
            threads.push(t);
        }
        drop(tx);
        let result = self.driver.run(&mut self.app);
        stop.store(true, Ordering::Relaxed);
        let mut stats = ServerStats {
            driver: self.driver.stats().clone(),
            endpoint: self.driver.endpoint.totals(),
            workers: 1 + threads.len(),
        };
        let mut first_err = result.err();
        for t in threads {
            match t.join() {
                Ok(Ok((d, e))) => {
                    stats.driver.absorb(&d);
                    stats.endpoint = add_endpoint_stats(stats.endpoint, e);
                }
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(NetError::Protocol("a worker thread panicked".into()));
                }
            }
        }
        // Events the others sent while stopping.
        let app = &mut self.app;
        if let (Some(rx), Sink::Local(f)) = (&app.inbox, &mut app.sink) {
            while let Ok(e) = rx.try_recv() {
                f(&e);
            }
        }
        self.stats = Some(stats);
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// What the driver measured about itself (syscalls, pacing error); of
    /// worker 0 while running, of all workers once `run` has returned.
    pub fn driver_stats(&self) -> &DriverStats {
        self.stats
            .as_ref()
            .map_or_else(|| self.driver.stats(), |s| &s.driver)
    }

    /// Every worker's counters, once `run` has returned; before that,
    /// worker 0's.
    pub fn stats(&self) -> ServerStats {
        self.stats.clone().unwrap_or_else(|| ServerStats {
            driver: self.driver.stats().clone(),
            endpoint: self.driver.endpoint.totals(),
            workers: 1 + self.others.len(),
        })
    }

    /// Lets another thread end the driver's sleeps: set the
    /// [`Server::stop_flag`], then [`Waker::wake`], and `run` returns at
    /// once rather than within 100 ms.
    pub fn set_waker(&mut self, waker: std::sync::Arc<Waker>) {
        self.driver.set_waker(waker);
    }
}

fn add_endpoint_stats(a: EndpointStats, b: EndpointStats) -> EndpointStats {
    EndpointStats {
        malformed: a.malformed + b.malformed,
        unknown_connection: a.unknown_connection + b.unknown_connection,
        handshake_failures: a.handshake_failures + b.handshake_failures,
        retries_sent: a.retries_sent + b.retries_sent,
        retries_dropped: a.retries_dropped + b.retries_dropped,
        tokens_accepted: a.tokens_accepted + b.tokens_accepted,
        unproven_expired: a.unproven_expired + b.unproven_expired,
        accepted: a.accepted + b.accepted,
        replays: a.replays + b.replays,
        auth_failures: a.auth_failures + b.auth_failures,
        offender_drops: a.offender_drops + b.offender_drops,
        version_mismatches: a.version_mismatches + b.version_mismatches,
    }
}

/// A random key from the OS, shared by the workers' Retry cookies.
fn rand_key() -> [u8; 32] {
    let mut k = [0u8; 32];
    // SAFETY: getrandom writes at most 32 bytes into the live array.
    let n = unsafe { libc::getrandom(k.as_mut_ptr() as *mut libc::c_void, 32, 0) };
    if n != 32 {
        // No OS randomness: fall back to a fresh static key's bytes.
        k = Keypair::generate().private;
    }
    k
}

//! The server: accepts connections, runs one [`Session`] per stream, and
//! stores uploads durably (see [`crate::store`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use convoy_proto::{Config, ConnectionHandle, Endpoint, Event, Keypair, Mode, StreamId};

use crate::driver::{Application, Driver, DriverConfig, Step};
use crate::error::NetError;
use crate::session::{ServerEvent, Session, PROGRESS_EVERY};
use crate::socket::NetSocket;
use crate::store::Store;
use crate::wake::Waker;

/// Where to listen, with which key, and where to store uploads.
#[derive(Clone, Debug)]
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
    /// Exit after the first client's connection ends.
    pub once: bool,
    /// Drop a client after this long without hearing from it (30 s).
    pub idle_timeout: Duration,
    /// Pacing, batching and timestamp settings of the driver.
    pub driver: DriverConfig,
}

impl ServerOptions {
    /// Defaults for everything but the address and key: perf only (no
    /// `dir`), Tide, not `once`, a 30 s idle timeout.
    pub fn new(listen: SocketAddr, keypair: Keypair) -> ServerOptions {
        ServerOptions {
            listen,
            keypair,
            dir: None,
            mode: Mode::Tide,
            once: false,
            idle_timeout: Duration::from_secs(30),
            driver: DriverConfig::default(),
        }
    }
}

/// A blocking server: stores uploads, serves downloads and perf runs, on
/// the thread that calls [`Server::run`].
pub struct Server {
    driver: Driver,
    app: ServerApp,
}

struct ServerApp {
    store: Option<Store>,
    sessions: HashMap<(ConnectionHandle, StreamId), Session>,
    peers: HashMap<ConnectionHandle, SocketAddr>,
    once: bool,
    served: bool,
    stop: Arc<AtomicBool>,
    on_event: Box<dyn FnMut(&ServerEvent)>,
    scratch: Vec<u8>,
    events: Vec<ServerEvent>,
    next_tick: Duration,
}

impl Server {
    /// Opens the storage directory and binds the socket; errors here are
    /// the operator's (bad directory, port in use).
    pub fn bind(opts: ServerOptions) -> Result<Server, NetError> {
        let store = opts.dir.as_deref().map(Store::open).transpose()?;
        let mut cfg = Config::for_mode(opts.keypair.clone(), opts.mode);
        cfg.idle_timeout = opts.idle_timeout;
        let endpoint = Endpoint::new(cfg, true).map_err(|e| NetError::Config(e.to_string()))?;
        let socket = NetSocket::bind(opts.listen, None).map_err(|err| NetError::Bind {
            addr: opts.listen,
            err,
        })?;
        Ok(Server {
            driver: Driver::new(endpoint, socket, opts.driver),
            app: ServerApp {
                store,
                sessions: HashMap::new(),
                peers: HashMap::new(),
                once: opts.once,
                served: false,
                stop: Arc::new(AtomicBool::new(false)),
                on_event: Box::new(|_| {}),
                scratch: vec![0; 256 * 1024],
                events: Vec::new(),
                next_tick: Duration::ZERO,
            },
        })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.driver.local_addr()
    }

    /// Setting this flag (e.g. from a signal handler) makes `run` return.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.app.stop.clone()
    }

    /// Called for every upload stored, download sent, perf run and error.
    pub fn on_event(&mut self, f: impl FnMut(&ServerEvent) + 'static) {
        self.app.on_event = Box::new(f);
    }

    /// Serves until stopped (or, with `once`, until the first client leaves).
    pub fn run(&mut self) -> Result<(), NetError> {
        self.driver.run(&mut self.app)
    }

    /// What the driver measured about itself (syscalls, pacing error).
    pub fn driver_stats(&self) -> &crate::stats::DriverStats {
        self.driver.stats()
    }

    /// Lets another thread end the driver's sleeps: set the
    /// [`Server::stop_flag`], then [`Waker::wake`], and `run` returns at
    /// once rather than within 100 ms.
    pub fn set_waker(&mut self, waker: std::sync::Arc<Waker>) {
        self.driver.set_waker(waker);
    }
}

impl ServerApp {
    /// A newer run of an upload takes its partial file from an older
    /// session still open (e.g. the killed client's, not yet timed out).
    fn take_over(&mut self, partial: &PathBuf, keep: (ConnectionHandle, StreamId)) {
        for (key, s) in self.sessions.iter_mut() {
            if *key != keep && s.partial.as_ref() == Some(partial) {
                s.abandon();
            }
        }
    }
}

impl Application for ServerApp {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        if self.stop.load(Ordering::Relaxed) {
            for h in ep.handles() {
                if let Some(c) = ep.connection(h) {
                    c.close(0, "server shutting down");
                }
            }
            return Ok(Step::Done);
        }
        while let Some(h) = ep.accept() {
            if let Some(c) = ep.connection(h) {
                self.peers.insert(h, c.remote_address());
            }
        }
        for h in ep.handles() {
            let Some(c) = ep.connection(h) else { continue };
            let peer = c.remote_address();
            while let Some(ev) = c.poll_event() {
                match ev {
                    Event::Connected => self.events.push(ServerEvent::Connected { peer }),
                    Event::Closed(reason) => self.events.push(ServerEvent::Closed {
                        peer,
                        reason: reason.to_string(),
                    }),
                    Event::StreamOpened(_) | Event::StreamReadable(_) => {}
                }
            }
            while let Some(id) = c.accept_stream() {
                self.sessions.insert((h, id), Session::new(peer));
            }
            if c.is_closed() {
                // Sessions of a dead connection keep their partial files
                // on disk for the client's next run.
                self.sessions.retain(|(ch, _), _| *ch != h);
                self.peers.remove(&h);
                ep.remove(h);
                self.served = true;
                continue;
            }
            let keys: Vec<_> = self
                .sessions
                .keys()
                .filter(|(ch, _)| *ch == h)
                .copied()
                .collect();
            for key in keys {
                let Some(mut s) = self.sessions.remove(&key) else {
                    continue;
                };
                let had_partial = s.partial.is_some();
                s.step(
                    c,
                    key.1,
                    self.store.as_ref(),
                    now,
                    &mut self.scratch,
                    &mut self.events,
                );
                let partial = s.partial.clone();
                if !s.is_done() {
                    self.sessions.insert(key, s);
                }
                if let (false, Some(p)) = (had_partial, partial) {
                    self.take_over(&p, key);
                }
            }
        }
        for e in self.events.drain(..) {
            (self.on_event)(&e);
        }
        if now >= self.next_tick {
            self.next_tick = now + PROGRESS_EVERY;
        }
        if self.once && self.served && ep.handles().is_empty() {
            return Ok(Step::Done);
        }
        Ok(Step::Continue)
    }

    fn wake_at(&self) -> Option<Duration> {
        // Perf sessions report progress on a clock of their own.
        (!self.sessions.is_empty()).then_some(self.next_tick)
    }
}

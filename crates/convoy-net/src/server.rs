//! The server: accepts connections, runs one [`Session`] per stream, and
//! stores uploads durably (see [`crate::store`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use convoy_proto::{
    Config, Connection, ConnectionHandle, Endpoint, Event, Keypair, Mode, StreamId,
};

use crate::auth::{Authorizer, CommitHook, Identity, REAUTH_EVERY, REFUSED_CODE};
use crate::driver::{Application, Driver, DriverConfig, Step};
use crate::error::NetError;
use crate::session::{ServerEvent, Session, SessionCtx, PROGRESS_EVERY};
use crate::socket::NetSocket;
use crate::store::Store;
use crate::wake::Waker;

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
    /// Exit after the first client's connection ends.
    pub once: bool,
    /// Drop a client after this long without hearing from it (30 s).
    pub idle_timeout: Duration,
    /// Pacing, batching and timestamp settings of the driver.
    pub driver: DriverConfig,
    /// Who may connect, and their namespaces (`None`: anyone holding the
    /// server's public key, one flat store; see [`crate::auth`]).
    pub authorizer: Option<Arc<dyn Authorizer>>,
    /// Runs after each upload is durable, before it is acknowledged.
    pub commit_hook: Option<Arc<dyn CommitHook>>,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("listen", &self.listen)
            .field("dir", &self.dir)
            .field("mode", &self.mode)
            .field("once", &self.once)
            .field("idle_timeout", &self.idle_timeout)
            .field("authorizer", &self.authorizer.is_some())
            .field("commit_hook", &self.commit_hook.is_some())
            .finish_non_exhaustive()
    }
}

impl ServerOptions {
    /// Defaults for everything but the address and key: perf only (no
    /// `dir`), RCDP, not `once`, a 30 s idle timeout.
    pub fn new(listen: SocketAddr, keypair: Keypair) -> ServerOptions {
        ServerOptions {
            listen,
            keypair,
            dir: None,
            mode: Mode::Rcdp,
            once: false,
            idle_timeout: Duration::from_secs(30),
            driver: DriverConfig::default(),
            authorizer: None,
            commit_hook: None,
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
    auth: Option<Arc<dyn Authorizer>>,
    hook: Option<Arc<dyn CommitHook>>,
    /// Identified connections (all of them without an authorizer, as
    /// `None`); streams are accepted only from these.
    who: HashMap<ConnectionHandle, Option<Identity>>,
    next_reauth: Duration,
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
                auth: opts.authorizer,
                hook: opts.commit_hook,
                who: HashMap::new(),
                next_reauth: Duration::ZERO,
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

impl ServerApp {
    fn vehicle(&self, h: ConnectionHandle) -> Option<String> {
        self.who.get(&h).cloned().flatten().map(|w| w.name)
    }

    /// Identifies a connection once its peer's key is known (right after
    /// the handshake), and again on every `reauth` turn; a refused key's
    /// connection is closed with the authorizer's reason.
    fn authorize(&mut self, h: ConnectionHandle, c: &mut Connection, reauth: bool) {
        let Some(auth) = self.auth.clone() else {
            self.who.entry(h).or_insert(None);
            return;
        };
        if c.is_closed() || (self.who.contains_key(&h) && !reauth) {
            return;
        }
        let Some(key) = c.peer_static() else { return };
        match auth.identify(&key) {
            Ok(id) => {
                self.who.insert(h, Some(id));
            }
            Err(reason) => {
                let was = self.who.remove(&h).flatten();
                c.close(REFUSED_CODE, &format!("refused: {reason}"));
                self.sessions.retain(|(ch, _), _| *ch != h);
                self.events.push(ServerEvent::Refused {
                    peer: c.remote_address(),
                    key: convoy_proto::crypto::hex(&key),
                    reason: match was {
                        Some(w) => format!("{} ({reason}) while connected", w.name),
                        None => reason,
                    },
                });
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
        let reauth = now >= self.next_reauth;
        if reauth {
            self.next_reauth = now + REAUTH_EVERY;
        }
        for h in ep.handles() {
            let Some(c) = ep.connection(h) else { continue };
            let peer = c.remote_address();
            self.authorize(h, c, reauth);
            let vehicle = self.vehicle(h);
            while let Some(ev) = c.poll_event() {
                match ev {
                    // A refused peer is logged as refused, not connected.
                    Event::Connected if self.who.contains_key(&h) => {
                        self.events.push(ServerEvent::Connected {
                            peer,
                            vehicle: vehicle.clone(),
                        })
                    }
                    Event::Connected => {}
                    Event::Closed(reason) => self.events.push(ServerEvent::Closed {
                        peer,
                        vehicle: vehicle.clone(),
                        reason: reason.to_string(),
                    }),
                    Event::StreamOpened(_) | Event::StreamReadable(_) => {}
                }
            }
            if c.is_closed() {
                // Sessions of a dead connection keep their partial files
                // on disk for the client's next run.
                self.sessions.retain(|(ch, _), _| *ch != h);
                self.peers.remove(&h);
                self.who.remove(&h);
                ep.remove(h);
                self.served = true;
                continue;
            }
            let Some(who) = self.who.get(&h).cloned() else {
                // Not identified yet: its streams wait unaccepted.
                continue;
            };
            while let Some(id) = c.accept_stream() {
                self.sessions.insert((h, id), Session::new(peer));
            }
            let ctx = SessionCtx {
                store: self.store.as_ref(),
                who: who.as_ref(),
                auth: self.auth.as_deref(),
                key: c.peer_static(),
                hook: self.hook.as_deref(),
            };
            let keys: Vec<_> = self
                .sessions
                .keys()
                .filter(|(ch, _)| *ch == h)
                .copied()
                .collect();
            let mut taken = Vec::new();
            for key in keys {
                let Some(mut s) = self.sessions.remove(&key) else {
                    continue;
                };
                let had_partial = s.partial.is_some();
                s.step(c, key.1, &ctx, now, &mut self.scratch, &mut self.events);
                let partial = s.partial.clone();
                if !s.is_done() {
                    self.sessions.insert(key, s);
                }
                if let (false, Some(p)) = (had_partial, partial) {
                    taken.push((p, key));
                }
            }
            for (p, key) in taken {
                self.take_over(&p, key);
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

//! An endpoint owns the connections of one socket: it routes datagrams by
//! connection id, accepts new clients (server side), answers with Retry
//! cookies when too many handshakes are pending, and merges the
//! connections' output and timers.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::config::Config;
use crate::connection::{Accepted, Connection, Handshake, Transmit};
use crate::crypto::CookieKey;
use crate::handshake::{HandshakeError, ServerHandshake, ServerStep};
use crate::wire::packet::write_retry;
use crate::wire::{self, ConnectionId, Packet};

/// How long a Retry token stays valid.
const TOKEN_LIFETIME_SECS: u64 = 10;

/// Handle of a connection within its endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(pub u64);

/// A datagram out of the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointTransmit {
    pub remote: SocketAddr,
    pub len: usize,
    pub path_id: u8,
    pub connection: Option<ConnectionHandle>,
}

/// Why `connect` failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
}

/// What the endpoint did with datagrams it could not give to a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    pub malformed: u64,
    pub unknown_connection: u64,
    pub handshake_failures: u64,
    pub retries_sent: u64,
    pub accepted: u64,
}

pub struct Endpoint {
    cfg: Arc<Config>,
    is_server: bool,
    connections: HashMap<ConnectionHandle, Connection>,
    by_cid: HashMap<ConnectionId, ConnectionHandle>,
    next_handle: u64,
    rng: StdRng,
    cookies: CookieKey,
    stateless: VecDeque<(SocketAddr, Vec<u8>)>,
    accept_queue: VecDeque<ConnectionHandle>,
    rr: u64,
    stats: EndpointStats,
}

impl Endpoint {
    /// A client-only endpoint (`is_server = false`) or one that also
    /// accepts connections.
    pub fn new(cfg: Config, is_server: bool) -> Result<Endpoint, ConnectError> {
        cfg.validate().map_err(ConnectError::Config)?;
        let mut rng = match cfg.seed {
            Some(s) => StdRng::seed_from_u64(s),
            None => StdRng::from_os_rng(),
        };
        let cookies = CookieKey::new(rng.random());
        Ok(Endpoint {
            cfg: Arc::new(cfg),
            is_server,
            connections: HashMap::new(),
            by_cid: HashMap::new(),
            next_handle: 0,
            rng,
            cookies,
            stateless: VecDeque::new(),
            accept_queue: VecDeque::new(),
            rr: 0,
            stats: EndpointStats::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    fn new_cid(&mut self) -> ConnectionId {
        loop {
            let cid = ConnectionId(self.rng.random());
            if !self.by_cid.contains_key(&cid) {
                return cid;
            }
        }
    }

    fn insert(&mut self, conn: Connection, extra_cid: Option<ConnectionId>) -> ConnectionHandle {
        let h = ConnectionHandle(self.next_handle);
        self.next_handle += 1;
        self.by_cid.insert(conn.local_cid(), h);
        if let Some(cid) = extra_cid {
            self.by_cid.insert(cid, h);
        }
        self.connections.insert(h, conn);
        h
    }

    /// Starts a connection to `remote`. With `server_key` the handshake is
    /// IK (one round trip, the server is authenticated up front); without,
    /// XX (the server's key is learned, see [`Connection::peer_static`]).
    pub fn connect(
        &mut self,
        now: Duration,
        remote: SocketAddr,
        server_key: Option<&[u8; 32]>,
    ) -> Result<ConnectionHandle, ConnectError> {
        let local = self.new_cid();
        let initial_dcid = self.new_cid();
        let conn = Connection::client(
            self.cfg.clone(),
            local,
            initial_dcid,
            remote,
            now,
            server_key,
        )?;
        Ok(self.insert(conn, None))
    }

    pub fn connection(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        self.connections.get_mut(&h)
    }

    pub fn connection_ref(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.connections.get(&h)
    }

    pub fn handles(&self) -> Vec<ConnectionHandle> {
        let mut v: Vec<_> = self.connections.keys().copied().collect();
        v.sort();
        v
    }

    /// A connection a client opened to us, once its handshake began.
    pub fn accept(&mut self) -> Option<ConnectionHandle> {
        self.accept_queue.pop_front()
    }

    /// Forgets a connection (after its `Closed` event).
    pub fn remove(&mut self, h: ConnectionHandle) -> Option<Connection> {
        let conn = self.connections.remove(&h)?;
        self.by_cid.retain(|_, v| *v != h);
        Some(conn)
    }

    /// Takes one received datagram. `now` should be the receive time
    /// (a kernel timestamp when the driver has one).
    pub fn handle(&mut self, now: Duration, remote: SocketAddr, datagram: &[u8]) {
        let packet = match wire::packet::parse(datagram) {
            Ok(p) => p,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        if let Some(&h) = self.by_cid.get(&packet.dcid()) {
            if let Some(c) = self.connections.get_mut(&h) {
                c.handle_packet(now, remote, packet, datagram.len());
                return;
            }
        }
        match packet {
            Packet::Initial {
                dcid,
                scid,
                token,
                noise,
            } if self.is_server => {
                self.on_initial(now, remote, dcid, scid, token, noise, datagram.len())
            }
            _ => self.stats.unknown_connection += 1,
        }
    }

    fn pending_handshakes(&self) -> usize {
        self.connections
            .values()
            .filter(|c| !c.is_established() && !c.is_closed())
            .count()
    }

    #[allow(clippy::too_many_arguments)]
    fn on_initial(
        &mut self,
        now: Duration,
        remote: SocketAddr,
        dcid: ConnectionId,
        scid: ConnectionId,
        token: &[u8],
        noise: &[u8],
        len: usize,
    ) {
        let mut validated = false;
        if self.pending_handshakes() >= self.cfg.retry_threshold {
            if !self
                .cookies
                .validate(token, remote, &dcid.0, now.as_secs(), TOKEN_LIFETIME_SECS)
            {
                let token = self.cookies.issue(remote, &dcid.0, now.as_secs());
                let mut buf = vec![0u8; 128];
                let our = self.new_cid();
                if let Ok(n) = write_retry(&mut buf, scid, our, &token) {
                    buf.truncate(n);
                    self.stateless.push_back((remote, buf));
                    self.stats.retries_sent += 1;
                }
                return;
            }
            validated = true;
        }
        let step = match ServerHandshake::accept(
            &self.cfg.keypair,
            noise,
            Connection::params(&self.cfg),
        ) {
            Ok(s) => s,
            Err(_) => {
                self.stats.handshake_failures += 1;
                return;
            }
        };
        let (handshake, established) = match step {
            ServerStep::Done { reply, established } => {
                if let Some(allowed) = &self.cfg.allowed_peers {
                    if !allowed.contains(&established.peer_static) {
                        self.stats.handshake_failures += 1;
                        return;
                    }
                }
                (Handshake::ServerDone { reply }, Some(*established))
            }
            ServerStep::AwaitFinal { reply, handshake } => (
                Handshake::ServerWait {
                    hs: handshake,
                    reply,
                },
                None,
            ),
        };
        let local = self.new_cid();
        let accepted = Accepted {
            local_cid: local,
            client_cid: scid,
            remote,
            handshake,
            established,
            initial_len: len,
            validated,
        };
        let conn = Connection::server(self.cfg.clone(), accepted, now);
        let h = self.insert(conn, Some(dcid));
        self.stats.accepted += 1;
        self.accept_queue.push_back(h);
    }

    /// The next datagram to send from any connection, round-robin.
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut [u8]) -> Option<EndpointTransmit> {
        if let Some((remote, bytes)) = self.stateless.pop_front() {
            buf[..bytes.len()].copy_from_slice(&bytes);
            return Some(EndpointTransmit {
                remote,
                len: bytes.len(),
                path_id: 0,
                connection: None,
            });
        }
        let handles = self.handles();
        if handles.is_empty() {
            return None;
        }
        let start = handles.iter().position(|h| h.0 >= self.rr).unwrap_or(0);
        for i in 0..handles.len() {
            let h = handles[(start + i) % handles.len()];
            let c = self.connections.get_mut(&h).expect("listed");
            if let Some(Transmit {
                remote,
                len,
                path_id,
            }) = c.poll_transmit(now, buf)
            {
                self.rr = h.0 + 1;
                return Some(EndpointTransmit {
                    remote,
                    len,
                    path_id,
                    connection: Some(h),
                });
            }
        }
        None
    }

    pub fn poll_timeout(&self) -> Option<Duration> {
        self.connections
            .values()
            .filter_map(Connection::poll_timeout)
            .min()
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        for c in self.connections.values_mut() {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
    }
}

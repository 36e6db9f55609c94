//! An endpoint owns the connections of one socket: it routes datagrams by
//! connection id, accepts new clients (server side), answers with Retry
//! cookies when new clients must first prove their address
//! ([`admission`]), and merges the connections' output and timers. Its
//! work is per event, not per connection ([`schedule`]), so one endpoint
//! serves thousands of connections.

mod admission;
mod offenders;
mod schedule;

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::cid::Routing;
use crate::config::Config;
use crate::connection::{Accepted, CloseReason, Connection, Handshake, Transmit};
use crate::crypto::CookieKey;
use crate::handshake::{HandshakeError, ServerHandshake, ServerStep};
use crate::wire::packet::write_retry;
use crate::wire::{self, ConnectionId, Packet, WireError};
use admission::Admission;
use schedule::{Place, Schedule};

/// How long a Retry token stays valid.
const TOKEN_LIFETIME_SECS: u64 = 10;
/// Stateless replies (Retry) waiting to be sent; more are dropped, so a
/// flood faster than the socket drains cannot grow memory.
const MAX_STATELESS: usize = 1024;

/// Handle of a connection within its endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(pub u64);

/// A datagram out of the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointTransmit {
    pub remote: SocketAddr,
    /// The source address to send from: our address the peer sent to,
    /// when the driver said ([`Endpoint::handle_to`]); `None`: the
    /// socket's own.
    pub local: Option<IpAddr>,
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
    /// Datagrams that did not parse (garbage).
    pub malformed: u64,
    /// Datagrams for no connection we have.
    pub unknown_connection: u64,
    /// Initials whose Noise message failed (garbage, wrong key) or whose
    /// client key is not allowed.
    pub handshake_failures: u64,
    pub retries_sent: u64,
    /// Retries not sent because too many were queued.
    pub retries_dropped: u64,
    /// Initials that came back with a valid Retry token.
    pub tokens_accepted: u64,
    /// Connections closed because their client never proved its address.
    pub unproven_expired: u64,
    pub accepted: u64,
    /// Of connections, live and removed: packets refused as replays, and
    /// packets that failed authentication (see [`Endpoint::totals`]).
    pub replays: u64,
    pub auth_failures: u64,
    /// Initials dropped unread from an address whose connections were
    /// just closed for its own fault, beyond its handshake rate.
    pub offender_drops: u64,
    /// Long headers of another wire version (answered with a Version
    /// packet when they came as a client's Initial).
    pub version_mismatches: u64,
}

/// A connection and its bookkeeping.
#[cfg_attr(feature = "fuzzing", derive(Clone))]
struct Slot {
    conn: Connection,
    cids: Vec<ConnectionId>,
    place: Place,
    /// Listed for the application since it last asked.
    touched: bool,
}

#[cfg_attr(feature = "fuzzing", derive(Clone))]
pub struct Endpoint {
    cfg: Arc<Config>,
    /// `cfg` for a peer on an IPv6 address ([`Config::for_ipv6`]).
    cfg_v6: Arc<Config>,
    is_server: bool,
    slots: HashMap<u64, Slot, foldhash::fast::RandomState>,
    by_cid: HashMap<ConnectionId, u64, foldhash::fast::RandomState>,
    next_handle: u64,
    rng: StdRng,
    cookies: CookieKey,
    /// Stateless replies: to whom, from which of our addresses, the bytes.
    stateless: VecDeque<(SocketAddr, Option<IpAddr>, Vec<u8>)>,
    accept_queue: VecDeque<ConnectionHandle>,
    schedule: Schedule,
    admission: Admission,
    offenders: offenders::Offenders,
    /// The latest time the application gave us (`handle`,
    /// `handle_timeout`): `remove` takes none.
    last_now: Duration,
    touched: Vec<ConnectionHandle>,
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
        let admission = Admission::new(cfg.retry_threshold, cfg.retry_rate);
        let offenders = offenders::Offenders::new(cfg.offender_rate, cfg.offender_hold);
        Ok(Endpoint {
            cfg_v6: Arc::new(cfg.for_ipv6()),
            cfg: Arc::new(cfg),
            is_server,
            slots: HashMap::default(),
            by_cid: HashMap::default(),
            next_handle: 0,
            rng,
            cookies,
            stateless: VecDeque::new(),
            accept_queue: VecDeque::new(),
            schedule: Schedule::default(),
            admission,
            offenders,
            last_now: Duration::ZERO,
            touched: Vec::new(),
            stats: EndpointStats::default(),
        })
    }

    /// Several endpoints share one cookie key so that a Retry token minted
    /// by one worker of a server is accepted by another.
    pub fn set_cookie_key(&mut self, key: [u8; 32]) {
        self.cookies = CookieKey::new(key);
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The endpoint's own counters (cheap).
    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    /// [`Endpoint::stats`] with the replay and authentication counters of
    /// the live connections added (a pass over all of them).
    pub fn totals(&self) -> EndpointStats {
        let mut t = self.stats;
        for s in self.slots.values() {
            let c = s.conn.stats();
            t.replays += c.replays;
            t.auth_failures += c.auth_failures;
        }
        t
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The configuration of a connection with `remote`: datagrams sized
    /// for its address family (an IPv4-mapped address is IPv4).
    fn config_for(&self, remote: SocketAddr) -> Arc<Config> {
        match remote.ip() {
            IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => self.cfg_v6.clone(),
            _ => self.cfg.clone(),
        }
    }

    fn new_cid(&mut self) -> ConnectionId {
        loop {
            let cid = if self.is_server {
                self.cfg.routing.mint(self.rng.random())
            } else {
                Routing::unroutable(self.rng.random())
            };
            if !self.by_cid.contains_key(&cid) {
                return cid;
            }
        }
    }

    fn insert(&mut self, conn: Connection, extra_cid: Option<ConnectionId>) -> ConnectionHandle {
        let h = self.next_handle;
        self.next_handle += 1;
        let mut cids = vec![conn.local_cid()];
        cids.extend(extra_cid);
        for &cid in &cids {
            self.by_cid.insert(cid, h);
        }
        let mut slot = Slot {
            conn,
            cids,
            place: Place::default(),
            touched: false,
        };
        self.schedule.activate(h, &mut slot.place);
        self.slots.insert(h, slot);
        self.touch(h);
        ConnectionHandle(h)
    }

    /// Lists `h` for [`Endpoint::take_touched`].
    fn touch(&mut self, h: u64) {
        if let Some(s) = self.slots.get_mut(&h) {
            if !s.touched {
                s.touched = true;
                self.touched.push(ConnectionHandle(h));
            }
        }
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
            self.config_for(remote),
            local,
            initial_dcid,
            remote,
            now,
            server_key,
        )?;
        Ok(self.insert(conn, None))
    }

    /// The connection, to read and write its streams. It is then polled
    /// for datagrams and its deadline recomputed at the next flush.
    pub fn connection(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        let s = self.slots.get_mut(&h.0)?;
        self.schedule.activate(h.0, &mut s.place);
        Some(&mut s.conn)
    }

    pub fn connection_ref(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.slots.get(&h.0).map(|s| &s.conn)
    }

    /// Lets a connection's peer in (with [`Config::authorize_before_data`]):
    /// the packets held for it are read now, and later ones as they come.
    pub fn authorize(&mut self, h: ConnectionHandle, now: Duration) {
        let Some(s) = self.slots.get_mut(&h.0) else {
            return;
        };
        if s.conn.authorized {
            return;
        }
        s.conn.authorized = true;
        for (remote, local, datagram) in std::mem::take(&mut s.conn.held) {
            if let Ok(packet) = wire::packet::parse(&datagram) {
                s.conn
                    .handle_packet(now, remote, local, packet, datagram.len());
            }
        }
        self.schedule.activate(h.0, &mut s.place);
        self.touch(h.0);
    }

    /// Every connection, in the order they were made.
    pub fn handles(&self) -> Vec<ConnectionHandle> {
        let mut v: Vec<_> = self.slots.keys().map(|&h| ConnectionHandle(h)).collect();
        v.sort();
        v
    }

    /// The connections that received packets, had timers fire, were
    /// accepted or closed since the last call, each once: what an
    /// application with many connections needs to look at.
    pub fn take_touched(&mut self, out: &mut Vec<ConnectionHandle>) {
        out.clear();
        for h in self.touched.drain(..) {
            if let Some(s) = self.slots.get_mut(&h.0) {
                s.touched = false;
                out.push(h);
            }
        }
    }

    /// A connection a client opened to us, once its handshake began.
    pub fn accept(&mut self) -> Option<ConnectionHandle> {
        self.accept_queue.pop_front()
    }

    /// Forgets a connection (after its `Closed` event).
    pub fn remove(&mut self, h: ConnectionHandle) -> Option<Connection> {
        let slot = self.slots.remove(&h.0)?;
        if slot.conn.role == crate::connection::Role::Server {
            // Closed for the peer's own fault: a protocol violation, or an
            // application refusal (a close with a non-zero code).
            let fault = match slot.conn.close_reason() {
                Some(CloseReason::ProtocolViolation(_)) => true,
                Some(CloseReason::Local { code }) => *code != 0,
                _ => false,
            };
            if fault {
                let ip = slot.conn.remote_address().ip();
                self.offenders.offend(ip, self.last_now);
            }
        }
        self.schedule.forget(h.0, &slot.place);
        for cid in &slot.cids {
            if self.by_cid.get(cid) == Some(&h.0) {
                self.by_cid.remove(cid);
            }
        }
        let c = slot.conn.stats();
        self.stats.replays += c.replays;
        self.stats.auth_failures += c.auth_failures;
        Some(slot.conn)
    }

    /// Takes one received datagram. `now` should be the receive time
    /// (a kernel timestamp when the driver has one).
    pub fn handle(&mut self, now: Duration, remote: SocketAddr, datagram: &[u8]) {
        self.handle_to(now, remote, None, datagram)
    }

    /// [`Endpoint::handle`], also told which of our addresses the
    /// datagram was sent to (`local`; a driver on a wildcard address reads
    /// it from IP_PKTINFO). Replies on its path then name it as their
    /// source ([`EndpointTransmit::local`]): a host with several
    /// addresses would otherwise answer from whichever the kernel's route
    /// picks, which a client's connected socket, a NAT or a firewall
    /// drops.
    pub fn handle_to(
        &mut self,
        now: Duration,
        remote: SocketAddr,
        local: Option<IpAddr>,
        datagram: &[u8],
    ) {
        self.last_now = self.last_now.max(now);
        let packet = match wire::packet::parse(datagram) {
            Ok(p) => p,
            Err(WireError::UnsupportedVersion(_)) => {
                self.on_foreign_version(remote, local, datagram);
                return;
            }
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        if let Some(&h) = self.by_cid.get(&packet.dcid()) {
            if let Some(s) = self.slots.get_mut(&h) {
                if !s.conn.authorized && matches!(packet, Packet::Protected(_)) {
                    // Not read before the application lets the key in:
                    // kept, a few, for then.
                    if s.conn.held.len() < crate::connection::HELD_PACKETS && !s.conn.is_closed() {
                        s.conn.held.push((remote, local, datagram.to_vec()));
                    }
                    self.touch(h);
                    return;
                }
                s.conn
                    .handle_packet(now, remote, local, packet, datagram.len());
                self.schedule.activate(h, &mut s.place);
                self.touch(h);
                return;
            }
        }
        match packet {
            Packet::Initial {
                dcid,
                scid,
                token,
                noise,
            } if self.is_server => self.on_initial(
                now,
                (remote, local),
                dcid,
                scid,
                token,
                noise,
                datagram.len(),
            ),
            _ => self.stats.unknown_connection += 1,
        }
    }

    /// Unproven connections still alive (and forgets the others).
    fn unproven_alive(&mut self) -> usize {
        let slots = &self.slots;
        self.admission.unproven.retain(|(_, h)| {
            slots
                .get(&h.0)
                .is_some_and(|s| !s.conn.validated && !s.conn.is_closed())
        });
        self.admission.unproven.len()
    }

    #[allow(clippy::too_many_arguments)]
    fn on_initial(
        &mut self,
        now: Duration,
        (remote, local): (SocketAddr, Option<IpAddr>),
        dcid: ConnectionId,
        scid: ConnectionId,
        token: &[u8],
        noise: &[u8],
        len: usize,
    ) {
        if !self.offenders.admit(remote.ip(), now) {
            self.stats.offender_drops += 1;
            return;
        }
        let validated = !token.is_empty()
            && self
                .cookies
                .validate(token, remote, &dcid.0, now.as_secs(), TOKEN_LIFETIME_SECS);
        if validated {
            self.stats.tokens_accepted += 1;
        } else {
            let alive = self.unproven_alive();
            if self.admission.must_retry(now, alive) {
                self.send_retry(now, (remote, local), dcid, scid);
                return;
            }
        }
        if !self.cfg.accept_xx && crate::handshake::is_xx(noise) {
            // Refused before any DH: an XX client proves only that it has
            // some key, which a server taking known keys cannot use.
            self.stats.handshake_failures += 1;
            return;
        }
        let step = match ServerHandshake::accept(
            &self.cfg.keypair,
            noise,
            Connection::params(&self.cfg),
        ) {
            Ok(s) => s,
            Err(_) => {
                self.stats.handshake_failures += 1;
                if !validated {
                    // A failed DH costs as much as a good one.
                    self.admission.spend();
                }
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
        let local_cid = self.new_cid();
        let accepted = Accepted {
            local_cid,
            client_cid: scid,
            remote,
            local,
            handshake,
            established,
            initial_len: len,
            validated,
        };
        let conn = Connection::server(self.config_for(remote), accepted, now);
        let h = self.insert(conn, Some(dcid));
        if !validated {
            self.admission.begun(h, now + self.cfg.handshake_timeout);
        }
        self.stats.accepted += 1;
        self.accept_queue.push_back(h);
    }

    /// A long header of another wire version. A server answers a client's
    /// first datagram (one padded as an Initial, so the answer is never
    /// larger than what came) with the versions it speaks, so that the
    /// client can say why it cannot connect instead of timing out.
    fn on_foreign_version(&mut self, remote: SocketAddr, local: Option<IpAddr>, datagram: &[u8]) {
        self.stats.version_mismatches += 1;
        let Some((_, dcid, scid)) = wire::packet::foreign_long_header(datagram) else {
            return;
        };
        if !self.is_server || datagram.len() < wire::MIN_INITIAL_SIZE {
            return;
        }
        if self.stateless.len() >= MAX_STATELESS {
            self.stats.retries_dropped += 1;
            return;
        }
        let mut buf = vec![0u8; 64];
        if let Ok(n) = wire::packet::write_version(&mut buf, scid, dcid, &[wire::VERSION]) {
            buf.truncate(n);
            self.stateless.push_back((remote, local, buf));
        }
    }

    fn send_retry(
        &mut self,
        now: Duration,
        (remote, local): (SocketAddr, Option<IpAddr>),
        dcid: ConnectionId,
        scid: ConnectionId,
    ) {
        if self.stateless.len() >= MAX_STATELESS {
            self.stats.retries_dropped += 1;
            return;
        }
        let token = self.cookies.issue(remote, &dcid.0, now.as_secs());
        let mut buf = vec![0u8; 128];
        let our = self.new_cid();
        if let Ok(n) = write_retry(&mut buf, scid, our, &token) {
            buf.truncate(n);
            self.stateless.push_back((remote, local, buf));
            self.stats.retries_sent += 1;
        }
    }

    /// The next datagram to send: stateless replies first, then the active
    /// connections in turn.
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut [u8]) -> Option<EndpointTransmit> {
        if let Some((remote, local, bytes)) = self.stateless.pop_front() {
            buf[..bytes.len()].copy_from_slice(&bytes);
            return Some(EndpointTransmit {
                remote,
                local,
                len: bytes.len(),
                path_id: 0,
                connection: None,
            });
        }
        while let Some(h) = self.schedule.next_active() {
            let Some(s) = self.slots.get_mut(&h) else {
                continue;
            };
            if let Some(Transmit {
                remote,
                local,
                len,
                path_id,
            }) = s.conn.poll_transmit(now, buf)
            {
                self.schedule.requeue(h);
                if s.conn.is_closed() {
                    // Its CLOSE just left: the application may drop it.
                    self.touch(h);
                }
                return Some(EndpointTransmit {
                    remote,
                    local,
                    len,
                    path_id,
                    connection: Some(ConnectionHandle(h)),
                });
            }
            let deadline = s.conn.poll_timeout();
            self.schedule.park(h, &mut s.place, deadline);
        }
        None
    }

    /// The earliest deadline of any connection.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let active = self
            .schedule
            .active()
            .filter_map(|h| self.slots.get(h))
            .filter_map(|s| s.conn.poll_timeout())
            .min();
        [
            self.schedule.first_deadline(),
            active,
            self.admission.next_expiry(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs the timers that are due.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.last_now = self.last_now.max(now);
        while self.admission.next_expiry().is_some_and(|t| t <= now) {
            let (_, h) = self.admission.unproven.pop_front().expect("listed");
            if let Some(s) = self.slots.get_mut(&h.0) {
                if !s.conn.validated && !s.conn.is_closed() {
                    s.conn.terminate(CloseReason::HandshakeTimeout);
                    self.stats.unproven_expired += 1;
                    self.schedule.activate(h.0, &mut s.place);
                    self.touch(h.0);
                }
            }
        }
        let active: Vec<u64> = self.schedule.active().copied().collect();
        for h in active {
            if let Some(s) = self.slots.get_mut(&h) {
                if s.conn.poll_timeout().is_some_and(|t| t <= now) {
                    s.conn.handle_timeout(now);
                    self.touch(h);
                }
            }
        }
        while let Some(h) = self.schedule.pop_due(now) {
            if let Some(s) = self.slots.get_mut(&h) {
                s.conn.handle_timeout(now);
                self.schedule.activate(h, &mut s.place);
                self.touch(h);
            }
        }
    }
}

#[cfg(test)]
mod start_pair_tests;
#[cfg(test)]
mod tests;

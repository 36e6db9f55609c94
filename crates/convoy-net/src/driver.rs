//! The event loop that runs a convoy-proto [`Endpoint`] on a UDP socket.
//!
//! Each turn: hand received datagrams to the endpoint (stamped with the
//! kernel's receive time), run due timers, let the application read and
//! write its streams, send every datagram the pacer allows now (batched
//! into one sendmmsg), then wait for the earliest of: a datagram, the
//! protocol's next deadline (pacing or timer), the application's next tick.
//! Waiting sleeps in ppoll until `spin` before the deadline and spins the
//! rest, because a sleep ends tens of microseconds late on a typical VM
//! and the pacer needs better than 50 µs (docs/NET.md has the measurement).
//!
//! A multipath client has one socket per local address: a datagram leaves
//! by the socket of its path (`path_id`), what arrives on any socket goes
//! to the endpoint, and the wait covers every socket and the netlink
//! socket of the path manager ([`crate::multipath`]).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use convoy_proto::Endpoint;

use crate::clock::Clock;
use crate::error::NetError;
use crate::multipath::Multipath;
use crate::pacing::{precise_timers, Spin};
use crate::socket::{wait_readable, NetSocket, RecvBatch, SendBatch};
use crate::stats::DriverStats;
use crate::wake::Waker;

/// Longest single sleep, so the application sees stop requests (signals)
/// and the clock offset is re-sampled even when nothing happens.
const MAX_SLEEP: Duration = Duration::from_millis(100);
/// How long to wait for room in a full socket send buffer before the
/// remaining datagrams of a batch are dropped (the protocol then treats
/// them as lost, as it would on the wire).
const SEND_BUFFER_WAIT: Duration = Duration::from_millis(5);
/// Receive batches read per turn before sending again, so a flood of
/// input cannot starve our own acknowledgements.
const MAX_RECV_BATCHES: usize = 4;

#[derive(Clone, Copy, Debug)]
pub struct DriverConfig {
    /// Datagrams per sendmmsg/recvmmsg call (1 = one syscall each).
    pub batch: usize,
    /// The most of a wait that is spun rather than slept (0: never spin).
    /// The spin actually used is what ppoll recently overslept, and only
    /// for deadlines within `spin_gap` of the last send ([`crate::pacing`]).
    pub spin: Duration,
    /// Deadlines further than this after the last send are slept to.
    pub spin_gap: Duration,
    /// Feed SO_TIMESTAMPNS receive times to the protocol (else: our clock
    /// when the datagram is read).
    pub kernel_timestamps: bool,
    /// Send runs of equal datagrams as one UDP GSO send (UDP_SEGMENT).
    /// On by default: measured on loopback (docs/NET.md) it halved the
    /// sender's CPU per byte.
    pub gso: bool,
    /// Let the kernel coalesce received datagrams (UDP_GRO). On by
    /// default; coalesced datagrams share one receive timestamp.
    pub gro: bool,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            batch: 32,
            spin: Duration::from_micros(50),
            spin_gap: Duration::from_micros(250),
            kernel_timestamps: true,
            gso: true,
            gro: true,
        }
    }
}

/// What the application tells the driver after each turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Continue,
    Done,
}

/// The code that uses the connections: it reads and writes streams.
pub trait Application {
    /// Called every turn with the current time.
    fn step(&mut self, endpoint: &mut Endpoint, now: Duration) -> Result<Step, NetError>;

    /// When the application next wants a turn without network events
    /// (progress reports); `None`: only on events.
    fn wake_at(&self) -> Option<Duration> {
        None
    }
}

enum Woke {
    Datagrams,
    Deadline(Duration),
    Tick,
}

/// Errors of a socket that only end its path, not the connection, when
/// there are other paths: its interface or address is gone or has no
/// route (the path manager hears of it through netlink and abandons the
/// path; the protocol sees the datagrams as lost meanwhile).
fn path_only(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ENETDOWN
                | libc::ENETUNREACH
                | libc::EHOSTUNREACH
                | libc::EADDRNOTAVAIL
                | libc::ENODEV
                | libc::ENXIO
                | libc::EPERM
        )
    )
}

pub struct Driver {
    pub endpoint: Endpoint,
    /// Socket 0 is the one the driver was made with (a client's path 0).
    sockets: Vec<NetSocket>,
    /// The socket each path id leaves by (0 unless set).
    path_socket: Vec<usize>,
    /// The client's path manager, when it uses several interfaces.
    pub(crate) multipath: Option<Multipath>,
    clock: Clock,
    cfg: DriverConfig,
    rx: RecvBatch,
    tx: SendBatch,
    stats: DriverStats,
    /// The latest kernel stamp given to the protocol; stamps never go back.
    last_stamp: Duration,
    /// Set for a connected client socket, to name it in errors.
    peer: Option<std::net::SocketAddr>,
    /// Ends a sleep early when another thread has work for the
    /// application (the tokio API's commands and cancellations).
    waker: Option<std::sync::Arc<Waker>>,
    spin: Spin,
    /// The last turn that sent a datagram.
    last_send_turn: Option<Duration>,
    /// ppoll's descriptors, kept between waits: the sockets, then the
    /// waker's and the netlink socket's when there are.
    pollfds: Vec<libc::pollfd>,
}

impl Driver {
    pub fn new(endpoint: Endpoint, mut socket: NetSocket, cfg: DriverConfig) -> Driver {
        let batch = cfg.batch.max(1);
        socket.set_offload(cfg.gso, cfg.gro);
        Driver {
            endpoint,
            clock: Clock::new(),
            cfg,
            rx: RecvBatch::new(batch, socket.gro),
            tx: SendBatch::new(batch),
            stats: DriverStats {
                gso: socket.gso(),
                gro: socket.gro,
                ..DriverStats::default()
            },
            sockets: vec![socket],
            path_socket: vec![0; 256],
            multipath: None,
            last_stamp: Duration::ZERO,
            peer: None,
            waker: None,
            spin: Spin::new(cfg.spin, cfg.spin_gap),
            last_send_turn: None,
            pollfds: Vec::new(),
        }
    }

    /// Adds a socket (a path's) with the same offloads as the first;
    /// returns its index for [`Driver::route_path`]. Its GRO follows the
    /// first socket's, because the receive buffers are shared.
    pub fn add_socket(&mut self, mut socket: NetSocket) -> usize {
        socket.set_offload(self.cfg.gso, self.sockets[0].gro);
        self.sockets.push(socket);
        self.sockets.len() - 1
    }

    /// Replaces socket `index` (its interface was recreated, so the old
    /// one's device binding is stale).
    pub fn replace_socket(&mut self, index: usize, mut socket: NetSocket) {
        socket.set_offload(self.cfg.gso, self.sockets[0].gro);
        self.sockets[index] = socket;
    }

    /// Datagrams of path `path` leave by socket `socket`.
    pub fn route_path(&mut self, path: u8, socket: usize) {
        self.path_socket[usize::from(path)] = socket;
    }

    /// The local address of socket `index`.
    pub fn socket_addr(&self, index: usize) -> io::Result<std::net::SocketAddr> {
        self.sockets[index].local_addr()
    }

    /// Sleeps also end when `waker` is woken; the application then gets a
    /// turn at once instead of at the next datagram or deadline.
    pub fn set_waker(&mut self, waker: std::sync::Arc<Waker>) {
        self.waker = Some(waker);
    }

    /// The waker set with [`Driver::set_waker`].
    pub fn waker(&self) -> Option<std::sync::Arc<Waker>> {
        self.waker.clone()
    }

    /// Marks the socket as connected to `peer` (errors then name it).
    pub fn set_peer(&mut self, peer: std::net::SocketAddr) {
        self.peer = Some(peer);
    }

    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    pub fn stats(&self) -> &DriverStats {
        &self.stats
    }

    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.sockets[0].local_addr()
    }

    pub fn kernel_timestamps(&self) -> bool {
        self.sockets[0].timestamps && self.cfg.kernel_timestamps
    }

    /// Runs turns until the application says it is done.
    pub fn run<A: Application>(&mut self, app: &mut A) -> Result<(), NetError> {
        precise_timers();
        // What arrived while nobody drove the endpoint goes in before its
        // timers run. An agent lane serves its idle connection one pass
        // every half second: each pass's first turn fired the probe
        // timeout of the last pass's ping, whose acknowledgment sat unread
        // in the socket, so the path was always "silent" between uploads
        // and a log's first packet after that paced the next one a second
        // later (docs/SERVICE.md, "Where the cell's time goes").
        self.receive()?;
        let mut woke_for = None;
        loop {
            let now = self.clock.now();
            self.clock.maybe_resample(now);
            self.endpoint.handle_timeout(now);
            self.manage_paths(now, false);
            let step = app.step(&mut self.endpoint, now)?;
            self.flush(now, woke_for.take())?;
            if step == Step::Done {
                return Ok(());
            }
            let deadline = match (self.endpoint.poll_timeout(), app.wake_at()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            match self.wait(deadline)? {
                Woke::Deadline(d) => woke_for = Some(d),
                Woke::Datagrams | Woke::Tick => {}
            }
        }
    }

    /// Lets the path manager open, abandon or revive paths: each turn (it
    /// opens the first extra paths once the handshake is done), and with
    /// `netlink` when its socket has news.
    fn manage_paths(&mut self, now: Duration, netlink: bool) {
        if let Some(mut mp) = self.multipath.take() {
            mp.turn(now, self, netlink);
            self.multipath = Some(mp);
        }
    }

    /// Sends everything the endpoint has for `now`, a batch per syscall.
    fn flush(&mut self, now: Duration, woke_for: Option<Duration>) -> Result<(), NetError> {
        let mut first = true;
        loop {
            self.tx.clear();
            while !self.tx.is_full() {
                match self.endpoint.poll_transmit(now, self.tx.next_buffer()) {
                    Some(t) => {
                        let flow = t.connection.map_or(u64::MAX, |h| h.0);
                        let socket = self.path_socket[usize::from(t.path_id)];
                        self.tx.push(t.len, t.remote, t.local, flow, socket)
                    }
                    None => break,
                }
            }
            if self.tx.len == 0 {
                return Ok(());
            }
            if first {
                self.last_send_turn = Some(now);
                if let Some(d) = woke_for {
                    self.stats
                        .pacing_lateness
                        .record(self.clock.now().saturating_sub(d));
                }
                first = false;
            }
            let full = self.tx.is_full();
            self.send_all()?;
            if !full {
                return Ok(());
            }
        }
    }

    fn send_all(&mut self) -> Result<(), NetError> {
        let total = self.tx.len;
        let mut done = 0;
        let mut waited = false;
        while done < total {
            let socket = &self.sockets[self.tx.socket_of(done)];
            let n = match socket.send_batch(&mut self.tx, done, self.cfg.batch) {
                Ok(n) => n,
                Err(e) if self.sockets.len() > 1 && path_only(&e) => {
                    // This path's interface is gone: its datagrams are lost.
                    let lost = self.tx.socket_run(done);
                    self.stats.send_drops += lost as u64;
                    done += lost;
                    continue;
                }
                Err(e) => return Err(self.socket_error(e)),
            };
            self.stats.send_syscalls += 1;
            if n == 0 {
                if waited {
                    self.stats.send_drops += (total - done) as u64;
                    break;
                }
                socket
                    .wait(Some(SEND_BUFFER_WAIT), true)
                    .map_err(NetError::Socket)?;
                waited = true;
                continue;
            }
            done += n;
            self.stats.datagrams_sent += n as u64;
        }
        self.stats.gso = self.sockets[0].gso();
        Ok(())
    }

    fn socket_error(&self, e: io::Error) -> NetError {
        match (self.peer, e.raw_os_error()) {
            (Some(p), Some(libc::ECONNREFUSED)) => NetError::Refused(p),
            (Some(addr), Some(libc::ENETUNREACH | libc::EHOSTUNREACH)) => {
                NetError::Unreachable { addr, err: e }
            }
            _ => NetError::Socket(e),
        }
    }

    /// Reads what is waiting on every socket and hands it to the
    /// endpoint; returns how many datagrams (GRO runs count once).
    fn receive(&mut self) -> Result<usize, NetError> {
        let mut total = 0;
        for s in 0..self.sockets.len() {
            total += self.receive_from(s)?;
        }
        Ok(total)
    }

    fn receive_from(&mut self, s: usize) -> Result<usize, NetError> {
        let mut total = 0;
        for _ in 0..MAX_RECV_BATCHES {
            let n = match self.sockets[s].recv_batch(&mut self.rx, self.cfg.batch) {
                Ok(n) => n,
                // An error queued by an interface that went away: the
                // path manager deals with the path.
                Err(e) if self.sockets.len() > 1 && path_only(&e) => 0,
                Err(e) => return Err(self.socket_error(e)),
            };
            self.stats.recv_syscalls += 1;
            if n == 0 {
                break;
            }
            let now = self.clock.now();
            let mut datagrams = 0;
            for i in 0..n {
                let r = self.rx.received[i];
                if let Some(d) = r.dropped {
                    self.stats.receive_drops = u64::from(d);
                }
                let mut at = now;
                if let Some((sec, nsec)) = r.kernel_time {
                    if let Some(stamp) = self.clock.from_realtime(sec, nsec) {
                        // A stamp can only be earlier than now; clamp the
                        // clock-offset error so time never runs backwards.
                        let stamp = stamp.clamp(self.last_stamp, now);
                        self.stats.kernel_stamps += 1;
                        self.stats.receive_stamp_lag.record(now - stamp);
                        if self.cfg.kernel_timestamps {
                            at = stamp;
                            self.last_stamp = stamp;
                        }
                    }
                }
                // One datagram, or with GRO several of `segment` bytes.
                for d in self.rx.datagram(i).chunks(r.segment) {
                    self.endpoint.handle_to(at, r.from, r.local, d);
                    datagrams += 1;
                }
            }
            self.stats.datagrams_received += datagrams;
            total += n;
            if n < self.cfg.batch {
                break;
            }
        }
        Ok(total)
    }

    /// ppoll over every socket, the waker and the netlink socket.
    /// Returns (a socket is readable, the waker fired, netlink has news).
    fn poll_all(&mut self, timeout: Duration) -> io::Result<(bool, bool, bool)> {
        let fd = |fd: RawFd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        self.pollfds.clear();
        self.pollfds
            .extend(self.sockets.iter().map(|s| fd(s.raw_fd())));
        let waker = self.waker.as_ref().map(|w| w.raw_fd());
        let netlink = self.multipath.as_ref().and_then(|m| m.raw_fd());
        self.pollfds
            .extend(waker.into_iter().chain(netlink).map(fd));
        if !wait_readable(&mut self.pollfds, timeout)? {
            return Ok((false, false, false));
        }
        let n = self.sockets.len();
        let ready = |p: &libc::pollfd| p.revents != 0;
        let sockets = self.pollfds[..n].iter().any(ready);
        let mut extra = self.pollfds[n..].iter();
        let woke = waker.is_some() && extra.next().is_some_and(ready);
        let news = netlink.is_some() && extra.next().is_some_and(ready);
        Ok((sockets, woke, news))
    }

    /// Waits for a datagram, the deadline, a wake-up from another thread,
    /// news from netlink or `MAX_SLEEP`. It sleeps in `ppoll` (the
    /// thread's timer slack is 1 ns, so the kernel does not add its default
    /// 50 µs) and spins, with no syscalls, only the last [`Spin::margin`]
    /// before a deadline that is part of a dense pacing schedule (see
    /// [`Spin`]).
    fn wait(&mut self, deadline: Option<Duration>) -> Result<Woke, NetError> {
        let started = self.clock.now();
        if let Some(d) = deadline.filter(|&d| started >= d) {
            // Read what is waiting even when already late: a sender that
            // is always behind its pacing schedule (CPU-bound, or sharing
            // the CPU) would otherwise never read its socket; its receive
            // buffer overflows with acknowledgments, its rate stays where
            // it was, the probe timer declares everything in flight lost,
            // and the connection dies of "nothing heard" with the peer's
            // replies queued.
            self.receive()?;
            return Ok(Woke::Deadline(d));
        }
        let until = deadline.map_or(started + MAX_SLEEP, |d| d.min(started + MAX_SLEEP));
        let spin = match deadline {
            Some(d) if d == until => self.spin.margin_for(d, self.last_send_turn),
            _ => Duration::ZERO,
        };
        loop {
            let now = self.clock.now();
            if now >= until {
                break;
            }
            let left = until - now;
            if left <= spin {
                // The spin: clock reads only. A datagram that lands now is
                // read at the next turn, at most `spin` later.
                while self.clock.now() < until {
                    std::hint::spin_loop();
                }
                break;
            }
            let sleep = left - spin;
            let (readable, woke, news) = self.poll_all(sleep).map_err(NetError::Socket)?;
            self.stats.sleeps += 1;
            if news {
                // An interface or address changed: act on it now, so a
                // new interface is probed within this turn.
                let now = self.clock.now();
                self.manage_paths(now, true);
                return Ok(Woke::Tick);
            }
            if woke {
                if let Some(w) = &self.waker {
                    w.drain();
                }
                return Ok(Woke::Tick);
            }
            if readable {
                if self.receive()? > 0 {
                    return Ok(Woke::Datagrams);
                }
            } else {
                // Timed out: learn how late ppoll wakes us, for the margin.
                let late = self.clock.now().saturating_sub(now + sleep);
                self.spin.observe_oversleep(late);
            }
        }
        Ok(match deadline {
            Some(d) if d == until => Woke::Deadline(d),
            _ => Woke::Tick,
        })
    }
}

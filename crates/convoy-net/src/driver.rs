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

use std::io;
use std::time::Duration;

use convoy_proto::Endpoint;

use crate::clock::Clock;
use crate::error::NetError;
use crate::pacing::{precise_timers, Spin};
use crate::socket::{NetSocket, RecvBatch, SendBatch};
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

pub struct Driver {
    pub endpoint: Endpoint,
    socket: NetSocket,
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
            socket,
            last_stamp: Duration::ZERO,
            peer: None,
            waker: None,
            spin: Spin::new(cfg.spin, cfg.spin_gap),
            last_send_turn: None,
        }
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
        self.socket.local_addr()
    }

    pub fn kernel_timestamps(&self) -> bool {
        self.socket.timestamps && self.cfg.kernel_timestamps
    }

    /// Runs turns until the application says it is done.
    pub fn run<A: Application>(&mut self, app: &mut A) -> Result<(), NetError> {
        precise_timers();
        let mut woke_for = None;
        loop {
            let now = self.clock.now();
            self.clock.maybe_resample(now);
            self.endpoint.handle_timeout(now);
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

    /// Sends everything the endpoint has for `now`, a batch per syscall.
    fn flush(&mut self, now: Duration, woke_for: Option<Duration>) -> Result<(), NetError> {
        let mut first = true;
        loop {
            self.tx.clear();
            while !self.tx.is_full() {
                match self.endpoint.poll_transmit(now, self.tx.next_buffer()) {
                    Some(t) => {
                        let flow = t.connection.map_or(u64::MAX, |h| h.0);
                        self.tx.push(t.len, t.remote, flow)
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
            let n = self
                .socket
                .send_batch(&mut self.tx, done, self.cfg.batch)
                .map_err(|e| self.socket_error(e))?;
            self.stats.send_syscalls += 1;
            if n == 0 {
                if waited {
                    self.stats.send_drops += (total - done) as u64;
                    break;
                }
                self.socket
                    .wait(Some(SEND_BUFFER_WAIT), true)
                    .map_err(NetError::Socket)?;
                waited = true;
                continue;
            }
            done += n;
            self.stats.datagrams_sent += n as u64;
        }
        self.stats.gso = self.socket.gso();
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

    /// Reads what is waiting and hands it to the endpoint; returns how many.
    fn receive(&mut self) -> Result<usize, NetError> {
        let mut total = 0;
        for _ in 0..MAX_RECV_BATCHES {
            let n = self
                .socket
                .recv_batch(&mut self.rx, self.cfg.batch)
                .map_err(|e| self.socket_error(e))?;
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
                    self.endpoint.handle(at, r.from, d);
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

    /// Waits for a datagram, the deadline, a wake-up from another thread
    /// or `MAX_SLEEP`. It sleeps in `ppoll` (the thread's timer slack is
    /// 1 ns, so the kernel does not add its default 50 µs) and spins, with
    /// no syscalls, only the last [`Spin::margin`] before a deadline that
    /// is part of a dense pacing schedule (see [`Spin`]).
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
            let readable = match &self.waker {
                None => self.socket.wait(Some(sleep), false),
                Some(w) => match self.socket.wait_readable_or(sleep, w.raw_fd()) {
                    Ok((_, true)) => {
                        w.drain();
                        return Ok(Woke::Tick);
                    }
                    r => r.map(|(readable, _)| readable),
                },
            }
            .map_err(NetError::Socket)?;
            self.stats.sleeps += 1;
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

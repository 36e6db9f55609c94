//! A fleet on one machine: many client connections to one server, each
//! streaming telemetry at a fixed rate, some uploading a bulk file, for
//! `convoy bench load` (and its small version in `make test`).
//!
//! Connections are spread over a few client threads; each thread is one
//! socket, one endpoint and one driver holding its share of the
//! connections (as a gateway would), so the load generator itself does
//! per-event work and leaves the CPU to the server it measures.
//!
//! Every connection is a real upload (`PUT`) of content generated from its
//! index, stored, fsynced and checked with BLAKE3 by the server, which
//! confirms it with the hash the client computed: telemetry writes a
//! tenth of a second's worth every 100 ms for the run's duration (a log
//! file growing as the vehicle drives), a bulk upload writes as fast as
//! the connection allows.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use convoy_proto::{Config, ConnectionHandle, Endpoint, Event, Keypair, Mode, StreamId};

use crate::client::read_replies;
use crate::driver::{Application, Driver, DriverConfig, Step};
use crate::error::NetError;
use crate::request::{Reply, Request};
use crate::session::Outbox;
use crate::socket::NetSocket;
use crate::stats::DriverStats;

const WRITE_EVERY: Duration = Duration::from_millis(100);
/// After the telemetry ends, how long to wait for the last confirmations.
const DRAIN: Duration = Duration::from_secs(20);

#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub server: SocketAddr,
    pub server_key: [u8; 32],
    pub mode: Mode,
    pub connections: usize,
    /// Telemetry rate of each connection, bits per second.
    pub telemetry_bps: u64,
    /// How many of the connections upload a bulk file instead.
    pub bulk: usize,
    pub bulk_bytes: u64,
    /// How long the telemetry runs once a connection is up.
    pub duration: Duration,
    /// Connections are started evenly over this time.
    pub ramp: Duration,
    /// Client threads (sockets).
    pub threads: usize,
    pub handshake_timeout: Duration,
    pub driver: DriverConfig,
    /// Instead of uploading, every connection stays open and idle this
    /// long, then closes (what an idle connection costs).
    pub idle: Option<Duration>,
}

/// What a load run measured on the client side.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct LoadReport {
    pub connections: usize,
    pub established: usize,
    pub failed: usize,
    /// Handshake times of the established connections, milliseconds.
    pub handshake_p50_ms: f64,
    pub handshake_p99_ms: f64,
    pub handshake_max_ms: f64,
    pub telemetry_bytes_sent: u64,
    /// Bytes of telemetry uploads the server stored and confirmed with
    /// the BLAKE3 hash the client computed.
    pub telemetry_bytes_confirmed: u64,
    pub telemetry_streams_confirmed: usize,
    pub bulk_stored: usize,
    pub bulk_bytes: u64,
    pub seconds: f64,
    pub client_receive_drops: u64,
    /// The first few failures, for the log.
    pub errors: Vec<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Telemetry,
    Bulk,
    Idle,
}

#[derive(PartialEq)]
enum State {
    Connecting,
    Running,
    Finishing,
    Done,
    Failed,
}

struct Conn {
    index: usize,
    started: Duration,
    handshake: Option<Duration>,
    stream: Option<StreamId>,
    kind: Kind,
    state: State,
    out: Outbox,
    inbox: Vec<u8>,
    /// Bytes handed to the stream, and the upload's size and hash.
    sent: u64,
    size: u64,
    hash: [u8; 32],
    /// Bytes the application has made available so far (telemetry grows).
    available: u64,
    resumed: bool,
    confirmed: Option<u64>,
    error: Option<String>,
}

/// The generated content of connection `seed`'s upload, from byte `from`.
fn fill(seed: u64, from: u64, out: &mut [u8]) {
    for (k, b) in out.iter_mut().enumerate() {
        let i = from + k as u64 + seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        *b = (i.wrapping_mul(2_654_435_761) >> 13) as u8;
    }
}

fn content_hash(seed: u64, size: u64) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut pos = 0;
    while pos < size {
        let n = (size - pos).min(buf.len() as u64) as usize;
        fill(seed, pos, &mut buf[..n]);
        h.update(&buf[..n]);
        pos += n as u64;
    }
    *h.finalize().as_bytes()
}

struct LoadApp {
    opts: LoadOptions,
    /// Global indices of this thread's connections, not yet started.
    to_start: Vec<usize>,
    conns: HashMap<ConnectionHandle, Conn>,
    writes: BTreeSet<(Duration, ConnectionHandle)>,
    touched: Vec<ConnectionHandle>,
    scratch: Vec<u8>,
    start: Duration,
    open: usize,
}

impl LoadApp {
    fn start_at(&self, index: usize) -> Duration {
        let n = self.opts.connections.max(1) as u32;
        self.start + self.opts.ramp * index as u32 / n
    }

    /// When connections still open are given up.
    fn deadline(&self) -> Duration {
        self.start
            + self.opts.ramp
            + self.opts.duration.max(self.opts.idle.unwrap_or_default())
            + DRAIN
    }

    fn start_due(&mut self, ep: &mut Endpoint, now: Duration) -> Result<(), NetError> {
        while let Some(&index) = self.to_start.last() {
            if self.start_at(index) > now {
                break;
            }
            self.to_start.pop();
            let h = ep
                .connect(now, self.opts.server, Some(&self.opts.server_key))
                .map_err(|e| NetError::Config(e.to_string()))?;
            let (kind, size) = if self.opts.idle.is_some() {
                (Kind::Idle, 0)
            } else if index < self.opts.bulk {
                (Kind::Bulk, self.opts.bulk_bytes)
            } else {
                let tenth = (self.opts.telemetry_bps / 80).max(1);
                let writes =
                    (self.opts.duration.as_millis() / WRITE_EVERY.as_millis()).max(1) as u64;
                (Kind::Telemetry, tenth * writes)
            };
            self.conns.insert(
                h,
                Conn {
                    index,
                    started: now,
                    handshake: None,
                    stream: None,
                    kind,
                    state: State::Connecting,
                    out: Outbox::default(),
                    inbox: Vec::new(),
                    sent: 0,
                    size,
                    hash: content_hash(index as u64, size),
                    available: if kind == Kind::Bulk { size } else { 0 },
                    resumed: false,
                    confirmed: None,
                    error: None,
                },
            );
            self.open += 1;
        }
        Ok(())
    }

    fn fail(&mut self, h: ConnectionHandle, why: String) {
        if let Some(k) = self.conns.get_mut(&h) {
            if matches!(k.state, State::Done | State::Failed) {
                return;
            }
            k.state = State::Failed;
            k.error = Some(why);
            self.open -= 1;
        }
    }

    fn step_conn(&mut self, ep: &mut Endpoint, h: ConnectionHandle, now: Duration) {
        if let Err(e) = self.try_step(ep, h, now) {
            self.fail(h, e.to_string());
            if let Some(c) = ep.connection(h) {
                c.close(1, "load test failure");
            }
        }
    }

    fn try_step(
        &mut self,
        ep: &mut Endpoint,
        h: ConnectionHandle,
        now: Duration,
    ) -> Result<(), NetError> {
        let Some(k) = self.conns.get_mut(&h) else {
            return Ok(());
        };
        if matches!(k.state, State::Done | State::Failed) {
            return Ok(());
        }
        let Some(c) = ep.connection(h) else {
            return Err(NetError::Protocol("connection vanished".into()));
        };
        while let Some(ev) = c.poll_event() {
            if let Event::Closed(reason) = ev {
                return Err(NetError::Protocol(format!("closed: {reason}")));
            }
        }
        if !c.is_established() {
            return Ok(());
        }
        if k.kind == Kind::Idle {
            match k.handshake {
                None => {
                    k.handshake = Some(now.saturating_sub(k.started));
                    k.state = State::Running;
                    let until = now + self.opts.idle.unwrap_or_default();
                    self.writes.insert((until, h));
                }
                Some(_) if k.state == State::Running && k.sent == 1 => {
                    k.state = State::Done;
                    k.confirmed = Some(0);
                    self.open -= 1;
                    c.close(0, "done");
                }
                Some(_) => {}
            }
            return Ok(());
        }
        let id = match k.stream {
            Some(id) => id,
            None => {
                k.handshake = Some(now.saturating_sub(k.started));
                let id = c.open_stream()?;
                k.stream = Some(id);
                k.state = State::Running;
                if k.kind == Kind::Telemetry {
                    // Stagger the writes of connections that came up together.
                    let phase = WRITE_EVERY * (k.index % 97) as u32 / 97;
                    self.writes.insert((now + phase, h));
                }
                let prefix = if k.kind == Kind::Bulk {
                    "bulk"
                } else {
                    "telemetry"
                };
                let req = Request::Put {
                    name: format!("{prefix}-{}", k.index),
                    size: k.size,
                    hash: k.hash,
                    from_start: false,
                };
                k.out.push(&req.encode());
                id
            }
        };
        k.out.flush(c, id)?;
        let (replies, fin) = read_replies(c, id, &mut k.inbox, &mut self.scratch)?;
        for r in replies {
            match r {
                Reply::PutFrom { offset } if offset <= k.size => {
                    k.sent = offset;
                    k.resumed = true;
                }
                Reply::Stored { hash } if hash == k.hash => k.confirmed = Some(k.size),
                Reply::Stored { .. } => {
                    return Err(NetError::Integrity("stored content differs".into()))
                }
                Reply::Error { message } => return Err(NetError::Remote(message)),
                other => return Err(NetError::Protocol(format!("unexpected reply {other:?}"))),
            }
        }
        if k.confirmed.is_some() {
            k.state = State::Done;
            self.open -= 1;
            c.close(0, "done");
            return Ok(());
        }
        if fin {
            return Err(NetError::Protocol("the server ended the stream".into()));
        }
        if k.state == State::Running && k.resumed {
            while k.sent < k.available {
                let room = c.write_room(id).min(self.scratch.len());
                if room == 0 {
                    break;
                }
                let n = room.min((k.available - k.sent) as usize);
                fill(k.index as u64, k.sent, &mut self.scratch[..n]);
                let w = c.write(id, &self.scratch[..n])?;
                k.sent += w as u64;
                if w < n {
                    break;
                }
            }
            if k.sent == k.size {
                c.finish(id)?;
                k.state = State::Finishing;
            }
        }
        Ok(())
    }

    /// A telemetry connection's periodic write: a tenth of a second more
    /// of its log becomes available.
    fn write_telemetry(&mut self, ep: &mut Endpoint, h: ConnectionHandle, now: Duration) {
        let tenth = (self.opts.telemetry_bps / 80).max(1);
        if let Some(k) = self.conns.get_mut(&h) {
            if k.state != State::Running {
                return;
            }
            if k.kind == Kind::Idle {
                // Its idle time is over (`sent` marks it for closing).
                k.sent = 1;
                self.step_conn(ep, h, now);
                return;
            }
            k.available = (k.available + tenth).min(k.size);
            if k.available < k.size {
                self.writes.insert((now + WRITE_EVERY, h));
            }
        }
        self.step_conn(ep, h, now);
    }
}

impl Application for LoadApp {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        self.start_due(ep, now)?;
        let mut touched = std::mem::take(&mut self.touched);
        ep.take_touched(&mut touched);
        for &h in &touched {
            self.step_conn(ep, h, now);
        }
        self.touched = touched;
        while let Some(&(t, h)) = self.writes.first() {
            if t > now {
                break;
            }
            self.writes.pop_first();
            self.write_telemetry(ep, h, now);
        }
        let deadline = self.deadline();
        if now >= deadline {
            let late: Vec<_> = self.conns.keys().copied().collect();
            for h in late {
                self.fail(h, "not finished in time".into());
            }
        }
        Ok(if self.to_start.is_empty() && self.open == 0 {
            Step::Done
        } else {
            Step::Continue
        })
    }

    fn wake_at(&self) -> Option<Duration> {
        let next_start = self.to_start.last().map(|&i| self.start_at(i));
        let next_write = self.writes.first().map(|&(t, _)| t);
        [next_start, next_write, Some(self.deadline())]
            .into_iter()
            .flatten()
            .min()
    }
}

struct ThreadResult {
    conns: Vec<Conn>,
    driver: DriverStats,
}

fn run_thread(opts: LoadOptions, indices: Vec<usize>) -> Result<ThreadResult, NetError> {
    let mut cfg = Config::for_mode(Keypair::generate(), opts.mode);
    cfg.handshake_timeout = opts.handshake_timeout;
    let endpoint = Endpoint::new(cfg, false).map_err(|e| NetError::Config(e.to_string()))?;
    let socket = NetSocket::connect_to(opts.server)?;
    let mut driver = Driver::new(endpoint, socket, opts.driver);
    let mut to_start = indices;
    to_start.sort_unstable_by(|a, b| b.cmp(a));
    let mut app = LoadApp {
        start: driver.now(),
        opts,
        to_start,
        conns: HashMap::new(),
        writes: BTreeSet::new(),
        touched: Vec::new(),
        scratch: vec![0; 64 * 1024],
        open: 0,
    };
    driver.run(&mut app)?;
    Ok(ThreadResult {
        conns: app.conns.into_values().collect(),
        driver: driver.stats().clone(),
    })
}

/// Runs the load and reports what the clients saw.
pub fn run(opts: &LoadOptions) -> Result<LoadReport, NetError> {
    let started = Instant::now();
    let threads = opts.threads.clamp(1, 64);
    let mut handles = Vec::new();
    for t in 0..threads {
        let indices: Vec<usize> = (t..opts.connections).step_by(threads).collect();
        let o = opts.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("convoy-load-{t}"))
                .spawn(move || run_thread(o, indices))
                .map_err(|e| NetError::Socket(std::io::Error::other(e)))?,
        );
    }
    let mut conns = Vec::new();
    let mut driver = DriverStats::default();
    for h in handles {
        let r = h
            .join()
            .map_err(|_| NetError::Protocol("a load thread panicked".into()))??;
        conns.extend(r.conns);
        driver.absorb(&r.driver);
    }
    let mut report = LoadReport {
        connections: opts.connections,
        seconds: started.elapsed().as_secs_f64(),
        client_receive_drops: driver.receive_drops,
        ..LoadReport::default()
    };
    let mut handshakes: Vec<f64> = Vec::new();
    for k in &conns {
        if let Some(d) = k.handshake {
            report.established += 1;
            handshakes.push(d.as_secs_f64() * 1e3);
        }
        if k.state == State::Failed {
            report.failed += 1;
            if report.errors.len() < 5 {
                report.errors.push(format!(
                    "connection {}: {}",
                    k.index,
                    k.error.as_deref().unwrap_or("failed")
                ));
            }
        }
        match k.kind {
            Kind::Telemetry => {
                report.telemetry_bytes_sent += k.sent;
                if let Some(c) = k.confirmed {
                    report.telemetry_bytes_confirmed += c;
                    report.telemetry_streams_confirmed += 1;
                }
            }
            Kind::Bulk => {
                if let Some(c) = k.confirmed {
                    report.bulk_stored += 1;
                    report.bulk_bytes += c;
                }
            }
            Kind::Idle => {}
        }
    }
    report.failed += opts.connections - conns.len();
    handshakes.sort_by(f64::total_cmp);
    let q = |p: f64| {
        if handshakes.is_empty() {
            0.0
        } else {
            handshakes
                [((handshakes.len() as f64 * p).ceil() as usize).clamp(1, handshakes.len()) - 1]
        }
    };
    report.handshake_p50_ms = q(0.5);
    report.handshake_p99_ms = q(0.99);
    report.handshake_max_ms = handshakes.last().copied().unwrap_or(0.0);
    Ok(report)
}

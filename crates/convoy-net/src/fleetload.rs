//! A fleet of vehicles speaking the agent's upload protocol to one fleet
//! server, for `convoy bench load --fleet`: each vehicle has its own
//! registered identity (so its own endpoint: an endpoint has one key),
//! connects as the agent's live lane does, and uploads a telemetry segment
//! every period with the agent's upload protocol ([`OneUpload`], the same
//! request, resume offset, data and BLAKE3-checked "stored" confirmation as
//! [`crate::Client::upload_queue`]), up to a window in flight.
//!
//! Many vehicles share a thread: each thread holds its vehicles' endpoints
//! and their UDP sockets (one a vehicle, as each vehicle has its own
//! address on the road), waits on all of them with one epoll, and keeps
//! their deadlines in one sorted set, so a turn costs what is due, not the
//! number of vehicles. What the segments hold is the caller's (the bench
//! makes them with the agent's segment writer and names).

use std::collections::{BTreeSet, VecDeque};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use convoy_proto::{Config, ConnectionHandle, Endpoint, Event, Keypair, Mode};

use crate::error::NetError;
use crate::upload::OneUpload;

/// Makes vehicle `index`'s segment number `seq` (from 1) at `t_ns`: its
/// upload name and bytes.
pub type SegmentFn = dyn Fn(usize, i64, i64) -> (String, Vec<u8>) + Send + Sync;

#[derive(Clone)]
pub struct FleetLoadOptions {
    pub server: SocketAddr,
    pub server_key: [u8; 32],
    pub mode: Mode,
    /// One registered identity per vehicle.
    pub keys: Arc<Vec<Keypair>>,
    /// A segment every this long, per vehicle.
    pub every: Duration,
    /// Segments are made until `ramp + duration` after the start.
    pub duration: Duration,
    /// Vehicles connect evenly over this time.
    pub ramp: Duration,
    /// After the last segment, how long to wait for confirmations.
    pub drain: Duration,
    /// Client threads.
    pub threads: usize,
    /// Uploads in flight per vehicle (the agent's window).
    pub window: usize,
    pub handshake_timeout: Duration,
    /// The agent's idle timeout (its keep-alives are due every third).
    pub idle_timeout: Duration,
    pub segment: Arc<SegmentFn>,
    pub counters: Arc<FleetCounters>,
    /// Niceness of the client threads (0: as the caller), so that on a
    /// small machine the server under test comes first.
    pub nice: i32,
}

/// Live counts, for progress lines while the run goes on.
#[derive(Debug, Default)]
pub struct FleetCounters {
    pub connected: AtomicU64,
    pub failed: AtomicU64,
    pub made: AtomicU64,
    pub confirmed: AtomicU64,
}

/// What the vehicles saw.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FleetLoadReport {
    pub vehicles: usize,
    pub connected: usize,
    pub failed: usize,
    /// Segments made (each handed to the upload protocol at once, or
    /// queued behind a full window as in the agent's spool).
    pub segments_made: u64,
    /// Segments the server confirmed durable (BLAKE3 checked).
    pub segments_confirmed: u64,
    pub segment_bytes_confirmed: u64,
    /// From a segment's making to its confirmation, milliseconds.
    pub confirm_p50_ms: f64,
    pub confirm_p99_ms: f64,
    pub confirm_max_ms: f64,
    pub handshake_p50_ms: f64,
    pub handshake_p99_ms: f64,
    pub seconds: f64,
    pub send_errors: u64,
    /// The first few failures.
    pub errors: Vec<String>,
    /// (vehicle index, upload name) of every confirmed segment.
    #[serde(skip)]
    pub confirmed_names: Vec<(usize, String)>,
}

#[derive(PartialEq)]
enum State {
    Connecting,
    Running,
    Done,
    Failed,
}

struct Vehicle {
    index: usize,
    ep: Endpoint,
    socket: UdpSocket,
    h: ConnectionHandle,
    state: State,
    started: Duration,
    handshake: Option<Duration>,
    /// Its entry in the thread's deadline set.
    timer: Option<Duration>,
    next_seq: i64,
    /// Made, waiting for room in the window: (made at, name, bytes).
    queued: VecDeque<(Duration, String, Vec<u8>)>,
    /// In flight, in the order given: (made at, name, bytes, upload).
    inflight: VecDeque<(Duration, String, u64, OneUpload)>,
    error: Option<String>,
}

struct Thread {
    opts: FleetLoadOptions,
    base: Instant,
    to_start: Vec<usize>,
    vehicles: Vec<Vehicle>,
    timers: BTreeSet<(Duration, usize)>,
    writes: BTreeSet<(Duration, usize)>,
    epfd: i32,
    open: usize,
    /// The vehicles were told the sending is over.
    closing: bool,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    latencies: Vec<f64>,
    confirmed: Vec<(usize, String)>,
    bytes_confirmed: u64,
    send_errors: u64,
}

impl Thread {
    fn now(&self) -> Duration {
        self.base.elapsed()
    }

    fn start_at(&self, index: usize) -> Duration {
        let n = self.opts.keys.len().max(1) as u32;
        self.opts.ramp * index as u32 / n
    }

    fn send_until(&self) -> Duration {
        self.opts.ramp + self.opts.duration
    }

    fn deadline(&self) -> Duration {
        self.send_until() + self.opts.drain
    }

    fn start_due(&mut self, now: Duration) -> Result<(), NetError> {
        while let Some(&index) = self.to_start.last() {
            if self.start_at(index) > now {
                break;
            }
            self.to_start.pop();
            let mut cfg = Config::for_mode(self.opts.keys[index].clone(), self.opts.mode);
            cfg.idle_timeout = self.opts.idle_timeout;
            cfg.handshake_timeout = self.opts.handshake_timeout;
            let mut ep = Endpoint::new(cfg, false).map_err(|e| NetError::Config(e.to_string()))?;
            let socket = UdpSocket::bind(("127.0.0.1", 0)).map_err(NetError::Socket)?;
            socket.connect(self.opts.server).map_err(NetError::Socket)?;
            socket.set_nonblocking(true).map_err(NetError::Socket)?;
            let slot = self.vehicles.len();
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: slot as u64,
            };
            // SAFETY: epfd and the socket's fd are open; ev is valid.
            let r = unsafe {
                libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_ADD, socket.as_raw_fd(), &mut ev)
            };
            if r != 0 {
                return Err(NetError::Socket(std::io::Error::last_os_error()));
            }
            let h = ep
                .connect(now, self.opts.server, Some(&self.opts.server_key))
                .map_err(|e| NetError::Config(e.to_string()))?;
            self.vehicles.push(Vehicle {
                index,
                ep,
                socket,
                h,
                state: State::Connecting,
                started: now,
                handshake: None,
                timer: None,
                next_seq: 1,
                queued: VecDeque::new(),
                inflight: VecDeque::new(),
                error: None,
            });
            self.open += 1;
            self.flush(slot, now);
        }
        Ok(())
    }

    fn fail(&mut self, slot: usize, why: String) {
        let v = &mut self.vehicles[slot];
        if matches!(v.state, State::Done | State::Failed) {
            return;
        }
        v.state = State::Failed;
        v.error = Some(why);
        if let Some(c) = v.ep.connection(v.h) {
            c.close(1, "load test failure");
        }
        self.open -= 1;
        self.opts.counters.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// A new segment for the vehicle, if it still sends.
    fn make_segment(&mut self, slot: usize, now: Duration) {
        let until = self.send_until();
        let v = &mut self.vehicles[slot];
        if v.state != State::Running || now >= until {
            return;
        }
        let seq = v.next_seq;
        v.next_seq += 1;
        let (name, data) = (self.opts.segment)(v.index, seq, unix_ns());
        v.queued.push_back((now, name, data));
        self.opts.counters.made.fetch_add(1, Ordering::Relaxed);
        if now + self.opts.every < until {
            self.writes.insert((now + self.opts.every, slot));
        }
    }

    fn step(&mut self, slot: usize, now: Duration) {
        if let Err(e) = self.try_step(slot, now) {
            self.fail(slot, e.to_string());
        }
    }

    fn try_step(&mut self, slot: usize, now: Duration) -> Result<(), NetError> {
        let until = self.send_until();
        let v = &mut self.vehicles[slot];
        if matches!(v.state, State::Done | State::Failed) {
            return Ok(());
        }
        let Some(c) = v.ep.connection(v.h) else {
            return Err(NetError::Protocol("connection vanished".into()));
        };
        while let Some(ev) = c.poll_event() {
            if let Event::Closed(reason) = ev {
                return Err(NetError::Protocol(format!("closed: {reason}")));
            }
        }
        if let Some(reason) = c.close_reason() {
            return Err(NetError::Protocol(format!("closed: {reason}")));
        }
        if !c.is_established() {
            return Ok(());
        }
        if v.handshake.is_none() {
            v.handshake = Some(now.saturating_sub(v.started));
            v.state = State::Running;
            self.opts.counters.connected.fetch_add(1, Ordering::Relaxed);
            // Vehicles that came up together send at different moments.
            let phase = self.opts.every.mul_f64((v.index % 997) as f64 / 997.0);
            self.writes.insert((now + phase, slot));
        }
        while v.inflight.len() < self.opts.window {
            let Some((at, name, data)) = v.queued.pop_front() else {
                break;
            };
            let size = data.len() as u64;
            let u = OneUpload::from_bytes(name.clone(), data)?;
            v.inflight.push_back((at, name, size, u));
        }
        for (_, _, _, u) in v.inflight.iter_mut() {
            if !u.stored {
                u.step(c, now, &mut self.scratch)?;
            }
        }
        // Confirmations are taken as each arrives, as the agent's lane
        // takes them (`Client::upload_queue`).
        while let Some(k) = v.inflight.iter().position(|f| f.3.stored) {
            let (at, name, size, _) = v.inflight.remove(k).expect("found");
            self.latencies
                .push(now.saturating_sub(at).as_secs_f64() * 1e3);
            self.bytes_confirmed += size;
            self.confirmed.push((v.index, name));
            self.opts.counters.confirmed.fetch_add(1, Ordering::Relaxed);
        }
        if now >= until && v.inflight.is_empty() && v.queued.is_empty() {
            c.close(0, "done");
            v.state = State::Done;
            self.open -= 1;
        }
        Ok(())
    }

    /// Sends what the vehicle's endpoint has, and files its next deadline.
    fn flush(&mut self, slot: usize, now: Duration) {
        let v = &mut self.vehicles[slot];
        while let Some(t) = v.ep.poll_transmit(now, &mut self.buf) {
            if v.socket.send(&self.buf[..t.len]).is_err() {
                self.send_errors += 1;
            }
        }
        let next = if v.state == State::Failed && v.ep.is_empty() {
            None
        } else {
            v.ep.poll_timeout()
        };
        if next != v.timer {
            if let Some(t) = v.timer {
                self.timers.remove(&(t, slot));
            }
            if let Some(t) = next {
                self.timers.insert((t, slot));
            }
            v.timer = next;
        }
    }

    fn run(&mut self) -> Result<(), NetError> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 512];
        let mut touched: Vec<usize> = Vec::new();
        let mut mark = vec![false; 0];
        loop {
            let now = self.now();
            self.start_due(now)?;
            if self.to_start.is_empty() && self.open == 0 {
                return Ok(());
            }
            let wake = [
                self.to_start.last().map(|&i| self.start_at(i)),
                self.timers.first().map(|t| t.0),
                self.writes.first().map(|t| t.0),
                Some(self.deadline()),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now);
            let wait = wake.saturating_sub(now).min(Duration::from_millis(100));
            // Rounded up: a deadline under a millisecond away is not a spin.
            let ms = wait.as_micros().div_ceil(1000) as i32;
            // SAFETY: events is a valid buffer of its length.
            let n = unsafe {
                libc::epoll_wait(self.epfd, events.as_mut_ptr(), events.len() as i32, ms)
            };
            let now = self.now();
            mark.resize(self.vehicles.len(), false);
            let mut touch = |slot: usize, touched: &mut Vec<usize>| {
                if !mark[slot] {
                    mark[slot] = true;
                    touched.push(slot);
                }
            };
            for ev in events.iter().take(n.max(0) as usize) {
                let slot = ev.u64 as usize;
                let v = &mut self.vehicles[slot];
                while let Ok(len) = v.socket.recv(&mut self.buf) {
                    v.ep.handle(now, self.opts.server, &self.buf[..len]);
                }
                touch(slot, &mut touched);
            }
            while let Some(&(t, slot)) = self.timers.first() {
                if t > now {
                    break;
                }
                self.timers.pop_first();
                self.vehicles[slot].timer = None;
                self.vehicles[slot].ep.handle_timeout(now);
                touch(slot, &mut touched);
            }
            while let Some(&(t, slot)) = self.writes.first() {
                if t > now {
                    break;
                }
                self.writes.pop_first();
                self.make_segment(slot, now);
                touch(slot, &mut touched);
            }
            if now >= self.send_until() && !self.closing {
                self.closing = true;
                // Vehicles with nothing in flight close now.
                for slot in 0..self.vehicles.len() {
                    if self.vehicles[slot].state == State::Running
                        && self.vehicles[slot].inflight.is_empty()
                        && self.vehicles[slot].queued.is_empty()
                    {
                        touch(slot, &mut touched);
                    }
                }
            }
            if now >= self.deadline() {
                for slot in 0..self.vehicles.len() {
                    self.fail(slot, "not finished in time".into());
                }
                self.to_start.clear();
            }
            for &slot in &touched {
                mark[slot] = false;
                self.step(slot, now);
                self.flush(slot, now);
            }
            touched.clear();
        }
    }
}

impl Drop for Thread {
    fn drop(&mut self) {
        // SAFETY: our own epoll descriptor, closed once.
        unsafe { libc::close(self.epfd) };
    }
}

struct ThreadResult {
    vehicles: Vec<(usize, Option<Duration>, Option<String>, bool)>,
    latencies: Vec<f64>,
    confirmed: Vec<(usize, String)>,
    bytes_confirmed: u64,
    send_errors: u64,
}

fn run_thread(opts: FleetLoadOptions, mut indices: Vec<usize>) -> Result<ThreadResult, NetError> {
    indices.sort_unstable_by(|a, b| b.cmp(a));
    if opts.nice != 0 {
        // SAFETY: plain syscalls; on Linux a thread's id sets its own nice.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, opts.nice);
        }
    }
    // SAFETY: plain syscall.
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epfd < 0 {
        return Err(NetError::Socket(std::io::Error::last_os_error()));
    }
    let mut t = Thread {
        opts,
        base: Instant::now(),
        to_start: indices,
        vehicles: Vec::new(),
        timers: BTreeSet::new(),
        writes: BTreeSet::new(),
        epfd,
        open: 0,
        closing: false,
        buf: vec![0; 65_536],
        scratch: vec![0; 65_536],
        latencies: Vec::new(),
        confirmed: Vec::new(),
        bytes_confirmed: 0,
        send_errors: 0,
    };
    t.run()?;
    Ok(ThreadResult {
        vehicles: t
            .vehicles
            .iter()
            .map(|v| {
                (
                    v.index,
                    v.handshake,
                    v.error.clone(),
                    v.state == State::Failed,
                )
            })
            .collect(),
        latencies: std::mem::take(&mut t.latencies),
        confirmed: std::mem::take(&mut t.confirmed),
        bytes_confirmed: t.bytes_confirmed,
        send_errors: t.send_errors,
    })
}

fn unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// The `p`-quantile of sorted values (0 if none).
fn quantile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// Runs the fleet and reports what its vehicles saw.
pub fn run(opts: &FleetLoadOptions) -> Result<FleetLoadReport, NetError> {
    let started = Instant::now();
    let n = opts.keys.len();
    let threads = opts.threads.clamp(1, 64);
    let mut handles = Vec::new();
    for t in 0..threads {
        let indices: Vec<usize> = (t..n).step_by(threads).collect();
        let o = opts.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("convoy-fleet-{t}"))
                .spawn(move || run_thread(o, indices))
                .map_err(|e| NetError::Socket(std::io::Error::other(e)))?,
        );
    }
    let mut report = FleetLoadReport {
        vehicles: n,
        ..FleetLoadReport::default()
    };
    let mut latencies = Vec::new();
    let mut handshakes = Vec::new();
    let mut seen = 0;
    for h in handles {
        let r = h
            .join()
            .map_err(|_| NetError::Protocol("a load thread panicked".into()))??;
        for (index, handshake, error, failed) in r.vehicles {
            seen += 1;
            if let Some(d) = handshake {
                report.connected += 1;
                handshakes.push(d.as_secs_f64() * 1e3);
            }
            if failed {
                report.failed += 1;
                if report.errors.len() < 5 {
                    report.errors.push(format!(
                        "vehicle {index}: {}",
                        error.as_deref().unwrap_or("failed")
                    ));
                }
            }
        }
        latencies.extend(r.latencies);
        report.confirmed_names.extend(r.confirmed);
        report.segment_bytes_confirmed += r.bytes_confirmed;
        report.send_errors += r.send_errors;
    }
    report.failed += n - seen;
    report.segments_made = opts.counters.made.load(Ordering::Relaxed);
    report.segments_confirmed = report.confirmed_names.len() as u64;
    latencies.sort_by(f64::total_cmp);
    handshakes.sort_by(f64::total_cmp);
    report.confirm_p50_ms = quantile(&latencies, 0.5);
    report.confirm_p99_ms = quantile(&latencies, 0.99);
    report.confirm_max_ms = latencies.last().copied().unwrap_or(0.0);
    report.handshake_p50_ms = quantile(&handshakes, 0.5);
    report.handshake_p99_ms = quantile(&handshakes, 0.99);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

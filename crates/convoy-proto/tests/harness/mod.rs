//! Two endpoints joined by several links, in virtual time: what a car with
//! Wi-Fi and LTE is to the protocol. Each link is a pair of directions with
//! a rate (serialisation, drop-tail at a queue-delay cap), a propagation
//! delay and blackhole intervals; the client reaches the server over link
//! `i` from its own address, as `convoy emu` sets it up.

use std::collections::{BinaryHeap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use convoy_link::splitmix64;
use convoy_proto::{Config, ConnectionHandle, Endpoint, Keypair, Mode, RateControl, StreamId};

pub const MS: Duration = Duration::from_millis(1);

/// Bytes of IP and UDP headers charged per datagram.
const OVERHEAD: u64 = 28;
/// A direction drops what would wait longer than this in its queue, unless
/// told otherwise.
const QUEUE_CAP: Duration = Duration::from_millis(150);

#[derive(Clone, Debug)]
pub struct Dir {
    pub bits_per_sec: u64,
    pub delay: Duration,
    /// Packets entering during these intervals, or leaving the queue
    /// during them, vanish (a silent blackhole).
    pub outages: Vec<(Duration, Duration)>,
    /// The chance that a datagram is lost on the air, after its airtime
    /// (a frame the radio sent and nobody received).
    pub loss: f64,
    /// It drops what would wait longer than this in its queue.
    pub queue_cap: Duration,
    /// The loss draws' state: a run is the same every time.
    rng: u64,
    free_at: Duration,
    /// The longest any datagram waited in its queue.
    pub max_wait: Duration,
    pub bytes: u64,
    /// Bytes offered while the direction was out (they vanished).
    pub offered_in_outage: u64,
    /// Bytes carried per 100 ms bin, for "which path carried what when".
    pub timeline: Vec<u64>,
}

impl Dir {
    pub fn new(mbit: f64, delay_ms: u64) -> Dir {
        Dir {
            bits_per_sec: (mbit * 1e6) as u64,
            delay: MS * delay_ms as u32,
            outages: Vec::new(),
            loss: 0.0,
            queue_cap: QUEUE_CAP,
            rng: delay_ms ^ (mbit.to_bits() << 1),
            free_at: Duration::ZERO,
            max_wait: Duration::ZERO,
            bytes: 0,
            offered_in_outage: 0,
            timeline: Vec::new(),
        }
    }

    fn down_at(&self, t: Duration) -> bool {
        self.outages.iter().any(|&(a, b)| t >= a && t < b)
    }

    /// When a datagram offered at `now` arrives, or `None` if dropped.
    fn offer(&mut self, now: Duration, len: usize) -> Option<Duration> {
        if self.down_at(now) {
            self.offered_in_outage += len as u64;
            return None;
        }
        let start = self.free_at.max(now);
        if start - now > self.queue_cap {
            return None;
        }
        self.max_wait = self.max_wait.max(start - now);
        let bits = (len as u64 + OVERHEAD) * 8;
        let tx = Duration::from_nanos(bits * 1_000_000_000 / self.bits_per_sec);
        self.free_at = start + tx;
        self.bytes += len as u64;
        let bin = (now.as_millis() / 100) as usize;
        if self.timeline.len() <= bin {
            self.timeline.resize(bin + 1, 0);
        }
        self.timeline[bin] += len as u64;
        if self.loss > 0.0 && self.draw() < self.loss {
            return None;
        }
        Some(self.free_at + self.delay)
    }

    /// Draws this direction's losses from `seed` as well, so runs of one
    /// scenario differ in which datagrams are lost, not only in timing.
    pub fn seed_losses(&mut self, seed: u64) {
        self.rng = splitmix(self.rng ^ seed);
    }

    /// A uniform draw in [0, 1).
    fn draw(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(1);
        (splitmix(self.rng) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// SplitMix64 of `x` (convoy-link's step, without keeping its state): a
/// well-mixed 64-bit value from any input, so runs draw the same "random"
/// choices every time.
pub fn splitmix(x: u64) -> u64 {
    splitmix64(&mut { x })
}

#[derive(Clone, Debug)]
pub struct Link {
    pub client: SocketAddr,
    pub up: Dir,
    pub down: Dir,
}

impl Link {
    pub fn new(i: u8, mbit: f64, delay_ms: u64) -> Link {
        let mut down = Dir::new(mbit, delay_ms);
        // Its own losses, not the same draws as the way up.
        down.rng = splitmix(down.rng);
        Link {
            client: SocketAddr::from(([10, 7, i, 1], 5000)),
            up: Dir::new(mbit, delay_ms),
            down,
        }
    }

    /// Both directions' rate and loss from now on.
    pub fn set_rate_and_loss(&mut self, bits_per_sec: u64, loss: f64) {
        for dir in [&mut self.up, &mut self.down] {
            dir.bits_per_sec = bits_per_sec;
            dir.loss = loss;
        }
    }

    /// Both directions draw their losses from `seed` as well.
    pub fn seed_losses(&mut self, seed: u64) {
        self.up.seed_losses(seed);
        self.down.seed_losses(seed);
    }

    /// Both directions silent from `from` to `to`.
    pub fn outage(mut self, from: Duration, to: Duration) -> Link {
        self.up.outages.push((from, to));
        self.down.outages.push((from, to));
        self
    }
}

struct InFlight {
    at: Duration,
    seq: u64,
    to_server: bool,
    link: usize,
    bytes: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

pub struct World {
    pub now: Duration,
    pub client: Endpoint,
    pub server: Endpoint,
    pub conn: ConnectionHandle,
    pub server_conn: Option<ConnectionHandle>,
    pub links: Vec<Link>,
    /// Client path id → the link its socket sends on.
    pub path_link: HashMap<u8, usize>,
    server_addr: SocketAddr,
    queue: BinaryHeap<InFlight>,
    seq: u64,
    /// Upload: bytes to write (u64::MAX: until the run ends).
    pub upload: u64,
    written: u64,
    stream: Option<StreamId>,
    server_stream: Option<StreamId>,
    /// (time, bytes) of every server read that returned data.
    pub reads: Vec<(Duration, u64)>,
    pub delivered: u64,
    /// The upload's bytes repeat with this period: one buffer serves
    /// every write and check.
    pattern: Vec<u8>,
    read_buf: Vec<u8>,
}

/// What a run starts from: both endpoints' initial window (Tide's first
/// flight, in packets) and the seed of their connection ids and keys.
#[derive(Clone, Copy, Debug)]
pub struct Start {
    pub initial_window: u64,
    pub seed: u64,
}

impl Default for Start {
    fn default() -> Start {
        Start {
            initial_window: 32,
            seed: 7,
        }
    }
}

impl World {
    pub fn new(links: Vec<Link>, upload: u64) -> World {
        World::starting(links, upload, Start::default())
    }

    pub fn starting(links: Vec<Link>, upload: u64, start: Start) -> World {
        let server_kp = Keypair::generate();
        let mut scfg = Config::for_mode(server_kp.clone(), Mode::Tide);
        scfg.seed = Some(start.seed);
        let mut ccfg = Config::for_mode(Keypair::generate(), Mode::Tide);
        ccfg.seed = Some(start.seed + 1);
        for cfg in [&mut scfg, &mut ccfg] {
            if let RateControl::Tide(tide) = &mut cfg.rate_control {
                tide.initial_window_packets = start.initial_window;
            }
        }
        let server_addr = SocketAddr::from(([10, 7, 0, 2], 4433));
        let mut client = Endpoint::new(ccfg, false).unwrap();
        let server = Endpoint::new(scfg, true).unwrap();
        let conn = client
            .connect(Duration::ZERO, server_addr, Some(&server_kp.public))
            .unwrap();
        World {
            now: Duration::ZERO,
            client,
            server,
            conn,
            server_conn: None,
            links,
            path_link: HashMap::from([(0, 0)]),
            server_addr,
            queue: BinaryHeap::new(),
            seq: 0,
            upload,
            written: 0,
            stream: None,
            server_stream: None,
            reads: Vec::new(),
            delivered: 0,
            pattern: pattern(0, PERIOD + CHUNK),
            read_buf: vec![0; CHUNK],
        }
    }

    /// Opens a client path over link `link`.
    pub fn open_path(&mut self, link: usize, backup: bool) -> u8 {
        let now = self.now;
        let c = self.client.connection(self.conn).unwrap();
        let id = c.open_path(now, self.server_addr, backup).unwrap();
        self.path_link.insert(id, link);
        id
    }

    pub fn client_conn(&mut self) -> &mut convoy_proto::Connection {
        self.client.connection(self.conn).unwrap()
    }

    /// The state of the client's path `id`.
    pub fn path_state(&mut self, id: u8) -> convoy_proto::PathState {
        self.client_conn()
            .paths()
            .iter()
            .find(|p| p.id == id)
            .unwrap()
            .state
    }

    fn send_all(&mut self) {
        let mut buf = vec![0u8; 2048];
        while let Some(t) = self.client.poll_transmit(self.now, &mut buf) {
            let link = self.path_link.get(&t.path_id).copied().unwrap_or(0);
            if let Some(at) = self.links[link].up.offer(self.now, t.len) {
                self.push(at, true, link, buf[..t.len].to_vec());
            }
        }
        while let Some(t) = self.server.poll_transmit(self.now, &mut buf) {
            let Some(link) = self.links.iter().position(|l| l.client == t.remote) else {
                continue;
            };
            if let Some(at) = self.links[link].down.offer(self.now, t.len) {
                self.push(at, false, link, buf[..t.len].to_vec());
            }
        }
    }

    fn push(&mut self, at: Duration, to_server: bool, link: usize, bytes: Vec<u8>) {
        self.seq += 1;
        let seq = self.seq;
        self.queue.push(InFlight {
            at,
            seq,
            to_server,
            link,
            bytes,
        });
    }

    fn apps(&mut self) {
        let now = self.now;
        if let Some(c) = self.client.connection(self.conn) {
            if c.is_established() {
                let id = *self.stream.get_or_insert_with(|| c.open_stream().unwrap());
                while self.written < self.upload {
                    let at = (self.written % PERIOD as u64) as usize;
                    let want = CHUNK.min((self.upload - self.written) as usize);
                    match c.write(id, &self.pattern[at..at + want]) {
                        Ok(n) if n > 0 => self.written += n as u64,
                        _ => break,
                    }
                }
                if self.written == self.upload && self.upload != u64::MAX {
                    let _ = c.finish(id);
                }
            }
        }
        if self.server_conn.is_none() {
            self.server_conn = self.server.accept();
        }
        let Some(h) = self.server_conn else { return };
        let Some(s) = self.server.connection(h) else {
            return;
        };
        if self.server_stream.is_none() {
            self.server_stream = s.accept_stream();
        }
        let Some(id) = self.server_stream else { return };
        while let Ok(n) = s.read(id, &mut self.read_buf) {
            if n == 0 {
                break;
            }
            let at = (self.delivered % PERIOD as u64) as usize;
            assert!(
                self.read_buf[..n] == self.pattern[at..at + n],
                "bytes from {} delivered wrong",
                self.delivered
            );
            self.delivered += n as u64;
            self.reads.push((now, n as u64));
        }
    }

    /// Runs until `until` (virtual time), calling `at_each` every step.
    pub fn run_until(&mut self, until: Duration, mut at_each: impl FnMut(&mut World)) {
        loop {
            self.apps();
            at_each(self);
            self.send_all();
            let next = [
                self.client.poll_timeout(),
                self.server.poll_timeout(),
                self.queue.peek().map(|p| p.at),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(until)
            .min(until)
            // Events at the same instant as the last step: move on by a
            // microsecond so a timer that stays due cannot spin forever.
            .max(self.now + Duration::from_micros(1));
            if next > until {
                break;
            }
            self.now = next;
            while self.queue.peek().is_some_and(|p| p.at <= self.now) {
                let p = self.queue.pop().unwrap();
                // A packet still queued or on the air when its link goes
                // out is lost with it (the radio's queue goes too).
                let dir = if p.to_server {
                    &self.links[p.link].up
                } else {
                    &self.links[p.link].down
                };
                if dir.down_at(p.at.saturating_sub(dir.delay)) {
                    continue;
                }
                if p.to_server {
                    let from = self.links[p.link].client;
                    self.server.handle(self.now, from, &p.bytes);
                } else {
                    self.client.handle(self.now, self.server_addr, &p.bytes);
                }
            }
            self.client.handle_timeout(self.now);
            self.server.handle_timeout(self.now);
            if self.now >= until {
                break;
            }
        }
    }

    /// The longest interval without a read, between `from` and `to`.
    pub fn longest_gap(&self, from: Duration, to: Duration) -> Duration {
        let mut last = from;
        let mut gap = Duration::ZERO;
        for &(t, _) in self.reads.iter().filter(|(t, _)| *t >= from && *t <= to) {
            gap = gap.max(t - last);
            last = t;
        }
        gap.max(to.saturating_sub(last))
    }

    /// Bytes read between two instants, as bit/s.
    pub fn goodput(&self, from: Duration, to: Duration) -> f64 {
        let bytes: u64 = self
            .reads
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|(_, n)| n)
            .sum();
        bytes as f64 * 8.0 / (to - from).as_secs_f64()
    }

    /// Bytes link `i` carried upward between two instants (100 ms bins).
    pub fn link_bytes(&self, i: usize, from: Duration, to: Duration) -> u64 {
        let (a, b) = (
            (from.as_millis() / 100) as usize,
            (to.as_millis() / 100) as usize,
        );
        let t = &self.links[i].up.timeline;
        t.iter().skip(a).take(b.saturating_sub(a)).sum()
    }
}

/// The pattern's period: a prime, so it never lines up with symbols or
/// blocks and a byte out of place shows.
const PERIOD: usize = 65_521;
const CHUNK: usize = 16 * 1024;

/// The upload's bytes: position-dependent, so a byte out of place shows.
fn pattern(offset: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            let x = (offset + i) % PERIOD as u64;
            (x ^ (x >> 7) ^ ((x * 31) >> 11)) as u8
        })
        .collect()
}

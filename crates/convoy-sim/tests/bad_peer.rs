//! A peer or a network that misbehaves: wrong keys, replays, truncated and
//! garbage datagrams, a peer that vanishes, a reader that stops reading.

use std::net::SocketAddr;
use std::time::Duration;

use convoy_link::{Dur, LinkConfig, QueueLimit};
use convoy_proto::{
    CloseReason, CodeKind, Config, ConnectionHandle, Endpoint, Keypair, StreamError,
};
use convoy_sim::payload::{pattern_check, pattern_fill};
use convoy_sim::{run, TransferSpec};
use proptest::prelude::*;

const DELAY: Duration = Duration::from_millis(10);

fn client_addr() -> SocketAddr {
    "10.0.0.1:40000".parse().unwrap()
}

fn server_addr() -> SocketAddr {
    "10.0.0.2:4433".parse().unwrap()
}

/// Two endpoints joined by a fixed-delay, lossless wire, with a hook that
/// may rewrite, duplicate or add to every datagram on its way to the server.
struct Wire {
    client: Endpoint,
    server: Endpoint,
    now: Duration,
    in_flight: Vec<(Duration, bool, Vec<u8>)>,
}

impl Wire {
    fn new(server_cfg: Config) -> Wire {
        let mut c = Config::new(Keypair::generate());
        c.seed = Some(1);
        c.handshake_timeout = Duration::from_secs(2);
        Wire {
            client: Endpoint::new(c, false).unwrap(),
            server: Endpoint::new(server_cfg, true).unwrap(),
            now: Duration::ZERO,
            in_flight: Vec::new(),
        }
    }

    /// Runs until `done` or `limit`, passing server-bound datagrams through `tamper`.
    fn run(
        &mut self,
        limit: Duration,
        mut tamper: impl FnMut(&[u8]) -> Vec<Vec<u8>>,
        mut app: impl FnMut(&mut Wire) -> bool,
    ) {
        let mut buf = vec![0u8; 2048];
        while self.now < limit {
            if app(self) {
                return;
            }
            while let Some(t) = self.client.poll_transmit(self.now, &mut buf) {
                for d in tamper(&buf[..t.len]) {
                    self.in_flight.push((self.now + DELAY, true, d));
                }
            }
            while let Some(t) = self.server.poll_transmit(self.now, &mut buf) {
                self.in_flight
                    .push((self.now + DELAY, false, buf[..t.len].to_vec()));
            }
            let next = [self.client.poll_timeout(), self.server.poll_timeout()]
                .into_iter()
                .flatten()
                .chain(self.in_flight.iter().map(|p| p.0))
                .min()
                .unwrap_or(limit);
            self.now = next.max(self.now + Duration::from_micros(1)).min(limit);
            let due: Vec<_> = self
                .in_flight
                .iter()
                .filter(|p| p.0 <= self.now)
                .cloned()
                .collect();
            self.in_flight.retain(|p| p.0 > self.now);
            for (_, to_server, bytes) in due {
                if to_server {
                    self.server.handle(self.now, client_addr(), &bytes);
                } else {
                    self.client.handle(self.now, server_addr(), &bytes);
                }
            }
            self.client.handle_timeout(self.now);
            self.server.handle_timeout(self.now);
        }
    }
}

fn server_config(kp: Keypair) -> Config {
    let mut s = Config::new(kp);
    s.seed = Some(2);
    s
}

/// A wire to a fresh server whose key the client knows (IK), connecting.
fn wire_with(configure: impl FnOnce(&mut Config)) -> (Wire, ConnectionHandle) {
    let kp = Keypair::generate();
    let mut cfg = server_config(kp.clone());
    configure(&mut cfg);
    let mut wire = Wire::new(cfg);
    let h = wire
        .client
        .connect(Duration::ZERO, server_addr(), Some(&kp.public))
        .unwrap();
    (wire, h)
}

/// Uploads `len` bytes through the wire, returning what the server read.
fn upload(
    wire: &mut Wire,
    h: ConnectionHandle,
    len: u64,
    tamper: impl FnMut(&[u8]) -> Vec<Vec<u8>>,
) -> u64 {
    let mut sent = 0u64;
    let mut read = 0u64;
    let mut stream = None;
    let mut buf = vec![0u8; 64 * 1024];
    wire.run(Duration::from_secs(30), tamper, |w| {
        let c = w.client.connection(h).unwrap();
        if c.is_established() {
            let id = *stream.get_or_insert_with(|| c.open_stream().unwrap());
            while sent < len {
                let n = (len - sent).min(buf.len() as u64) as usize;
                pattern_fill(0, sent, &mut buf[..n]);
                match c.write(id, &buf[..n]) {
                    Ok(k) => sent += k as u64,
                    Err(StreamError::Blocked) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            if sent == len {
                let _ = c.finish(id);
            }
        }
        for sh in w.server.handles() {
            let conn = w.server.connection(sh).unwrap();
            while conn.accept_stream().is_some() {}
            loop {
                match conn.read(convoy_proto::StreamId(0), &mut buf) {
                    Ok(0) => return true,
                    Ok(n) => {
                        assert_eq!(pattern_check(0, read, &buf[..n]), None, "byte-exact");
                        read += n as u64;
                    }
                    Err(_) => break,
                }
            }
        }
        false
    });
    read
}

#[test]
fn wrong_server_key_fails_the_handshake_cleanly() {
    let mut wire = Wire::new(server_config(Keypair::generate()));
    let wrong = Keypair::generate().public;
    let h = wire
        .client
        .connect(Duration::ZERO, server_addr(), Some(&wrong))
        .unwrap();
    wire.run(
        Duration::from_secs(5),
        |d| vec![d.to_vec()],
        |w| w.client.connection(h).unwrap().is_closed(),
    );
    let c = wire.client.connection(h).unwrap();
    assert_eq!(c.close_reason(), Some(&CloseReason::HandshakeTimeout));
    assert!(wire.server.stats().handshake_failures >= 1);
    assert!(
        wire.server.handles().is_empty(),
        "no state kept for a failed handshake"
    );
}

/// Connects through a wire that drops the first `lost` client datagrams
/// (its Initials); returns when the client is established, and that time.
fn connect_losing_initials(lost: usize) -> (Wire, ConnectionHandle, Duration) {
    let kp = Keypair::generate();
    let mut wire = Wire::new(server_config(kp.clone()));
    let mut c = Config::new(Keypair::generate());
    c.seed = Some(1);
    c.handshake_timeout = Duration::from_secs(10);
    wire.client = Endpoint::new(c, false).unwrap();
    let h = wire
        .client
        .connect(Duration::ZERO, server_addr(), Some(&kp.public))
        .unwrap();
    let mut seen = 0;
    wire.run(
        Duration::from_secs(10),
        |d| {
            seen += 1;
            if seen <= lost {
                vec![]
            } else {
                vec![d.to_vec()]
            }
        },
        |w| w.client.connection(h).unwrap().is_established(),
    );
    let at = wire.now;
    (wire, h, at)
}

#[test]
fn the_handshake_round_trip_seeds_the_rtt_estimate() {
    let (mut wire, h, at) = connect_losing_initials(0);
    assert_eq!(at, 2 * DELAY);
    let rtt = wire.client.connection(h).unwrap().stats().smoothed_rtt;
    assert_eq!(rtt, 2 * DELAY, "not the 333 ms default");
}

#[test]
fn a_lossy_handshake_is_retried_every_1_2_s_after_the_first_doubling() {
    // Tries at 0, 0.6, 1.8, 3.0 and 4.2 s: the fifth gets through. Doubling
    // on would have tried at 9 s, and given up at the 10 s timeout.
    let (mut wire, h, at) = connect_losing_initials(4);
    assert_eq!(at, Duration::from_millis(4200) + 2 * DELAY);
    let rtt = wire.client.connection(h).unwrap().stats().smoothed_rtt;
    assert!(
        rtt > 2 * DELAY,
        "an answer to a repeated Initial is no RTT sample (Karn): {rtt:?}"
    );
}

#[test]
fn replayed_packets_are_refused_and_data_stays_exact() {
    let (mut wire, h) = wire_with(|_| {});
    let read = upload(&mut wire, h, 300_000, |d| vec![d.to_vec(), d.to_vec()]);
    assert_eq!(read, 300_000);
    let sh = wire.server.handles()[0];
    assert!(wire.server.connection(sh).unwrap().stats().replays > 100);
}

#[test]
fn truncated_flipped_and_garbage_datagrams_are_survived() {
    let (mut wire, h) = wire_with(|_| {});
    let mut n = 0usize;
    let read = upload(&mut wire, h, 300_000, |d| {
        n += 1;
        let mut flipped = d.to_vec();
        let at = n * 7 % flipped.len();
        flipped[at] ^= 0x40;
        let garbage: Vec<u8> = (0..n % 1500).map(|i| (i * 31 + n) as u8).collect();
        vec![
            d[..n % d.len()].to_vec(),
            flipped,
            garbage,
            Vec::new(),
            d.to_vec(),
        ]
    });
    assert_eq!(read, 300_000);
    let sh = wire.server.handles()[0];
    let stats = wire.server.connection(sh).unwrap().stats();
    assert!(
        stats.auth_failures > 100,
        "flipped packets fail authentication: {stats:?}"
    );
    assert!(wire.server.stats().malformed > 100);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn arbitrary_datagrams_never_panic(datagrams in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1600), 1..20)) {
        let kp = Keypair::generate();
        let mut server = Endpoint::new(server_config(kp), true).unwrap();
        for (i, d) in datagrams.iter().enumerate() {
            server.handle(Duration::from_millis(i as u64), client_addr(), d);
            let mut buf = [0u8; 2048];
            while server.poll_transmit(Duration::from_millis(i as u64), &mut buf).is_some() {}
        }
    }
}

fn link() -> LinkConfig {
    LinkConfig::constant(20_000_000)
        .with_delay(Dur::from_millis(25))
        .with_queue(QueueLimit::Packets(300))
}

#[test]
fn a_vanished_peer_is_noticed_by_the_idle_timeout() {
    let mut c = Config::new(Keypair::generate());
    c.idle_timeout = Duration::from_secs(3);
    let s = Config::new(Keypair::generate());
    let mut spec = TransferSpec::new(link(), link(), c, s);
    spec.upload = 50_000_000;
    spec.server_vanishes_at = Some(Duration::from_secs(1));
    spec.time_limit = Duration::from_secs(30);
    let r = run(spec).unwrap();
    assert_eq!(
        r.client_closed.as_deref(),
        Some(CloseReason::IdleTimeout.to_string().as_str())
    );
    let closed_at = r.elapsed + r.handshake.unwrap();
    assert!(
        closed_at >= Duration::from_secs(4) && closed_at < Duration::from_millis(4200),
        "closed at {closed_at:?}"
    );
}

#[test]
fn a_reader_that_stops_reading_bounds_memory() {
    let c = Config::new(Keypair::generate()).with_code(CodeKind::Rlnc);
    let s = Config::new(Keypair::generate()).with_code(CodeKind::Rlnc);
    let limits = c.streams;
    let window_bytes = c.coding.window as usize * c.coding.block_bytes();
    let mut spec = TransferSpec::new(link(), link(), c, s);
    spec.upload = 200_000_000;
    spec.server_reads_at_most = Some(1_000_000);
    spec.time_limit = Duration::from_secs(20);
    let r = run(spec).unwrap();
    assert_eq!(r.upload.delivered, 1_000_000);
    let bound = limits.send_buffer + limits.max_stream_data as usize + window_bytes;
    assert!(
        r.peak_buffered <= bound,
        "peak {} > bound {bound}",
        r.peak_buffered
    );
    // The sender stopped: far less than 20 s at 20 Mbit/s went out.
    assert!(
        r.client.data_packets_sent < 20_000,
        "{} data packets",
        r.client.data_packets_sent
    );
    assert!(r.client_closed.is_none(), "a slow reader is not an error");
}

#[test]
fn xx_learns_the_server_key_and_carries_data() {
    let kp = Keypair::generate();
    let mut wire = Wire::new(server_config(kp.clone()));
    let h = wire
        .client
        .connect(Duration::ZERO, server_addr(), None)
        .unwrap();
    assert_eq!(upload(&mut wire, h, 100_000, |d| vec![d.to_vec()]), 100_000);
    assert_eq!(
        wire.client.connection(h).unwrap().peer_static(),
        Some(kp.public)
    );
}

#[test]
fn retry_cookie_is_required_when_handshakes_pile_up() {
    let (mut wire, h) = wire_with(|cfg| cfg.retry_threshold = 0);
    assert_eq!(upload(&mut wire, h, 50_000, |d| vec![d.to_vec()]), 50_000);
    assert_eq!(wire.server.stats().retries_sent, 1);
}

#[test]
fn an_unvalidated_client_gets_at_most_three_times_what_it_sent() {
    let (mut wire, h) = wire_with(|_| {});
    let mut received_by_server = 0usize;
    // Only the first Initial reaches the server (a spoofed source address
    // never answers); the server also has data to push.
    wire.run(
        Duration::from_secs(3),
        |d| {
            if received_by_server == 0 {
                received_by_server = d.len();
                vec![d.to_vec()]
            } else {
                Vec::new()
            }
        },
        |w| {
            for sh in w.server.handles() {
                let c = w.server.connection(sh).unwrap();
                if let Ok(id) = c.open_stream() {
                    let _ = c.write(id, &[7u8; 100_000]);
                }
            }
            false
        },
    );
    let sh = wire.server.handles()[0];
    let server_sent = wire.server.connection(sh).unwrap().stats().bytes_sent as usize;
    assert!(received_by_server >= 1200);
    assert!(
        server_sent <= 3 * received_by_server,
        "sent {server_sent} for {received_by_server}"
    );
    let _ = h;
}

//! The server under attack, in virtual time: spoofed Initials trigger
//! Retry and leave no lasting state, the 3× limit holds byte for byte,
//! garbage is counted, and a real client still gets in.

use std::net::SocketAddr;
use std::time::Duration;

use super::*;
use crate::connection::HELD_PACKETS;
use crate::crypto::Keypair;
use crate::StreamId;
use convoy_codec::CodeKind;

pub(super) const MS: Duration = Duration::from_millis(1);

pub(super) fn server(retry_threshold: usize, retry_rate: u32) -> (Endpoint, Keypair) {
    let kp = Keypair::generate();
    let mut cfg = Config::new(kp.clone());
    cfg.seed = Some(1);
    cfg.retry_threshold = retry_threshold;
    cfg.retry_rate = retry_rate;
    (Endpoint::new(cfg, true).unwrap(), kp)
}

pub(super) fn client() -> Endpoint {
    let mut cfg = Config::new(Keypair::generate());
    cfg.seed = Some(2);
    Endpoint::new(cfg, false).unwrap()
}

pub(super) fn addr(i: u32) -> SocketAddr {
    SocketAddr::from((
        [127, 1, (i >> 8) as u8, i as u8],
        1000 + (i % 50_000) as u16,
    ))
}

/// Everything `ep` sends at `now`, as (to, bytes).
pub(super) fn drain(ep: &mut Endpoint, now: Duration) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 2048];
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        out.push((t.remote, buf[..t.len].to_vec()));
    }
    out
}

/// A valid IK Initial for `key` (what a flood can replay at no DH cost).
fn initial(key: &[u8; 32]) -> Vec<u8> {
    let mut c = client();
    c.connect(Duration::ZERO, addr(0), Some(key)).unwrap();
    drain(&mut c, Duration::ZERO).remove(0).1
}

#[test]
fn spoofed_initials_get_retries_and_leave_no_lasting_state() {
    let (mut s, kp) = server(64, 100);
    let pool: Vec<Vec<u8>> = (0..8).map(|_| initial(&kp.public)).collect();
    let mut received = 0u64;
    for i in 0..2000u32 {
        let now = MS * (i / 10); // 10 000 per second for 0.2 s
                                 // Replayed valid Initials, each with a fresh destination id (it is
                                 // cleartext), so each looks like a new client.
        let mut d = pool[i as usize % pool.len()].clone();
        d[5..9].copy_from_slice(&i.to_be_bytes());
        let d = &d;
        s.handle(now, addr(i + 1), d);
        received += d.len() as u64;
        let sent: u64 = drain(&mut s, now).iter().map(|(_, b)| b.len() as u64).sum();
        assert!(sent <= 3 * received);
    }
    let st = s.stats();
    assert!(st.accepted <= 100, "{st:?}");
    assert!(st.retries_sent >= 1900, "{st:?}");
    assert!(s.len() <= 100, "state bounded: {} connections", s.len());
    // A real client, during the flood, gets a Retry, comes back and is in.
    let mut c = client();
    let h = c.connect(MS * 200, addr(9999), Some(&kp.public)).unwrap();
    let mut now = MS * 200;
    for _ in 0..20 {
        for (_, d) in drain(&mut c, now) {
            s.handle(now, addr(9999), &d);
        }
        for (_, d) in drain(&mut s, now) {
            c.handle(now, addr(0), &d);
        }
        now += MS;
    }
    assert!(c.connection(h).unwrap().is_established());
    assert_eq!(s.stats().tokens_accepted, 1);
    // The spoofed connections never prove their address and expire.
    let later = now + Duration::from_secs(11);
    s.handle_timeout(later);
    let mut handles = Vec::new();
    s.take_touched(&mut handles);
    for h in handles {
        if s.connection_ref(h).is_some_and(|c| c.is_closed()) {
            s.remove(h);
        }
    }
    let st = s.stats();
    assert_eq!(
        st.unproven_expired,
        st.accepted - 1,
        "every spoofed one: {st:?}"
    );
    assert_eq!(s.len(), 1, "only the real client is left");
}

#[test]
fn an_unproven_address_gets_at_most_three_times_what_it_sent() {
    for pattern_known in [true, false] {
        let (mut s, kp) = server(64, 1000);
        let mut c = client();
        let key = pattern_known.then_some(&kp.public);
        c.connect(Duration::ZERO, addr(0), key).unwrap();
        let first = drain(&mut c, Duration::ZERO).remove(0).1;
        let (mut received, mut sent) = (0u64, 0u64);
        // The client's Initial, repeated; nothing else ever comes back
        // from that (spoofed) address.
        for i in 0..30u32 {
            let now = MS * 300 * i;
            s.handle(now, addr(7), &first);
            received += first.len() as u64;
            s.handle_timeout(now);
            sent += drain(&mut s, now)
                .iter()
                .map(|(_, b)| b.len() as u64)
                .sum::<u64>();
            assert!(sent <= 3 * received, "{sent} > 3 × {received}");
        }
        assert!(sent > 0, "the server did answer");
    }
}

#[test]
fn garbage_and_unknown_connections_are_counted_not_answered() {
    let (mut s, _) = server(64, 1000);
    let mut rng = StdRng::seed_from_u64(5);
    for i in 0..1000u32 {
        let len = rng.random_range(1..1400);
        let mut d: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        if i % 2 == 0 {
            // A well-formed short header for a connection that is not there.
            d.resize(d.len().max(40), 0);
            d[0] = 0x40;
        } else if d[0] & 0xc0 == 0x40 {
            d[0] = 0x07;
        }
        s.handle(MS, addr(i), &d);
    }
    let st = s.stats();
    assert_eq!(
        st.malformed + st.unknown_connection + st.version_mismatches,
        1000,
        "{st:?}"
    );
    assert!(st.unknown_connection >= 500);
    // Random long headers name random versions; the long ones (as an
    // Initial is) get the versions we speak, in fewer bytes than came.
    for (_, d) in drain(&mut s, MS) {
        assert!(matches!(
            wire::packet::parse(&d),
            Ok(Packet::Version { .. })
        ));
        assert!(d.len() < wire::MIN_INITIAL_SIZE);
    }
    assert!(s.is_empty());
}

/// Runs `c` and `s` against each other for `rounds` of 1 ms.
fn exchange(c: &mut Endpoint, s: &mut Endpoint, now: &mut Duration, rounds: u32) {
    for _ in 0..rounds {
        for (_, d) in drain(c, *now) {
            s.handle(*now, addr(1), &d);
        }
        answer_and_tick(c, s, now);
    }
}

/// The second half of a round of [`exchange`]: the server's datagrams to
/// the client, then a millisecond on both clocks.
fn answer_and_tick(c: &mut Endpoint, s: &mut Endpoint, now: &mut Duration) {
    for (_, d) in drain(s, *now) {
        c.handle(*now, addr(0), &d);
    }
    *now += MS;
    c.handle_timeout(*now);
    s.handle_timeout(*now);
}

/// A default (Tide) server and a client of `code` (seeds 1 and 2),
/// connected and `rounds` milliseconds into their exchange.
fn tide_pair(code: CodeKind, rounds: u32) -> (Endpoint, Endpoint, ConnectionHandle, Duration) {
    let kp = Keypair::generate();
    let mut scfg = Config::for_mode(kp.clone(), crate::Mode::Tide);
    scfg.seed = Some(1);
    let mut s = Endpoint::new(scfg, true).unwrap();
    let mut ccfg = Config::for_mode(Keypair::generate(), crate::Mode::Tide);
    ccfg.seed = Some(2);
    ccfg.coding.code = code;
    let mut c = Endpoint::new(ccfg, false).unwrap();
    let mut now = Duration::ZERO;
    let ch = c.connect(now, addr(0), Some(&kp.public)).unwrap();
    exchange(&mut c, &mut s, &mut now, rounds);
    (c, s, ch, now)
}

#[test]
fn nothing_but_the_handshake_is_read_before_the_application_authorizes() {
    let kp = Keypair::generate();
    let mut cfg = Config::new(kp.clone());
    cfg.seed = Some(1);
    cfg.authorize_before_data = true;
    let mut s = Endpoint::new(cfg, true).unwrap();
    let mut c = client();
    let mut now = Duration::ZERO;
    let ch = c.connect(now, addr(0), Some(&kp.public)).unwrap();
    exchange(&mut c, &mut s, &mut now, 5);
    let sh = s.accept().expect("handshake accepted");
    let cc = c.connection(ch).unwrap();
    let id = cc.open_stream().unwrap();
    cc.write(id, &[7u8; 50_000]).unwrap();
    cc.finish(id).unwrap();
    exchange(&mut c, &mut s, &mut now, 50);
    let sc = s.connection(sh).unwrap();
    assert!(sc.awaiting_authorization());
    assert_eq!(
        sc.accept_stream(),
        None,
        "no stream read before authorization"
    );
    assert!(sc.stats().packets_received == 0, "{:?}", sc.stats());
    let held = sc.memory_in_use();
    assert!(held <= HELD_PACKETS * 1500, "held {held} bytes");
    // The application says yes: the held packets are read, and the
    // client's retransmissions bring the rest.
    s.authorize(sh, now);
    exchange(&mut c, &mut s, &mut now, 3000);
    let sc = s.connection(sh).unwrap();
    let id = sc.accept_stream().expect("the stream, once authorized");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = sc.read(id, &mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got.len(), 50_000);
}

#[test]
fn xx_is_refused_before_its_dh_when_not_accepted() {
    let kp = Keypair::generate();
    let mut cfg = Config::new(kp);
    cfg.seed = Some(1);
    cfg.accept_xx = false;
    let mut s = Endpoint::new(cfg, true).unwrap();
    let mut c = client();
    let mut now = Duration::ZERO;
    c.connect(now, addr(0), None).unwrap();
    exchange(&mut c, &mut s, &mut now, 5);
    assert_eq!(s.accept(), None);
    assert_eq!(s.stats().handshake_failures, 1);
}

#[test]
fn a_code_the_server_does_not_take_is_refused() {
    let kp = Keypair::generate();
    let mut cfg = Config::new(kp.clone());
    cfg.seed = Some(1);
    cfg.accept_codes = vec![CodeKind::Rlnc];
    let mut s = Endpoint::new(cfg, true).unwrap();
    // Config::new proposes RaptorQ.
    let mut c = client();
    let mut now = Duration::ZERO;
    let ch = c.connect(now, addr(0), Some(&kp.public)).unwrap();
    exchange(&mut c, &mut s, &mut now, 20);
    let reason = c.connection(ch).and_then(|c| c.close_reason().cloned());
    assert!(
        matches!(&reason, Some(CloseReason::Peer { code, .. }) if *code == crate::connection::CODE_REFUSED_CODE),
        "{reason:?}"
    );
}

/// Runs a transfer of `bytes` from the server to the client, with the
/// client's datagrams arriving from `from(round)`; datagrams to any other
/// address than the client's current one go to `elsewhere`.
struct Rebinding {
    c: Endpoint,
    s: Endpoint,
    now: Duration,
    ch: ConnectionHandle,
    sh: ConnectionHandle,
    stream: StreamId,
    /// Bytes the server has still to write.
    unwritten: usize,
    received: usize,
}

impl Rebinding {
    fn start(bytes: usize) -> Rebinding {
        let (mut s, kp) = server(64, 100);
        let mut c = client();
        let mut now = Duration::ZERO;
        let ch = c.connect(now, addr(0), Some(&kp.public)).unwrap();
        exchange(&mut c, &mut s, &mut now, 5);
        let sh = s.accept().expect("handshake accepted");
        let sc = s.connection(sh).unwrap();
        let stream = sc.open_stream().unwrap();
        Rebinding {
            c,
            s,
            now,
            ch,
            sh,
            stream,
            unwritten: bytes,
            received: 0,
        }
    }

    /// One millisecond: the client's datagrams arrive from `from`; the
    /// server's reach the client only if sent to `reaches`. Returns the
    /// bytes the server sent to `watch` and received from it.
    fn round(&mut self, from: SocketAddr, reaches: SocketAddr, watch: SocketAddr) -> (u64, u64) {
        let (mut sent, mut got) = (0, 0);
        if self.unwritten > 0 {
            let sc = self.s.connection(self.sh).unwrap();
            let chunk = vec![9u8; self.unwritten.min(64 * 1024)];
            self.unwritten -= sc.write(self.stream, &chunk).unwrap_or(0);
            if self.unwritten == 0 {
                sc.finish(self.stream).unwrap();
            }
        }
        for (_, d) in drain(&mut self.c, self.now) {
            if from == watch {
                got += d.len() as u64;
            }
            self.s.handle(self.now, from, &d);
        }
        for (to, d) in drain(&mut self.s, self.now) {
            if to == watch {
                sent += d.len() as u64;
            }
            if to == reaches {
                self.c.handle(self.now, addr(0), &d);
            }
        }
        self.now += MS;
        self.c.handle_timeout(self.now);
        self.s.handle_timeout(self.now);
        let cc = self.c.connection(self.ch).unwrap();
        let id = cc.accept_stream().unwrap_or(self.stream);
        let mut buf = [0u8; 4096];
        while let Ok(n) = cc.read(id, &mut buf) {
            if n == 0 {
                break;
            }
            self.received += n;
        }
        (sent, got)
    }
}

#[test]
fn a_rebound_client_address_is_validated_before_it_gets_more_than_three_times() {
    let mut t = Rebinding::start(3_000_000);
    for _ in 0..100 {
        t.round(addr(1), addr(1), addr(1));
    }
    assert!(t.received > 0, "data flows before the rebinding");
    // An on-path attacker sends a copy of the client's next datagram from
    // a victim's address, ahead of the original. What the server sends to
    // the victim stays within 3× what came from it.
    let victim = addr(9);
    let (mut to_victim, mut from_victim) = (0, 0);
    let mut copied = false;
    for _ in 0..300 {
        let from = if copied { addr(1) } else { victim };
        let (sent, got) = t.round(from, addr(1), victim);
        copied |= got > 0;
        to_victim += sent;
        from_victim += got;
    }
    assert!(from_victim > 0, "the copy arrived");
    assert!(
        to_victim <= 3 * from_victim,
        "{to_victim} bytes to an address that sent {from_victim}"
    );
    // The client's own NAT rebinds: its new address answers the challenge
    // and the transfer goes on to the end.
    let rebound = addr(7);
    for _ in 0..20_000 {
        t.round(rebound, rebound, rebound);
        if t.received == 3_000_000 {
            break;
        }
    }
    assert_eq!(t.received, 3_000_000);
    assert_eq!(t.s.connection(t.sh).unwrap().remote_address(), rebound);
}

#[test]
fn an_address_closed_for_its_own_fault_gets_a_small_handshake_rate() {
    let (mut s, kp) = server(64, 500);
    let mut now = Duration::ZERO;
    let mut c = client();
    c.connect(now, addr(0), Some(&kp.public)).unwrap();
    exchange(&mut c, &mut s, &mut now, 5);
    let sh = s.accept().expect("accepted");
    // The application refuses the key (as convoy-net's authorizer does).
    s.connection(sh).unwrap().close(0x4e4f, "refused");
    exchange(&mut c, &mut s, &mut now, 5);
    assert!(matches!(
        s.connection(sh).unwrap().close_reason(),
        Some(CloseReason::Local { code: 0x4e4f })
    ));
    s.remove(sh);
    // The same address comes straight back: dropped unread, before any
    // key exchange.
    let mut again = client();
    again.connect(now, addr(0), Some(&kp.public)).unwrap();
    for (_, d) in drain(&mut again, now) {
        s.handle(now, addr(1), &d);
    }
    assert_eq!(s.accept(), None);
    assert_eq!(s.stats().offender_drops, 1);
    // Another address is not held...
    let mut other = client();
    other.connect(now, addr(0), Some(&kp.public)).unwrap();
    for (_, d) in drain(&mut other, now) {
        s.handle(now, addr(2), &d);
    }
    assert!(s.accept().is_some(), "another address gets in");
    // ...and the held one gets in at its rate (16 a second by default):
    // an Initial 100 ms on is read.
    now += 100 * MS;
    // (Another seed: the same seed would pick `other`'s connection ids.)
    let mut later = {
        let mut cfg = Config::new(Keypair::generate());
        cfg.seed = Some(3);
        Endpoint::new(cfg, false).unwrap()
    };
    later.connect(now, addr(0), Some(&kp.public)).unwrap();
    for (_, d) in drain(&mut later, now) {
        s.handle(now, addr(1), &d);
    }
    assert!(s.accept().is_some(), "the held address, at its rate");
    // A clean close (code 0) holds nobody.
    let (mut s2, kp2) = server(64, 500);
    let mut now2 = Duration::ZERO;
    let mut c2 = client();
    c2.connect(now2, addr(0), Some(&kp2.public)).unwrap();
    exchange(&mut c2, &mut s2, &mut now2, 5);
    let h2 = s2.accept().unwrap();
    s2.connection(h2).unwrap().close(0, "done");
    exchange(&mut c2, &mut s2, &mut now2, 5);
    s2.remove(h2);
    let mut c3 = client();
    c3.connect(now2, addr(0), Some(&kp2.public)).unwrap();
    for (_, d) in drain(&mut c3, now2) {
        s2.handle(now2, addr(1), &d);
    }
    assert!(s2.accept().is_some());
    assert_eq!(s2.stats().offender_drops, 0);
}

/// What a version 1 client sends first: a real Initial with version 1 in
/// its long header (the layout of a long header has not changed).
fn v1_initial(key: &[u8; 32]) -> Vec<u8> {
    let mut d = initial(key);
    d[1..5].copy_from_slice(&0x434e_5901u32.to_be_bytes());
    d
}

#[test]
fn an_old_wire_version_is_answered_with_ours_not_silence() {
    let (mut s, kp) = server(64, 1000);
    let old = v1_initial(&kp.public);
    s.handle(MS, addr(7), &old);
    let st = s.stats();
    assert_eq!((st.version_mismatches, st.accepted), (1, 0), "{st:?}");
    let sent = drain(&mut s, MS);
    assert_eq!(sent.len(), 1);
    let (to, d) = &sent[0];
    assert_eq!(*to, addr(7));
    let Ok(Packet::Version {
        dcid,
        scid,
        versions,
    }) = wire::packet::parse(d)
    else {
        panic!("not a Version packet: {d:?}")
    };
    // Addressed to the client's own id, from the id it chose for us.
    assert_eq!(dcid.0, old[13..21]);
    assert_eq!(scid.0, old[5..13]);
    assert_eq!(
        wire::packet::listed_versions(versions).collect::<Vec<_>>(),
        [wire::VERSION]
    );
    // Not worth an answer when shorter than an Initial: no amplification.
    s.handle(MS, addr(8), &old[..200]);
    assert!(drain(&mut s, MS).is_empty());
    assert!(s.is_empty());
}

#[test]
fn a_client_told_another_version_closes_at_once_with_a_one_line_reason() {
    let (_, kp) = server(64, 1000);
    let mut c = client();
    let h = c
        .connect(Duration::ZERO, addr(0), Some(&kp.public))
        .unwrap();
    let initial = drain(&mut c, Duration::ZERO).remove(0).1;
    let mut reply = vec![0u8; 64];
    let client_id = ConnectionId(initial[13..21].try_into().unwrap());
    let server_id = ConnectionId(initial[5..13].try_into().unwrap());
    let n = wire::packet::write_version(&mut reply, client_id, server_id, &[0x434e_5901]).unwrap();
    c.handle(MS, addr(1), &reply[..n]);
    let reason = c.connection_ref(h).unwrap().close_reason().cloned();
    assert_eq!(
        reason,
        Some(CloseReason::Version {
            ours: wire::VERSION,
            peer: vec![0x434e_5901]
        })
    );
    let line = reason.unwrap().to_string();
    assert!(!line.contains('\n'));
    assert!(
        line.contains("0x434e5901") && line.contains(&format!("{:#x}", wire::VERSION)),
        "{line}"
    );
}

#[test]
fn a_version_packet_listing_ours_or_arriving_late_is_ignored() {
    let (mut s, kp) = server(64, 1000);
    let mut c = client();
    let h = c
        .connect(Duration::ZERO, addr(0), Some(&kp.public))
        .unwrap();
    let client_id = c.connection_ref(h).unwrap().local_cid();
    let mut reply = vec![0u8; 64];
    let ours =
        wire::packet::write_version(&mut reply, client_id, client_id, &[wire::VERSION]).unwrap();
    c.handle(MS, addr(1), &reply[..ours]);
    assert!(c.connection_ref(h).unwrap().close_reason().is_none());
    let mut now = Duration::ZERO;
    exchange(&mut c, &mut s, &mut now, 20);
    assert!(c.connection_ref(h).unwrap().is_established());
    // Once the handshake is done, a Version packet could only be forged.
    let n = wire::packet::write_version(&mut reply, client_id, client_id, &[1]).unwrap();
    c.handle(now, addr(1), &reply[..n]);
    assert!(c.connection_ref(h).unwrap().close_reason().is_none());
}

/// The bytes a full data packet spends around its symbol, measured on the
/// datagrams a default (Tide) client sends for a 3 MB upload, and taken
/// apart: `cargo test --release -p convoy-proto bytes_per_full_packet --
/// --nocapture` prints the breakdown (docs/PROTOCOL.md, "Bytes per
/// packet").
#[test]
fn bytes_per_full_packet() {
    let (mut c, mut s, ch, mut now) = tide_pair(CodeKind::Rlnc, 5);
    let symbol = usize::from(
        Config::for_mode(Keypair::generate(), crate::Mode::Tide)
            .coding
            .symbol_size,
    );
    let cc = c.connection(ch).unwrap();
    let id = cc.open_stream().unwrap();
    let data = vec![7u8; 3_000_000];
    let mut written = 0;
    // Around the symbol: the short header, the SYMBOL frame's header (and
    // any feedback riding along), the tag. Counted per datagram.
    let mut around = std::collections::BTreeMap::<usize, (u64, usize)>::new();
    for _ in 0..20_000 {
        let cc = c.connection(ch).unwrap();
        written += cc.write(id, &data[written..]).unwrap_or(0);
        for (_, d) in drain(&mut c, now) {
            if d.len() > symbol {
                let Ok(Packet::Protected(p)) = wire::packet::parse(&d) else {
                    panic!("a data packet that is not protected")
                };
                let e = around.entry(d.len() - symbol).or_insert((0, 0));
                e.0 += 1;
                e.1 = p.header.len();
            }
            s.handle(now, addr(1), &d);
        }
        answer_and_tick(&mut c, &mut s, &mut now);
        if written == data.len() && c.connection(ch).unwrap().stats().sender.source_symbols > 2000 {
            break;
        }
    }
    let packets: u64 = around.values().map(|v| v.0).sum();
    assert!(packets > 2000, "{packets} data packets");
    let (&most, &(count, header)) = around.iter().max_by_key(|(_, v)| v.0).unwrap();
    let frame = most - header - wire::TAG_LEN;
    eprintln!(
        "{packets} data packets of a {symbol}-byte symbol; the most common ({count}): \
         IP 20 + UDP 8 + short header {header} + SYMBOL frame header {frame} + tag {} \
         = {} bytes per full packet",
        wire::TAG_LEN,
        28 + most
    );
    eprintln!("bytes around the symbol (without IP and UDP) -> packets: {around:?}");
    // Version 1 took 68 here (a 14-byte header, 10 bytes of SYMBOL header),
    // version 2 61 (an 8-byte dcid, K in every symbol). Without delay the
    // blocks are large: symbol ids above 63 take a SOURCE frame (type,
    // block id, a 2-byte id); at 20 Mbit/s nearly all are below 64 and
    // ride in the type byte (docs/PROTOCOL.md).
    assert_eq!(header, 9, "type, 6 bytes of dcid, 2 bytes of packet number");
    assert!(frame <= 4, "type, block id, symbol id: {frame}");
    assert!(28 + most <= 57, "{} bytes", 28 + most);
}

/// A server told which of its addresses each datagram was sent to names
/// it as the source of every reply (handshake, Retry-free data and
/// feedback); and to an IPv6 peer every datagram is 20 bytes smaller
/// than to an IPv4 one, so it fits the same MTU.
#[test]
fn replies_leave_from_the_dialled_address_and_ipv6_datagrams_fit_its_header() {
    let (mut s, kp) = server(64, 1000);
    let v4 = Config::new(Keypair::generate()).max_datagram;
    let v6 = Config::new(Keypair::generate()).for_ipv6().max_datagram;
    assert_eq!(v6 + crate::config::IPV6_EXTRA_HEADER, v4);
    let server_addr: SocketAddr = "[fd00:77::8000]:4433".parse().unwrap();
    let client_addr: SocketAddr = "[fd00:77::10]:5000".parse().unwrap();
    let dialled = Some(server_addr.ip());
    // Symbols that fill an IPv4 datagram, as every command's mode has.
    let mut ccfg = Config::for_mode(Keypair::generate(), crate::Mode::Tide);
    ccfg.seed = Some(2);
    let mut c = Endpoint::new(ccfg, false).unwrap();
    let ch = c
        .connect(Duration::ZERO, server_addr, Some(&kp.public))
        .unwrap();
    let mut now = Duration::ZERO;
    let (mut replies, mut largest) = (0, 0);
    let mut buf = vec![0u8; 2048];
    for round in 0..400 {
        if round == 5 {
            let cc = c.connection(ch).unwrap();
            let id = cc.open_stream().unwrap();
            cc.write(id, &[9u8; 200_000]).unwrap();
        }
        while let Some(t) = c.poll_transmit(now, &mut buf) {
            assert_eq!(t.local, None, "a client names no source");
            largest = largest.max(t.len);
            s.handle_to(now, client_addr, dialled, &buf[..t.len]);
        }
        while let Some(t) = s.poll_transmit(now, &mut buf) {
            assert_eq!(t.local, dialled, "every reply from the dialled address");
            largest = largest.max(t.len);
            replies += 1;
            c.handle(now, server_addr, &buf[..t.len]);
        }
        now += MS;
        c.handle_timeout(now);
        s.handle_timeout(now);
    }
    assert!(replies > 10, "{replies} replies");
    assert!(
        largest <= v6,
        "{largest} bytes: datagrams to IPv6 are at most {v6}"
    );
    assert!(
        largest + 30 > v6,
        "{largest} bytes: full symbols still fill them"
    );
    assert!(c.connection(ch).unwrap().stats().bytes_sent > 200_000);
}

/// A message shorter than a symbol goes as a block of one symbol its own
/// length: a 100-byte write leaves in a datagram of about 150 bytes, not
/// padded to the full symbol, and arrives whole even when that packet is
/// lost (its repair is as short).
#[test]
fn a_small_message_travels_in_a_small_packet_and_its_repair_too() {
    for code in [CodeKind::Rlnc, CodeKind::RaptorQ] {
        small_message_over(code);
    }
}

fn small_message_over(code: CodeKind) {
    let (mut c, mut s, ch, mut now) = tide_pair(code, 20);
    let sh = s.accept().expect("handshake accepted");
    let cc = c.connection(ch).unwrap();
    let id = cc.open_stream().unwrap();
    cc.write(id, &[5u8; 100]).unwrap();
    cc.finish(id).unwrap();
    let (mut dropped, mut largest) = (false, 0);
    for _ in 0..2000 {
        for (_, d) in drain(&mut c, now) {
            largest = largest.max(d.len());
            if d.len() > 100 && !dropped {
                dropped = true; // the message's first copy dies on the way
                continue;
            }
            s.handle(now, addr(1), &d);
        }
        answer_and_tick(&mut c, &mut s, &mut now);
    }
    assert!(dropped);
    assert!(largest < 200, "a datagram of {largest} bytes for 100");
    let sc = s.connection(sh).unwrap();
    let id = sc.accept_stream().expect("the stream arrived");
    let mut buf = [0u8; 4096];
    let n = sc.read(id, &mut buf).unwrap();
    assert_eq!(&buf[..n], &[5u8; 100][..]);
}

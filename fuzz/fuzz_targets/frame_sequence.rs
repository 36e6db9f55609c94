//! Sequences of frames through a full connection: a client and a server
//! endpoint shake hands in virtual time, then each piece of the input
//! (split at each 0xFF byte) is sealed as the body of one protected packet from
//! the client (`Connection::hostile_packet`) and handed to the server,
//! which answers. The server must never panic, and a connection still
//! open must hold no more than its memory budget after every packet. The
//! handshake runs once; each run starts from a copy of the established
//! pair (convoy-proto's `fuzzing` feature), so runs are independent.
#![no_main]

use std::net::SocketAddr;
use std::time::Duration;

use convoy_proto::{CodeKind, Config, ConnectionHandle, Endpoint, Keypair};
use libfuzzer_sys::fuzz_target;

fn exchange(c: &mut Endpoint, s: &mut Endpoint, now: Duration, buf: &mut [u8]) {
    let (ca, sa): (SocketAddr, SocketAddr) = (
        "10.0.0.1:1000".parse().unwrap(),
        "10.0.0.2:4433".parse().unwrap(),
    );
    for _ in 0..4 {
        while let Some(t) = c.poll_transmit(now, buf) {
            s.handle(now, ca, &buf[..t.len]);
        }
        while let Some(t) = s.poll_transmit(now, buf) {
            c.handle(now, sa, &buf[..t.len]);
        }
    }
}

/// An established pair: the client and server endpoints, the client's
/// handle and the server's.
#[derive(Clone)]
struct Pair {
    c: Endpoint,
    s: Endpoint,
    h: ConnectionHandle,
    sh: ConnectionHandle,
    budget: usize,
}

/// Shakes hands once per process. Every run starts from a copy of the
/// same established pair: the handshake's key exchanges took nearly all of
/// a run's time. The keys differ from process to process (OS randomness),
/// but the frames the input chooses, not the keys, drive the server.
fn established() -> Pair {
    let server_kp = Keypair::generate();
    let mut scfg = Config::new(server_kp.clone());
    scfg.seed = Some(1);
    // Small budgets, so the fuzzer can reach them.
    scfg.max_connection_memory = 1 << 20;
    scfg.max_decoder_memory = 256 << 10;
    let budget = scfg.max_connection_memory;
    let mut s = Endpoint::new(scfg, true).unwrap();
    let mut ccfg = Config::new(Keypair::generate()).with_code(CodeKind::Rlnc);
    ccfg.seed = Some(2);
    let mut c = Endpoint::new(ccfg, false).unwrap();
    let server: SocketAddr = "10.0.0.2:4433".parse().unwrap();
    let mut buf = vec![0u8; 2048];
    let h = c
        .connect(Duration::ZERO, server, Some(&server_kp.public))
        .unwrap();
    exchange(&mut c, &mut s, Duration::ZERO, &mut buf);
    let sh = s.accept().expect("the handshake completes");
    Pair {
        c,
        s,
        h,
        sh,
        budget,
    }
}

thread_local! {
    static PAIR: Pair = established();
}

fuzz_target!(|data: &[u8]| {
    let Pair {
        mut c,
        mut s,
        h,
        sh,
        budget,
    } = PAIR.with(Pair::clone);
    let mut now = Duration::ZERO;
    let mut buf = vec![0u8; 2048];
    for body in data
        .split(|&b| b == 0xff)
        .filter(|b| !b.is_empty())
        .take(64)
    {
        now += Duration::from_millis(1);
        let Some(conn) = c.connection(h) else { return };
        let Some(t) = conn.hostile_packet(now, body, &mut buf) else {
            continue;
        };
        let packet = buf[..t.len].to_vec();
        s.handle(now, "10.0.0.1:1000".parse().unwrap(), &packet);
        if let Some(sc) = s.connection(sh) {
            let mut read = [0u8; 4096];
            while let Some(id) = sc.accept_stream() {
                let _ = sc.read(id, &mut read);
            }
            // Over the budget, it is closed at once.
            assert!(
                sc.is_closed() || sc.memory_in_use() <= budget,
                "{} > {budget}",
                sc.memory_in_use()
            );
        }
        s.handle_timeout(now);
        exchange(&mut c, &mut s, now, &mut buf);
    }
});

//! A vehicle whose address keeps changing (a handover, a NAT rebinding)
//! while it uploads to a server with two workers: every packet must reach
//! the worker that holds its connection. The kernel's default SO_REUSEPORT
//! choice (a hash of the source address) would send about half of the
//! rebinds to the other worker; the connection-id steering program must
//! send none there.

mod support;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use convoy_net::{Client, ClientOptions, Server, ServerOptions};
use convoy_proto::Keypair;
use support::{assert_identical, make_file, TempDir};

/// Forwards client datagrams to the server from a new source port every
/// `every`, and the server's replies back to the client.
fn rebinding_relay(
    server: SocketAddr,
    every: Duration,
    stop: Arc<AtomicBool>,
    rebinds: Arc<AtomicU64>,
) -> SocketAddr {
    let front = UdpSocket::bind("127.0.0.1:0").unwrap();
    front
        .set_read_timeout(Some(Duration::from_millis(1)))
        .unwrap();
    let addr = front.local_addr().unwrap();
    std::thread::spawn(move || {
        let new_back = || {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.set_nonblocking(true).unwrap();
            s
        };
        let mut back = new_back();
        let mut since = Instant::now();
        let mut client = None;
        let mut buf = vec![0u8; 65_536];
        while !stop.load(Ordering::Relaxed) {
            if since.elapsed() >= every {
                back = new_back();
                since = Instant::now();
                rebinds.fetch_add(1, Ordering::Relaxed);
            }
            if let Ok((n, from)) = front.recv_from(&mut buf) {
                client = Some(from);
                let _ = back.send_to(&buf[..n], server);
            }
            while let Ok((n, _)) = back.recv_from(&mut buf) {
                if let Some(c) = client {
                    let _ = front.send_to(&buf[..n], c);
                }
            }
        }
    });
    addr
}

#[test]
fn rebinding_every_200ms_never_reaches_the_wrong_worker() {
    let store = TempDir::new("handover");
    let src = TempDir::new("handover-src");
    let file = src.path().join("drive.log");
    make_file(&file, 6_000_000, 7);
    let keypair = Keypair::generate();
    let key = keypair.public;
    let mut opts = ServerOptions::new("127.0.0.1:0".parse().unwrap(), keypair);
    opts.open = true;
    opts.dir = Some(store.path().to_owned());
    opts.workers = 2;
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let mut server = Server::bind(opts).unwrap();
        tx.send((server.local_addr().unwrap(), server.stop_flag()))
            .unwrap();
        server.run().unwrap();
        server.stats()
    });
    let (addr, stop_server) = rx.recv().unwrap();
    let stop_relay = Arc::new(AtomicBool::new(false));
    let rebinds = Arc::new(AtomicU64::new(0));
    let relay = rebinding_relay(
        addr,
        Duration::from_millis(200),
        stop_relay.clone(),
        rebinds.clone(),
    );
    let mut o = ClientOptions::new(relay, key);
    o.mode = convoy_proto::Mode::RlncBbr;
    // Slow enough to see many rebinds: the relay is one thread.
    let mut client = Client::connect(o).unwrap();
    // Upload again until the relay has rebound a few times: a fast machine
    // moves 6 MB in less than one 200 ms period.
    let mut report = client.upload(&file, None, None).unwrap();
    let mut copies = Vec::new();
    for i in 1..=20 {
        if rebinds.load(Ordering::Relaxed) >= 3 {
            break;
        }
        let name = format!("drive-{i}.log");
        report = client.upload(&file, Some(&name), None).unwrap();
        copies.push(name);
    }
    client.close();
    stop_relay.store(true, Ordering::Relaxed);
    stop_server.store(true, Ordering::Relaxed);
    let stats = server.join().unwrap();
    assert_eq!(report.bytes, 6_000_000);
    assert_identical(&file, &store.path().join("drive.log"));
    for name in &copies {
        assert_identical(&file, &store.path().join(name));
    }
    let seen = rebinds.load(Ordering::Relaxed);
    assert!(seen >= 3, "only {seen} rebinds in 21 uploads");
    assert_eq!(stats.workers, 2);
    assert_eq!(
        stats.endpoint.unknown_connection, 0,
        "{} datagrams reached a worker without their connection over {seen} rebinds",
        stats.endpoint.unknown_connection
    );
}

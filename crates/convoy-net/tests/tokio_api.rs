//! The tokio API on loopback: an in-process `convoy_net::tokio::Server` on
//! 127.0.0.1 with a port the system picks, and clients in the same
//! runtime. Several tests use a current-thread runtime on purpose: if any
//! call blocked its thread, the server's and clients' futures could not
//! all make progress and the test would time out.

mod support;

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use convoy_net::tokio::{Client, Server};
use convoy_net::{ClientOptions, NetError, PerfAmount, ServerEvent, ServerOptions};
use convoy_proto::{Keypair, Mode};
use support::{assert_identical, make_file, partial_size, Relay, TempDir};

/// Every await on the network gets this long before the test fails
/// instead of hanging.
const LIMIT: Duration = Duration::from_secs(60);

/// A server with a key pair and an empty store in a temporary directory.
struct Site {
    server: Server,
    key: [u8; 32],
    store: PathBuf,
    dir: TempDir,
}

impl Site {
    async fn new(tag: &str) -> Site {
        let dir = TempDir::new(tag);
        let store = dir.path().join("store");
        std::fs::create_dir(&store).unwrap();
        let keypair = Keypair::generate();
        let key = keypair.public;
        let mut opts = ServerOptions::new("127.0.0.1:0".parse().unwrap(), keypair);
        opts.open = true;
        opts.dir = Some(store.clone());
        let server = Server::bind(opts).await.unwrap();
        Site {
            server,
            key,
            store,
            dir,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    fn client_opts(&self, via: SocketAddr) -> ClientOptions {
        ClientOptions::new(via, self.key)
    }

    async fn connect(&self) -> Client {
        within(Client::connect(self.client_opts(self.addr())))
            .await
            .unwrap()
    }

    fn file(&self, name: &str, size: usize, seed: u64) -> PathBuf {
        let p = self.dir.path().join(name);
        make_file(&p, size, seed);
        p
    }

    /// Stops the server and waits for its thread, so the directory is not
    /// removed under it.
    async fn finish(self) {
        self.server.stop();
        within(self.server.run()).await.unwrap();
    }
}

async fn within<F: IntoFuture>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f.into_future())
        .await
        .expect("timed out")
}

/// Polls `cond` every 5 ms until it holds; panics after `limit`.
async fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn upload_then_download_is_byte_identical() {
    let site = Site::new("roundtrip").await;
    let mut events = site.server.events();
    let src = site.file("drive.log", 3_000_000, 7);
    let client = site.connect().await;

    let upload = client.upload(&src);
    let progress = upload.progress();
    let up = within(upload).await.unwrap();
    assert_eq!(
        (up.name.as_str(), up.bytes, up.resumed_from),
        ("drive.log", 3_000_000, 0)
    );
    let last = progress.borrow().clone();
    assert_eq!((last.done, last.total), (3_000_000, 3_000_000));
    assert_identical(&src, &site.store.join("drive.log"));

    let dest = site.dir.path().join("back.log");
    let download = client.download("drive.log", &dest);
    let progress = download.progress();
    let down = within(download).await.unwrap();
    assert_eq!((down.bytes, down.resumed_from), (3_000_000, 0));
    assert_eq!(down.blake3, up.blake3);
    assert_eq!(progress.borrow().done, 3_000_000);
    assert_identical(&src, &dest);
    assert!(!site.dir.path().join("back.log.convoy-part").exists());

    // The server said what it did, in order.
    let mut seen = Vec::new();
    while seen.len() < 3 {
        match within(events.recv()).await.unwrap() {
            ServerEvent::Connected { .. } => seen.push("connected"),
            ServerEvent::Stored { name, bytes, .. } => {
                assert_eq!((name.as_str(), bytes), ("drive.log", 3_000_000));
                seen.push("stored");
            }
            ServerEvent::Sent { name, bytes, .. } => {
                assert_eq!((name.as_str(), bytes), ("drive.log", 3_000_000));
                seen.push("sent");
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(seen, ["connected", "stored", "sent"]);
    within(client.close()).await;
    site.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_upload_resumes_where_it_stopped() {
    let site = Site::new("resume").await;
    // The relay goes silent after 1.5 MB of the client's datagrams, so
    // the first upload stalls midway however fast the machine is, and
    // the server can hold at most 1.5 MB of the file from it.
    let size = 4_000_000;
    let src = site.file("drive.log", size, 11);
    let relay = Relay::new(site.addr(), 1_500_000);
    let client = within(Client::connect(site.client_opts(relay.addr)))
        .await
        .unwrap();

    // Boxed already, so `drop` below really drops the transfer.
    let mut first = client.upload(&src).into_future();
    let stalled = wait_until("a stalled upload with a partial file", LIMIT, || {
        relay.is_silent() && partial_size(&site.store) > 0
    });
    tokio::select! {
        r = &mut first => panic!("the upload finished through a silent relay: {r:?}"),
        _ = stalled => {}
    }
    drop(first);

    // The same client connects again (the dropped upload closed its
    // connection) and resumes.
    relay.restore();
    let second = within(client.upload(&src)).await.unwrap();
    assert!(
        second.resumed_from > 0 && second.resumed_from <= 1_500_000,
        "resumed from {} of {size}",
        second.resumed_from
    );
    assert_eq!(second.bytes, size as u64);
    assert_identical(&src, &site.store.join("drive.log"));
    within(client.close()).await;
    drop(relay);
    site.finish().await;
}

#[tokio::test(flavor = "current_thread")]
async fn wrong_server_key_fails_within_the_handshake_timeout() {
    let site = Site::new("wrongkey").await;
    let mut opts = ClientOptions::new(site.addr(), [0x11; 32]);
    opts.handshake_timeout = Duration::from_secs(1);
    let started = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(10), Client::connect(opts))
        .await
        .expect("connect hung")
        .unwrap_err();
    assert!(matches!(err, NetError::Closed { .. }), "{err:?}");
    assert!(err.to_string().contains("key"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    site.finish().await;
}

#[tokio::test(flavor = "current_thread")]
async fn concurrent_uploads_from_one_runtime() {
    let site = Site::new("concurrent").await;
    let files: Vec<PathBuf> = (0..4)
        .map(|i| site.file(&format!("f{i}.bin"), 2_000_000 + i * 1000, 20 + i as u64))
        .collect();
    // Two connections, in both modes, at the same time.
    let a = site.connect().await;
    let mut opts = site.client_opts(site.addr());
    opts.mode = Mode::RlncBbr;
    let b = within(Client::connect(opts)).await.unwrap();
    let (ra, rb) = within(async { tokio::join!(a.upload(&files[0]), b.upload(&files[1])) }).await;
    assert_eq!(ra.unwrap().bytes, 2_000_000);
    assert_eq!(rb.unwrap().bytes, 2_001_000);
    // Two transfers on one connection queue, and a spawned one works too.
    let spawned = tokio::spawn(a.upload(&files[2]).into_future());
    let r3 = within(a.upload(&files[3])).await.unwrap();
    let r2 = within(spawned).await.unwrap().unwrap();
    assert_eq!((r2.bytes, r3.bytes), (2_002_000, 2_003_000));
    for f in &files {
        assert_identical(f, &site.store.join(f.file_name().unwrap()));
    }
    within(a.close()).await;
    within(b.close()).await;
    site.finish().await;
}

#[tokio::test(flavor = "current_thread")]
async fn perf_and_stats() {
    let site = Site::new("perf").await;
    let client = site.connect().await;
    let perf = client.perf(PerfAmount::Bytes(4_000_000));
    let report = within(perf).await.unwrap();
    assert_eq!(report.bytes, 4_000_000);
    let stats = within(client.stats()).await.unwrap();
    assert!(stats.packets_sent > 0);
    // A closed client says so instead of hanging.
    let other = client.clone();
    within(client.close()).await;
    let err = within(other.stats()).await.unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
    site.finish().await;
}

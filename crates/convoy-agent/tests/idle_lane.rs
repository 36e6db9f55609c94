//! A lane that idles for longer than the idle timeout keeps its
//! connection, and an upload confirmed says the server is in reach.
//!
//! Seen over `convoy emu` (TMobile LTE, `convoy_lab.fleet lte`): the
//! backlog lane also takes telemetry, so the live lane sometimes had
//! nothing to send for over 5 s while the link worked. Its blocking client
//! was not driven meanwhile, so both ends timed the connection out ("idle
//! timeout: nothing heard from the peer") and the lane's next segment
//! failed once; the failure set the agent offline, and since only a new
//! connection cleared that, telemetry was cut into 60 s segments while the
//! backlog lane's connection kept uploading.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convoy_agent::policy::Class;
use convoy_agent::spool::{Lane, Spool};
use convoy_net::{ClientOptions, Server, ServerEvent, ServerOptions};
use convoy_proto::Keypair;
use support::{queue_segment as queue, RunningLane};

const IDLE_TIMEOUT: Duration = Duration::from_millis(1500);

/// Connections made and closed at the server, as "connected"/"closed: why".
type Log = Arc<Mutex<Vec<String>>>;

/// A server on loopback, on its own thread: (address, key, stop flag).
fn server(store: &Path, log: Log) -> (SocketAddr, [u8; 32], Arc<AtomicBool>) {
    let keypair = Keypair::generate();
    let key = keypair.public;
    let mut opts = ServerOptions::new("127.0.0.1:0".parse().unwrap(), keypair);
    opts.open = true;
    opts.dir = Some(store.to_owned());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut server = Server::bind(opts).unwrap();
        server.on_event(move |e| match e {
            ServerEvent::Connected { .. } => log.lock().unwrap().push("connected".into()),
            ServerEvent::Closed { reason, .. } => {
                log.lock().unwrap().push(format!("closed: {reason}"))
            }
            _ => {}
        });
        tx.send((server.local_addr().unwrap(), server.stop_flag()))
            .unwrap();
        server.run()
    });
    let (addr, stop) = rx.recv().unwrap();
    (addr, key, stop)
}

/// Upload attempts of the segment `name`, once it is acknowledged.
fn attempts_when_acked(spool_dir: &Path, spool: &Mutex<Spool>, name: &str) -> i64 {
    let start = Instant::now();
    while !spool
        .lock()
        .unwrap()
        .acked_names()
        .unwrap()
        .iter()
        .any(|n| n == name)
    {
        assert!(start.elapsed() < Duration::from_secs(30), "{name} not sent");
        std::thread::sleep(Duration::from_millis(20));
    }
    let db = rusqlite::Connection::open(spool_dir.join("agent.db")).unwrap();
    db.query_row("SELECT attempts FROM items WHERE name = ?1", [name], |r| {
        r.get(0)
    })
    .unwrap()
}

#[test]
fn an_idle_lane_keeps_its_connection_and_an_upload_clears_offline() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let spool_dir = dir.path().join("spool");
    let log = Log::default();
    let (addr, key, server_stop) = server(&store, log.clone());
    let spool = Arc::new(Mutex::new(Spool::open(&spool_dir, 1 << 30).unwrap()));
    let mut client = ClientOptions::new(addr, key);
    client.idle_timeout = IDLE_TIMEOUT;
    client.handshake_timeout = Duration::from_secs(5);
    let lane = RunningLane::start(Lane::Live, client, spool.clone());
    let status = lane.status.clone();

    queue(&spool, "day/telemetry/0001.jsonl.zst", Class::Telemetry);
    status.wake_uploaders();
    let first = attempts_when_acked(&spool_dir, &spool, "day/telemetry/0001.jsonl.zst");
    assert_eq!(first, 1);
    // Nothing for the lane for three idle timeouts (the other lane took
    // the segments)...
    std::thread::sleep(3 * IDLE_TIMEOUT);
    // ...while the other lane's connection failed once.
    status.set_offline(true);
    queue(&spool, "day/telemetry/0002.jsonl.zst", Class::Telemetry);
    status.wake_uploaders();
    let second = attempts_when_acked(&spool_dir, &spool, "day/telemetry/0002.jsonl.zst");
    assert_eq!(
        second, 1,
        "the idle lane's connection died: its next upload failed first"
    );
    assert_eq!(
        *log.lock().unwrap(),
        ["connected"],
        "the lane's connection did not last"
    );
    assert!(
        !status.is_offline(),
        "an upload was confirmed, yet the agent still thinks it is offline"
    );

    lane.stop();
    server_stop.store(true, Ordering::Relaxed);
}

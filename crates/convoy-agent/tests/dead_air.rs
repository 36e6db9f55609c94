//! Out of coverage, a lane keeps trying without gaps: when the link comes
//! back, the next Initial is at most ~1.2 s away.
//!
//! Seen over `convoy emu` (`convoy_lab.fleet lte`, TMobile LTE): after
//! each timed-out handshake the lane paused for its backoff (up to 2 s),
//! so Initials went out 2.8 s apart at times and the first upload came
//! 1.9 s after a 30 s outage ended; over a short drain that alone cost
//! about a point of the link's capacity. An attempt that spent its whole
//! handshake timeout now counts as the wait.

mod support;

use std::net::UdpSocket;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convoy_agent::policy::Class;
use convoy_agent::spool::{Lane, Spool};
use convoy_net::ClientOptions;
use convoy_proto::Keypair;
use support::{queue_segment, RunningLane};

/// Short, so that the old backoff (250 ms, 500 ms, 1 s, 2 s after
/// successive failures) would show within the test: Initials at 0, 0.6
/// and 1.8 s, then the attempt ends at 1.9 s.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(1900);
const WATCH: Duration = Duration::from_secs(12);

#[test]
fn a_lane_into_dead_air_sends_an_initial_at_least_every_1_2_s() {
    // A bound socket that never answers: datagrams vanish as into a dead
    // radio link, with no ICMP "port unreachable" to fail fast on.
    let hole = UdpSocket::bind("127.0.0.1:0").unwrap();
    hole.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spool = Arc::new(Mutex::new(
        Spool::open(&dir.path().join("spool"), 1 << 30).unwrap(),
    ));
    queue_segment(&spool, "day/bulk/0001.log", Class::Bulk);
    let mut client = ClientOptions::new(hole.local_addr().unwrap(), Keypair::generate().public);
    client.handshake_timeout = HANDSHAKE_TIMEOUT;
    let lane = RunningLane::start(Lane::Backlog, client, spool);

    let start = Instant::now();
    let mut arrivals = Vec::new();
    let mut buf = [0u8; 2048];
    while start.elapsed() < WATCH {
        if hole.recv_from(&mut buf).is_ok() {
            arrivals.push(start.elapsed());
        }
    }
    lane.stop();

    assert!(
        arrivals.len() >= 8,
        "only {} Initials in {WATCH:?}",
        arrivals.len()
    );
    let widest = arrivals.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(
        widest <= Duration::from_millis(1500),
        "{widest:?} between two Initials into dead air (arrivals {arrivals:?})"
    );
    assert!(
        arrivals[0] < Duration::from_millis(500),
        "the first Initial came after {:?}",
        arrivals[0]
    );
}

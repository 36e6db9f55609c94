//! One direction of a single path stops while the other works, as a
//! cellular drive's uplink and downlink do at different moments (issue 15):
//! Tide keeps sending for a bounded time while it hears nothing at all
//! ("coasting"), and stops at once when the receiver reports that the data
//! stopped arriving (connection/stall.rs). Virtual time, whole protocol.

// Shared with the multipath tests, which use more of it.
#[allow(dead_code)]
mod harness;

use std::time::Duration;

use harness::{Link, World, MS};

const SEC: Duration = Duration::from_secs(1);
/// 10 Mbit/s, 20 ms one way.
const RATE_BYTES: f64 = 10e6 / 8.0;

fn link() -> Link {
    Link::new(0, 10.0, 20)
}

/// An endless upload over `link` until `until`.
fn upload_over(link: Link, until: Duration) -> World {
    let mut w = World::new(vec![link], u64::MAX);
    w.run_until(until, |_| {});
    w
}

#[test]
fn data_keeps_flowing_while_only_the_acknowledgments_are_lost() {
    let mut l = link();
    l.down.outages.push((3 * SEC, 4 * SEC));
    let w = upload_over(l, 6 * SEC);
    // The forward link works throughout: coasting at 3/4 of its rate
    // keeps it carrying (the window alone would stop it after about a
    // hundred milliseconds).
    let carried = w.link_bytes(0, 3 * SEC + 100 * MS, 4 * SEC) as f64;
    assert!(
        carried > 0.5 * RATE_BYTES * 0.9,
        "carried {carried} bytes while the return path was out"
    );
    // The receiving application reads it as it arrives.
    let read = w.goodput(3 * SEC + 100 * MS, 4 * SEC) / 8.0;
    assert!(read > 0.4 * RATE_BYTES, "read {read} B/s during the outage");
    // And the transfer goes on at the link's rate after it.
    let after = w.goodput(5 * SEC, 6 * SEC);
    assert!(after > 0.85 * 10e6, "goodput after {after}");
}

#[test]
fn a_forward_stall_is_reported_and_ends_the_coasting() {
    let mut l = link();
    l.up.outages.push((3 * SEC, 4 * SEC));
    let w = upload_over(l, 6 * SEC);
    // The receiver's stall report reaches the sender within ~50 ms: what
    // goes into the dead link is about a window, not a second of coasting
    // (which would be ~940 kB).
    let blind = w.links[0].up.offered_in_outage;
    assert!(blind < 300_000, "{blind} bytes sent into the dead link");
    let after = w.goodput(5 * SEC, 6 * SEC);
    assert!(after > 0.85 * 10e6, "goodput after {after}");
}

#[test]
fn coasting_into_a_link_dead_both_ways_is_bounded() {
    let w = upload_over(link().outage(3 * SEC, 6 * SEC), 9 * SEC);
    // Nothing comes back, so nothing says stop: at most a second at 3/4
    // of the rate (plus a window and the probes) goes out blind.
    let blind = w.links[0].up.offered_in_outage as f64;
    assert!(
        blind < 1.1 * RATE_BYTES,
        "{blind} bytes sent into the dead link"
    );
    assert!(blind > 0.3 * RATE_BYTES, "{blind}: it did not coast");
    // Pings find the link again within `REPROBE` of its return, however
    // far the probe timeout has backed off (the outage took what the
    // queue held, so nothing else would).
    let after = w.goodput(6500 * MS, 7 * SEC);
    assert!(after > 0.5 * 10e6, "goodput just after {after}");
    let after = w.goodput(8 * SEC, 9 * SEC);
    assert!(after > 0.85 * 10e6, "goodput after {after}");
}

//! Multipath in virtual time: Wi-Fi (30 Mbit/s, 5 ms one way) and LTE
//! (10 Mbit/s, 30 ms) as in issue 16's experiments, the protocol's own
//! behaviour only (the emulator experiments measure real processes).
//!
//! The failover, death and return scenarios run over a grid of starts
//! (`multipath_grid`): here its fast tier, the initial windows that broke
//! bounds before; `make multipath-sweep` runs the whole grid
//! (`tests/multipath_sweep.rs`).

mod harness;
#[allow(dead_code)]
mod multipath_grid;

use std::time::Duration;

use convoy_proto::PathState;
use harness::{Link, World, MS};

const SEC: Duration = Duration::from_secs(1);
const WIFI: usize = 1;
const LTE: usize = 0;

/// LTE is link 0 (the handshake path), Wi-Fi link 1.
fn world(wifi: Link, upload: u64) -> World {
    World::new(vec![Link::new(0, 10.0, 30), wifi], upload)
}

fn wifi() -> Link {
    Link::new(1, 30.0, 5)
}

/// Runs until established, then opens the Wi-Fi path.
fn with_wifi_path(w: &mut World, backup_lte: bool) -> u8 {
    w.run_until(200 * MS, |_| {});
    let id = w.open_path(WIFI, false);
    if backup_lte {
        let now = w.now;
        w.client_conn().set_path_backup(now, 0, true).unwrap();
    }
    id
}

#[test]
fn two_paths_carry_the_sum_of_their_capacities() {
    let mut w = world(wifi(), u64::MAX);
    let id = with_wifi_path(&mut w, false);
    w.run_until(8 * SEC, |_| {});
    assert_eq!(w.path_state(id), PathState::Active);
    // CapProbe's packet pairs measure each path's capacity.
    let paths = w.client_conn().paths();
    let cap = |i: u8| {
        paths
            .iter()
            .find(|p| p.id == i)
            .unwrap()
            .capacity_bps
            .unwrap() as f64
    };
    eprintln!(
        "CapProbe C': Wi-Fi {:.1}, LTE {:.1} Mbit/s",
        cap(id) / 1e6,
        cap(0) / 1e6
    );
    assert!((20e6..45e6).contains(&cap(id)), "Wi-Fi C' {}", cap(id));
    assert!((6e6..15e6).contains(&cap(0)), "LTE C' {}", cap(0));
    let goodput = w.goodput(2 * SEC, 8 * SEC);
    let ratio = goodput / 40e6;
    eprintln!("aggregate: {:.2} Mbit/s, {ratio:.3} of 40", goodput / 1e6);
    assert!(ratio > 0.85, "{ratio:.3} of the summed capacity");
    assert!(goodput > 30e6, "never below the best single path");
    let lte = w.link_bytes(LTE, 2 * SEC, 8 * SEC) as f64 * 8.0 / 6.0;
    assert!(lte > 7e6, "LTE carried {:.1} Mbit/s", lte / 1e6);
}

#[test]
fn the_fast_tier_of_the_grid_holds_every_bound() {
    // The windows that broke a bound before (24: the interface-down
    // failover; 36 and 40: a repair-filled gap, a demoted Wi-Fi's
    // return), two seeds, the links' own rates; the two starts where a
    // backup taking over from the handshake's path was slowest, at a
    // quarter and four times the rates; and the start where a standby
    // that had carried only the first 200 ms was slowest to reach LTE's
    // rate (window 16 at four times the rates).
    let mut points = multipath_grid::grid(&[24, 36, 40], &[1, 2], &[1.0]);
    points.extend(multipath_grid::grid(&[64], &[5], &[0.25]));
    points.extend(multipath_grid::grid(&[32], &[9], &[4.0]));
    points.extend(multipath_grid::grid(&[16], &[10], &[4.0]));
    let failures = multipath_grid::run_and_report(&points);
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_silent_wifi_fails_over_to_standby_lte() {
    let mut w = world(wifi().outage(3 * SEC, 5 * SEC), u64::MAX);
    let id = with_wifi_path(&mut w, true);
    w.run_until(3 * SEC, |_| {});
    assert_eq!(w.path_state(0), PathState::Standby);
    // Standby costs only its probes (and what the handshake sent).
    let probing = w.link_bytes(LTE, SEC, 3 * SEC) as f64 * 8.0 / 2.0;
    eprintln!("standby LTE probing: {probing:.0} bit/s");
    assert!(probing < 2000.0, "standby probing {probing:.0} bit/s");
    w.run_until(8 * SEC, |_| {});
    let gap = w.longest_gap(2 * SEC, 8 * SEC);
    eprintln!("standby failover on silence: longest gap {gap:?}");
    assert!(gap <= 60 * MS + 200 * MS, "failover took {gap:?}");
    // Wi-Fi came back at 5 s: traffic returns to it within 2 s.
    assert_eq!(w.path_state(id), PathState::Active);
    let back = w.link_bytes(WIFI, 7 * SEC, 8 * SEC);
    assert!(back > 2_000_000, "Wi-Fi carried {back} B in 7-8 s");
    let lte_after = w.link_bytes(LTE, 7500 * MS, 8 * SEC);
    assert!(lte_after < 20_000, "LTE still carried {lte_after} B");
}

/// Sets the Wi-Fi link's rate and loss, both directions.
fn set_wifi(w: &mut World, mbit: f64, loss: f64) {
    w.links[WIFI].set_rate_and_loss((mbit * 1e6) as u64, loss);
}

/// Mena's bad Wi-Fi (SPEC S3): the preferred Wi-Fi stays up but narrows
/// to 0.8 Mbit/s with 10 % loss, LTE standing by as the backup. The
/// thesis's rule wants two of C′, δ and SRTT to vote; under a sender that
/// keeps its queue short only C′ can, so the backup's measured capacity
/// is the second witness. When the Wi-Fi is good again it carries again.
#[test]
fn a_poor_wifi_hands_its_role_to_a_better_backup() {
    poor_wifi_hands_over(Duration::from_millis(150), true);
}

/// The same behind the thesis's deep FIFO (2.5 s at 0.8 Mbit/s). Here
/// the rate drop fills the queue at once, the pings wait behind it, and
/// the path is abandoned and comes back on probation, demoted until its
/// pairs show 1.5 Mbit/s: handed over all the same. (Where it stays
/// active behind the queue, as over `convoy emu`, the pairs' reports come
/// back after the next pairs left; `run mp-capprobe` measures that case.)
#[test]
fn a_poor_wifi_behind_a_deep_queue_hands_over_too() {
    let w = poor_wifi_hands_over(2500 * MS, false);
    // The queue did build past the pair interval (500 ms, grading.rs's
    // PAIR_INTERVAL).
    let longest = w.links[WIFI].up.max_wait;
    assert!(longest > 500 * MS, "longest queue {longest:?}");
}

/// `by_grade`: demoted by its grade, never abandoned on the way.
fn poor_wifi_hands_over(queue: Duration, by_grade: bool) -> World {
    let mut w = world(wifi(), u64::MAX);
    let id = with_wifi_path(&mut w, true);
    let bad = 3 * SEC;
    w.run_until(bad, |_| {});
    assert_eq!(w.path_state(id), PathState::Active);
    w.links[WIFI].up.queue_cap = queue;
    set_wifi(&mut w, 0.8, 0.1);
    let mut demoted_at = None;
    // Demoted by its grade, not abandoned and validated again on
    // probation, nor for turning suspect three times in 10 s.
    let (mut last, mut suspicions) = (PathState::Active, Vec::new());
    w.run_until(bad + 19 * SEC, |w| {
        let state = w.path_state(id);
        assert!(
            !by_grade || !matches!(state, PathState::Abandoned | PathState::Validating),
            "{state:?} at {:?}",
            w.now
        );
        if state == PathState::Suspect && last != PathState::Suspect {
            suspicions.push(w.now);
        }
        if demoted_at.is_none() && state == PathState::Standby {
            demoted_at = Some(w.now);
            let recent = suspicions.iter().filter(|&&t| w.now - t < 10 * SEC).count();
            assert!(recent < 3, "suspect {recent} times in the 10 s before");
        }
        last = state;
    });
    let detection = demoted_at.map(|t| t - bad);
    eprintln!(
        "poor Wi-Fi demoted after {detection:?}, longest queue {:?}",
        w.links[WIFI].up.max_wait
    );
    // The thesis detected its bad Wi-Fi in 4-19 s.
    assert!(detection.is_some(), "never demoted in 19 s");
    assert_eq!(w.path_state(id), PathState::Standby, "demoted for good");
    let end = w.now;
    let lte = w.link_bytes(LTE, end - 2 * SEC, end) as f64 * 8.0 / 2.0;
    assert!(lte > 7e6, "LTE carried {:.1} Mbit/s", lte / 1e6);
    // Standing by, the Wi-Fi costs only its pairs.
    let wifi_bits = w.link_bytes(WIFI, end - 2 * SEC, end) as f64 * 8.0 / 2.0;
    assert!(
        wifi_bits < 300e3,
        "Wi-Fi still carried {wifi_bits:.0} bit/s"
    );

    set_wifi(&mut w, 30.0, 0.0);
    w.run_until(end + 2 * SEC, |_| {});
    assert_eq!(w.path_state(id), PathState::Active);
    let back = w.link_bytes(WIFI, end + SEC, end + 2 * SEC);
    assert!(
        back > 2_000_000,
        "Wi-Fi carried {back} B in the second after"
    );
    w
}

/// ...but a Wi-Fi that is slow and lossy while still above the capacity
/// threshold keeps its role: LTE is the backup because it costs.
#[test]
fn a_slow_wifi_above_the_threshold_keeps_its_role() {
    let mut w = world(wifi(), u64::MAX);
    let id = with_wifi_path(&mut w, true);
    w.run_until(3 * SEC, |_| {});
    set_wifi(&mut w, 2.0, 0.1);
    w.run_until(23 * SEC, |w| {
        assert_ne!(w.path_state(id), PathState::Standby, "at {:?}", w.now);
    });
    // A few acknowledgments lost in a row are not silence: no false
    // suspicion sends data to LTE.
    let lte = w.link_bytes(LTE, 13 * SEC, 23 * SEC);
    assert!(lte < 20_000, "LTE carried {lte} B");
}

#[test]
fn a_server_sends_at_most_three_times_what_it_got_on_an_unvalidated_path() {
    // Wi-Fi's uplink is dead: the server hears the challenge but its
    // answer and challenge are never confirmed.
    let mut wifi = wifi();
    wifi.up.outages.push((250 * MS, 60 * SEC));
    let mut w = world(wifi, 1_000_000);
    with_wifi_path(&mut w, false);
    w.run_until(5 * SEC, |_| {});
    let up = w.links[WIFI].up.bytes;
    let down = w.links[WIFI].down.bytes;
    eprintln!("unvalidated path: {up} B up, {down} B down");
    assert!(up > 0);
    assert!(down <= 3 * up, "{down} B sent for {up} B received");
    assert_eq!(w.delivered, 1_000_000);
}

#[test]
fn path_calls_refuse_bad_input() {
    let mut w = world(wifi(), 0);
    let now = w.now;
    assert!(
        w.client_conn()
            .open_path(now, "10.7.0.2:4433".parse().unwrap(), false)
            .is_err(),
        "not established yet"
    );
    w.run_until(200 * MS, |_| {});
    let now = w.now;
    assert!(w.client_conn().path_down(now, 9).is_err());
    assert!(w.client_conn().set_path_backup(now, 9, true).is_err());
    for _ in 1..convoy_proto::connection::MAX_PATHS {
        w.open_path(WIFI, false);
    }
    let now = w.now;
    assert!(w
        .client_conn()
        .open_path(now, "10.7.0.2:4433".parse().unwrap(), false)
        .is_err());
    let h = w.server_conn.unwrap();
    let s = w.server.connection(h).unwrap();
    assert!(
        s.open_path(now, "10.7.1.1:5000".parse().unwrap(), false)
            .is_err(),
        "servers do not open paths"
    );
}

#[test]
fn a_backup_opened_after_the_handshake_takes_over_at_a_useful_rate() {
    // Wi-Fi is the handshake path and LTE is opened as backup, so LTE has
    // only ever carried pings when Wi-Fi goes silent at 5 s. Its
    // controller must not have learnt their few bytes a second as its rate.
    let wifi = Link::new(1, 30.0, 5).outage(5 * SEC, 9 * SEC);
    let mut w = World::new(vec![wifi, Link::new(0, 10.0, 30)], u64::MAX);
    w.run_until(200 * MS, |_| {});
    w.open_path(1, true);
    w.run_until(7 * SEC, |_| {});
    let gap = w.longest_gap(2 * SEC, 7 * SEC);
    eprintln!("backup opened after the handshake: failover gap {gap:?}");
    // Goodput over 300 ms back at 90 % of LTE's rate within two LTE round
    // trips and that window (the emulator's `mp-wifi-dies` target): LTE's
    // controller starts at CapProbe's reading once Wi-Fi is suspect (360
    // ms), not three probe timeouts later when Wi-Fi is abandoned (400).
    let mut back = 5 * SEC + 300 * MS;
    while back < 7 * SEC && w.goodput(back - 300 * MS, back) < 9e6 {
        back += 10 * MS;
    }
    eprintln!(
        "goodput at 90 % of LTE's {:?} after the outage",
        back - 5 * SEC
    );
    assert!(
        back - 5 * SEC <= 2 * 60 * MS + 300 * MS,
        "LTE at 90 % after {back:?}"
    );
    assert!(gap <= 60 * MS + 200 * MS, "failover took {gap:?}");
    assert!(
        w.goodput(6 * SEC, 7 * SEC) > 8e6,
        "LTE carries the transfer"
    );
}

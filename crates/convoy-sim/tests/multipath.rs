//! Multipath in virtual time over convoy-link: both links carry, an
//! interface that goes down and comes back is followed at its edges, and
//! the report's stalls are where the reader waited.

use std::time::Duration;

use convoy_link::{Dur, LinkConfig, OutagePolicy, QueueLimit, Time};
use convoy_proto::{Config, Keypair, Mode};
use convoy_sim::multipath::{run_multipath, MultipathReport, MultipathSpec, PathLink};

fn link(name: &str, mbit: u64, delay_ms: u64, seed: u64) -> PathLink {
    let dir = |s: u64| {
        LinkConfig::constant(mbit * 1_000_000)
            .with_delay(Dur::from_millis(delay_ms))
            .with_queue(QueueLimit::Packets(100))
            .with_seed(s)
    };
    PathLink {
        name: name.into(),
        uplink: dir(seed),
        downlink: dir(seed + 100),
        iface_down: false,
        backup: false,
    }
}

fn run(links: Vec<PathLink>, seconds: u64, seed: u64) -> MultipathReport {
    let mut client = Config::for_mode(Keypair::generate(), Mode::Tide);
    let mut server = Config::for_mode(Keypair::generate(), Mode::Tide);
    client.seed = Some(seed);
    server.seed = Some(seed + 1);
    let spec = MultipathSpec::new(links, client, server, Duration::from_secs(seconds));
    run_multipath(spec).expect("the simulation runs")
}

#[test]
fn both_links_carry_and_the_reader_never_waits_long() {
    let r = run(vec![link("wifi", 20, 5, 1), link("lte", 10, 30, 2)], 10, 1);
    let ratio = r.goodput_bps / r.capacity_bps;
    eprintln!(
        "goodput {:.2} of {:.2} Mbit/s ({ratio:.3}); wifi {:.2}, lte {:.2}; {} stalls",
        r.goodput_bps / 1e6,
        r.capacity_bps / 1e6,
        r.paths[0].carried_bps / 1e6,
        r.paths[1].carried_bps / 1e6,
        r.stalls.len()
    );
    assert!(
        (r.capacity_bps / 30e6 - 1.0).abs() < 0.01,
        "capacity {}",
        r.capacity_bps
    );
    // Goodput counts payload and the start-up; the clean multipath grid
    // reaches 0.94-0.96 over longer runs.
    assert!(ratio > 0.85, "goodput {ratio:.3} of the summed capacity");
    for p in &r.paths {
        assert!(
            p.carried_bps > 0.7 * p.capacity_bps,
            "{} carried {:.2} of {:.2} Mbit/s",
            p.name,
            p.carried_bps / 1e6,
            p.capacity_bps / 1e6
        );
    }
    assert!(r.stalls_over_limit.is_empty(), "{:?}", r.stalls_over_limit);
    let longest = r.stalls.iter().map(|s| s.seconds).fold(0.0, f64::max);
    assert!(longest < 0.2, "longest stall {longest:.3} s");
    assert_eq!(r.read_timeline.iter().sum::<u64>(), r.delivered);
}

#[test]
fn an_interface_that_goes_down_is_followed_at_its_edges() {
    let mut wifi = link("wifi", 20, 5, 3);
    let out = vec![(Time::from_millis(3_000), Time::from_millis(5_000))];
    for dir in [&mut wifi.uplink, &mut wifi.downlink] {
        *dir = dir.clone().with_outages(out.clone(), OutagePolicy::Drop);
    }
    wifi.iface_down = true;
    let r = run(vec![wifi, link("lte", 10, 30, 4)], 10, 2);
    let w = &r.paths[0];
    eprintln!("wifi states {:?}; stalls {:?}", w.states, r.stalls);
    assert_eq!(w.interface_downs, 1);
    let at = |state: &str, after: f64| {
        w.states
            .iter()
            .find(|&&(t, s)| s == state && t >= after)
            .map(|&(t, _)| t)
    };
    // Abandoned at the edge itself: the driver tells the connection then.
    let abandoned = at("abandoned", 2.9).expect("abandoned when its interface went down");
    assert!((abandoned - 3.0).abs() < 0.001, "abandoned at {abandoned}");
    let back = at("validating", 3.1).expect("re-validated when it came back");
    assert!((back - 5.0).abs() < 0.001, "validating again at {back}");
    let active = at("active", back).expect("carrying again");
    assert!(
        active - 5.0 < 2.0,
        "back on Wi-Fi {:.2} s after its return",
        active - 5.0
    );
    // LTE carries on: the reader waits at most a failover, never the outage.
    let at_edge = r
        .stalls
        .iter()
        .filter(|s| s.at_s > 2.5 && s.at_s < 3.5)
        .map(|s| s.seconds)
        .fold(0.0, f64::max);
    assert!(
        at_edge < 0.3,
        "the reader waited {at_edge:.3} s at the edge"
    );
    assert!(r.stalls_over_limit.is_empty(), "{:?}", r.stalls_over_limit);
    // The outage had capacity on LTE: the with-capacity time counts it.
    assert!(r.paths[1].carried_bps > 0.7 * r.paths[1].capacity_bps);
}

#[test]
fn a_stall_across_every_link_s_outage_is_not_held_against_the_transfer() {
    let out = vec![(Time::from_millis(2_000), Time::from_millis(4_000))];
    let mut links = vec![link("a", 10, 10, 5), link("b", 10, 20, 6)];
    for l in &mut links {
        for dir in [&mut l.uplink, &mut l.downlink] {
            *dir = dir.clone().with_outages(out.clone(), OutagePolicy::Drop);
        }
    }
    let r = run(links, 8, 3);
    let longest = r
        .stalls
        .iter()
        .max_by(|a, b| a.seconds.total_cmp(&b.seconds))
        .copied()
        .expect("a stall");
    eprintln!("longest stall {longest:?}");
    assert!(longest.seconds >= 2.0, "{longest:?}");
    // Only the time on either side of the outage had capacity.
    assert!(
        longest.with_capacity_s <= longest.seconds - 1.9,
        "{longest:?}"
    );
}

#[test]
fn no_links_is_an_error() {
    let c = Config::for_mode(Keypair::generate(), Mode::Tide);
    let s = Config::for_mode(Keypair::generate(), Mode::Tide);
    let spec = MultipathSpec::new(Vec::new(), c, s, Duration::from_secs(1));
    assert!(run_multipath(spec).is_err());
}

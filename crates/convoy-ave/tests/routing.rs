//! Routers wired together by an ideal unit-disk radio (every frame within
//! 100 m arrives, nothing beyond), to check each strategy, the loop rule
//! and the baselines on hand-made topologies.

use std::sync::Arc;
use std::time::Duration;

use convoy_ave::{
    Config, Destination, DropCause, Protocol, Role, Router, RouterEvent, RsuTable, Strategy, Vec2,
};

const RANGE: f64 = 100.0;
const RSU: u32 = 1000;

struct Net {
    nodes: Vec<(Router, Vec2, Vec2)>,
    now: Duration,
    delivered: Vec<(u32, u32, u8)>,
    hops: Vec<Strategy>,
    dropped: Vec<DropCause>,
}

impl Net {
    /// Vehicles at `cars` (position, velocity) and one RSU at `rsu`.
    fn new(protocol: Protocol, rsu: Vec2, cars: &[(Vec2, Vec2)]) -> Net {
        let mut cfg = Config::new(protocol);
        cfg.max_range_m = RANGE;
        cfg.d_th_m = 50.0;
        cfg.carry_min_gain_m = 20.0;
        let rsus = Arc::new(RsuTable::new(vec![(RSU, rsu)]));
        let mut nodes = vec![(
            Router::new(RSU, Role::Rsu, cfg.clone(), rsus.clone(), 1).unwrap(),
            rsu,
            Vec2::default(),
        )];
        for (i, (p, v)) in cars.iter().enumerate() {
            nodes.push((
                Router::new(i as u32 + 1, Role::Vehicle, cfg.clone(), rsus.clone(), 1).unwrap(),
                *p,
                *v,
            ));
        }
        Net {
            nodes,
            now: Duration::ZERO,
            delivered: vec![],
            hops: vec![],
            dropped: vec![],
        }
    }

    fn index(&self, id: u32) -> usize {
        self.nodes.iter().position(|n| n.0.id() == id).unwrap()
    }

    /// Runs in 10 ms steps: moves nodes, fires timers, carries frames.
    fn run(&mut self, secs: f64) {
        let end = self.now + Duration::from_secs_f64(secs);
        while self.now < end {
            self.now += Duration::from_millis(10);
            let now = self.now;
            for (r, p, v) in &mut self.nodes {
                *p = p.add_scaled(*v, 0.01);
                r.set_motion(now, *p, *v, None);
                if r.poll_timeout().is_some_and(|t| t <= now) {
                    r.handle_timeout(now);
                }
            }
            loop {
                let mut any = false;
                for i in 0..self.nodes.len() {
                    while let Some(f) = self.nodes[i].0.poll_transmit() {
                        any = true;
                        let from = self.nodes[i].0.id();
                        let at = self.nodes[i].1;
                        match f.to {
                            Destination::Broadcast => {
                                for j in 0..self.nodes.len() {
                                    if j != i && self.nodes[j].1.dist(at) <= RANGE {
                                        self.nodes[j].0.handle_frame(now, from, &f.bytes).unwrap();
                                    }
                                }
                            }
                            Destination::Node(to) => {
                                let j = self.index(to);
                                let ok = self.nodes[j].1.dist(at) <= RANGE;
                                if ok {
                                    self.nodes[j].0.handle_frame(now, from, &f.bytes).unwrap();
                                }
                                self.nodes[i].0.handle_link_result(now, f.token, ok);
                            }
                        }
                    }
                }
                for (r, _, _) in &mut self.nodes {
                    while let Some(e) = r.poll_event() {
                        match e {
                            RouterEvent::Delivered {
                                origin,
                                bundle,
                                hops,
                                ..
                            } => self.delivered.push((origin, bundle, hops)),
                            RouterEvent::Hop { strategy, .. } => self.hops.push(strategy),
                            RouterEvent::Dropped { cause, .. } => self.dropped.push(cause),
                        }
                    }
                }
                if !any {
                    break;
                }
            }
        }
    }

    fn originate(&mut self, car: u32) {
        let i = self.index(car);
        let now = self.now;
        self.nodes[i].0.originate(now, 100);
    }
}

fn still(x: f64, y: f64) -> (Vec2, Vec2) {
    (Vec2::new(x, y), Vec2::default())
}

#[test]
fn ave_delivers_locally_one_and_two_hops_away() {
    let mut n = Net::new(
        Protocol::Ave,
        Vec2::new(0.0, 0.0),
        &[still(80.0, 0.0), still(160.0, 0.0)],
    );
    n.run(5.0);
    n.originate(1);
    n.originate(2);
    n.run(1.0);
    assert_eq!(n.delivered.len(), 2, "{:?} {:?}", n.delivered, n.dropped);
    assert!(n.hops.iter().all(|s| *s == Strategy::Local), "{:?}", n.hops);
    assert!(n.delivered.iter().any(|d| d.0 == 2 && d.2 == 2));
}

#[test]
fn ave_discovers_a_route_beyond_two_hops() {
    let cars: Vec<_> = (1..=4).map(|i| still(80.0 * f64::from(i), 0.0)).collect();
    let mut n = Net::new(Protocol::Ave, Vec2::new(0.0, 0.0), &cars);
    // The far car has heard the RSU recently (it drove past): move it away.
    n.run(5.0);
    let i = n.index(4);
    n.nodes[i].0.handle_timeout(n.now); // nothing else: hearing was via the chain
    n.originate(4);
    n.run(2.0);
    // Car 4 never heard the RSU itself, so AVE skips discovery (T_MAX rule)
    // and goes geographic, hop by hop, then local at the end.
    assert_eq!(n.delivered.len(), 1, "{:?} {:?}", n.hops, n.dropped);
    assert!(n.hops.contains(&Strategy::Geographic));
}

#[test]
fn ave_carries_when_isolated_and_hands_over_on_contact() {
    // Car 1 is alone, driving toward the RSU from 1 km away.
    let mut n = Net::new(
        Protocol::Ave,
        Vec2::new(0.0, 0.0),
        &[(Vec2::new(1000.0, 0.0), Vec2::new(-20.0, 0.0))],
    );
    n.run(3.0);
    n.originate(1);
    n.run(60.0);
    assert_eq!(n.delivered.len(), 1, "{:?}", n.dropped);
    assert!(n.dropped.is_empty());
}

#[test]
fn greedy_drops_at_a_local_minimum_while_ave_carries() {
    for (p, want) in [(Protocol::Greedy, 0), (Protocol::Ave, 1)] {
        let mut n = Net::new(
            p,
            Vec2::new(0.0, 0.0),
            &[(Vec2::new(600.0, 0.0), Vec2::new(-15.0, 0.0))],
        );
        n.run(3.0);
        n.originate(1);
        n.run(60.0);
        assert_eq!(n.delivered.len(), want, "{p:?}: {:?}", n.dropped);
    }
}

#[test]
fn dymo_finds_a_multi_hop_route_and_gives_up_without_one() {
    let cars: Vec<_> = (1..=4).map(|i| still(80.0 * f64::from(i), 0.0)).collect();
    let mut n = Net::new(Protocol::Dymo, Vec2::new(0.0, 0.0), &cars);
    n.run(5.0);
    n.originate(4);
    n.run(3.0);
    assert_eq!(n.delivered.len(), 1, "{:?}", n.dropped);
    assert_eq!(n.delivered[0].2, 4);
    assert!(n.hops.iter().all(|s| *s == Strategy::Reactive));

    let mut lone = Net::new(Protocol::Dymo, Vec2::new(0.0, 0.0), &[still(900.0, 0.0)]);
    lone.run(3.0);
    lone.originate(1);
    lone.run(20.0);
    assert!(lone.delivered.is_empty());
    assert_eq!(lone.dropped, vec![DropCause::NoRoute]);
}

#[test]
fn spray_and_wait_splits_copies_and_delivers_once() {
    // Car 1 meets car 2 (both parked), then car 2 drives to the RSU.
    let mut n = Net::new(
        Protocol::SprayAndWait { copies: 4 },
        Vec2::new(0.0, 0.0),
        &[
            still(900.0, 0.0),
            (Vec2::new(950.0, 0.0), Vec2::new(-20.0, 0.0)),
        ],
    );
    n.run(3.0);
    n.originate(1);
    n.run(60.0);
    assert_eq!(n.delivered.len(), 1, "{:?}", n.dropped);
}

#[test]
fn garbage_frames_are_errors_not_panics() {
    let cfg = Config::new(Protocol::Ave);
    let mut r = Router::new(
        1,
        Role::Vehicle,
        cfg,
        Arc::new(RsuTable::new(vec![(9, Vec2::default())])),
        0,
    )
    .unwrap();
    for bytes in [
        &[][..],
        &[0u8][..],
        &[1, 2, 3][..],
        &[0xff; 40][..],
        &[0, 0, 0xf3, 0, 9][..],
    ] {
        assert!(r.handle_frame(Duration::ZERO, 2, bytes).is_err());
    }
}

mod prop {
    use convoy_ave::wire::frame::Frame;
    use convoy_ave::wire::hello::Hello;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = Hello::decode(&bytes);
            let _ = Frame::decode(&bytes);
        }
    }
}

//! Availability (hold or drop while down), propagation delay and jitter.

mod common;

use std::sync::Arc;

use common::{drive, periodic};
use convoy_link::{
    Delivery, DropReason, Dur, Enqueued, LinkConfig, LinkDirection, MahimahiTrace, OutagePolicy,
    QueueLimit, Time,
};

fn ms(v: u64) -> Time {
    Time::from_millis(v)
}

fn departed_ms(d: &[Delivery]) -> Vec<(u64, u64)> {
    d.iter()
        .map(|d| (d.id, d.departed_at.as_nanos() / 1_000_000))
        .collect()
}

/// 8 Mbit/s (1 byte/us), 1000-byte packets every ms: exactly saturated.
/// Down during [10 ms, 20 ms).
fn outage_link(policy: OutagePolicy) -> LinkDirection {
    LinkDirection::new(
        LinkConfig::constant(8_000_000)
            .with_outages(vec![(ms(10), ms(20))], policy)
            .with_records(true),
    )
    .unwrap()
}

#[test]
fn hold_keeps_packets_and_resumes_after_the_outage() {
    let mut l = outage_link(OutagePolicy::Hold);
    let (d, v) = drive(&mut l, &periodic(30, 0, 1_000_000, 1000), ms(100));
    assert!(v.iter().all(|(_, e)| *e == Enqueued::Accepted));
    assert_eq!(d.len(), 30);
    let dep = departed_ms(&d);
    // Packet 9 finishes exactly as the link goes down; packet 10 starts at
    // 10 ms but gets its first byte out at 20 ms; the rest follow.
    assert_eq!(dep[9], (9, 10));
    assert_eq!(dep[10], (10, 21));
    assert_eq!(dep[29], (29, 40));
    assert_eq!(l.stats().dropped_total(), 0);
}

#[test]
fn hold_is_bounded_by_the_queue_limit() {
    let mut l: LinkDirection = LinkDirection::new(
        LinkConfig::constant(8_000_000)
            .with_outages(vec![(ms(10), ms(20))], OutagePolicy::Hold)
            .with_queue(QueueLimit::Packets(5)),
    )
    .unwrap();
    let (d, _) = drive(&mut l, &periodic(30, 0, 1_000_000, 1000), ms(100));
    // Packet 10 is on the (paused) wire until 21 ms, 11..=15 wait, and
    // 16..=20 find the queue full.
    assert_eq!(l.stats().dropped(DropReason::QueueFull), 5);
    assert_eq!(d.len(), 25);
}

#[test]
fn drop_discards_what_the_link_holds_and_what_arrives_while_down() {
    let mut l = outage_link(OutagePolicy::Drop);
    // 1500-byte packets every ms: the queue grows, so the outage finds a
    // packet on the wire and several waiting.
    let (d, v) = drive(&mut l, &periodic(30, 0, 1_000_000, 1500), ms(200));
    let dropped: Vec<u64> = v
        .iter()
        .filter(|(_, e)| *e == Enqueued::Dropped(DropReason::LinkDown))
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(dropped, (10..20).collect::<Vec<_>>());
    // By 10 ms, packets 0..=5 have left (1.5 ms each); 6 is on the wire
    // and 7..=9 wait: all four are dropped at the instant the link goes down,
    // before packet 10, arriving at that instant, is refused.
    let link_down_at_10: Vec<u64> = l
        .take_records()
        .iter()
        .filter(|r| {
            r.t == ms(10) && matches!(r.kind, convoy_link::RecordKind::Drop(DropReason::LinkDown))
        })
        .map(|r| r.id)
        .collect();
    assert_eq!(link_down_at_10, [6, 7, 8, 9, 10]);
    let ids: Vec<u64> = d.iter().map(|d| d.id).collect();
    assert_eq!(
        ids,
        [0, 1, 2, 3, 4, 5]
            .into_iter()
            .chain(20..30)
            .collect::<Vec<_>>()
    );
    assert_eq!(l.stats().dropped(DropReason::LinkDown), 14);
    // After the outage, the link restarts from idle at 20 ms.
    assert_eq!(d[6].departed_at, Time::from_micros(21_500));
}

#[test]
fn mahimahi_opportunities_during_an_outage_are_wasted() {
    // One opportunity per ms.
    let text: String = (1..=100).map(|m| format!("{m}\n")).collect();
    let trace = Arc::new(MahimahiTrace::parse(&text, "t").unwrap());
    let mut l: LinkDirection = LinkDirection::new(
        LinkConfig::mahimahi(trace).with_outages(vec![(ms(3), ms(7))], OutagePolicy::Hold),
    )
    .unwrap();
    for id in 0..5 {
        l.enqueue(Time::ZERO, 1500, id);
    }
    let d: Vec<Delivery> = std::iter::from_fn(|| l.poll_delivery(ms(50))).collect();
    assert_eq!(departed_ms(&d), [(0, 1), (1, 2), (2, 7), (3, 8), (4, 9)]);
}

#[test]
fn fixed_delay_is_added_after_the_bottleneck() {
    let mut l: LinkDirection =
        LinkDirection::new(LinkConfig::constant(8_000_000).with_delay(Dur::from_millis(30)))
            .unwrap();
    l.enqueue(Time::ZERO, 1000, 0);
    l.enqueue(Time::ZERO, 1000, 1);
    assert_eq!(l.next_event_time(), Some(ms(1)));
    assert!(l.poll_delivery(ms(30)).is_none());
    let d0 = l.poll_delivery(ms(31)).unwrap();
    assert_eq!(
        (d0.id, d0.at, d0.queue_delay),
        (0, ms(31), Dur::from_millis(1))
    );
    assert_eq!(l.next_event_time(), Some(ms(32)));
    assert_eq!(l.poll_delivery(ms(40)).unwrap().at, ms(32));
    assert_eq!(l.next_event_time(), None);
}

fn jitter_run(reorder: bool) -> Vec<Delivery> {
    let mut l: LinkDirection = LinkDirection::new(
        LinkConfig::constant(100_000_000)
            .with_delay(Dur::from_millis(10))
            .with_jitter(Dur::from_millis(5), reorder)
            .with_seed(7),
    )
    .unwrap();
    let (d, _) = drive(
        &mut l,
        &periodic(5000, 0, 200_000, 1000),
        Time::from_secs(10),
    );
    assert_eq!(d.len(), 5000);
    d
}

#[test]
fn jitter_keeps_order_by_default() {
    let d = jitter_run(false);
    assert!(d
        .windows(2)
        .all(|w| w[0].id < w[1].id && w[0].at <= w[1].at));
    let one_way: Vec<u64> = d
        .iter()
        .map(|d| (d.at - d.departed_at).as_nanos())
        .collect();
    assert!(one_way
        .iter()
        .all(|&x| (10_000_000..=15_000_000 + 5_000_000).contains(&x)));
    let distinct: std::collections::BTreeSet<u64> = one_way.iter().copied().collect();
    assert!(distinct.len() > 1000, "jitter should vary the delay");
}

#[test]
fn jitter_reorders_only_when_asked() {
    let d = jitter_run(true);
    // Deliveries still come out in arrival-time order...
    assert!(d.windows(2).all(|w| w[0].at <= w[1].at));
    // ...but packets overtake each other, and each delay is base + [0, 5] ms.
    let inversions = d.windows(2).filter(|w| w[0].id > w[1].id).count();
    assert!(inversions > 100, "{inversions}");
    for x in &d {
        let one_way = (x.at - x.departed_at).as_nanos();
        assert!((10_000_000..=15_000_000).contains(&one_way));
    }
}

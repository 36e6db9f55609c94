//! A cell's per-UE buffers and round robin, through a whole link direction.

use convoy_link::{
    DropReason, Dur, Enqueued, LinkConfig, LinkDirection, PerUeConfig, QueueDiscipline, QueueLimit,
    Time,
};

/// 12 Mbit/s (1500 bytes per ms), a 100-packet buffer: per UE, or shared.
fn cell(per_ue: bool) -> LinkDirection {
    let mut c = LinkConfig::constant(12_000_000).with_queue(QueueLimit::Packets(100));
    if per_ue {
        c = c.with_discipline(QueueDiscipline::PerUe(PerUeConfig::default()));
    }
    LinkDirection::new(c).unwrap()
}

/// Two UEs: UE 1 dumps 90 full packets at once every 200 ms (a log upload),
/// UE 2 sends one small packet every 20 ms (telemetry). Returns UE 2's
/// worst queueing delay and the link's queue-full drops.
fn worst_small_delay(per_ue: bool) -> (Dur, u64) {
    let mut link = cell(per_ue);
    let mut worst = Dur::ZERO;
    let mut id = 0u64;
    for ms in 0..2_000u64 {
        let now = Time::from_millis(ms);
        if ms % 200 == 0 {
            for _ in 0..90 {
                link.enqueue_flow(now, 1500, id, 1);
                id += 1;
            }
        }
        if ms % 20 == 5 {
            link.enqueue_flow(now, 200, 1_000_000 + ms, 2);
        }
        while let Some(d) = link.poll_delivery(now) {
            if d.id >= 1_000_000 {
                worst = worst.max(d.queue_delay);
            }
        }
    }
    (worst, link.stats().dropped(DropReason::QueueFull))
}

#[test]
fn a_neighbours_burst_does_not_hold_up_a_ue() {
    let (fifo, _) = worst_small_delay(false);
    let (per_ue, drops) = worst_small_delay(true);
    // In the shared FIFO the small packet waits behind most of the burst
    // (up to 90 ms); with its own buffer, behind at most the packet in
    // service and one quantum of the other UE's.
    assert!(fifo > Dur::from_millis(60), "FIFO: {fifo:?}");
    assert!(per_ue < Dur::from_millis(3), "per UE: {per_ue:?}");
    assert_eq!(drops, 0);
}

#[test]
fn each_ue_has_the_whole_limit_and_loses_only_its_own_packets() {
    let mut link = cell(true);
    let t = Time::ZERO;
    for id in 0..150 {
        link.enqueue_flow(t, 1500, id, 1);
    }
    // UE 1's buffer is full (one packet in service, 100 waiting) ...
    assert_eq!(link.stats().dropped(DropReason::QueueFull), 49);
    // ... but UE 2 still gets all of its own.
    for id in 0..100 {
        assert_eq!(
            link.enqueue_flow(t, 1500, 1000 + id, 2),
            Enqueued::Accepted,
            "packet {id}"
        );
    }
    assert_eq!(
        link.enqueue_flow(t, 1500, 2000, 2),
        Enqueued::Dropped(DropReason::QueueFull)
    );
    assert_eq!(link.queue_state().packets, 200);
    // Served in alternation: of the first 20 delivered, 10 are each UE's.
    let delivered: Vec<u64> = std::iter::from_fn(|| link.poll_delivery(Time::from_secs(1)))
        .map(|d| d.id)
        .take(21)
        .collect();
    let ue2 = delivered[1..].iter().filter(|&&id| id >= 1000).count();
    assert_eq!(ue2, 10, "{delivered:?}");
}

#[test]
fn every_packet_is_accounted_for_and_the_link_stays_work_conserving() {
    // Many UEs at random, more than the link carries: everything offered
    // is delivered or dropped, and the link never idles with data queued
    // (it delivers as many bytes as a FIFO would over the same time).
    let run = |per_ue: bool| {
        let mut link = cell(per_ue);
        let mut rng = convoy_link::Rng::new(7, 0);
        let mut bytes = 0u64;
        for us in (0..500_000u64).step_by(100) {
            let now = Time::from_micros(us);
            if rng.uniform_inclusive(9) < 2 {
                let len = 40 + rng.uniform_inclusive(1460) as u32;
                link.enqueue_flow(now, len, us, rng.uniform_inclusive(40));
            }
            while let Some(d) = link.poll_delivery(now) {
                bytes += u64::from(d.len);
            }
        }
        let s = *link.stats();
        let waiting = link.queue_state().packets as u64;
        assert!(s.offered >= s.delivered + s.dropped(DropReason::QueueFull) + waiting);
        assert!(s.offered <= s.delivered + s.dropped(DropReason::QueueFull) + waiting + 1);
        bytes
    };
    let (fifo, per_ue) = (run(false), run(true));
    assert!(fifo.abs_diff(per_ue) <= 1500, "{fifo} against {per_ue}");
}

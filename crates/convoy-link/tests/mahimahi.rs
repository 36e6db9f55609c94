//! Mahimahi trace replay: mm-link's LinkQueue semantics, on small traces
//! where every byte can be followed and on the six shared LTE traces.

mod common;

use std::sync::Arc;

use common::{drive, periodic, shared_traces, Arrival, SHARED_TRACES};
use convoy_link::{
    Dur, Enqueued, LinkConfig, LinkDirection, MahimahiTrace, QueueLimit, Time, OPPORTUNITY_BYTES,
};

fn link(trace: &str) -> LinkDirection {
    let t = Arc::new(MahimahiTrace::parse(trace, "test.trace").unwrap());
    LinkDirection::new(LinkConfig::mahimahi(t)).unwrap()
}

fn ms(v: u64) -> Time {
    Time::from_millis(v)
}

/// Departure times (ms) of everything delivered by `until_ms`.
fn departures(l: &mut LinkDirection, until_ms: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    while let Some(d) = l.poll_delivery(ms(until_ms)) {
        out.push((d.id, d.departed_at.as_nanos() / 1_000_000));
    }
    out
}

#[test]
fn small_packets_share_an_opportunity_and_big_ones_span_several() {
    // One opportunity per ms from 1 ms on.
    let mut l = link("1\n2\n3\n4\n5\n6\n");
    // Three 500-byte packets fill exactly one opportunity.
    for id in 0..3 {
        l.enqueue(Time::ZERO, 500, id);
    }
    // 1000 + 1000: the second is cut: 500 bytes at 2 ms, 500 at 3 ms.
    l.enqueue(Time::ZERO, 1000, 3);
    l.enqueue(Time::ZERO, 1000, 4);
    // A 4000-byte packet (mm-link caps at 1500; we generalise) spans
    // 1000 bytes at 3 ms, 1500 at 4 ms, 1500 at 5 ms.
    l.enqueue(Time::ZERO, 4000, 5);
    assert_eq!(
        departures(&mut l, 10),
        [(0, 1), (1, 1), (2, 1), (3, 2), (4, 3), (5, 5)]
    );
}

#[test]
fn opportunities_with_an_empty_queue_are_wasted() {
    let mut l = link("1\n2\n3\n4\n5\n6\n");
    // Arrives after the 1 ms and 2 ms opportunities passed unused.
    l.enqueue(Time::from_micros(2500), 3000, 0);
    assert_eq!(departures(&mut l, 5), [(0, 4)]);
    // The leftover of an opportunity is wasted too: 100 bytes use the
    // 6 ms opportunity alone; the next packet takes the first opportunity
    // of the second period (6 + 1 ms).
    l.enqueue(Time::from_micros(5500), 100, 1);
    l.enqueue(Time::from_micros(6500), 100, 2);
    assert_eq!(departures(&mut l, 20), [(1, 6), (2, 7)]);
}

#[test]
fn a_packet_arriving_at_an_opportunity_instant_misses_it() {
    // mm-link runs the link up to `now` before queueing the new packet.
    let mut l = link("5\n10\n");
    l.enqueue(ms(5), 100, 0);
    assert_eq!(l.next_event_time(), Some(ms(10)));
    assert_eq!(departures(&mut l, 10), [(0, 10)]);
}

#[test]
fn repeated_timestamps_are_several_opportunities_and_the_trace_wraps() {
    // Period 4 ms: two opportunities at 0, three at 2, one at 4.
    let mut l = link("0\n0\n2\n2\n2\n4\n");
    for id in 0..12 {
        l.enqueue(Time::from_nanos(1), 1500, id);
    }
    let got: Vec<u64> = departures(&mut l, 100)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    // Cycle 1 (base 4 ms): 4, 4 (first line), 6, 6, 6, 8 (and 8 again from
    // cycle 2's first lines); packets queued at 1 ns miss the two at 0 ms.
    assert_eq!(got, [2, 2, 2, 4, 4, 4, 6, 6, 6, 8, 8, 8]);
}

#[test]
fn queueing_delay_is_backlog_over_rate_on_a_regular_trace() {
    // One 1500-byte opportunity per ms = 12 Mbit/s.
    let lines: String = (1..=1000).map(|m| format!("{m}\n")).collect();
    let mut l = link(&lines);
    for id in 0..50 {
        l.enqueue(Time::from_micros(500), 1500, id);
    }
    for (k, d) in std::iter::from_fn(|| l.poll_delivery(ms(100))).enumerate() {
        // Packet k waits for k packets ahead: departs at (k+1) ms.
        assert_eq!(d.queue_delay, Dur::from_micros(500 + 1000 * k as u64));
    }
}

#[test]
fn drop_tail_in_packets_counts_only_waiting_packets() {
    let mut l: LinkDirection = LinkDirection::new(
        LinkConfig::mahimahi(Arc::new(MahimahiTrace::parse("10\n", "t").unwrap()))
            .with_queue(QueueLimit::Packets(3)),
    )
    .unwrap();
    let v: Vec<Enqueued> = (0..5).map(|id| l.enqueue(Time::ZERO, 1500, id)).collect();
    assert_eq!(v.iter().filter(|e| **e == Enqueued::Accepted).count(), 3);
    // One leaves at 10 ms, making room for one more.
    assert_eq!(l.enqueue(ms(10), 1500, 5), Enqueued::Accepted);
    assert!(matches!(l.enqueue(ms(10), 1500, 6), Enqueued::Dropped(_)));
}

/// Opportunities of `trace` at times in `(after, until]`, by enumeration.
fn opportunities_between(trace: &MahimahiTrace, after: Time, until: Time) -> u64 {
    let period = trace.period().as_nanos();
    let mut n = 0;
    for cycle in 0.. {
        let base = cycle * period;
        if base > until.as_nanos() {
            break;
        }
        for &m in trace.opportunities_ms() {
            let t = base + m * 1_000_000;
            if t > after.as_nanos() && t <= until.as_nanos() {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn shared_traces_parse_with_their_documented_mean_rates() {
    // From ../shared/traces/README.md (3 significant digits).
    let documented = [1.91e6, 4.56e6, 13.3e6, 16.7e6, 5.95e6, 5.03e6];
    for (name, rate) in SHARED_TRACES.iter().zip(documented) {
        let t = MahimahiTrace::from_file(shared_traces().join(name)).unwrap();
        let got = t.mean_rate_bps();
        assert!((got - rate).abs() / rate < 0.005, "{name}: {got} vs {rate}");
    }
}

#[test]
fn saturated_shared_traces_deliver_their_rate_over_60_s() {
    let window = Time::from_secs(60);
    for name in SHARED_TRACES {
        let trace = Arc::new(MahimahiTrace::from_file(shared_traces().join(name)).unwrap());
        let expected_bytes =
            opportunities_between(&trace, Time::ZERO, window) * u64::from(OPPORTUNITY_BYTES);

        // (a) MTU-sized packets all queued at t = 0 (opportunities at 0 ms are
        // spent before they arrive, as in mm-link): byte-exact.
        let mut l: LinkDirection = LinkDirection::new(LinkConfig::mahimahi(trace.clone())).unwrap();
        let n = expected_bytes / 1500 + 10_000;
        for id in 0..n {
            l.enqueue(Time::ZERO, 1500, id);
        }
        let mut delivered = 0u64;
        while let Some(d) = l.poll_delivery(window) {
            delivered += u64::from(d.len);
        }
        assert_eq!(delivered, expected_bytes, "{name}: MTU packets");

        // (b) Mixed sizes, queue kept backlogged by a driver that tops it up
        // at every event: within 0.5 % (only the packet cut at the window's
        // end is missing).
        let mut l: LinkDirection = LinkDirection::new(LinkConfig::mahimahi(trace.clone())).unwrap();
        let sizes = [40u32, 1500, 576, 1200, 1500, 100, 900];
        let mut id = 0u64;
        let mut delivered = 0u64;
        let mut t = Time::ZERO;
        loop {
            while let Some(d) = l.poll_delivery(t) {
                delivered += u64::from(d.len);
            }
            while l.queue_state().packets < 64 {
                l.enqueue(t, sizes[id as usize % sizes.len()], id);
                id += 1;
            }
            match l.next_event_time() {
                Some(next) if next <= window => t = next,
                _ => break,
            }
        }
        while let Some(d) = l.poll_delivery(window) {
            delivered += u64::from(d.len);
        }
        let rel = (expected_bytes as f64 - delivered as f64).abs() / expected_bytes as f64;
        assert!(
            rel < 0.005,
            "{name}: delivered {delivered} of {expected_bytes} bytes"
        );
        assert!(
            delivered <= expected_bytes && expected_bytes - delivered < 1500,
            "{name}"
        );
        let rate = delivered as f64 * 8.0 / 60.0;
        eprintln!(
            "{name}: {:.3} Mbit/s delivered over 60 s, {rel:.2e} below the trace",
            rate / 1e6
        );
    }
}

#[test]
fn shared_trace_wraps_around_exactly() {
    // 300 s of a 120 s trace: two wraps, counted opportunity by opportunity.
    let trace = Arc::new(
        MahimahiTrace::from_file(shared_traces().join("ATT-LTE-driving-2016.up")).unwrap(),
    );
    let until = Time::from_secs(300);
    let expected = opportunities_between(&trace, Time::ZERO, until);
    assert_eq!(
        expected,
        trace.opportunities_until(until) - trace.opportunities_until(Time::ZERO)
    );
    let l_trace = trace.clone();
    let mut l: LinkDirection = LinkDirection::new(LinkConfig::mahimahi(trace)).unwrap();
    let arrivals: Vec<Arrival> = periodic(expected + 1000, 0, 1, 1500);
    // Everything offered within the first microsecond or so: saturated.
    let (deliveries, _) = drive(&mut l, &arrivals, until);
    assert_eq!(deliveries.len() as u64, expected);
    // Each MTU packet leaves at its own opportunity: compare every departure
    // with the schedule enumerated cycle by cycle.
    let period = l_trace.period().as_nanos();
    let schedule = (0..3u64).flat_map(|c| {
        l_trace
            .opportunities_ms()
            .iter()
            .map(move |&m| c * period + m * 1_000_000)
    });
    let want: Vec<u64> = schedule
        .filter(|&t| t > 0 && t <= until.as_nanos())
        .collect();
    let got: Vec<u64> = deliveries
        .iter()
        .map(|d| d.departed_at.as_nanos())
        .collect();
    assert_eq!(got, want);
}

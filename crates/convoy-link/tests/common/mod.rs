//! Shared helpers for the integration tests: a virtual-time driver.
#![allow(dead_code)]

use std::path::PathBuf;

use convoy_link::{Delivery, Enqueued, LinkDirection, QueuePolicy, Time};

/// The shared traces directory beside the repository (CI always has it).
pub fn shared_traces() -> PathBuf {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces"
    ));
    assert!(
        dir.join("README.md").is_file(),
        "shared traces not found at {}: clone the repository with ../shared beside it",
        dir.display()
    );
    dir
}

pub const SHARED_TRACES: [&str; 6] = [
    "ATT-LTE-driving-2016.up",
    "ATT-LTE-driving-2016.down",
    "TMobile-LTE-short.up",
    "TMobile-LTE-short.down",
    "Verizon-LTE-short.up",
    "Verizon-LTE-short.down",
];

/// An offered packet.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    pub at: Time,
    pub len: u32,
    pub id: u64,
}

/// Drives `link` as an emulator would: wake at every arrival and every event
/// the link announces, poll all due deliveries, then offer the arrivals of
/// that instant. Runs until `until` (inclusive).
pub fn drive<P: QueuePolicy>(
    link: &mut LinkDirection<P>,
    arrivals: &[Arrival],
    until: Time,
) -> (Vec<Delivery>, Vec<(u64, Enqueued)>) {
    let mut deliveries = Vec::new();
    let mut verdicts = Vec::new();
    let mut i = 0;
    loop {
        let next_arrival = arrivals.get(i).map(|a| a.at);
        let t = match (next_arrival, link.next_event_time()) {
            (Some(a), Some(e)) => a.min(e),
            (a, e) => match a.or(e) {
                Some(t) => t,
                None => break,
            },
        };
        if t > until {
            break;
        }
        while let Some(d) = link.poll_delivery(t) {
            deliveries.push(d);
        }
        while i < arrivals.len() && arrivals[i].at == t {
            let a = arrivals[i];
            verdicts.push((a.id, link.enqueue(a.at, a.len, a.id)));
            i += 1;
        }
    }
    while let Some(d) = link.poll_delivery(until) {
        deliveries.push(d);
    }
    (deliveries, verdicts)
}

/// `n` packets of `len` bytes, one every `gap_ns` from `start_ns`.
pub fn periodic(n: u64, start_ns: u64, gap_ns: u64, len: u32) -> Vec<Arrival> {
    (0..n)
        .map(|i| Arrival {
            at: Time::from_nanos(start_ns + i * gap_ns),
            len,
            id: i,
        })
        .collect()
}

//! The throughput workload, written once for `cargo bench`, the
//! `link_throughput` example and a later `convoy bench link`: one link
//! direction driven in virtual time, every packet going through `enqueue`
//! and, unless dropped, `poll_delivery`. No clock here; callers time runs.

use std::hint::black_box;
use std::sync::Arc;

use crate::config::LinkConfig;
use crate::error::ConfigError;
use crate::link::LinkDirection;
use crate::loss::LossModel;
use crate::queue::QueueLimit;
use crate::time::{Dur, Time};
use crate::trace::mahimahi::MahimahiTrace;

/// Bytes per offered packet.
pub const PACKET_BYTES: u32 = 1500;

/// A link configuration and an offered load.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Short identifier (benchmark id).
    pub id: &'static str,
    /// What it models, for reports.
    pub description: &'static str,
    pub config: LinkConfig,
    /// Time between offered packets.
    pub gap: Dur,
}

impl Workload {
    /// 1 Gbit/s, 10 ms, 1 % Bernoulli loss, 1000-packet drop-tail, offered
    /// at 109 % of capacity (a packet every 11 us), so the queue fills and
    /// tail drops happen as well as losses.
    pub fn constant_gbit() -> Workload {
        Workload {
            id: "constant_1gbps_bernoulli",
            description: "constant 1 Gbit/s, 10 ms, Bernoulli 1 %, drop-tail 1000 packets",
            config: LinkConfig::constant(1_000_000_000)
                .with_delay(Dur::from_millis(10))
                .with_loss(LossModel::Bernoulli { p: 0.01 })
                .with_queue(QueueLimit::Packets(1000))
                .with_seed(1),
            gap: Dur::from_micros(11),
        }
    }

    /// A Mahimahi trace, 20 ms, Gilbert loss (1 % to Bad, 30 % back),
    /// 500-packet drop-tail, offered at 110 % of the trace's mean rate.
    pub fn mahimahi(trace: Arc<MahimahiTrace>) -> Workload {
        let gap_ns = f64::from(PACKET_BYTES) * 8.0 / trace.mean_rate_bps() / 1.1 * 1e9;
        Workload {
            id: "mahimahi_gilbert",
            description: "Mahimahi trace, 20 ms, Gilbert-Elliott, drop-tail 500 packets",
            config: LinkConfig::mahimahi(trace)
                .with_delay(Dur::from_millis(20))
                .with_loss(LossModel::gilbert(0.01, 0.3))
                .with_queue(QueueLimit::Packets(500))
                .with_seed(2),
            gap: Dur::from_nanos(gap_ns as u64),
        }
    }

    /// A fresh link direction for this workload.
    pub fn link(&self) -> Result<LinkDirection, ConfigError> {
        LinkDirection::new(self.config.clone())
    }

    /// Offers `packets` packets to `link`, polling deliveries at each
    /// arrival; returns how many were delivered.
    pub fn run(&self, link: &mut LinkDirection, packets: u64) -> u64 {
        let mut delivered = 0;
        let mut now = Time::ZERO;
        for id in 0..packets {
            black_box(link.enqueue(now, PACKET_BYTES, id));
            while let Some(d) = link.poll_delivery(now) {
                black_box(d);
                delivered += 1;
            }
            now += self.gap;
        }
        delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_run_and_drop_as_designed() {
        let w = Workload::constant_gbit();
        let mut l = w.link().unwrap();
        let delivered = w.run(&mut l, 200_000);
        let s = *l.stats();
        assert_eq!(s.offered, 200_000);
        assert!(s.dropped(crate::DropReason::QueueFull) > 0);
        assert!(s.dropped(crate::DropReason::Loss) > 0);
        // Everything is accounted for: delivered, dropped or still inside.
        let inside = l.queue_state().packets as u64 + l.in_flight() as u64 + 1;
        assert!(s.offered - delivered - s.dropped_total() <= inside);
        let trace = MahimahiTrace::parse("1\n1\n2\n", "t").unwrap();
        let w = Workload::mahimahi(Arc::new(trace));
        let mut l = w.link().unwrap();
        assert!(w.run(&mut l, 10_000) > 5_000);
    }
}

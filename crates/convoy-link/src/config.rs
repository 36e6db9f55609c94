//! Configuration of one link direction.

use std::sync::Arc;

use crate::availability::{Availability, OutagePolicy};
use crate::capacity::Capacity;
use crate::delay::{DelayConfig, DelaySource};
use crate::loss::{LossModel, LossPosition, LossSource};
use crate::mac::MacConfig;
use crate::queue::{QueueDiscipline, QueueLimit};
use crate::time::{Dur, Time};
use crate::trace::mahimahi::MahimahiTrace;
use crate::trace::series::SeriesTrace;

/// Everything that defines one direction of a link. Two directions with the
/// same configuration (including `seed`) behave identically for the same
/// sequence of calls.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    pub capacity: Capacity,
    pub delay: DelayConfig,
    pub loss: LossSource,
    pub loss_position: LossPosition,
    pub queue: QueueLimit,
    /// FIFO (default) or per-flow queues.
    pub discipline: QueueDiscipline,
    pub availability: Availability,
    pub outage: OutagePolicy,
    /// 802.11 retries and backoff at the transmitter (`None`: every packet
    /// is sent once, back to back). With it, the rate is the PHY rate and
    /// the loss model is the loss of each attempt.
    pub mac: Option<MacConfig>,
    /// The time-series trace that `Capacity::Series`, `DelaySource::Series`,
    /// `LossSource::Series` and `Availability::Series` read.
    pub series: Option<Arc<SeriesTrace>>,
    /// Seeds every random process of this direction (each its own stream).
    pub seed: u64,
    /// Keep per-packet records (see [`LinkDirection::take_records`](crate::LinkDirection::take_records)).
    pub record: bool,
}

impl LinkConfig {
    fn with_capacity(capacity: Capacity) -> LinkConfig {
        LinkConfig {
            capacity,
            delay: DelayConfig::default(),
            loss: LossSource::default(),
            loss_position: LossPosition::default(),
            queue: QueueLimit::default(),
            discipline: QueueDiscipline::default(),
            availability: Availability::default(),
            outage: OutagePolicy::default(),
            mac: None,
            series: None,
            seed: 0,
            record: false,
        }
    }

    /// A constant-rate link: no delay, no loss, unlimited queue.
    pub fn constant(bps: u64) -> LinkConfig {
        LinkConfig::with_capacity(Capacity::Constant { bps })
    }

    /// A Mahimahi-trace link: no delay, no loss, unlimited queue (mm-link's
    /// defaults).
    pub fn mahimahi(trace: Arc<MahimahiTrace>) -> LinkConfig {
        LinkConfig::with_capacity(Capacity::Mahimahi(trace))
    }

    /// A link driven entirely by a time-series trace: rate, delay, loss and
    /// availability all come from it.
    pub fn series(trace: Arc<SeriesTrace>) -> LinkConfig {
        LinkConfig {
            delay: DelayConfig {
                base: DelaySource::Series,
                ..DelayConfig::default()
            },
            loss: LossSource::Series,
            availability: Availability::Series,
            series: Some(trace),
            ..LinkConfig::with_capacity(Capacity::Series)
        }
    }

    pub fn with_delay(mut self, delay: Dur) -> LinkConfig {
        self.delay.base = DelaySource::Fixed(delay);
        self
    }

    /// Uniform jitter in `[0, max]`; `reorder` lets packets overtake.
    pub fn with_jitter(mut self, max: Dur, reorder: bool) -> LinkConfig {
        self.delay.jitter = max;
        self.delay.reorder = reorder;
        self
    }

    pub fn with_loss(mut self, model: LossModel) -> LinkConfig {
        self.loss = LossSource::Model(model);
        self
    }

    pub fn with_loss_position(mut self, position: LossPosition) -> LinkConfig {
        self.loss_position = position;
        self
    }

    pub fn with_queue(mut self, limit: QueueLimit) -> LinkConfig {
        self.queue = limit;
        self
    }

    pub fn with_discipline(mut self, discipline: QueueDiscipline) -> LinkConfig {
        self.discipline = discipline;
        self
    }

    /// Down intervals `[start, end)` and what happens to packets meanwhile.
    pub fn with_outages(mut self, down: Vec<(Time, Time)>, policy: OutagePolicy) -> LinkConfig {
        self.availability = Availability::Down(down);
        self.outage = policy;
        self
    }

    pub fn with_outage_policy(mut self, policy: OutagePolicy) -> LinkConfig {
        self.outage = policy;
        self
    }

    pub fn with_mac(mut self, mac: MacConfig) -> LinkConfig {
        self.mac = Some(mac);
        self
    }

    pub fn with_seed(mut self, seed: u64) -> LinkConfig {
        self.seed = seed;
        self
    }

    pub fn with_records(mut self, on: bool) -> LinkConfig {
        self.record = on;
        self
    }
}

impl LinkConfig {
    /// With a MAC: the share of a `rate_bps` PHY rate that full-size
    /// (1500-byte) packets get, and the loss left after the retries, when
    /// each attempt is lost with `p` (mac.rs). Without one: `(1, p)`.
    pub fn mac_share_and_loss(&self, rate_bps: f64, p: f64) -> (f64, f64) {
        let Some(mac) = &self.mac else {
            return (1.0, p);
        };
        if rate_bps <= 0.0 {
            return (0.0, p);
        }
        let frame_s = 1500.0 * 8.0 / rate_bps;
        let body_s = f64::from(1500 + mac.header_bytes) * 8.0 / rate_bps;
        let e = mac.expected(p, Dur::from_nanos((body_s * 1e9).round() as u64));
        (frame_s / e.service_s, e.residual_loss)
    }

    /// The loss of each attempt (or packet) at `t`: the model's long-run
    /// rate, or the series row's Bernoulli probability (0 for other rows).
    fn loss_at(&self, t: Time) -> f64 {
        match &self.loss {
            LossSource::Model(m) => m.theoretical_loss_rate().unwrap_or(0.0),
            LossSource::Series => match self.series.as_ref().map(|s| s.row_at(t).loss) {
                Some(crate::loss::LossParams::Bernoulli(p)) => p.as_f64(),
                _ => 0.0,
            },
        }
    }

    /// Bits the bottleneck could carry in `[from, to)`: what a sender that
    /// never let the queue empty would have been offered. Mahimahi traces
    /// count their opportunities exactly; rates are integrated in 1 ms steps.
    /// Down intervals carry nothing. With a MAC, each step's rate is scaled
    /// by the share full-size packets get after backoff, ACKs and retries
    /// at that step's attempt loss (`mac_share_and_loss`).
    pub fn capacity_bits(&self, from: Time, to: Time) -> f64 {
        if to <= from {
            return 0.0;
        }
        let down = |t: Time| -> bool {
            match &self.availability {
                Availability::AlwaysUp => false,
                Availability::Down(list) => list.iter().any(|&(s, e)| s <= t && t < e),
                Availability::Series => self.series.as_ref().is_some_and(|s| !s.row_at(t).up),
            }
        };
        let step = Dur::from_millis(1);
        let mut bits = 0.0;
        match &self.capacity {
            Capacity::Mahimahi(trace) if matches!(self.availability, Availability::AlwaysUp) => {
                let n = trace.opportunities_until(to) - trace.opportunities_until(from);
                return n as f64 * f64::from(crate::OPPORTUNITY_BYTES) * 8.0;
            }
            Capacity::Mahimahi(trace) => {
                let mut t = from;
                while t < to {
                    let next = (t + step).min(to);
                    if !down(t) {
                        let n = trace.opportunities_until(next) - trace.opportunities_until(t);
                        bits += n as f64 * f64::from(crate::OPPORTUNITY_BYTES) * 8.0;
                    }
                    t = next;
                }
            }
            Capacity::Constant { bps } => {
                let mut t = from;
                while t < to {
                    let next = (t + step).min(to);
                    if !down(t) {
                        let share = self.mac_share_and_loss(*bps as f64, self.loss_at(t)).0;
                        bits += *bps as f64 * share * (next - t).as_secs_f64();
                    }
                    t = next;
                }
            }
            Capacity::Series => {
                let Some(series) = &self.series else {
                    return 0.0;
                };
                let mut t = from;
                while t < to {
                    let next = (t + step).min(to);
                    if !down(t) {
                        let rate = series.row_at(t).rate_bps as f64;
                        let share = self.mac_share_and_loss(rate, self.loss_at(t)).0;
                        bits += rate * share * (next - t).as_secs_f64();
                    }
                    t = next;
                }
            }
        }
        bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_with_a_mac_is_what_full_size_frames_get() {
        let c = LinkConfig::constant(20_000_000).with_mac(MacConfig::ofdm_20mhz());
        // 600 µs of payload in 34 + 7.5·9 + 20 + 614.4 + 16 + 44 µs.
        let bits = c.capacity_bits(Time::ZERO, Time::from_secs(1));
        assert!((bits - 20e6 * 600.0 / 795.9).abs() < 1e3, "{bits}");
        let lossy = c.with_loss(LossModel::Bernoulli { p: 0.5 });
        let (share, loss) = lossy.mac_share_and_loss(20e6, 0.5);
        assert!((loss - 0.5f64.powi(8)).abs() < 1e-15);
        assert!(share < 0.4, "{share}");
        assert_eq!(
            LinkConfig::constant(1).mac_share_and_loss(1.0, 0.1),
            (1.0, 0.1)
        );
    }

    #[test]
    fn capacity_in_a_window_counts_opportunities_and_outages() {
        let c = LinkConfig::constant(8_000_000);
        let bits = c.capacity_bits(Time::from_millis(100), Time::from_millis(600));
        assert!((bits - 4e6).abs() < 1.0, "{bits}");
        let c = c.with_outages(
            vec![(Time::from_millis(200), Time::from_millis(300))],
            OutagePolicy::Hold,
        );
        let bits = c.capacity_bits(Time::from_millis(100), Time::from_millis(600));
        assert!((bits - 3.2e6).abs() < 1.0, "{bits}");
        let t = MahimahiTrace::parse("1\n2\n2\n10\n", "t").unwrap();
        let m = LinkConfig::mahimahi(Arc::new(t));
        // (0, 10] holds 4 opportunities; (10, 25] holds 11, 12, 12, 20 and
        // 21, 22, 22 of the two cycles after.
        assert_eq!(
            m.capacity_bits(Time::ZERO, Time::from_millis(10)),
            4.0 * 12000.0
        );
        assert_eq!(
            m.capacity_bits(Time::from_millis(10), Time::from_millis(25)),
            7.0 * 12000.0
        );
    }
}

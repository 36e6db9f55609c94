//! Every constant of the router, with the thesis's value where it gives
//! one and our documented choice where it does not (docs/SIM.md).

use std::time::Duration;

/// Which routing protocol a router runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// AVE's four strategies in order, with the loop rule.
    Ave,
    /// Plain DYMO: route discovery for every bundle, no store-carry.
    Dymo,
    /// Greedy geographic forwarding toward the nearest RSU (no perimeter
    /// mode): a bundle at a local minimum is dropped.
    Greedy,
    /// Binary spray-and-wait with `copies` copies (the DTN baseline).
    SprayAndWait { copies: u8 },
}

impl Protocol {
    pub const NAMES: &'static [&'static str] = &["ave", "dymo", "greedy", "spray"];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ave => "ave",
            Protocol::Dymo => "dymo",
            Protocol::Greedy => "greedy",
            Protocol::SprayAndWait { .. } => "spray",
        }
    }
}

impl std::str::FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Protocol, String> {
        match s {
            "ave" => Ok(Protocol::Ave),
            "dymo" => Ok(Protocol::Dymo),
            "greedy" => Ok(Protocol::Greedy),
            "spray" => Ok(Protocol::SprayAndWait { copies: 8 }),
            _ => Err(format!(
                "unknown routing protocol {s:?}: valid ones are {}",
                Protocol::NAMES.join(", ")
            )),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub protocol: Protocol,
    /// NHDP HELLO interval (thesis: 2 s, RFC 6130's recommendation).
    pub beacon_interval: Duration,
    /// A neighbour not heard for this long is forgotten (RFC 6130's
    /// H_HOLD_TIME = 3 × HELLO interval).
    pub neighbor_hold: Duration,
    /// Beacons from senders farther than this are ignored (the thesis's
    /// filter instead of hysteresis). The driver sets it from its radio
    /// model: the distance where delivery falls to 1 %.
    pub max_range_m: f64,
    /// Route discovery only if an RSU beacon was heard this recently (T_MAX).
    pub t_max: Duration,
    /// A discovery with no reply by then gives up (T_END).
    pub t_end: Duration,
    /// AVE's bounded search: RREQ hop limit (thesis: "reduced"; ours 5,
    /// the "RSU 5 hops away" of its T_MAX argument).
    pub ave_rreq_hops: u8,
    /// Plain DYMO's RREQ hop limit (DYMO's MSG_HOPLIMIT default, 10).
    pub dymo_rreq_hops: u8,
    /// Plain DYMO: discovery attempts before buffered bundles are dropped
    /// (RREQ_TRIES = 3), each waiting `dymo_rreq_wait` (doubling).
    pub dymo_rreq_tries: u8,
    pub dymo_rreq_wait: Duration,
    /// A route unused this long expires (DYMO ROUTE_TIMEOUT 5 s).
    pub route_timeout: Duration,
    /// The geo ↔ carry distance threshold d_th (not given by the thesis).
    pub d_th_m: f64,
    /// Store-carry-forward looks this far ahead when predicting positions.
    pub carry_horizon: Duration,
    /// ...and hands custody over only for at least this much gain.
    pub carry_min_gain_m: f64,
    /// A bundle older than this is dropped (its carrier gave up).
    pub bundle_lifetime: Duration,
    /// At most this many bundles held; the oldest goes first.
    pub buffer_limit: usize,
}

impl Config {
    pub fn new(protocol: Protocol) -> Config {
        Config {
            protocol,
            beacon_interval: Duration::from_secs(2),
            neighbor_hold: Duration::from_secs(6),
            max_range_m: 1000.0,
            t_max: Duration::from_secs(360),
            t_end: Duration::from_secs(10),
            ave_rreq_hops: 5,
            dymo_rreq_hops: 10,
            dymo_rreq_tries: 3,
            dymo_rreq_wait: Duration::from_secs(1),
            route_timeout: Duration::from_secs(5),
            d_th_m: 150.0,
            carry_horizon: Duration::from_secs(10),
            carry_min_gain_m: 50.0,
            bundle_lifetime: Duration::from_secs(600),
            buffer_limit: 256,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.beacon_interval.is_zero() || self.neighbor_hold < self.beacon_interval {
            return Err("the neighbour hold time must be at least one beacon interval".into());
        }
        if !(self.max_range_m > 0.0 && self.d_th_m >= 0.0 && self.carry_min_gain_m >= 0.0) {
            return Err("ranges and thresholds must be positive".into());
        }
        if let Protocol::SprayAndWait { copies } = self.protocol {
            if copies == 0 {
                return Err("spray-and-wait needs at least one copy".into());
            }
        }
        if self.buffer_limit == 0 {
            return Err("the buffer must hold at least one bundle".into());
        }
        Ok(())
    }
}

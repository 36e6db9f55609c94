//! Faults after the link, as netem's `duplicate`, `corrupt` and `reorder`:
//! a delivered packet may arrive twice, arrive with one bit flipped, or be
//! held back so that later packets overtake it. Sans-IO and seeded like
//! the rest of the model; the emulator applies the decisions to bytes.

use std::collections::{BTreeMap, VecDeque};

use crate::error::ConfigError;
use crate::link::Delivery;
use crate::rng::{Prob, Rng};
use crate::time::{Dur, Time};

/// How often each fault happens, per delivered packet.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultConfig {
    /// Probability that a packet arrives twice (the copy right after it).
    pub duplicate: f64,
    /// Probability that a packet arrives with one bit of its payload flipped.
    pub corrupt: f64,
    /// Probability that a packet is held back by `reorder_delay`.
    pub reorder: f64,
    pub reorder_delay: Dur,
}

impl FaultConfig {
    /// The hold-back of a reordered packet when none is given.
    pub const DEFAULT_REORDER_DELAY: Dur = Dur::from_millis(10);

    pub fn is_none(&self) -> bool {
        self.duplicate == 0.0 && self.corrupt == 0.0 && self.reorder == 0.0
    }
}

/// A delivery after the faults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Faulted {
    pub delivery: Delivery,
    /// This is the duplicate (the packet's second arrival).
    pub copy: bool,
    /// Another arrival of the same packet follows (keep its bytes).
    pub more: bool,
    /// Flip this bit of the payload (modulo its length in bits).
    pub corrupt_bit: Option<u64>,
}

/// What the faults did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    pub duplicated: u64,
    pub corrupted: u64,
    pub reordered: u64,
}

pub struct FaultStage {
    duplicate: Prob,
    corrupt: Prob,
    reorder: Prob,
    reorder_delay: Dur,
    rng: Rng,
    ready: VecDeque<Faulted>,
    /// Held-back packets by release time (and arrival order).
    held: BTreeMap<(Time, u64), Faulted>,
    seq: u64,
    stats: FaultStats,
}

impl FaultStage {
    pub fn new(cfg: &FaultConfig, seed: u64) -> Result<FaultStage, ConfigError> {
        Ok(FaultStage {
            duplicate: Prob::new(cfg.duplicate, "duplicate")?,
            corrupt: Prob::new(cfg.corrupt, "corrupt")?,
            reorder: Prob::new(cfg.reorder, "reorder")?,
            reorder_delay: cfg.reorder_delay,
            rng: Rng::new(seed, 0xfa17),
            ready: VecDeque::new(),
            held: BTreeMap::new(),
            seq: 0,
            stats: FaultStats::default(),
        })
    }

    /// Takes a delivery from the link. Each packet draws the same number
    /// of random numbers whatever happens, so one fault's probability does
    /// not shift another's pattern.
    pub fn push(&mut self, d: Delivery) {
        let dup = self.rng.chance(self.duplicate);
        let corrupt = self.rng.chance(self.corrupt);
        let hold = self.rng.chance(self.reorder);
        let bit = self.rng.next_u64();
        let first = Faulted {
            delivery: d,
            copy: false,
            more: dup,
            corrupt_bit: corrupt.then_some(bit),
        };
        self.stats.duplicated += u64::from(dup);
        self.stats.corrupted += u64::from(corrupt);
        let mut out = vec![first];
        if dup {
            out.push(Faulted {
                copy: true,
                more: false,
                corrupt_bit: None,
                ..first
            });
        }
        if hold && !self.reorder_delay.is_zero() {
            self.stats.reordered += 1;
            let release = d.at + self.reorder_delay;
            for mut f in out {
                f.delivery.at = release;
                self.seq += 1;
                self.held.insert((release, self.seq), f);
            }
        } else {
            self.ready.extend(out);
        }
    }

    /// The next packet to deliver by `now`.
    pub fn pop(&mut self, now: Time) -> Option<Faulted> {
        if let Some(f) = self.ready.pop_front() {
            return Some(f);
        }
        let (&key, _) = self.held.first_key_value()?;
        if key.0 > now {
            return None;
        }
        self.held.remove(&key)
    }

    /// When a held-back packet is due (`None`: nothing held).
    pub fn next_event_time(&self) -> Option<Time> {
        if !self.ready.is_empty() {
            return self.ready.front().map(|f| f.delivery.at);
        }
        self.held.first_key_value().map(|(k, _)| k.0)
    }

    pub fn stats(&self) -> FaultStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(id: u64, ms: u64) -> Delivery {
        Delivery {
            id,
            len: 100,
            tag: 0,
            enqueued_at: Time::ZERO,
            departed_at: Time::ZERO,
            at: Time::ZERO + Dur::from_millis(ms),
            queue_delay: Dur::ZERO,
        }
    }

    fn run(cfg: &FaultConfig, n: u64) -> (Vec<Faulted>, FaultStats) {
        let mut f = FaultStage::new(cfg, 7).unwrap();
        let mut out = Vec::new();
        for i in 0..n {
            f.push(delivery(i, i));
            while let Some(x) = f.pop(Time::ZERO + Dur::from_millis(i)) {
                out.push(x);
            }
        }
        while let Some(x) = f.pop(Time::MAX) {
            out.push(x);
        }
        (out, f.stats())
    }

    #[test]
    fn rates_match_and_nothing_is_lost() {
        let cfg = FaultConfig {
            duplicate: 0.05,
            corrupt: 0.02,
            reorder: 0.1,
            reorder_delay: Dur::from_millis(5),
        };
        let (out, st) = run(&cfg, 20_000);
        assert_eq!(out.len() as u64, 20_000 + st.duplicated);
        let near = |x: u64, p: f64| (x as f64 / 20_000.0 - p).abs() < p * 0.2;
        assert!(
            near(st.duplicated, 0.05) && near(st.corrupted, 0.02) && near(st.reordered, 0.1),
            "{st:?}"
        );
        let overtaken = out
            .windows(2)
            .filter(|w| w[1].delivery.id < w[0].delivery.id)
            .count();
        assert!(overtaken > 1000, "reordered: {overtaken}");
        let copies = out.iter().filter(|f| f.copy).count() as u64;
        assert_eq!(copies, st.duplicated);
        assert_eq!(
            out.iter().filter(|f| f.corrupt_bit.is_some()).count() as u64,
            st.corrupted
        );
        // Same seed, same faults.
        assert_eq!(run(&cfg, 20_000).0, out);
    }

    #[test]
    fn no_faults_is_the_identity_and_bad_probabilities_are_refused() {
        let (out, st) = run(&FaultConfig::default(), 100);
        assert_eq!(st, FaultStats::default());
        assert!(out
            .iter()
            .enumerate()
            .all(|(i, f)| f.delivery.id == i as u64 && !f.copy && f.corrupt_bit.is_none()));
        assert!(FaultStage::new(
            &FaultConfig {
                duplicate: 1.5,
                ..FaultConfig::default()
            },
            1
        )
        .is_err());
    }
}

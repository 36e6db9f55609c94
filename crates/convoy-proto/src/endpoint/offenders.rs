//! Source addresses whose connections the server just closed for a fault
//! of their own (a protocol violation, or a refusal by the application:
//! unknown key, too many connections for one identity), and a small
//! handshake rate for them until they stay clean for a while.
//!
//! Every handshake costs the server its key exchanges before it learns
//! who is asking, and the application can refuse an identity only after
//! that. A peer that comes back as soon as it is closed would buy a
//! handshake a time, for ever. This gate runs before any of it: an
//! Initial from an offending address beyond its rate is dropped unread.
//! It is a rate, never a ban, because vehicles share addresses behind
//! carrier-grade NAT, and an honest one behind the same address as an
//! attacker should get in, if more slowly.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

/// At most this many addresses are remembered; beyond it the one whose
/// hold ends first is forgotten (a flood of addresses cannot grow it).
const MAX_ADDRESSES: usize = 4096;

#[derive(Clone, Debug)]
struct Bucket {
    tokens: f64,
    refilled_at: Duration,
    /// The hold ends this long after the last offence.
    until: Duration,
}

#[derive(Clone, Debug)]
pub(crate) struct Offenders {
    /// Handshakes a second an offending address may begin (0: the gate
    /// is off).
    rate: f64,
    hold: Duration,
    held: HashMap<IpAddr, Bucket, foldhash::fast::RandomState>,
}

impl Offenders {
    pub fn new(rate: u32, hold: Duration) -> Offenders {
        Offenders {
            rate: f64::from(rate),
            hold,
            held: HashMap::default(),
        }
    }

    fn off(&self) -> bool {
        self.rate <= 0.0 || self.hold.is_zero()
    }

    /// `ip` just had a connection closed for its own fault: held from now
    /// on, with its bucket empty, so its next handshake waits 1/rate.
    pub fn offend(&mut self, ip: IpAddr, now: Duration) {
        if self.off() {
            return;
        }
        if !self.held.contains_key(&ip) && self.held.len() >= MAX_ADDRESSES {
            self.held.retain(|_, b| b.until > now);
            if self.held.len() >= MAX_ADDRESSES {
                if let Some(first) = self
                    .held
                    .iter()
                    .min_by_key(|(_, b)| b.until)
                    .map(|(ip, _)| *ip)
                {
                    self.held.remove(&first);
                }
            }
        }
        let b = self.held.entry(ip).or_insert(Bucket {
            tokens: 0.0,
            refilled_at: now,
            until: now,
        });
        b.until = now + self.hold;
    }

    /// Whether a handshake from `ip` may begin at `now` (and spends its
    /// token if so).
    pub fn admit(&mut self, ip: IpAddr, now: Duration) -> bool {
        let Some(b) = self.held.get_mut(&ip) else {
            return true;
        };
        if b.until <= now {
            self.held.remove(&ip);
            return true;
        }
        let dt = now.saturating_sub(b.refilled_at).as_secs_f64();
        // A second's worth at most: a held address never saves up a burst.
        b.tokens = (b.tokens + dt * self.rate).min(self.rate.max(1.0));
        b.refilled_at = b.refilled_at.max(now);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Addresses held now.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn ip(n: u32) -> IpAddr {
        IpAddr::from(n.to_be_bytes())
    }

    #[test]
    fn an_offender_gets_its_rate_until_the_hold_ends() {
        let mut o = Offenders::new(4, Duration::from_secs(10));
        let a = ip(1);
        assert!(o.admit(a, Duration::ZERO), "nobody is held at first");
        o.offend(a, Duration::ZERO);
        assert!(!o.admit(a, 100 * MS), "its bucket starts empty");
        assert!(o.admit(a, 250 * MS), "one handshake per 250 ms");
        assert!(!o.admit(a, 260 * MS));
        // A second of tokens at most, however long it waited.
        let t = Duration::from_secs(5);
        let admitted = (0..10).filter(|_| o.admit(a, t)).count();
        assert_eq!(admitted, 4);
        // Others are not touched.
        assert!(o.admit(ip(2), t));
        // Clean for the hold: free again, and forgotten.
        assert!(o.admit(a, Duration::from_secs(10)));
        assert_eq!(o.held(), 0);
    }

    #[test]
    fn a_new_offence_extends_the_hold() {
        let mut o = Offenders::new(4, Duration::from_secs(10));
        o.offend(ip(1), Duration::ZERO);
        o.offend(ip(1), Duration::from_secs(8));
        let t = Duration::from_secs(12);
        let admitted = (0..10).filter(|_| o.admit(ip(1), t)).count();
        assert_eq!(admitted, 4, "still held at 12 s");
    }

    #[test]
    fn the_table_is_bounded() {
        let mut o = Offenders::new(4, Duration::from_secs(10));
        for n in 0..(MAX_ADDRESSES as u32 + 100) {
            o.offend(ip(n), Duration::from_millis(u64::from(n)));
        }
        assert_eq!(o.held(), MAX_ADDRESSES);
        // The oldest holds went first.
        assert!(o.admit(ip(0), Duration::from_secs(1)));
        assert!(!o.admit(ip(MAX_ADDRESSES as u32 + 99), Duration::from_secs(1)));
    }

    #[test]
    fn a_zero_rate_or_hold_turns_it_off() {
        for mut o in [
            Offenders::new(0, Duration::from_secs(10)),
            Offenders::new(4, Duration::ZERO),
        ] {
            o.offend(ip(1), Duration::ZERO);
            assert!(o.admit(ip(1), Duration::ZERO));
            assert_eq!(o.held(), 0);
        }
    }
}

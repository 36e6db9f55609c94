//! CoDel (RFC 8289) as a [`QueuePolicy`].
//!
//! RFC 8289 writes CoDel as one `dequeue()` that may drop several packets in
//! a loop. The link instead offers packets one at a time, so the loop's
//! position is kept in `pending`; the decisions, including the Linux-style
//! count reuse, are those of the RFC's reference pseudocode.

use crate::queue::{PacketMeta, QueuePolicy, QueueState, Verdict};
use crate::time::{Dur, Time};

/// Where we are inside the RFC's `dequeue()` when the next packet is offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    /// A fresh `dequeue()` call.
    None,
    /// Just dropped while entering the dropping state: the RFC dequeues the
    /// next packet and returns it unconditionally.
    AfterEnter,
    /// Just dropped inside the dropping loop: the RFC dequeues the next
    /// packet, leaves or reschedules, and may drop again.
    InLoop,
}

/// CoDel state and parameters.
#[derive(Clone, Debug)]
pub struct CoDel {
    target: Dur,
    interval: Dur,
    mtu: u64,
    first_above_time: Option<Time>,
    dropping: bool,
    drop_next: Time,
    count: u32,
    lastcount: u32,
    pending: Pending,
    drops: u64,
}

impl Default for CoDel {
    fn default() -> CoDel {
        CoDel::new(Dur::from_millis(5), Dur::from_millis(100), 1500)
    }
}

impl CoDel {
    /// `target` (RFC default 5 ms), `interval` (100 ms), and the largest
    /// packet (`MAXPACKET`, 1500 bytes): a queue holding at most one such
    /// packet is never considered standing.
    pub fn new(target: Dur, interval: Dur, mtu: u32) -> CoDel {
        CoDel {
            target,
            interval,
            mtu: u64::from(mtu),
            first_above_time: None,
            dropping: false,
            drop_next: Time::ZERO,
            count: 0,
            lastcount: 0,
            pending: Pending::None,
            drops: 0,
        }
    }

    /// Packets CoDel has dropped.
    pub fn drops(&self) -> u64 {
        self.drops
    }

    /// Whether CoDel is in its dropping state.
    pub fn is_dropping(&self) -> bool {
        self.dropping
    }

    fn control_law(&self, t: Time, count: u32) -> Time {
        // f64 division and sqrt are correctly rounded (IEEE 754), so this is
        // identical on every platform.
        let step = self.interval.as_nanos() as f64 / f64::from(count.max(1)).sqrt();
        t + Dur::from_nanos(step as u64)
    }

    /// The RFC's `dodequeue()` check for a dequeued packet.
    fn ok_to_drop(&mut self, now: Time, packet: &PacketMeta, after: QueueState) -> bool {
        let sojourn = now.saturating_since(packet.enqueued_at);
        if sojourn < self.target || after.bytes <= self.mtu {
            self.first_above_time = None;
            return false;
        }
        match self.first_above_time {
            None => {
                self.first_above_time = Some(now + self.interval);
                false
            }
            Some(t) => now >= t,
        }
    }

    fn drop_in_loop(&mut self) -> Verdict {
        self.count = self.count.saturating_add(1);
        self.pending = Pending::InLoop;
        self.drops += 1;
        Verdict::Drop
    }
}

impl QueuePolicy for CoDel {
    fn on_dequeue(&mut self, now: Time, packet: &mut PacketMeta, after: QueueState) -> Verdict {
        let ok = self.ok_to_drop(now, packet, after);
        match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::AfterEnter => Verdict::Pass,
            Pending::InLoop => {
                if !ok {
                    self.dropping = false;
                    return Verdict::Pass;
                }
                self.drop_next = self.control_law(self.drop_next, self.count);
                if now >= self.drop_next {
                    self.drop_in_loop()
                } else {
                    Verdict::Pass
                }
            }
            Pending::None if self.dropping => {
                if !ok {
                    self.dropping = false;
                    Verdict::Pass
                } else if now >= self.drop_next {
                    self.drop_in_loop()
                } else {
                    Verdict::Pass
                }
            }
            Pending::None if ok => {
                self.dropping = true;
                let delta = self.count.wrapping_sub(self.lastcount);
                self.count = 1;
                if delta > 1
                    && now.saturating_since(self.drop_next)
                        < Dur::from_nanos(16 * self.interval.as_nanos())
                {
                    self.count = delta;
                }
                self.drop_next = self.control_law(now, self.count);
                self.lastcount = self.count;
                self.pending = Pending::AfterEnter;
                self.drops += 1;
                Verdict::Drop
            }
            Pending::None => Verdict::Pass,
        }
    }

    fn on_empty(&mut self, _now: Time) {
        self.first_above_time = None;
        // After entering the dropping state the RFC keeps it even if the
        // queue ran dry; everywhere else an empty queue ends it.
        if self.pending != Pending::AfterEnter {
            self.dropping = false;
        }
        self.pending = Pending::None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(at_ms: u64) -> PacketMeta {
        PacketMeta {
            id: 0,
            len: 1500,
            enqueued_at: Time::from_millis(at_ms),
            tag: 0,
            flow: 0,
        }
    }

    const BIG: QueueState = QueueState {
        packets: 10,
        bytes: 15_000,
    };

    #[test]
    fn short_sojourn_never_drops() {
        let mut c = CoDel::default();
        for ms in 0..10_000 {
            let v = c.on_dequeue(Time::from_millis(ms + 4), &mut meta(ms), BIG);
            assert_eq!(v, Verdict::Pass);
        }
    }

    #[test]
    fn standing_queue_enters_dropping_after_interval() {
        let mut c = CoDel::default();
        // Sojourn 20 ms on every packet, one packet per ms.
        let mut first_drop = None;
        for ms in 0..1000u64 {
            let v = c.on_dequeue(Time::from_millis(ms + 20), &mut meta(ms), BIG);
            if v == Verdict::Drop && first_drop.is_none() {
                first_drop = Some(ms + 20);
            }
        }
        // Above target first seen at 20 ms; dropping allowed from 120 ms on.
        assert_eq!(first_drop, Some(120));
        assert!(c.drops() > 3);
        // Queue drains: leaving the dropping state.
        assert_eq!(
            c.on_dequeue(Time::from_millis(2000), &mut meta(1999), BIG),
            Verdict::Pass
        );
        assert!(!c.is_dropping());
    }

    #[test]
    fn small_backlog_is_not_standing() {
        let mut c = CoDel::default();
        let one = QueueState {
            packets: 1,
            bytes: 1500,
        };
        for ms in 0..1000 {
            assert_eq!(
                c.on_dequeue(Time::from_millis(ms + 50), &mut meta(ms), one),
                Verdict::Pass
            );
        }
    }
}

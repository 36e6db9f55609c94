//! The bottleneck queue: a FIFO with a drop-tail limit, plus a hook for
//! active queue management.
//!
//! The limit counts packets *waiting*, not the one being transmitted, as in
//! mm-link (whose in-transit packet has already left its queue) and in Linux
//! (where it sits in the driver ring, outside the qdisc).

use crate::time::Time;

/// Drop-tail buffer size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueLimit {
    /// No limit (mm-link's default "infinite" queue).
    #[default]
    Unlimited,
    /// At most this many packets wait.
    Packets(u64),
    /// At most this many bytes wait.
    Bytes(u64),
}

impl QueueLimit {
    /// Whether a packet of `len` bytes fits beside what is already queued.
    #[inline]
    pub fn admits(self, queued: QueueState, len: u32) -> bool {
        match self {
            QueueLimit::Unlimited => true,
            QueueLimit::Packets(max) => (queued.packets as u64) < max,
            QueueLimit::Bytes(max) => queued.bytes + u64::from(len) <= max,
        }
    }
}

/// What the link knows about a packet. The payload stays with the driver;
/// `id` ties the two together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// Chosen by the driver; returned untouched on delivery.
    pub id: u64,
    /// Bytes on the wire, as used for capacity and queue limits. A policy
    /// may change it (e.g. after rewriting headers).
    pub len: u32,
    /// When the packet entered the queue.
    pub enqueued_at: Time,
    /// Free for queue policies: 0 on entry, returned on delivery, so a
    /// policy can tell the driver what to do to the payload (e.g. the TCP
    /// receive window a smart access point wants written into it).
    pub tag: u64,
    /// Which flow it belongs to, for per-flow queueing (a hash of the
    /// 5-tuple, say), or which UE for per-UE queueing (a hash of the
    /// device's address); 0 when the driver does not tell them apart.
    pub flow: u64,
}

/// How waiting packets are held and ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueDiscipline {
    /// One FIFO under the drop-tail limit and the [`QueuePolicy`].
    #[default]
    Fifo,
    /// Per-flow queues with CoDel each (RFC 8290); the drop-tail limit is
    /// FQ-CoDel's own.
    FqCodel(crate::fq_codel::FqCodelConfig),
    /// A drop-tail buffer per UE (keyed by [`PacketMeta::flow`]), each
    /// under the drop-tail limit, served by byte-fair round robin: a
    /// cellular cell's scheduler (see [`crate::PerUe`]).
    PerUe(crate::per_ue::PerUeConfig),
}

/// Queue occupancy, excluding the packet being transmitted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueState {
    pub packets: usize,
    pub bytes: u64,
}

/// A queue policy's decision about one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Drop,
}

/// Active queue management: called as packets enter and leave the queue.
///
/// The link calls, for each packet it admits past the drop-tail limit,
/// `on_enqueue` (with the occupancy before the packet is added), and when the
/// transmitter takes the head packet, `on_dequeue` (with the occupancy after
/// it was removed). After a `Drop` from `on_dequeue` the link immediately, at
/// the same `now`, offers the next packet or calls `on_empty`; `on_empty` is
/// also called whenever the transmitter finds the queue empty. This mirrors
/// the dequeue loop of RFC 8289 so CoDel can be written against it exactly.
pub trait QueuePolicy {
    fn on_enqueue(&mut self, now: Time, packet: &mut PacketMeta, queue: QueueState) -> Verdict {
        let _ = (now, packet, queue);
        Verdict::Pass
    }
    fn on_dequeue(&mut self, now: Time, packet: &mut PacketMeta, queue: QueueState) -> Verdict {
        let _ = (now, packet, queue);
        Verdict::Pass
    }
    fn on_empty(&mut self, now: Time) {
        let _ = now;
    }
}

/// Plain drop-tail: no active policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoAqm;

impl QueuePolicy for NoAqm {}

impl<P: QueuePolicy + ?Sized> QueuePolicy for Box<P> {
    fn on_enqueue(&mut self, now: Time, packet: &mut PacketMeta, queue: QueueState) -> Verdict {
        (**self).on_enqueue(now, packet, queue)
    }
    fn on_dequeue(&mut self, now: Time, packet: &mut PacketMeta, queue: QueueState) -> Verdict {
        (**self).on_dequeue(now, packet, queue)
    }
    fn on_empty(&mut self, now: Time) {
        (**self).on_empty(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        let q = QueueState {
            packets: 2,
            bytes: 3000,
        };
        assert!(QueueLimit::Unlimited.admits(q, u32::MAX));
        assert!(QueueLimit::Packets(3).admits(q, 1));
        assert!(!QueueLimit::Packets(2).admits(q, 1));
        assert!(QueueLimit::Bytes(4500).admits(q, 1500));
        assert!(!QueueLimit::Bytes(4499).admits(q, 1500));
    }
}

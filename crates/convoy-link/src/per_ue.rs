//! Per-UE buffers served by deficit round robin: how a cellular cell holds
//! and schedules the traffic of the many devices (UEs) that share it.
//!
//! A cell is not one FIFO. On the LTE and NR uplink each UE queues its own
//! data in its own buffer (its modem's RLC/PDCP queues) and reports how much
//! is waiting (buffer status reports); the base station's scheduler then
//! shares the cell's resource blocks among the UEs that have data, by round
//! robin or proportional fairness. On the downlink the base station keeps a
//! queue per UE (per bearer) and schedules them the same way. So one UE's
//! backlog fills its own buffer and takes its own share of grants; it does
//! not make a packet of another UE wait behind it, as a shared drop-tail
//! FIFO would.
//!
//! This models that with one drop-tail buffer per UE under the link's queue
//! limit (a UE whose buffer is full loses its own arriving packet) and a
//! byte-fair deficit round robin among the UEs with data (Shreedhar and
//! Varghese, 1996): each turn a UE may send up to `quantum` bytes more than
//! it was owed. Proportional fair scheduling also weighs each UE's radio
//! conditions; the traces carry one capacity for the whole cell, so every
//! UE is given the same, which makes PF round robin. Within one UE the
//! buffer is FIFO, as a modem's is for one bearer.
//!
//! UEs are told apart by [`PacketMeta::flow`]: the emulator sets it from
//! the client-side address (the source on the uplink, the destination on
//! the downlink), the UE's address in a cell. Every packet of key 0 shares
//! one buffer, which makes this a plain drop-tail FIFO.

use std::collections::{HashMap, VecDeque};

use crate::queue::{PacketMeta, QueueLimit, QueueState};

/// The scheduler's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerUeConfig {
    /// Bytes a UE may send per round (one full packet by default, so UEs
    /// alternate packet by packet when all are backlogged).
    pub quantum: u32,
}

impl Default for PerUeConfig {
    fn default() -> Self {
        PerUeConfig { quantum: 1500 }
    }
}

#[derive(Clone, Debug, Default)]
struct UeBuffer {
    packets: VecDeque<PacketMeta>,
    bytes: u64,
    /// Bytes this UE may still send in its current turn.
    deficit: u64,
}

/// The UEs' buffers and the round robin among them.
#[derive(Clone, Debug)]
pub struct PerUe {
    cfg: PerUeConfig,
    /// Only UEs with something queued: an emptied buffer is forgotten, so
    /// memory follows the backlog, not the number of UEs ever seen.
    buffers: HashMap<u64, UeBuffer>,
    /// The UEs with data, in round-robin order; the front one has the turn.
    turns: VecDeque<u64>,
    packets: usize,
    bytes: u64,
}

impl PerUe {
    pub fn new(cfg: PerUeConfig) -> PerUe {
        PerUe {
            cfg: PerUeConfig {
                quantum: cfg.quantum.max(1),
            },
            buffers: HashMap::new(),
            turns: VecDeque::new(),
            packets: 0,
            bytes: 0,
        }
    }

    pub fn config(&self) -> &PerUeConfig {
        &self.cfg
    }

    /// Everything waiting, over all UEs.
    pub fn state(&self) -> QueueState {
        QueueState {
            packets: self.packets,
            bytes: self.bytes,
        }
    }

    /// What one UE has waiting.
    pub fn ue_state(&self, ue: u64) -> QueueState {
        self.buffers
            .get(&ue)
            .map_or(QueueState::default(), |b| QueueState {
                packets: b.packets.len(),
                bytes: b.bytes,
            })
    }

    pub fn is_empty(&self) -> bool {
        self.packets == 0
    }

    /// UEs with data waiting.
    pub fn active_ues(&self) -> usize {
        self.turns.len()
    }

    /// Queues a packet in its UE's buffer if `limit` (per UE) admits it;
    /// `false` means that buffer is full and the packet is the caller's to
    /// drop.
    pub fn push(&mut self, meta: PacketMeta, limit: QueueLimit) -> bool {
        if !limit.admits(self.ue_state(meta.flow), meta.len) {
            return false;
        }
        let quantum = u64::from(self.cfg.quantum);
        let buffer = self.buffers.entry(meta.flow).or_default();
        if buffer.packets.is_empty() {
            // A UE with new data joins the end of the round with one
            // turn's allowance, as if it had been passed over once.
            buffer.deficit = quantum;
            self.turns.push_back(meta.flow);
        }
        buffer.bytes += u64::from(meta.len);
        buffer.packets.push_back(meta);
        self.packets += 1;
        self.bytes += u64::from(meta.len);
        true
    }

    /// The next packet to transmit: the head of the UE whose turn it is, if
    /// its allowance covers it; else that UE's turn passes (its allowance
    /// grows by a quantum for the next round) to the next UE.
    pub fn pop(&mut self) -> Option<PacketMeta> {
        let quantum = u64::from(self.cfg.quantum);
        loop {
            let ue = *self.turns.front()?;
            let buffer = self
                .buffers
                .get_mut(&ue)
                .expect("a UE in turn has a buffer");
            let head = buffer.packets.front().expect("a UE in turn has data");
            let len = u64::from(head.len);
            if len > buffer.deficit {
                buffer.deficit += quantum;
                self.turns.rotate_left(1);
                continue;
            }
            let meta = buffer.packets.pop_front().expect("checked");
            buffer.deficit -= len;
            buffer.bytes -= len;
            self.packets -= 1;
            self.bytes -= len;
            if buffer.packets.is_empty() {
                // An idle UE keeps no credit (DRR resets an emptied queue).
                self.buffers.remove(&ue);
                self.turns.pop_front();
            }
            return Some(meta);
        }
    }

    /// Empties every buffer (an outage under the drop policy), oldest
    /// first within each UE, UEs in turn order.
    pub fn drain(&mut self) -> Vec<PacketMeta> {
        let mut out = Vec::with_capacity(self.packets);
        for ue in self.turns.drain(..) {
            if let Some(b) = self.buffers.remove(&ue) {
                out.extend(b.packets);
            }
        }
        self.packets = 0;
        self.bytes = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Time;

    fn pkt(id: u64, ue: u64, len: u32) -> PacketMeta {
        PacketMeta {
            id,
            len,
            enqueued_at: Time::ZERO,
            tag: 0,
            flow: ue,
        }
    }

    fn order(q: &mut PerUe) -> Vec<u64> {
        std::iter::from_fn(|| q.pop()).map(|m| m.id).collect()
    }

    #[test]
    fn one_ue_is_a_fifo() {
        let mut q = PerUe::new(PerUeConfig::default());
        for id in 0..5 {
            assert!(q.push(pkt(id, 0, 1500), QueueLimit::Unlimited));
        }
        assert_eq!(order(&mut q), vec![0, 1, 2, 3, 4]);
        assert!(q.is_empty());
        assert_eq!(q.state(), QueueState::default());
        assert_eq!(q.active_ues(), 0);
    }

    #[test]
    fn a_backlog_does_not_delay_another_ues_packet() {
        // UE 1 has 100 packets waiting when UE 2's one packet arrives: in a
        // FIFO it would leave 101st; here it leaves second.
        let mut q = PerUe::new(PerUeConfig::default());
        for id in 0..100 {
            q.push(pkt(id, 1, 1500), QueueLimit::Unlimited);
        }
        q.push(pkt(1000, 2, 100), QueueLimit::Unlimited);
        assert_eq!(q.pop().unwrap().id, 0);
        assert_eq!(q.pop().unwrap().id, 1000);
        assert_eq!(order(&mut q), (1..100).collect::<Vec<_>>());
    }

    #[test]
    fn backlogged_ues_share_bytes_not_packets() {
        // UE 1 sends 1500-byte packets, UE 2 500-byte ones: while both are
        // backlogged each gets the same bytes, so UE 2 sends three packets
        // for each of UE 1's.
        let mut q = PerUe::new(PerUeConfig::default());
        for id in 0..30 {
            q.push(pkt(id, 1, 1500), QueueLimit::Unlimited);
            q.push(pkt(100 + id, 2, 500), QueueLimit::Unlimited);
        }
        let (mut big, mut small) = (0u64, 0u64);
        for _ in 0..40 {
            let m = q.pop().unwrap();
            if m.flow == 1 {
                big += u64::from(m.len);
            } else {
                small += u64::from(m.len);
            }
        }
        assert!(big.abs_diff(small) <= 1500, "{big} against {small}");
    }

    #[test]
    fn packets_larger_than_the_quantum_still_go() {
        let mut q = PerUe::new(PerUeConfig { quantum: 100 });
        q.push(pkt(1, 1, 9000), QueueLimit::Unlimited);
        q.push(pkt(2, 2, 9000), QueueLimit::Unlimited);
        q.push(pkt(3, 1, 50), QueueLimit::Unlimited);
        assert_eq!(order(&mut q), vec![1, 2, 3]);
    }

    #[test]
    fn the_limit_is_per_ue() {
        let mut q = PerUe::new(PerUeConfig::default());
        let limit = QueueLimit::Packets(2);
        assert!(q.push(pkt(1, 1, 1500), limit));
        assert!(q.push(pkt(2, 1, 1500), limit));
        // UE 1 is full: its own packet is refused...
        assert!(!q.push(pkt(3, 1, 1500), limit));
        // ...and UE 2 still has its whole buffer.
        assert!(q.push(pkt(4, 2, 1500), limit));
        assert!(q.push(pkt(5, 2, 1500), limit));
        assert_eq!(q.ue_state(1).packets, 2);
        assert_eq!(
            q.state(),
            QueueState {
                packets: 4,
                bytes: 6000
            }
        );
        assert_eq!(q.pop().unwrap().id, 1);
        assert!(q.push(pkt(6, 1, 1500), limit));
        let bytes = QueueLimit::Bytes(2000);
        let mut q = PerUe::new(PerUeConfig::default());
        assert!(q.push(pkt(1, 1, 1500), bytes));
        assert!(!q.push(pkt(2, 1, 600), bytes));
        assert!(q.push(pkt(3, 1, 500), bytes));
    }

    #[test]
    fn an_emptied_ue_is_forgotten_and_rejoins_at_the_end() {
        let mut q = PerUe::new(PerUeConfig::default());
        q.push(pkt(1, 1, 1500), QueueLimit::Unlimited);
        q.push(pkt(2, 2, 1500), QueueLimit::Unlimited);
        q.push(pkt(3, 2, 1500), QueueLimit::Unlimited);
        assert_eq!(q.pop().unwrap().id, 1);
        assert_eq!(q.active_ues(), 1);
        // UE 1 comes back with data: it waits for UE 2's turn to pass.
        q.push(pkt(4, 1, 1500), QueueLimit::Unlimited);
        assert_eq!(order(&mut q), vec![2, 4, 3]);
        assert!(q.buffers.is_empty());
    }

    #[test]
    fn drain_empties_everything() {
        let mut q = PerUe::new(PerUeConfig::default());
        for id in 0..6 {
            q.push(pkt(id, id % 3, 1000), QueueLimit::Unlimited);
        }
        q.pop();
        let mut ids: Vec<u64> = q.drain().into_iter().map(|m| m.id).collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![1, 2, 3, 4, 5]);
        assert!(q.is_empty() && q.pop().is_none());
        assert_eq!(q.state(), QueueState::default());
    }

    #[test]
    fn a_zero_quantum_is_taken_as_one_byte() {
        let mut q = PerUe::new(PerUeConfig { quantum: 0 });
        assert_eq!(q.config().quantum, 1);
        q.push(pkt(1, 1, 40), QueueLimit::Unlimited);
        q.push(pkt(2, 2, 40), QueueLimit::Unlimited);
        assert_eq!(order(&mut q), vec![1, 2]);
    }
}

//! FQ-CoDel (RFC 8290): per-flow queues served by deficit round robin with
//! a preference for new (sparse) flows, each queue under its own CoDel.
//!
//! This is the modern access point's answer to a bulk flow that fills the
//! buffer: a VoIP or game flow sends less than its quantum per round, so it
//! stays on the new-flows list and is served before any backlogged flow,
//! while CoDel keeps each bulk flow's own queue near its 5 ms target.
//!
//! Unlike [`crate::CoDel`], which only decides the fate of the FIFO's head,
//! FQ-CoDel owns the packets: the link keeps them here instead of in its
//! FIFO when configured with [`crate::QueueDiscipline::FqCodel`]. Flows are
//! told apart by [`crate::PacketMeta::flow`], a hash the driver computes
//! (the emulator hashes the IPv4 5-tuple); every packet of flow 0 shares one
//! queue, which makes FQ-CoDel plain CoDel.
//!
//! Choices, all RFC 8290 / Linux defaults: 1024 queues, quantum 1514 bytes,
//! limit 10240 packets, CoDel target 5 ms and interval 100 ms. When the
//! limit is reached, the head of the queue with the largest backlog in bytes
//! is dropped (`fq_codel_drop`), not the arriving packet. CoDel's "at most
//! one MTU queued" test looks at the whole backlog, as Linux does.

use std::collections::VecDeque;

use crate::codel::CoDel;
use crate::queue::{PacketMeta, QueuePolicy, QueueState, Verdict};
use crate::time::{Dur, Time};

/// FQ-CoDel's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FqCodelConfig {
    /// Number of flow queues (flows are hashed into them).
    pub flows: u32,
    /// Bytes a queue may send per round.
    pub quantum: u32,
    /// Packets held in all queues together.
    pub limit: u32,
    pub target: Dur,
    pub interval: Dur,
    /// The largest packet, for CoDel's "one MTU" test.
    pub mtu: u32,
}

impl Default for FqCodelConfig {
    fn default() -> Self {
        FqCodelConfig {
            flows: 1024,
            quantum: 1514,
            limit: 10_240,
            target: Dur::from_millis(5),
            interval: Dur::from_millis(100),
            mtu: 1500,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

#[derive(Clone, Debug)]
struct FlowQueue {
    packets: VecDeque<PacketMeta>,
    bytes: u64,
    deficit: i64,
    codel: CoDel,
    list: List,
}

/// The per-flow queues and their scheduler.
#[derive(Clone, Debug)]
pub struct FqCodel {
    cfg: FqCodelConfig,
    queues: Vec<FlowQueue>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    packets: usize,
    bytes: u64,
}

impl FqCodel {
    pub fn new(cfg: FqCodelConfig) -> FqCodel {
        let n = cfg.flows.max(1) as usize;
        let q = FlowQueue {
            packets: VecDeque::new(),
            bytes: 0,
            deficit: 0,
            codel: CoDel::new(cfg.target, cfg.interval, cfg.mtu),
            list: List::None,
        };
        FqCodel {
            cfg,
            queues: vec![q; n],
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            packets: 0,
            bytes: 0,
        }
    }

    pub fn config(&self) -> &FqCodelConfig {
        &self.cfg
    }

    pub fn state(&self) -> QueueState {
        QueueState {
            packets: self.packets,
            bytes: self.bytes,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.packets == 0
    }

    /// Packets CoDel has dropped, over all queues.
    pub fn codel_drops(&self) -> u64 {
        self.queues.iter().map(|q| q.codel.drops()).sum()
    }

    fn bucket(&self, flow: u64) -> usize {
        (flow % self.queues.len() as u64) as usize
    }

    /// Queues a packet. If that takes the total over the limit, the head of
    /// the fattest queue is returned for the caller to drop (it may be this
    /// very packet).
    pub fn push(&mut self, meta: PacketMeta) -> Option<PacketMeta> {
        let i = self.bucket(meta.flow);
        let q = &mut self.queues[i];
        q.bytes += u64::from(meta.len);
        q.packets.push_back(meta);
        if q.list == List::None {
            q.list = List::New;
            q.deficit = i64::from(self.cfg.quantum);
            self.new_flows.push_back(i);
        }
        self.packets += 1;
        self.bytes += u64::from(meta.len);
        if self.packets > self.cfg.limit as usize {
            return self.drop_from_fattest();
        }
        None
    }

    fn drop_from_fattest(&mut self) -> Option<PacketMeta> {
        let (i, _) = self
            .queues
            .iter()
            .enumerate()
            .max_by_key(|(_, q)| q.bytes)?;
        let q = &mut self.queues[i];
        let meta = q.packets.pop_front()?;
        q.bytes -= u64::from(meta.len);
        self.packets -= 1;
        self.bytes -= u64::from(meta.len);
        Some(meta)
    }

    /// The next packet to transmit at `now`, by DRR++ with CoDel per queue.
    /// Packets CoDel drops on the way are appended to `dropped`.
    pub fn pop(&mut self, now: Time, dropped: &mut Vec<PacketMeta>) -> Option<PacketMeta> {
        loop {
            let (i, from_new) = match self.new_flows.front() {
                Some(&i) => (i, true),
                None => (*self.old_flows.front()?, false),
            };
            if self.queues[i].deficit <= 0 {
                self.queues[i].deficit += i64::from(self.cfg.quantum);
                self.unlink_front(from_new);
                self.queues[i].list = List::Old;
                self.old_flows.push_back(i);
                continue;
            }
            match self.codel_dequeue(i, now, dropped) {
                Some(meta) => {
                    self.queues[i].deficit -= i64::from(meta.len);
                    return Some(meta);
                }
                None => {
                    // An emptied new flow goes to the end of the old list
                    // (so it cannot jump the queue again at once) unless
                    // that list is empty; an emptied old flow leaves.
                    self.unlink_front(from_new);
                    if from_new && !self.old_flows.is_empty() {
                        self.queues[i].list = List::Old;
                        self.old_flows.push_back(i);
                    } else {
                        self.queues[i].list = List::None;
                    }
                }
            }
        }
    }

    fn unlink_front(&mut self, from_new: bool) {
        if from_new {
            self.new_flows.pop_front();
        } else {
            self.old_flows.pop_front();
        }
    }

    /// CoDel's dequeue on one flow queue.
    fn codel_dequeue(
        &mut self,
        i: usize,
        now: Time,
        dropped: &mut Vec<PacketMeta>,
    ) -> Option<PacketMeta> {
        loop {
            let q = &mut self.queues[i];
            let Some(mut meta) = q.packets.pop_front() else {
                q.codel.on_empty(now);
                return None;
            };
            q.bytes -= u64::from(meta.len);
            self.packets -= 1;
            self.bytes -= u64::from(meta.len);
            let after = QueueState {
                packets: self.packets,
                bytes: self.bytes,
            };
            match self.queues[i].codel.on_dequeue(now, &mut meta, after) {
                Verdict::Pass => return Some(meta),
                Verdict::Drop => dropped.push(meta),
            }
        }
    }

    /// Empties every queue (the link went down), returning the packets.
    pub fn drain(&mut self, now: Time) -> Vec<PacketMeta> {
        let mut out = Vec::with_capacity(self.packets);
        for q in &mut self.queues {
            out.extend(q.packets.drain(..));
            q.bytes = 0;
            q.list = List::None;
            q.codel.on_empty(now);
        }
        self.new_flows.clear();
        self.old_flows.clear();
        self.packets = 0;
        self.bytes = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(id: u64, flow: u64, len: u32, at: Time) -> PacketMeta {
        PacketMeta {
            id,
            len,
            enqueued_at: at,
            tag: 0,
            flow,
        }
    }

    #[test]
    fn sparse_flow_is_served_before_a_backlog() {
        let mut fq = FqCodel::new(FqCodelConfig::default());
        let t = Time::ZERO;
        for id in 0..100 {
            assert!(fq.push(pkt(id, 1, 1500, t)).is_none());
        }
        let mut dropped = Vec::new();
        // The bulk flow has used its first quantum (two packets take it
        // below zero) and is on the old list...
        assert_eq!(fq.pop(t, &mut dropped).unwrap().flow, 1);
        assert_eq!(fq.pop(t, &mut dropped).unwrap().flow, 1);
        // ...when one small VoIP packet arrives: it goes next, not 99th.
        fq.push(pkt(1000, 2, 200, t));
        let next = fq.pop(t, &mut dropped).unwrap();
        assert_eq!(next.id, 1000);
        assert!(dropped.is_empty());
    }

    #[test]
    fn backlogged_flows_share_bytes_equally() {
        let mut fq = FqCodel::new(FqCodelConfig::default());
        let t = Time::ZERO;
        // Flow 1 sends 1500-byte packets, flow 2 sends 500-byte packets.
        for id in 0..300 {
            fq.push(pkt(id, 1, 1500, t));
            fq.push(pkt(1000 + id, 2, 500, t));
            fq.push(pkt(2000 + id, 2, 500, t));
            fq.push(pkt(3000 + id, 2, 500, t));
        }
        let mut bytes = [0u64; 3];
        let mut dropped = Vec::new();
        for _ in 0..300 {
            let p = fq.pop(t, &mut dropped).unwrap();
            bytes[p.flow as usize] += u64::from(p.len);
        }
        let ratio = bytes[1] as f64 / bytes[2] as f64;
        assert!((0.95..1.05).contains(&ratio), "{bytes:?}");
    }

    #[test]
    fn overflow_drops_from_the_fattest_queue() {
        let cfg = FqCodelConfig {
            limit: 10,
            ..FqCodelConfig::default()
        };
        let mut fq = FqCodel::new(cfg);
        for id in 0..9 {
            assert!(fq.push(pkt(id, 1, 1500, Time::ZERO)).is_none());
        }
        assert!(fq.push(pkt(100, 2, 100, Time::ZERO)).is_none());
        // The 11th packet is the sparse flow's, but the bulk flow pays.
        let victim = fq.push(pkt(101, 2, 100, Time::ZERO)).unwrap();
        assert_eq!((victim.id, victim.flow), (0, 1));
        assert_eq!(fq.state().packets, 10);
    }

    #[test]
    fn standing_queue_of_one_flow_gets_codel_drops() {
        let mut fq = FqCodel::new(FqCodelConfig::default());
        let mut dropped = Vec::new();
        let mut id = 0;
        // 2 packets in per ms, 1 out per ms: the queue and its delay grow.
        for ms in 0..400u64 {
            let now = Time::from_millis(ms);
            for _ in 0..2 {
                fq.push(pkt(id, 7, 1500, now));
                id += 1;
            }
            fq.pop(now, &mut dropped);
        }
        assert!(!dropped.is_empty());
        assert!(dropped.iter().all(|p| p.flow == 7));
        assert_eq!(fq.codel_drops(), dropped.len() as u64);
    }

    #[test]
    fn drain_empties_everything() {
        let mut fq = FqCodel::new(FqCodelConfig::default());
        for id in 0..5 {
            fq.push(pkt(id, id, 100, Time::ZERO));
        }
        assert_eq!(fq.drain(Time::ZERO).len(), 5);
        assert!(fq.is_empty());
        assert!(fq.pop(Time::ZERO, &mut Vec::new()).is_none());
    }
}

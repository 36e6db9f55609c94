//! The link state machine: one direction ([`LinkDirection`]) and a pair of
//! them ([`Link`]). The crate docs describe the order of operations.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::availability::{OutagePolicy, Schedule};
use crate::capacity::{Capacity, Fluid, Opportunities};
use crate::config::LinkConfig;
use crate::delay::{Delayer, InFlight, MetaOrd, Pipe};
use crate::error::ConfigError;
use crate::fq_codel::FqCodel;
use crate::loss::{LossPosition, LossProcess, LossSource};
use crate::mac::MacConfig;
use crate::per_ue::PerUe;
use crate::queue::{
    NoAqm, PacketMeta, QueueDiscipline, QueueLimit, QueuePolicy, QueueState, Verdict,
};
use crate::record::{DropReason, Record, RecordKind};
use crate::rng::{splitmix64, Rng, STREAM_BACKOFF};
use crate::time::{Dur, Time};
use crate::trace::mahimahi::OPPORTUNITY_BYTES;
use crate::trace::series::SeriesTrace;

/// The outcome of offering a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueued {
    /// Queued (it may still be dropped later: AQM, loss after the queue,
    /// an outage under [`OutagePolicy::Drop`]).
    Accepted,
    Dropped(DropReason),
}

/// A packet handed to the far end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub id: u64,
    /// Length as last set (a queue policy may change it).
    pub len: u32,
    /// Set by the queue policy, 0 otherwise.
    pub tag: u64,
    pub enqueued_at: Time,
    /// When its last byte left the bottleneck.
    pub departed_at: Time,
    /// When it reaches the far end.
    pub at: Time,
    /// `departed_at - enqueued_at`: waiting plus transmission.
    pub queue_delay: Dur,
}

/// Counters of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub offered: u64,
    pub offered_bytes: u64,
    pub delivered: u64,
    pub delivered_bytes: u64,
    /// 802.11 attempts (frames put on the air), with a MAC configured.
    pub mac_attempts: u64,
    /// Medium time the MAC held for them: DIFS, backoff, frames, SIFS and
    /// ACKs (or ACK timeouts), delivered or not.
    pub mac_airtime: Dur,
    dropped: [u64; 4],
}

impl Stats {
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason as usize]
    }
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }
}

enum Server {
    Fluid(Fluid),
    Opportunities(Opportunities),
}

/// The 802.11 transmitter's state (see `mac.rs`).
struct Mac {
    config: MacConfig,
    backoff: Rng,
    /// Whether the frame in service got through (else every attempt was
    /// lost).
    delivered: bool,
    /// When the medium is free after the last frame's ACK (or ACK
    /// timeout): the next frame's DIFS starts no earlier.
    free_at: Time,
}

/// Where waiting packets are kept.
enum Store {
    Fifo(VecDeque<PacketMeta>),
    Fq(Box<FqCodel>),
    PerUe(Box<PerUe>),
}

impl Store {
    fn is_empty(&self) -> bool {
        match self {
            Store::Fifo(q) => q.is_empty(),
            Store::Fq(f) => f.is_empty(),
            Store::PerUe(u) => u.is_empty(),
        }
    }
}

/// One direction of a link: queue, capacity, loss, propagation,
/// availability. Sans-IO: time is handed in, nothing is read or written.
pub struct LinkDirection<P: QueuePolicy = NoAqm> {
    queue: Store,
    queued_bytes: u64,
    limit: QueueLimit,
    policy: P,
    server: Server,
    schedule: Schedule,
    arrival_hint: usize,
    server_hint: usize,
    drop_when_down: bool,
    /// Under `OutagePolicy::Drop`, while busy: when the link next goes down.
    next_flush: Option<Time>,
    loss: LossProcess,
    loss_series: Option<Arc<SeriesTrace>>,
    loss_hint: usize,
    loss_before_queue: bool,
    delayer: Delayer,
    pipe: Pipe,
    departures: u64,
    records: Option<Vec<Record>>,
    stats: Stats,
    now: Time,
    /// How long the packet last taken for transmission waited; zero once
    /// the transmitter finds the queue empty.
    sojourn: Dur,
    /// Packets FQ-CoDel dropped while choosing the next one.
    fq_dropped: Vec<PacketMeta>,
    mac: Option<Mac>,
}

impl<P: QueuePolicy + Default> LinkDirection<P> {
    /// A direction with the policy's default state.
    pub fn new(config: LinkConfig) -> Result<LinkDirection<P>, ConfigError> {
        LinkDirection::with_policy(config, P::default())
    }
}

impl<P: QueuePolicy> LinkDirection<P> {
    /// A direction with a given queue policy (e.g. a configured [`crate::CoDel`]).
    pub fn with_policy(config: LinkConfig, policy: P) -> Result<LinkDirection<P>, ConfigError> {
        let series = config.series.as_ref();
        let schedule = Schedule::new(&config.availability, series)?;
        let server = match &config.capacity {
            Capacity::Constant { bps } => Server::Fluid(Fluid::constant(*bps, &schedule)?),
            Capacity::Series => {
                let trace = series.ok_or(ConfigError::NoSeries { what: "capacity" })?;
                Server::Fluid(Fluid::series(trace.clone(), &schedule)?)
            }
            Capacity::Mahimahi(trace) => Server::Opportunities(Opportunities::new(trace.clone())),
        };
        let (loss, loss_series) = match &config.loss {
            LossSource::Model(model) => (LossProcess::new(model, config.seed)?, None),
            LossSource::Series => (
                LossProcess::external(config.seed),
                Some(
                    series
                        .cloned()
                        .ok_or(ConfigError::NoSeries { what: "loss" })?,
                ),
            ),
        };
        let delayer = Delayer::new(&config.delay, series, config.seed)?;
        let pipe = Pipe::new(delayer.reorders());
        let mac = match config.mac {
            None => None,
            Some(_) if matches!(server, Server::Opportunities(_)) => {
                return Err(ConfigError::MacNeedsRate)
            }
            Some(_) if config.loss_position == LossPosition::BeforeQueue => {
                return Err(ConfigError::MacLossBeforeQueue)
            }
            Some(m) => {
                m.validate()?;
                Some(Mac {
                    config: m,
                    backoff: Rng::new(config.seed, STREAM_BACKOFF),
                    delivered: false,
                    free_at: Time::ZERO,
                })
            }
        };
        let queue = match config.discipline {
            QueueDiscipline::Fifo => Store::Fifo(VecDeque::new()),
            QueueDiscipline::FqCodel(c) => Store::Fq(Box::new(FqCodel::new(c))),
            QueueDiscipline::PerUe(c) => Store::PerUe(Box::new(PerUe::new(c))),
        };
        Ok(LinkDirection {
            queue,
            queued_bytes: 0,
            limit: config.queue,
            policy,
            server,
            drop_when_down: config.outage == OutagePolicy::Drop && !schedule.is_always_up(),
            schedule,
            arrival_hint: 0,
            server_hint: 0,
            next_flush: None,
            loss,
            loss_series,
            loss_hint: 0,
            loss_before_queue: config.loss_position == LossPosition::BeforeQueue,
            delayer,
            pipe,
            departures: 0,
            records: config.record.then(Vec::new),
            stats: Stats::default(),
            now: Time::ZERO,
            sojourn: Dur::ZERO,
            fq_dropped: Vec::new(),
            mac,
        })
    }

    /// Offers a packet of `len` bytes at `now`. Everything due at or before
    /// `now` happens first, so a packet arriving exactly at a Mahimahi
    /// opportunity misses it (as in mm-link).
    #[inline]
    pub fn enqueue(&mut self, now: Time, len: u32, id: u64) -> Enqueued {
        self.enqueue_flow(now, len, id, 0)
    }

    /// [`Self::enqueue`] for a packet of flow `flow` (see
    /// [`PacketMeta::flow`]); only per-flow queueing looks at it.
    #[inline]
    pub fn enqueue_flow(&mut self, now: Time, len: u32, id: u64, flow: u64) -> Enqueued {
        let now = self.clock(now);
        self.advance(now);
        self.stats.offered += 1;
        self.stats.offered_bytes += u64::from(len);
        self.record(now, RecordKind::Enqueue, id, len);
        let mut meta = PacketMeta {
            id,
            len,
            enqueued_at: now,
            tag: 0,
            flow,
        };
        if self.drop_when_down && !self.schedule.is_up(now, &mut self.arrival_hint) {
            return self.reject(now, &meta, DropReason::LinkDown);
        }
        if self.loss_before_queue && self.decide_loss(now) {
            return self.reject(now, &meta, DropReason::Loss);
        }
        let state = self.queue_state();
        let admitted = match &self.queue {
            Store::Fifo(_) => self.limit.admits(state, len),
            // FQ-CoDel keeps its own limit, dropping from the fattest queue.
            Store::Fq(_) => true,
            // Each UE's buffer is under the limit on its own.
            Store::PerUe(u) => self.limit.admits(u.ue_state(flow), len),
        };
        if !admitted {
            return self.reject(now, &meta, DropReason::QueueFull);
        }
        if self.policy.on_enqueue(now, &mut meta, state) == Verdict::Drop {
            return self.reject(now, &meta, DropReason::Aqm);
        }
        let was_idle = self.is_idle();
        let victim = match &mut self.queue {
            Store::Fifo(q) => {
                q.push_back(meta);
                None
            }
            Store::Fq(f) => f.push(meta),
            Store::PerUe(u) => {
                let stored = u.push(meta, self.limit);
                debug_assert!(stored, "admitted above");
                None
            }
        };
        self.queued_bytes += u64::from(meta.len);
        if let Some(v) = victim {
            // FQ-CoDel over its limit dropped the head of its fattest queue.
            self.queued_bytes -= u64::from(v.len);
            self.drop_packet(now, &v, DropReason::QueueFull);
            if v.id == id {
                return Enqueued::Dropped(DropReason::QueueFull);
            }
        }
        if was_idle {
            self.start_busy(now);
        }
        Enqueued::Accepted
    }

    /// The next packet that has reached the far end by `now`, if any, in
    /// arrival order. Call repeatedly until `None`.
    #[inline]
    pub fn poll_delivery(&mut self, now: Time) -> Option<Delivery> {
        let now = self.clock(now);
        self.advance(now);
        let p = self.pipe.pop_due(now)?;
        let meta = p.meta.0;
        let queue_delay = p.departed.saturating_since(meta.enqueued_at);
        self.stats.delivered += 1;
        self.stats.delivered_bytes += u64::from(meta.len);
        self.record(p.at, RecordKind::Deliver { queue_delay }, meta.id, meta.len);
        Some(Delivery {
            id: meta.id,
            len: meta.len,
            tag: meta.tag,
            enqueued_at: meta.enqueued_at,
            departed_at: p.departed,
            at: p.at,
            queue_delay,
        })
    }

    /// When the driver should next call [`Self::poll_delivery`]: the earliest
    /// delivery, transmitter event or outage. A transmitter event may yield
    /// no delivery (it only moves a packet onto the wire); `None` means
    /// nothing will happen until a packet is offered.
    pub fn next_event_time(&self) -> Option<Time> {
        let mut next = self.pipe.next_at();
        let mut consider = |t: Time| {
            if t != Time::MAX {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        match &self.server {
            Server::Fluid(f) => {
                if let Some((_, finish)) = f.in_service {
                    consider(finish);
                }
            }
            Server::Opportunities(o) => {
                if o.in_transit.is_some() || !self.queue.is_empty() {
                    consider(o.next_time());
                }
            }
        }
        if !self.is_idle() {
            if let Some(t) = self.next_flush {
                consider(t);
            }
        }
        next
    }

    /// Records gathered since the last call (empty unless recording is on).
    pub fn take_records(&mut self) -> Vec<Record> {
        match &mut self.records {
            Some(r) => std::mem::take(r),
            None => Vec::new(),
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Packets and bytes waiting (not counting the one being transmitted).
    pub fn queue_state(&self) -> QueueState {
        let packets = match &self.queue {
            Store::Fifo(q) => q.len(),
            Store::Fq(f) => f.state().packets,
            Store::PerUe(u) => u.state().packets,
        };
        QueueState {
            packets,
            bytes: self.queued_bytes,
        }
    }

    /// How long the packet most recently taken for transmission waited in
    /// the queue (CoDel's sojourn time); zero once the queue ran empty.
    /// This is the queueing delay an access point would measure.
    pub fn sojourn(&self) -> Dur {
        self.sojourn
    }

    /// Packets between the bottleneck and the far end.
    pub fn in_flight(&self) -> usize {
        self.pipe.len()
    }

    pub fn policy(&self) -> &P {
        &self.policy
    }

    pub fn policy_mut(&mut self) -> &mut P {
        &mut self.policy
    }

    /// Driver time never goes back: a stale `now` is treated as the latest
    /// one seen, so a jittery driver clock cannot corrupt the state.
    #[inline]
    fn clock(&mut self, now: Time) -> Time {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    #[inline]
    fn record(&mut self, t: Time, kind: RecordKind, id: u64, len: u32) {
        if let Some(r) = &mut self.records {
            r.push(Record { t, kind, id, len });
        }
    }

    fn drop_packet(&mut self, t: Time, meta: &PacketMeta, reason: DropReason) {
        self.stats.dropped[reason as usize] += 1;
        self.record(t, RecordKind::Drop(reason), meta.id, meta.len);
    }

    fn reject(&mut self, now: Time, meta: &PacketMeta, reason: DropReason) -> Enqueued {
        self.drop_packet(now, meta, reason);
        Enqueued::Dropped(reason)
    }

    #[inline]
    fn is_idle(&self) -> bool {
        self.queue.is_empty()
            && match &self.server {
                Server::Fluid(f) => f.in_service.is_none(),
                Server::Opportunities(o) => o.in_transit.is_none(),
            }
    }

    /// The first packet entered an idle link at `now`.
    fn start_busy(&mut self, now: Time) {
        if self.drop_when_down {
            self.next_flush = self.schedule.next_down(now, &mut self.arrival_hint);
        }
        match &mut self.server {
            Server::Fluid(_) => self.start_service(now, false),
            // Opportunities that passed while the queue was empty are wasted.
            Server::Opportunities(o) => o.skip_through(now),
        }
    }

    /// Runs the transmitter and outages up to and including `now`.
    #[inline]
    fn advance(&mut self, now: Time) {
        loop {
            let t = match &self.server {
                Server::Fluid(f) => match f.in_service {
                    Some((_, finish)) => finish,
                    None => return,
                },
                Server::Opportunities(o) => {
                    if o.in_transit.is_none() && self.queue.is_empty() {
                        return;
                    }
                    o.next_time()
                }
            };
            if let Some(down) = self.next_flush {
                if down < t && down <= now {
                    self.flush(down);
                    continue;
                }
            }
            if t > now {
                return;
            }
            match self.server {
                Server::Fluid(_) => self.complete_service(t),
                Server::Opportunities(_) => self.opportunity(t),
            }
        }
    }

    /// Takes the next packet the policy lets through, or tells it the queue
    /// is empty.
    #[inline]
    fn dequeue(&mut self, t: Time) -> Option<PacketMeta> {
        loop {
            let next = match &mut self.queue {
                Store::Fifo(q) => q.pop_front(),
                Store::PerUe(u) => u.pop(),
                Store::Fq(f) => {
                    let mut dropped = std::mem::take(&mut self.fq_dropped);
                    let next = f.pop(t, &mut dropped);
                    for meta in dropped.drain(..) {
                        self.queued_bytes -= u64::from(meta.len);
                        self.drop_packet(t, &meta, DropReason::Aqm);
                    }
                    self.fq_dropped = dropped;
                    next
                }
            };
            let Some(mut meta) = next else {
                self.sojourn = Dur::ZERO;
                self.policy.on_empty(t);
                return None;
            };
            self.queued_bytes -= u64::from(meta.len);
            let after = self.queue_state();
            match self.policy.on_dequeue(t, &mut meta, after) {
                Verdict::Pass => {
                    self.sojourn = t.saturating_since(meta.enqueued_at);
                    return Some(meta);
                }
                Verdict::Drop => self.drop_packet(t, &meta, DropReason::Aqm),
            }
        }
    }

    /// Fluid transmitter: start the next packet at `t`.
    #[inline]
    fn start_service(&mut self, t: Time, back_to_back: bool) {
        let next = self.dequeue(t);
        if self.mac.is_some() {
            if let Some(meta) = next {
                let frame_end = self.mac_attempts(t, &meta);
                if let Server::Fluid(f) = &mut self.server {
                    f.in_service = Some((meta, frame_end));
                }
                return;
            }
        }
        let Server::Fluid(f) = &mut self.server else {
            return;
        };
        match next {
            Some(meta) => {
                let finish = f.finish(t, meta.len, back_to_back, &self.schedule);
                f.in_service = Some((meta, finish));
            }
            None => f.idle(),
        }
    }

    /// Runs every 802.11 attempt of the frame `meta`, from `start` or the
    /// end of the previous frame's ACK if later (the attempts depend on
    /// nothing that can change meanwhile: the loss and backoff streams
    /// serve frames in order), records whether one got through, and returns
    /// when the last attempt's last bit left: the frame is delivered or
    /// dropped then; its ACK holds the medium a little longer.
    fn mac_attempts(&mut self, start: Time, meta: &PacketMeta) -> Time {
        let Some(mac) = &mut self.mac else {
            return start;
        };
        let Server::Fluid(f) = &mut self.server else {
            return start;
        };
        let c = mac.config;
        let body_len = meta.len.saturating_add(c.header_bytes);
        let start = start.max(mac.free_at);
        let mut t = start;
        let mut frame_end = start;
        mac.delivered = false;
        for attempt in 0..=u32::from(c.retry_limit) {
            let slots = mac.backoff.uniform_inclusive(u64::from(c.cw(attempt)));
            t += c.difs() + Dur::from_nanos(slots * c.slot.as_nanos()) + c.preamble;
            // Contention separates attempts, so no rounding credit carries.
            t = f.finish(t, body_len, false, &self.schedule);
            if t == Time::MAX {
                frame_end = t; // the link never serves another byte
                break;
            }
            self.stats.mac_attempts += 1;
            let lost = decide_loss(
                &mut self.loss,
                self.loss_series.as_deref(),
                &mut self.loss_hint,
                t,
            );
            frame_end = t;
            // The ACK, or the wait for one that never comes.
            t += c.sifs + c.ack;
            if !lost {
                mac.delivered = true;
                break;
            }
        }
        mac.free_at = t;
        self.stats.mac_airtime = self.stats.mac_airtime + t.saturating_since(start);
        frame_end
    }

    #[inline]
    fn complete_service(&mut self, t: Time) {
        let Server::Fluid(f) = &mut self.server else {
            return;
        };
        if let Some((meta, _)) = f.in_service.take() {
            match &mut self.mac {
                None => self.depart(meta, t),
                Some(mac) if mac.delivered => self.propagate(meta, t),
                // Every attempt was lost: the retry limit dropped it.
                Some(_) => self.drop_packet(t, &meta, DropReason::Loss),
            }
        }
        self.start_service(t, true);
    }

    /// Mahimahi transmitter: use the opportunity at `t`.
    fn opportunity(&mut self, t: Time) {
        let Server::Opportunities(o) = &mut self.server else {
            return;
        };
        o.consume();
        let (up, until) = self.schedule.state_at(t, &mut self.server_hint);
        if !up {
            // Opportunities during an outage are wasted; skip them in bulk.
            if until == Time::MAX {
                o.stall();
            } else {
                o.skip_through(until.saturating_sub(Dur::from_nanos(1)));
            }
            return;
        }
        let mut budget = OPPORTUNITY_BYTES;
        loop {
            let needs_packet = match &self.server {
                Server::Opportunities(o) => o.in_transit.is_none(),
                Server::Fluid(_) => return,
            };
            let fresh = if needs_packet {
                match self.dequeue(t) {
                    Some(meta) => Some(meta),
                    None => return, // the rest of the opportunity is wasted
                }
            } else {
                None
            };
            let Server::Opportunities(o) = &mut self.server else {
                return;
            };
            let (meta, left) = match fresh {
                Some(meta) => o.in_transit.insert((meta, meta.len)),
                None => match &mut o.in_transit {
                    Some(p) => p,
                    None => return,
                },
            };
            let sent = budget.min(*left);
            *left -= sent;
            budget -= sent;
            if *left == 0 {
                let meta = *meta;
                o.in_transit = None;
                self.depart(meta, t);
            }
            if budget == 0 {
                return;
            }
        }
    }

    /// The link went down at `t` under `OutagePolicy::Drop`.
    fn flush(&mut self, t: Time) {
        self.next_flush = None;
        let current = match &mut self.server {
            Server::Fluid(f) => {
                f.idle();
                f.in_service.take().map(|(m, _)| m)
            }
            Server::Opportunities(o) => o.in_transit.take().map(|(m, _)| m),
        };
        if let Some(meta) = current {
            self.drop_packet(t, &meta, DropReason::LinkDown);
        }
        let waiting = match &mut self.queue {
            Store::Fifo(q) => q.drain(..).collect::<Vec<_>>(),
            Store::Fq(f) => f.drain(t),
            Store::PerUe(u) => u.drain(),
        };
        for meta in &waiting {
            self.drop_packet(t, meta, DropReason::LinkDown);
        }
        self.queued_bytes = 0;
        self.sojourn = Dur::ZERO;
        self.policy.on_empty(t);
    }

    #[inline]
    fn decide_loss(&mut self, t: Time) -> bool {
        decide_loss(
            &mut self.loss,
            self.loss_series.as_deref(),
            &mut self.loss_hint,
            t,
        )
    }

    /// The packet's last byte left the bottleneck at `t`.
    #[inline]
    fn depart(&mut self, meta: PacketMeta, t: Time) {
        if !self.loss_before_queue && self.decide_loss(t) {
            self.drop_packet(t, &meta, DropReason::Loss);
            return;
        }
        self.propagate(meta, t);
    }

    /// The packet left the bottleneck intact at `t`: on to the far end.
    #[inline]
    fn propagate(&mut self, meta: PacketMeta, t: Time) {
        let at = self.delayer.arrival(t);
        self.departures += 1;
        self.pipe.push(InFlight {
            at,
            seq: self.departures,
            departed: t,
            meta: MetaOrd(meta),
        });
    }
}

/// Whether the loss process (or the series trace's row at `t`) loses the
/// packet that leaves at `t`.
#[inline]
fn decide_loss(
    loss: &mut LossProcess,
    series: Option<&SeriesTrace>,
    hint: &mut usize,
    t: Time,
) -> bool {
    match series {
        None => loss.lose(),
        Some(trace) => {
            let row = trace.locate(t, hint).0;
            let params = trace.rows()[row].loss;
            loss.lose_with(&params)
        }
    }
}

/// Both directions of a link. `uplink` carries traffic from the mobile node
/// (the vehicle) to the network, `downlink` the reverse, matching the
/// `.up`/`.down` naming of Mahimahi traces.
pub struct Link<P: QueuePolicy = NoAqm> {
    pub uplink: LinkDirection<P>,
    pub downlink: LinkDirection<P>,
}

impl<P: QueuePolicy + Default> Link<P> {
    /// Each direction's seed is derived from its configured seed and the
    /// direction, so a symmetric configuration still gives the two
    /// directions independent randomness.
    pub fn new(uplink: LinkConfig, downlink: LinkConfig) -> Result<Link<P>, ConfigError> {
        Link::with_policies(uplink, P::default(), downlink, P::default())
    }
}

impl<P: QueuePolicy> Link<P> {
    pub fn with_policies(
        mut uplink: LinkConfig,
        uplink_policy: P,
        mut downlink: LinkConfig,
        downlink_policy: P,
    ) -> Result<Link<P>, ConfigError> {
        uplink.seed = direction_seed(uplink.seed, 1);
        downlink.seed = direction_seed(downlink.seed, 2);
        Ok(Link {
            uplink: LinkDirection::with_policy(uplink, uplink_policy)?,
            downlink: LinkDirection::with_policy(downlink, downlink_policy)?,
        })
    }

    /// The earlier of the two directions' next events.
    pub fn next_event_time(&self) -> Option<Time> {
        match (
            self.uplink.next_event_time(),
            self.downlink.next_event_time(),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

fn direction_seed(seed: u64, direction: u64) -> u64 {
    let mut s = seed ^ direction.wrapping_mul(0xa076_1d64_78bd_642f);
    splitmix64(&mut s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::LossModel;

    #[test]
    fn link_pair_has_independent_directions() {
        let config = LinkConfig::constant(8_000_000)
            .with_delay(Dur::from_millis(10))
            .with_loss(LossModel::Bernoulli { p: 0.5 })
            .with_seed(3);
        let mut link: Link =
            Link::new(config.clone(), config.with_delay(Dur::from_millis(5))).unwrap();
        assert_eq!(link.next_event_time(), None);
        for id in 0..64 {
            link.uplink.enqueue(Time::ZERO, 1000, id);
            link.downlink.enqueue(Time::ZERO, 1000, id);
        }
        assert_eq!(link.next_event_time(), Some(Time::from_millis(1)));
        let mut up = Vec::new();
        let mut down = Vec::new();
        let end = Time::from_secs(1);
        while let Some(d) = link.uplink.poll_delivery(end) {
            up.push(d.id);
        }
        while let Some(d) = link.downlink.poll_delivery(end) {
            down.push(d.id);
        }
        // Same configured seed, yet different loss patterns per direction.
        assert_ne!(up, down);
        assert_eq!(link.next_event_time(), None);
    }

    #[test]
    fn stale_time_is_clamped_not_trusted() {
        let mut l: LinkDirection = LinkDirection::new(LinkConfig::constant(8_000_000)).unwrap();
        l.enqueue(Time::from_millis(5), 1000, 0);
        // A driver clock that steps back: treated as 5 ms.
        l.enqueue(Time::from_millis(1), 1000, 1);
        let d: Vec<Delivery> =
            std::iter::from_fn(|| l.poll_delivery(Time::from_millis(9))).collect();
        assert_eq!(d[1].enqueued_at, Time::from_millis(5));
        assert_eq!(d[1].departed_at, Time::from_millis(7));
    }

    #[test]
    fn invalid_configurations_are_errors() {
        let bad = |c: LinkConfig| LinkDirection::<NoAqm>::new(c).err();
        assert_eq!(bad(LinkConfig::constant(0)), Some(ConfigError::ZeroRate));
        assert!(matches!(
            bad(LinkConfig::constant(1).with_loss(LossModel::Bernoulli { p: 2.0 })),
            Some(ConfigError::Probability { .. })
        ));
        assert!(matches!(
            bad(LinkConfig::constant(1).with_outages(
                vec![(Time::from_secs(2), Time::from_secs(1))],
                OutagePolicy::Drop
            )),
            Some(ConfigError::EmptyDownInterval { .. })
        ));
        let mut c = LinkConfig::constant(1);
        c.capacity = Capacity::Series;
        assert_eq!(bad(c), Some(ConfigError::NoSeries { what: "capacity" }));
    }
}

//! Deterministic, sans-IO model of one vehicular link.
//!
//! The emulator (real programs over replayed links), the simulator (fleet
//! scale, virtual time) and the protocol's tests all drive this one state
//! machine, so a loss pattern seen in one replays in the others from the
//! same seed. It never reads a clock and never touches a socket: the driver
//! hands in [`Time`] and packet lengths, and gets back deliveries and the
//! time of the next event (the smoltcp / quinn-proto style).
//!
//! ```
//! use convoy_link::{Dur, LinkConfig, LinkDirection, LossModel, QueueLimit, Time};
//!
//! let config = LinkConfig::constant(10_000_000) // 10 Mbit/s
//!     .with_delay(Dur::from_millis(20))
//!     .with_loss(LossModel::Bernoulli { p: 0.01 })
//!     .with_queue(QueueLimit::Packets(100))
//!     .with_seed(42);
//! let mut link: LinkDirection = LinkDirection::new(config).unwrap();
//! link.enqueue(Time::ZERO, 1250, 1);
//! // 1250 bytes at 10 Mbit/s take 1 ms, then 20 ms of propagation.
//! assert_eq!(link.next_event_time(), Some(Time::from_millis(1)));
//! assert!(link.poll_delivery(Time::from_millis(1)).is_none());
//! let d = link.poll_delivery(Time::from_millis(21)).unwrap();
//! assert_eq!((d.id, d.at, d.queue_delay), (1, Time::from_millis(21), Dur::from_millis(1)));
//! ```
//!
//! # The model of one direction
//!
//! ```text
//! enqueue ─► [outage drop] ─► [loss, if before queue] ─► drop-tail limit ─► AQM on_enqueue
//!        ─► FIFO queue ─► AQM on_dequeue ─► transmitter (capacity, availability)
//!        ─► [loss, default position] ─► propagation delay + jitter ─► poll_delivery
//! ```
//!
//! * **Capacity** ([`Capacity`]): a constant rate, a Mahimahi packet-delivery
//!   trace read exactly as mm-link reads it (1500-byte opportunities,
//!   byte-level accounting, wasted when the queue is empty, wrap-around with
//!   the last timestamp as period), or the rate column of convoy's
//!   time-series trace. docs/TRACES.md defines both formats.
//! * **Queue** ([`QueueLimit`], [`QueuePolicy`]): FIFO, drop-tail in packets
//!   or bytes, counting packets waiting (not the one on the wire); an active
//!   policy may drop or rewrite packets as they enter and leave ([`CoDel`]
//!   per RFC 8289 is included). The queueing delay of a packet runs from
//!   entering the queue to its last byte leaving the bottleneck.
//! * **Loss** ([`LossModel`]): Bernoulli, Gilbert–Elliott (4 parameters),
//!   every n-th, explicit positions, or per-interval from the series trace.
//!   By default a packet is lost *after* the bottleneck, on the air: it has
//!   waited and used capacity, as radio losses do. [`LossPosition::BeforeQueue`]
//!   loses it on arrival instead (mm-loss outside mm-link).
//! * **Delay** ([`DelayConfig`]): fixed or per-interval from the series trace,
//!   taken at the instant the packet leaves the bottleneck, plus optional
//!   uniform jitter. Order is kept unless reordering is asked for: a packet
//!   whose delay would let it overtake waits behind its predecessor.
//! * **Availability** ([`Availability`], [`OutagePolicy`]): down intervals
//!   stop the transmitter. Under `Hold` packets wait (subject to the queue
//!   limit) and transmission resumes afterwards; under `Drop` arrivals are
//!   dropped while down and the link's contents are dropped when it goes down.
//!   Packets already propagating are delivered either way.
//! * **802.11 MAC** ([`MacConfig`], optional): each packet is a frame sent
//!   after DIFS and a random backoff, acknowledged after SIFS, and retried
//!   with a doubled contention window until a retry limit; the rate is then
//!   the PHY rate and the loss model decides each attempt. Rate-driven
//!   transmitters only.
//!
//! # Order of operations
//!
//! Every call first runs the model up to and including `now`: transmitter
//! events (departures, opportunities) and outage starts at or before `now`
//! happen, in time order, before the packet being offered is considered.
//! Times handed in must not go backwards; an earlier `now` is treated as the
//! latest one seen. Random decisions are drawn in the order packets reach
//! them, from streams seeded by [`LinkConfig::seed`] (loss and jitter on
//! separate streams), so the same configuration and the same sequence of
//! calls give the same deliveries and the same [`Record`]s, bit for bit.
//!
//! # Not modelled
//!
//! One queue per direction, a FIFO or FQ-CoDel's per-flow queues
//! ([`QueueDiscipline`]; no per-UE queues), no link-layer ARQ beyond
//! 802.11's retries (LTE's HARQ/RLC: model its effect as delay and loss),
//! no contention from other stations, no corruption or duplication, no
//! capacity shared between the two directions, and of mm-link's queue
//! disciplines only drop-tail and CoDel (no drop-head, no PIE).
//!
//! Records, when enabled, are kept in a `Vec` the driver drains with
//! [`LinkDirection::take_records`]; with records off nothing is allocated
//! per packet. [`RecordWriter`] writes them as compact CSV.

mod availability;
mod capacity;
mod codel;
mod config;
mod delay;
mod error;
mod faults;
mod fq_codel;
mod link;
mod loss;
mod mac;
mod per_ue;
mod queue;
mod record;
mod rng;
mod time;
pub mod trace;
pub mod workload;

pub use availability::{Availability, AvailabilityTimeline, OutagePolicy};
pub use capacity::Capacity;
pub use codel::CoDel;
pub use config::LinkConfig;
pub use delay::{DelayConfig, DelaySource};
pub use error::{ConfigError, ParseErrorKind, TraceError};
pub use faults::{FaultConfig, FaultStage, FaultStats, Faulted};
pub use fq_codel::{FqCodel, FqCodelConfig};
pub use link::{Delivery, Enqueued, Link, LinkDirection, Stats};
pub use loss::{GeParams, LossModel, LossParams, LossPosition, LossProcess, LossSource};
pub use mac::{MacConfig, MacExpectation};
pub use per_ue::{PerUe, PerUeConfig};
pub use queue::{NoAqm, PacketMeta, QueueDiscipline, QueueLimit, QueuePolicy, QueueState, Verdict};
pub use record::{
    parse_records, records_to_csv, DropReason, Record, RecordKind, RecordWriter, CSV_HEADER,
};
pub use rng::{splitmix64, Prob, Rng};
pub use time::{Dur, Time};
pub use trace::mahimahi::{MahimahiTrace, OPPORTUNITY_BYTES};
pub use trace::series::{SeriesRow, SeriesTrace};

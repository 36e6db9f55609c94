//! Rate controllers. Each path owns one; the connection asks it when the next
//! packet may leave (pacing) and how much may be in flight, and tells it
//! what was sent, acknowledged, lost and reported. RCDP's receiver-driven
//! packet trains are here; BBR, the background scavenger, NewReno and
//! Cubic plug into the same trait.

pub mod background;
pub mod bbr;
pub mod bottleneck;
pub mod rcdp;
pub mod tide;
pub mod train;

use std::time::Duration;

use crate::recovery::SentPacket;
use crate::rtt::RttEstimator;
use crate::wire::TrainTag;

pub use background::{Background, BackgroundConfig, Priority};
pub use bbr::{Bbr, BbrConfig};
pub use rcdp::{Rcdp, RcdpConfig};
pub use tide::{Tide, TideConfig};
pub use train::TrainEstimator;

/// Time to send `bytes` at `rate` bytes/s (pacing gaps).
pub(crate) fn transmit_time(bytes: u64, rate: u64) -> Duration {
    Duration::from_nanos((bytes as u128 * 1_000_000_000 / u128::from(rate.max(1))) as u64)
}

/// How far behind its pacing schedule a sender may fall and still keep to
/// it, sending what fell due back to back. A real driver wakes up tens of
/// microseconds late (more on a busy machine), and at 1 Gbit/s a 1472-byte
/// datagram is due every 12 µs (6 µs inside an RCDP train): restarting the
/// schedule from the late wake-up sent one datagram per wake-up and capped
/// loopback at ~200 Mbit/s whatever the rate. Catching up over this much
/// lets each wake-up send everything due by now, in one batch; a longer
/// stall (descheduled, idle) still restarts the schedule rather than burst.
/// In virtual time (the simulator) nothing is ever late, so nothing changes.
pub const PACING_CATCH_UP: Duration = Duration::from_micros(250);

/// The time the next gap counts from, for a packet sent at `now` that was
/// due at `due`: `due` if the sender is late by at most `gaps` gaps or
/// [`PACING_CATCH_UP`], else `now`.
pub(crate) fn pacing_base(
    due: Option<Duration>,
    now: Duration,
    gap: Duration,
    gaps: u32,
) -> Duration {
    match due {
        Some(t) if t <= now && t + (gap * gaps).max(PACING_CATCH_UP) >= now => t,
        _ => now,
    }
}

/// What the connection tells a controller about an acknowledgment.
#[derive(Clone)]
pub struct AckEvent<'a> {
    pub now: Duration,
    pub acked: &'a [SentPacket],
    pub rtt: &'a RttEstimator,
    /// Bytes still in flight after this acknowledgment.
    pub bytes_in_flight: u64,
    /// When the peer received one of the newly acknowledged packets (its
    /// RECEIVE_TIME frame), if it said.
    pub peer_receive: Option<PeerReceive>,
}

/// One packet's send time on our clock and arrival time on the peer's:
/// their difference is the one-way delay up to a constant offset between
/// the clocks, and successive arrival times space deliveries as the
/// bottleneck did, whatever the return path did to the acknowledgments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerReceive {
    pub pn: u64,
    pub sent: Duration,
    /// On the peer's clock.
    pub received: Duration,
}

pub trait RateController: Send {
    /// A short name for reports ("rcdp", "bbr").
    fn name(&self) -> &'static str;

    /// A copy of this controller in its present state (a boxed trait
    /// object cannot derive `Clone`); fuzzing snapshots an established
    /// connection.
    fn boxed_clone(&self) -> Box<dyn RateController>;

    /// The earliest time the next data packet may leave. `None` means at once.
    fn next_send_time(&self) -> Option<Duration>;

    /// How many bytes may be in flight; `None` if the controller is purely
    /// rate-based (RCDP).
    fn window(&self) -> Option<u64> {
        None
    }

    /// The train tag the next data packet must carry, for controllers that
    /// measure with receiver-side train dispersion.
    fn train_tag(&self) -> Option<TrainTag> {
        None
    }

    /// Data packet `pn` of `bytes` left at `now`; `bytes_in_flight`
    /// includes it.
    fn on_sent(&mut self, now: Duration, pn: u64, bytes: usize, bytes_in_flight: u64);

    /// The handshake measured this round trip, before any data was sent.
    fn on_handshake_rtt(&mut self, _now: Duration, _rtt: Duration) {}

    /// The sender had nothing to send when pacing allowed it.
    fn on_app_limited(&mut self, _now: Duration) {}

    fn on_ack(&mut self, event: &AckEvent<'_>);

    fn on_loss(&mut self, _now: Duration, _lost: &[SentPacket]) {}

    /// The receiver says data stopped arriving (an acknowledgment of
    /// nothing new, long after the last arrival: connection/stall.rs).
    fn on_forward_stall(&mut self, _now: Duration) {}

    /// Whether this path is the only one carrying data (told with each
    /// acknowledgment). With others beside it, a path that falls silent is
    /// one to leave, not one to keep sending on blind.
    fn set_only_path(&mut self, _only: bool) {}

    /// The path takes over from paths that died, and CapProbe measured
    /// its capacity while it stood by: a controller that has measured no
    /// rate of its own yet may start from it rather than from its first
    /// flight.
    fn on_takeover(&mut self, _now: Duration, _capacity_bytes_per_sec: u64) {}

    /// The start pair (connection/start_pair.rs) measured the path's
    /// capacity before any data was sent, from one pair of 1,200-byte
    /// datagrams: a noisy reading, which a controller may use to keep its
    /// first flight from overfilling a slow link.
    fn on_start_capacity(&mut self, _now: Duration, _capacity_bytes_per_sec: u64) {}

    /// No report a round trip after the handshake: if the copy is still
    /// on its way, the path carries less than `capacity_bound`; if a
    /// datagram was lost, nothing is known. A controller may hold its
    /// first flight to what the bound allows until the report or
    /// [`RateController::on_start_unknown`] comes, but not slow its pace
    /// for it (packets paced to a guess would be read as the link).
    fn on_start_pending(&mut self, _now: Duration, _capacity_bound: u64) {}

    /// After [`RateController::on_start_pending`], no reading after all
    /// (a datagram was lost, or the report saw no spacing): the first
    /// flight as configured.
    fn on_start_unknown(&mut self, _now: Duration) {}

    /// Whether this controller uses that reading: only then does the
    /// client send the pair and hold its first data for the report.
    fn wants_start_capacity(&self) -> bool {
        false
    }

    /// The probe timeout fired: nothing was acknowledged for a PTO, and
    /// what was in flight was declared lost (the link may be down, with
    /// those packets waiting in its queue).
    fn on_probe_timeout(&mut self, _now: Duration) {}

    /// The receiver's capacity estimate for one of our trains.
    fn on_rate_report(
        &mut self,
        _now: Duration,
        _train_id: u64,
        _bytes_per_sec: u64,
        _rtt: &RttEstimator,
    ) {
    }

    /// The share of packets lost on the air (random loss after the
    /// bottleneck), for controllers that tell it apart from drops at a
    /// full queue and from timeouts; `None` for those that do not. The
    /// coding margins are sized from it: a burst of drops after a blind
    /// second into a dead link is no reason to send the next blocks with
    /// margins for 90 % loss.
    fn air_loss(&self) -> Option<f64> {
        None
    }

    /// The controller's current sending rate, bytes per second.
    fn rate(&self) -> u64;

    /// A word for the controller's state, for traces and reports.
    fn state(&self) -> &'static str {
        self.name()
    }
}

impl Clone for Box<dyn RateController> {
    fn clone(&self) -> Self {
        self.boxed_clone()
    }
}

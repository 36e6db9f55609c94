//! The start pair: the first flight sized from the link, not from a
//! constant.
//!
//! A client that knows the server's key (IK), and whose rate controller
//! uses the reading (Tide), sends its padded Initial twice, back to back.
//! The server notes when the first arrived and, when the copy follows,
//! reports the gap in a PAIR_REPORT with the reserved id
//! [`START_PAIR_ID`], twice, in two packets. The bottleneck spaced the two
//! copies by its time to serialize one: 1,200 bytes take 0.5 ms at 20
//! Mbit/s and 126 ms at 76 kbit/s. The client holds its first data until
//! that report comes (at most one handshake round trip after the reply)
//! and tells the rate controller the capacity it implies, which may shrink
//! the first flight (`RateController::on_start_capacity`). On a slow link
//! the 32-packet first flight was seconds of queue before any
//! acknowledgment could say so (docs/PROTOCOL.md, "The start pair"). A
//! report not there by then may be one still coming, on a link slower
//! than the handshake showed: for a round trip more only a couple of
//! packets go (`RateController::on_start_pending`).
//!
//! Why the Initial itself: it is already 1,200 bytes and already goes
//! first, so the pair costs one datagram and no wait on a fast link; a
//! pair of data packets would be measured only a round trip after the
//! first flight it is meant to size. The server tells a pair's copy from a
//! retransmission by time: a copy arriving later than half the client's
//! first retransmission timeout is taken as a repeat, answered with the
//! reply again as before, and not measured.

use std::time::Duration;

use super::{Connection, Transmit, HANDSHAKE_RETRANSMIT};

/// The pair id of the start pair's report: the largest varint, never
/// reached by CapProbe's pair counter. A peer that does not know it finds
/// no pair of that id and ignores the report.
pub(crate) const START_PAIR_ID: u64 = (1 << 62) - 1;

/// Where a connection stands with its start pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum StartPair {
    /// No pair: an XX client (its first flight waits on no report: the
    /// server has no keys to send one with until the client's final
    /// message), a retransmitted handshake, or the pair is over.
    #[default]
    Off,
    /// Client: the Initial's first send will be a pair.
    Ready,
    /// Client: the Initial left; its copy (`bytes` long) goes next.
    SecondDue { bytes: u32 },
    /// Client: both left; the handshake has not completed.
    Sent { bytes: u32 },
    /// Client: the handshake completed after `rtt`; data waits for the
    /// report until `until`, one more such round trip.
    Awaiting {
        bytes: u32,
        rtt: Duration,
        until: Duration,
    },
    /// Client: no report after that round trip. Either the copy is still
    /// on its way (the link takes longer than the handshake's round trip
    /// to carry one datagram) or a datagram was lost: a first flight of a
    /// couple of packets goes, as if the gap were a round trip, and the
    /// report is awaited until `until`, a round trip more.
    Provisional { bytes: u32, until: Duration },
    /// Server: the client's first Initial arrived at `first`.
    Measuring { first: Duration },
    /// Server: the copy followed `gap` after; its report is due, and once
    /// written goes again in a packet of its own.
    ReportAgain { first: Duration, gap: Duration },
}

impl Connection {
    /// Client: the Initial's copy, right behind the Initial.
    pub(super) fn start_pair_second(&mut self, now: Duration, buf: &mut [u8]) -> Option<Transmit> {
        let StartPair::SecondDue { bytes } = self.start_pair else {
            return None;
        };
        let Some(len) = self.write_client_initial(buf) else {
            self.start_pair = StartPair::Off;
            return None;
        };
        self.start_pair = StartPair::Sent { bytes };
        Some(self.sent(now, len, 0))
    }

    /// Client: an Initial of `len` bytes left; the first send starts a
    /// pair, a retransmission ends it (its answer times nothing).
    pub(super) fn on_initial_sent(&mut self, len: usize) {
        self.start_pair = match self.start_pair {
            StartPair::Ready => StartPair::SecondDue { bytes: len as u32 },
            _ => StartPair::Off,
        };
    }

    /// Client: the handshake completed at `now` after `rtt` (`None` when
    /// it took repeats): the report is awaited for one more round trip.
    pub(super) fn start_pair_established(&mut self, now: Duration, rtt: Option<Duration>) {
        if let StartPair::Sent { bytes } = self.start_pair {
            self.start_pair = match rtt {
                Some(rtt) => StartPair::Awaiting {
                    bytes,
                    rtt,
                    until: now + rtt,
                },
                None => StartPair::Off,
            };
        }
    }

    /// Client: the server does not measure start pairs (an older one):
    /// no report will come, so nothing waits for one.
    pub(super) fn start_pair_unmeasured(&mut self) {
        if matches!(
            self.start_pair,
            StartPair::Sent { .. } | StartPair::Awaiting { .. }
        ) {
            self.start_pair = StartPair::Off;
        }
    }

    /// Client: whether data must still wait for the start pair's report.
    pub(crate) fn start_pair_holds(&self, now: Duration) -> bool {
        matches!(self.start_pair, StartPair::Awaiting { until, .. } if now < until)
    }

    /// Client: whether data waits for the report (until its deadline,
    /// which is then the driver's timer rather than the pacer).
    pub(crate) fn start_pair_holds_data(&self) -> bool {
        matches!(self.start_pair, StartPair::Awaiting { .. })
    }

    /// Client: no report within a round trip: a small first flight goes
    /// while the report may still come (a link slower than the handshake
    /// showed: the ATT drive at a twentieth of its rate took 70–290 ms to
    /// serialize the copy, and the configured 32 packets were seconds of
    /// queue). None a round trip later either (it or the copy was lost,
    /// or the server does not measure pairs): the first flight as
    /// configured.
    pub(super) fn start_pair_timeout(&mut self, now: Duration) {
        match self.start_pair {
            StartPair::Awaiting { bytes, rtt, until } if now >= until => {
                self.start_pair = StartPair::Provisional {
                    bytes,
                    until: now + rtt,
                };
                let bound = u64::from(bytes) * 1_000_000 / (rtt.as_micros() as u64).max(1);
                self.paths[0].cc.on_start_pending(now, bound);
            }
            StartPair::Provisional { until, .. } if now >= until => {
                self.start_pair = StartPair::Off;
                self.paths[0].cc.on_start_unknown(now);
            }
            _ => {}
        }
    }

    /// When the wait for the report ends (a timer for the driver).
    pub(crate) fn start_pair_deadline(&self) -> Option<Duration> {
        match self.start_pair {
            StartPair::Awaiting { until, .. } | StartPair::Provisional { until, .. } => Some(until),
            _ => None,
        }
    }

    /// Client: the server's report. Any gap it gives within the server's
    /// own limit (half a retransmission timeout) is the pair's: a client
    /// that sent its Initial again is no longer awaiting one. A gap of
    /// zero (no spacing seen: a link faster than the clock) sizes
    /// nothing; after the provisional flight it releases the configured
    /// one. A longer gap is no report a server sends: ignored.
    pub(super) fn on_start_pair_report(&mut self, now: Duration, dispersion_us: u64) {
        let (StartPair::Awaiting { bytes, .. } | StartPair::Provisional { bytes, .. }) =
            self.start_pair
        else {
            return;
        };
        let provisional = matches!(self.start_pair, StartPair::Provisional { .. });
        self.start_pair = StartPair::Off;
        if dispersion_us == 0 || dispersion_us >= (HANDSHAKE_RETRANSMIT / 2).as_micros() as u64 {
            if provisional {
                self.paths[0].cc.on_start_unknown(now);
            }
            return;
        }
        let capacity = u64::from(bytes) * 1_000_000 / dispersion_us;
        self.paths[0].cc.on_start_capacity(now, capacity);
    }

    /// Server: an Initial came again. Returns whether it was the pair's
    /// copy (measured and reported); otherwise it is a repeat, and the
    /// reply goes again.
    pub(super) fn on_initial_again(&mut self, now: Duration) -> bool {
        let StartPair::Measuring { first } = self.start_pair else {
            return false;
        };
        self.start_pair = StartPair::Off;
        let gap = now.saturating_sub(first);
        if gap >= HANDSHAKE_RETRANSMIT / 2 {
            return false;
        }
        self.paths[0].pair_reports.push((START_PAIR_ID, first, gap));
        self.feedback_due = true;
        self.start_pair = StartPair::ReportAgain { first, gap };
        true
    }

    /// Server: feedback was written, with the report in it: the report
    /// goes once more, in the packet after. A lost report costs the client
    /// a round trip of waiting, a second small datagram almost nothing.
    pub(super) fn start_pair_reported(&mut self) {
        if let StartPair::ReportAgain { first, gap } = self.start_pair {
            self.start_pair = StartPair::Off;
            self.paths[0].pair_reports.push((START_PAIR_ID, first, gap));
            self.feedback_due = true;
        }
    }
}

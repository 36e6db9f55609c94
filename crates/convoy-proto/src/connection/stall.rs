//! Telling a forward stall from a return-path one.
//!
//! On a cellular drive either direction pauses for seconds on its own: the
//! traces' uplinks and downlinks have outages at different times. When
//! acknowledgments stop, the sender cannot tell whether its data stopped
//! arriving (a forward stall: more data would only wait in the queue) or
//! the acknowledgments stopped coming back while the data still flows (a
//! return-path stall: the forward link idles unless the sender goes on).
//!
//! The receiver can tell, and while the return path works it can say so:
//! when data that was flowing stops, it sends an acknowledgment anyway
//! (`STALL_REPORT_AFTER`, then twice and four times as long), which
//! acknowledges nothing new and carries an ACK delay that long. A sender
//! that reads such an acknowledgment knows its data stopped arriving; one
//! that hears nothing at all knows only that it hears nothing, which is
//! when Tide keeps sending for a bounded time (`cc/tide`, "coasting").
//! Only peers that asked for RECEIVE_TIME frames (Tide senders) get
//! reports; the other modes' traffic is unchanged.

use std::time::Duration;

use super::Connection;

/// Data that stopped arriving for this long is reported.
const STALL_REPORT_AFTER: Duration = Duration::from_millis(25);
/// Reports per stall: at 1, 3 and 7 × `STALL_REPORT_AFTER` of silence.
/// The first one counts; the others cover its loss.
const STALL_REPORTS: u32 = 3;
/// An acknowledgment of nothing new with at least this ACK delay says the
/// forward path delivered nothing for that long.
const STALL_EVIDENCE: Duration = Duration::from_millis(20);
/// Data counts as flowing (and its stopping as a stall) when packets came
/// at most this far apart: a transfer of more than ~0.1 Mbit/s. Isolated
/// packets (a vehicle's periodic samples) are not followed by reports.
const FLOWING_GAP: Duration = Duration::from_millis(100);

/// The receiver's side: when the next stall report is due, and how many
/// were sent for this stall.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StallReports {
    next: Option<(Duration, u32)>,
    last_data: Option<Duration>,
}

impl StallReports {
    /// A data packet arrived: if data is flowing, the next report is due
    /// after a silence.
    pub(crate) fn on_data(&mut self, now: Duration) {
        let flowing = self
            .last_data
            .is_some_and(|t| now.saturating_sub(t) <= FLOWING_GAP);
        self.last_data = Some(now);
        self.next = flowing.then_some((now + STALL_REPORT_AFTER, 0));
    }

    pub(crate) fn deadline(&self) -> Option<Duration> {
        self.next.map(|(t, _)| t)
    }

    /// Whether a report is due now; schedules the next one.
    fn take_due(&mut self, now: Duration) -> bool {
        match self.next {
            Some((t, sent)) if now >= t => {
                let sent = sent + 1;
                self.next =
                    (sent < STALL_REPORTS).then(|| (now + STALL_REPORT_AFTER * (1 << sent), sent));
                true
            }
            _ => false,
        }
    }
}

impl Connection {
    /// Receiver: a data packet arrived. Only a peer that asked for
    /// RECEIVE_TIME frames reads stall reports, so only its data arms
    /// them (for the others no timer would fire in vain).
    pub(crate) fn on_data_for_stall(&mut self, now: Duration) {
        if self.send_receive_times {
            self.stall_reports.on_data(now);
        }
    }

    /// Receiver: sends a stall report (an acknowledgment) when one is due.
    pub(crate) fn on_stall_timer(&mut self, now: Duration) {
        if self.stall_reports.take_due(now) {
            self.feedback_due = true;
        }
    }

    /// Sender: an acknowledgment that acknowledged nothing new, with this
    /// ACK delay. A long one is a stall report: the data paths' controllers
    /// hear that data stopped arriving.
    pub(crate) fn on_empty_ack(&mut self, now: Duration, ack_delay: Duration) {
        if ack_delay < STALL_EVIDENCE {
            return;
        }
        for i in self.data_paths().collect::<Vec<_>>() {
            self.paths[i].cc.on_forward_stall(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn reports_back_off_and_stop() {
        let mut r = StallReports::default();
        assert_eq!(r.deadline(), None);
        r.on_data(ms(90));
        r.on_data(ms(100));
        assert!(!r.take_due(ms(110)));
        assert!(r.take_due(ms(125)));
        assert_eq!(r.deadline(), Some(ms(175)));
        assert!(r.take_due(ms(175)));
        assert_eq!(r.deadline(), Some(ms(275)));
        assert!(r.take_due(ms(275)));
        assert_eq!(r.deadline(), None);
        assert!(!r.take_due(ms(1000)));
        // New data after a long silence is not yet a flow...
        r.on_data(ms(1000));
        assert_eq!(r.deadline(), None);
        // ...the next packet soon after it makes one, with a new count.
        r.on_data(ms(1050));
        assert_eq!(r.deadline(), Some(ms(1075)));
    }

    #[test]
    fn isolated_packets_are_not_followed_by_reports() {
        let mut r = StallReports::default();
        for s in 1..10 {
            r.on_data(ms(1000 * s));
            assert_eq!(r.deadline(), None);
        }
    }
}

//! CapProbe path grading (SPEC S3, Mena ch. 7) wired into the paths: a
//! packet pair on each path that carries data every [`PAIR_INTERVAL`], the
//! receiver's dispersion report, a grade every γ. A path graded bad N times
//! in a row while another path works is demoted: it stands by (the peer is
//! told with PATH_STATUS) until its grades are good again. This catches
//! what the probe timers cannot: a path that answers, but slowly.

use std::time::Duration;

use super::paths::PathState;
use super::{Connection, Transmit};
use crate::capprobe::{Config as GradeConfig, Estimator, PairSample};
use crate::wire::frame::write_frame;
use crate::wire::Frame;

/// One pair per path this often: two full datagrams, about 46 kbit/s, so
/// each γ = 1 s grade has pairs to go on (the thesis probed at 77–150
/// kbit/s).
pub const PAIR_INTERVAL: Duration = Duration::from_millis(500);
/// ...and on a demoted path, this often: CapProbe's EWMA (α = 1/8) needs
/// about 20 pairs to forget a poor spell, and at two pairs a second a path
/// that came good would wait ten seconds to be used again (the issue asks
/// for two). About 230 kbit/s, on a path that carries no data.
pub const DEMOTED_PAIR_INTERVAL: Duration = Duration::from_millis(100);
/// A demoted path whose newest this many pairs all measured a capacity
/// above the threshold is restored at once, not at its next grade: judged
/// by the EWMA, when it came back depended on how long the poor spell had
/// been measured and where the 1 s grade period stood (0.5-2.9 s over the
/// multipath grid's starts). Five pairs at 100 ms: half a second of a path
/// that keeps showing its capacity.
const RECOVERY_PAIRS: usize = 5;
/// A backup standing by is measured, not graded: this many pairs 100 ms
/// apart once it stands by, then one every [`STANDBY_PAIR_INTERVAL`], so
/// that when it takes over its controller starts at the capacity they
/// showed (`RateController::on_takeover`). About 0.4 kbit/s on a path that
/// may be metered, beside its 1 s keep-alive pings.
const STANDBY_FIRST_PAIRS: u32 = 5;
const STANDBY_PAIR_INTERVAL: Duration = Duration::from_secs(60);
/// A path that turned suspect this many times within [`FLAP_WINDOW`] is
/// graded bad.
const FLAPS_TO_DEMOTE: usize = 3;
const FLAP_WINDOW: Duration = Duration::from_secs(10);
/// A backup standing by that measured at least this many times a primary's
/// C′ is the second witness against it (see `on_grading_timers`).
const BACKUP_ADVANTAGE: u64 = 2;
/// A demoted path comes back once its pairs show this many times the
/// capacity threshold: between the two it stays where it is, so a path
/// whose capacity hovers at the threshold does not flap.
const RESTORE_MARGIN: f64 = 1.5;
/// Pairs a path remembers while their reports are on the way: behind a
/// queue longer than the pair interval (the thesis's bad Wi-Fi holds 2.7 s
/// behind a 400 kB FIFO) the report of a pair arrives after the next ones
/// left, and with only the newest remembered no pair was ever measured,
/// so C′ stood still at what it was before the queue built.
const PAIRS_REMEMBERED: usize = 16;
/// Delay sums carry the difference of the two clocks; this keeps them
/// positive (only comparisons between a path's samples matter).
const CLOCK_OFFSET_US: i128 = 1 << 40;

/// A pair on its way: id, when each packet left, the second's size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PairSent {
    pub id: u64,
    pub first: Duration,
    pub second: Option<(Duration, u32)>,
}

impl Connection {
    /// Whether path `i` is graded: with another path to hand its role to,
    /// validated, and carrying data, suspect (a poor path flaps between
    /// the two: its grades must survive that) or demoted (so that its
    /// recovery shows).
    pub(crate) fn graded(&self, i: usize) -> bool {
        let p = &self.paths[i];
        self.paths.len() > 1
            && p.validated
            && (matches!(p.state, PathState::Active | PathState::Suspect)
                || (p.demoted && p.state == PathState::Standby))
    }

    /// Whether path `i` is a backup standing by, whose capacity pairs
    /// measure without grading it.
    fn measured_standby(&self, i: usize) -> bool {
        let p = &self.paths[i];
        self.paths.len() > 1
            && p.validated
            && p.backup
            && !p.demoted
            && p.state == PathState::Standby
            && !self.graded(i)
    }

    /// The paths died and data now goes to the backups standing by: each
    /// one that CapProbe measured starts at that capacity.
    pub(crate) fn on_backups_take_over(&mut self, now: Duration) {
        if self.paths.iter().any(|p| p.state == PathState::Active) {
            return;
        }
        for i in 0..self.paths.len() {
            if !self.measured_standby(i) {
                continue;
            }
            let p = &mut self.paths[i];
            if let Some(bps) = p.grader.as_ref().and_then(|g| g.capacity_bps()) {
                p.cc.on_takeover(now, bps / 8);
            }
        }
    }

    /// The two packets of a due pair, back to back: a PAIR_PROBE, a PING
    /// and padding to a full datagram each.
    pub(crate) fn pair_packet(&mut self, now: Duration, buf: &mut [u8]) -> Option<Transmit> {
        let i = (0..self.paths.len()).find(|&i| self.paths[i].pair_stage > 0)?;
        let second = self.paths[i].pair_stage == 2;
        let id = if second {
            self.paths[i].pairs_sent.back()?.id
        } else {
            self.next_pair_id += 1;
            self.next_pair_id
        };
        let t = self.protected(now, buf, i, true, None, |w, _| {
            if write_frame(w, &Frame::PairProbe { pair: id, second }).is_err()
                || write_frame(w, &Frame::Ping).is_err()
            {
                return false;
            }
            let _ = w.pad_to(w.len() + w.remaining());
            true
        });
        let p = &mut self.paths[i];
        match (&t, second) {
            (Some(_), false) => {
                if p.pairs_sent.len() == PAIRS_REMEMBERED {
                    p.pairs_sent.pop_front();
                }
                p.pairs_sent.push_back(PairSent {
                    id,
                    first: now,
                    second: None,
                });
                p.pair_stage = 2;
            }
            (Some(t), true) => {
                if let Some(s) = p.pairs_sent.back_mut() {
                    s.second = Some((now, t.len as u32));
                }
                p.pair_stage = 0;
            }
            (None, _) => p.pair_stage = 0,
        }
        t
    }

    /// Receiver: the first packet of a pair is remembered, the second
    /// measured against it.
    pub(crate) fn on_pair_probe(&mut self, now: Duration, i: usize, pair: u64, second: bool) {
        let p = &mut self.paths[i];
        if !second {
            p.pair_received = Some((pair, now));
        } else if let Some((id, first)) = p.pair_received.take() {
            if id == pair && p.pair_reports.len() < 4 {
                p.pair_reports
                    .push((pair, first, now.saturating_sub(first)));
                self.feedback_due = true;
            }
        }
    }

    /// Sender: a pair's report becomes a CapProbe sample of its path.
    pub(crate) fn on_pair_report(&mut self, now: Duration, pair: u64, first_us: u64, disp_us: u64) {
        let Some((i, k)) = self.paths.iter().enumerate().find_map(|(i, p)| {
            let k = p.pairs_sent.iter().position(|s| s.id == pair)?;
            Some((i, k))
        }) else {
            return;
        };
        let p = &mut self.paths[i];
        let sent = p.pairs_sent.remove(k).expect("found");
        let (Some((second_at, bytes)), Some(grader)) = (sent.second, p.grader.as_mut()) else {
            return;
        };
        let us = |d: Duration| d.as_micros() as i128;
        let sum = 2 * i128::from(first_us) + i128::from(disp_us) - us(sent.first) - us(second_at)
            + CLOCK_OFFSET_US;
        grader.on_pair(PairSample {
            at: now,
            bytes,
            dispersion: Duration::from_micros(disp_us),
            delay_sum: Duration::from_micros(sum.max(0) as u64),
        });
        let good_again = grader
            .recent_capacity_bps(RECOVERY_PAIRS)
            .is_some_and(|c| c >= restore_capacity_bps(grader));
        if p.demoted && good_again {
            grader.recovered(RECOVERY_PAIRS);
            // Its suspicions were the poor spell's: kept, three of them
            // would demote it again at the next grade.
            p.recent_suspicions.clear();
            self.demote(now, i, false);
        }
    }

    /// Starts pairs and grades the graded paths; demotes a path graded bad
    /// while another works, and restores it once it grades good again.
    pub(crate) fn on_grading_timers(&mut self, now: Duration) {
        for i in 0..self.paths.len() {
            if self.measured_standby(i) {
                let p = &mut self.paths[i];
                p.grader.get_or_insert_with(|| {
                    Estimator::new(now, GradeConfig::default()).expect("valid")
                });
                if now >= p.next_pair_at {
                    p.standby_pairs += 1;
                    p.next_pair_at = now
                        + if p.standby_pairs < STANDBY_FIRST_PAIRS {
                            DEMOTED_PAIR_INTERVAL
                        } else {
                            STANDBY_PAIR_INTERVAL
                        };
                    p.pair_stage = 1;
                }
                continue;
            }
            if !self.graded(i) {
                self.paths[i].forget_grades();
                continue;
            }
            let backup_bps = self.backup_capacity_bps(i);
            let p = &mut self.paths[i];
            if p.standby_pairs > 0 && p.state == PathState::Active {
                // It stood by, measured but not graded, and now carries
                // data again: its grader still holds the spell before it
                // stood by (a server's view of a Wi-Fi its client demoted
                // and then restored read the poor spell as now and
                // demoted it again at once). Graded afresh, its first pair
                // now rather than at the standby's next (a minute away).
                // (A backup that is only suspect keeps what it measured:
                // it stands by again once it answers.)
                p.forget_grades();
                p.next_pair_at = now;
            }
            let grader = p
                .grader
                .get_or_insert_with(|| Estimator::new(now, GradeConfig::default()).expect("valid"));
            if now >= p.next_pair_at {
                p.next_pair_at = now
                    + if p.demoted {
                        DEMOTED_PAIR_INTERVAL
                    } else {
                        PAIR_INTERVAL
                    };
                p.pair_stage = 1;
            }
            let Some(grade) = grader.grade(now) else {
                continue;
            };
            // Repeated silences with a low or unmeasurable capacity are a
            // bad grade too: a path that answers, then stalls, again and
            // again (a hotspot at the edge of its range behind a tiny
            // queue, where pairs do not survive to be measured) would
            // otherwise take data at every answer. Silences alone are not:
            // a cellular path whose capacity dips to nothing now and then
            // still measures well between (demoting it on silences alone
            // took the aggregate over a drive trace from 0.92 to 0.85 of
            // the links' capacity).
            p.recent_suspicions
                .retain(|&t| now.saturating_sub(t) < FLAP_WINDOW);
            let flapping = p.recent_suspicions.len() >= FLAPS_TO_DEMOTE
                && (grade.reasons.low_capacity || grade.reasons.no_pairs);
            // CapProbe wants two of its three votes, and a path that
            // queues gives them: C′ and a climbing SRTT or δ. convoy's
            // controllers keep the queue short, so on a narrow but live
            // path only C′ can vote (the thesis's bad Wi-Fi at 0.8 Mbit/s
            // under Tide: δ near 37, SRTT near 70 ms), and the path was
            // never handed over. A backup standing by that measured at
            // least twice as much is the second witness.
            let outclassed = !p.backup
                && grader.persistently_low_capacity()
                && backup_bps.is_some_and(|b| {
                    b >= grader.config().capacity_threshold_bps
                        && grader
                            .capacity_bps()
                            .is_some_and(|c| b >= c.saturating_mul(BACKUP_ADVANTAGE))
                });
            let bad = grader.is_bad() || flapping || outclassed;
            // Back only on a measured good grade: pairs got through and
            // showed capacity.
            let measured_good = !bad
                && grade
                    .capacity_bps
                    .is_some_and(|c| c >= restore_capacity_bps(grader));
            if bad && !p.demoted && self.another_works(i) {
                self.demote(now, i, true);
            } else if measured_good && self.paths[i].demoted {
                self.demote(now, i, false);
            }
        }
    }

    fn demote(&mut self, now: Duration, i: usize, demoted: bool) {
        if !demoted {
            // Its controller last learnt the poor spell's rate (a demoted
            // path carries no data to teach it otherwise), and beside a
            // working path the scheduler gives a path that slow almost
            // nothing to measure a better one with: restored with it, a
            // Wi-Fi back at 30 Mbit/s took 1.5 s to carry again. What it
            // carries now is unknown, as for a path validated again.
            self.paths[i].cc = self.cfg.rate_control.build();
        }
        let p = &mut self.paths[i];
        p.demoted = demoted;
        // Only a client tells its peer; a server's status_seq is the
        // newest it heard from the client, and counting its own demotions
        // there had the client's next PATH_STATUS dropped as old.
        if self.role == super::Role::Client {
            p.status_seq += 1;
            p.status_repeats = 3;
        }
        self.feedback_due = true;
        // A suspect path stays suspect; its answer brings it back as
        // what its grade says (Path::working_state).
        if p.state != PathState::Suspect {
            let s = if p.backup || demoted {
                PathState::Standby
            } else {
                PathState::Active
            };
            self.set_state(now, i, s);
        }
        if demoted {
            self.on_backups_take_over(now);
        }
    }

    /// The best capacity a backup standing by (not `i`) measured.
    fn backup_capacity_bps(&self, i: usize) -> Option<u64> {
        (0..self.paths.len())
            .filter(|&j| j != i && self.measured_standby(j))
            .filter_map(|j| self.paths[j].grader.as_ref()?.capacity_bps())
            .max()
    }

    /// When the grading needs the timer next.
    pub(crate) fn grading_timeout(&self) -> Option<Duration> {
        (0..self.paths.len())
            .filter_map(|i| {
                let p = &self.paths[i];
                if self.measured_standby(i) {
                    // Measured, never graded: its grade time stands still
                    // and would keep the timer due. Its grader is set up
                    // at the next timer run.
                    return Some(if p.grader.is_some() {
                        p.next_pair_at
                    } else {
                        now_or_zero()
                    });
                }
                self.graded(i).then(|| {
                    let grade = p
                        .grader
                        .as_ref()
                        .map_or(now_or_zero(), |g| g.next_grade_at());
                    p.next_pair_at.min(grade)
                })
            })
            .min()
    }
}

/// What a demoted path's pairs must show to bring it back.
fn restore_capacity_bps(grader: &Estimator) -> u64 {
    (grader.config().capacity_threshold_bps as f64 * RESTORE_MARGIN) as u64
}

/// A path not graded yet is set up at the next timer run.
fn now_or_zero() -> Duration {
    Duration::ZERO
}

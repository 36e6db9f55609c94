//! Paths: every (local interface, remote address) pair a connection uses.
//!
//! A connection starts on path 0 (the handshake's). A client opens more
//! with [`Connection::open_path`]; the peer learns of a path from the first
//! packet carrying its id. Each path has its own RTT estimator and rate
//! controller, and goes through these states:
//!
//! ```text
//!  Validating ──response──► Active ◄──status──► Standby
//!      ▲                     │  ▲                  │
//!      │ probe        1 PTO  │  │ ack              │ 1 PTO
//!      │ (1 s)         silent▼  │                  ▼
//!  Abandoned ◄──3 PTO── Suspect ◄──────────────────┘
//!      ▲
//!      └── the OS reports the interface down (path_down), or PATH_ABANDON
//! ```
//!
//! * **Validating**: a PATH_CHALLENGE is out; until the peer echoes it in a
//!   PATH_RESPONSE nothing but path frames go there, and a server sends at
//!   most 3× what it received on it (anti-amplification).
//! * **Active** paths carry data, each symbol on the path where it will
//!   arrive first ([`Connection::data_path`]).
//! * **Standby** (backup) paths carry no data while an active path works;
//!   a ping every [`STANDBY_PROBE`] keeps their RTT known and the NAT open.
//! * **Suspect**: one PTO without an acknowledgment while another path
//!   works. Its symbols in flight are declared lost at once, so their repair
//!   goes out on the other paths; it gets pings only.
//! * **Abandoned**: suspect for [`ABANDON_PTOS`] PTOs, or its interface went
//!   down. PATH_ABANDON tells the peer. A silent path is re-probed every
//!   [`REPROBE`]; one whose interface is down waits for [`Connection::path_up`].

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::Connection;
use crate::cc::RateController;
use crate::rtt::RttEstimator;

/// Paths per connection, path 0 included.
pub const MAX_PATHS: usize = 8;
/// A standby path is pinged this often: 60-byte pings, under 0.5 kbit/s.
pub const STANDBY_PROBE: Duration = Duration::from_secs(1);
/// A path abandoned for silence is probed again this often, so traffic
/// returns within about this long of the path coming back.
pub const REPROBE: Duration = Duration::from_millis(500);
/// A suspect path is abandoned after this many (base) PTOs of silence.
pub const ABANDON_PTOS: u32 = 3;
/// Tries of a path challenge before the path is given up (re-probed later).
const CHALLENGE_TRIES: u32 = 5;
/// Challenges repeat at most this far apart: a path coming back is found
/// within this long.
const MAX_CHALLENGE_INTERVAL: Duration = Duration::from_millis(250);
/// See [`Connection::silence_limit`].
const MIN_SILENCE: Duration = Duration::from_millis(20);
/// See [`Connection::feedback_path`].
const FEEDBACK_ALIVE: Duration = Duration::from_millis(10);
/// The window of [`Path::received_lately`].
const RECEIVE_WINDOW: Duration = Duration::from_millis(100);
/// Feedback avoids a path that brought less than this share of what the
/// busiest path brought lately.
const FEEDBACK_MIN_SHARE: u64 = 10;
/// Path events kept for [`Connection::path_events`].
const MAX_EVENTS: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PathState {
    Validating,
    Active,
    Standby,
    Suspect,
    Abandoned,
}

impl PathState {
    pub fn as_str(self) -> &'static str {
        match self {
            PathState::Validating => "validating",
            PathState::Active => "active",
            PathState::Standby => "standby",
            PathState::Suspect => "suspect",
            PathState::Abandoned => "abandoned",
        }
    }
}

impl std::fmt::Display for PathState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("only a client opens paths")]
    NotClient,
    #[error("the connection is not established")]
    NotEstablished,
    #[error("at most {MAX_PATHS} paths per connection")]
    TooManyPaths,
    #[error("no path {0}")]
    UnknownPath(u8),
}

/// One path, as the application sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathInfo {
    pub id: u8,
    pub remote: SocketAddr,
    pub state: PathState,
    pub backup: bool,
    pub srtt: Duration,
    pub min_rtt: Duration,
    /// The path's rate controller, bytes/s.
    pub rate: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
    pub packets_lost: u64,
    /// CapProbe's verdict: graded bad N times in a row (demoted).
    pub bad: bool,
    /// CapProbe's capacity estimate C′, bit/s, once pairs were measured.
    pub capacity_bps: Option<u64>,
}

/// A path changed state at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathEvent {
    pub at: Duration,
    pub path: u8,
    pub state: PathState,
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PathCounters {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
    pub packets_lost: u64,
}

#[derive(Clone)]
pub(crate) struct Path {
    pub id: u8,
    pub remote: SocketAddr,
    /// Our address the peer's newest packet on it was sent to, when the
    /// driver knows it (a server on a wildcard address, from
    /// IP_PKTINFO): replies leave from it, so they come from the address
    /// the peer dialled.
    pub local: Option<IpAddr>,
    pub rtt: RttEstimator,
    pub cc: Box<dyn RateController>,
    pub state: PathState,
    /// Standby wanted: ours for a path we opened, the peer's PATH_STATUS
    /// otherwise.
    pub backup: bool,
    /// Sequence of the newest PATH_STATUS sent or accepted.
    pub status_seq: u64,
    /// Feedback packets that still repeat our PATH_STATUS / PATH_ABANDON.
    pub status_repeats: u8,
    pub abandon_repeats: u8,
    /// The peer answered our challenge on it (path 0: the handshake did).
    pub validated: bool,
    /// Our challenge, when it was last sent, how often.
    pub challenge: Option<([u8; 8], Duration)>,
    pub challenge_tries: u32,
    pub challenge_due: bool,
    /// Challenges from the peer to echo on this path.
    pub responses: Vec<[u8; 8]>,
    /// A ping to send on this path (PTO probe, standby keep-alive).
    pub ping_due: bool,
    /// The peer opened it: until validated, we send at most 3× what came
    /// in on it (anti-amplification; a path we opened has no such limit).
    pub peer_opened: bool,
    pub unvalidated_received: u64,
    pub unvalidated_sent: u64,
    pub last_received: Option<Duration>,
    /// Bytes received on it lately (feedback goes on a busy path).
    pub received_recent: RecentBytes,
    /// When an acknowledgment last covered a packet of this path.
    pub last_progress: Option<Duration>,
    /// When the newest of its packets acknowledged so far was sent.
    pub newest_acked_sent: Option<Duration>,
    /// That acknowledgment arrived on this path (not on another).
    pub feedback_on_it: bool,
    pub last_sent: Duration,
    pub pto_count: u32,
    /// When its probe timer last fired, on a connection with this path
    /// alone: the next one (twice as long) runs from here, as the packets
    /// it keeps in flight through a probe timeout stay the oldest.
    pub last_probe_timeout: Option<Duration>,
    pub suspect_since: Option<Duration>,
    /// When it turned suspect (`suspect_since` moves on with every packet
    /// heard, which delays abandoning it; this one does not).
    pub suspected_at: Option<Duration>,
    /// Abandoned: the OS said its interface is down (no re-probing).
    pub os_down: bool,
    /// When an abandoned path is probed next.
    pub reprobe_at: Option<Duration>,
    /// The newest packet received on it and when, not yet reported in a
    /// RECEIVE_TIME frame.
    pub newest_received: Option<(u64, Duration)>,
    pub receive_time_due: bool,
    pub counters: PathCounters,
    /// CapProbe (grading.rs): the grader, the pairs on their way (newest
    /// last) and the one being received, reports to send, when the next
    /// pair goes.
    pub grader: Option<crate::capprobe::Estimator>,
    pub pair_stage: u8,
    pub pairs_sent: std::collections::VecDeque<super::grading::PairSent>,
    pub pair_received: Option<(u64, Duration)>,
    pub pair_reports: Vec<(u64, Duration, Duration)>,
    pub next_pair_at: Duration,
    /// Pairs sent while standing by as a backup (grading.rs).
    pub standby_pairs: u32,
    /// Graded bad: standing by until graded good again.
    pub demoted: bool,
    /// When it last turned suspect (grading.rs counts them).
    pub recent_suspicions: Vec<Duration>,
    /// Validated again after being abandoned: demoted once validated.
    pub probation: bool,
    /// A challenge filled a datagram on it once (the path carries
    /// full-size packets); re-probes need not.
    pub full_size_checked: bool,
}

/// Bytes counted over the window of `RECEIVE_WINDOW` under way and the one
/// before it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RecentBytes {
    start: Duration,
    current: u64,
    previous: u64,
}

impl RecentBytes {
    /// The counts as they stand at `now`: windows that ended are moved
    /// back or forgotten.
    fn at(self, now: Duration) -> RecentBytes {
        if now >= self.start + 2 * RECEIVE_WINDOW {
            RecentBytes {
                start: now,
                ..RecentBytes::default()
            }
        } else if now >= self.start + RECEIVE_WINDOW {
            RecentBytes {
                start: now,
                current: 0,
                previous: self.current,
            }
        } else {
            self
        }
    }

    pub(crate) fn add(&mut self, now: Duration, bytes: usize) {
        *self = self.at(now);
        self.current += bytes as u64;
    }

    /// Bytes over the last one or two windows.
    fn total(self, now: Duration) -> u64 {
        let r = self.at(now);
        r.current + r.previous
    }
}

impl Path {
    /// Forgets what CapProbe measured on it: the grader, and the pairs
    /// whose reports would otherwise seed a fresh grader with the old
    /// spell.
    pub(crate) fn forget_grades(&mut self) {
        self.grader = None;
        self.standby_pairs = 0;
        self.pairs_sent.clear();
    }

    /// An acknowledgment measured a round trip on this path (`max_ack_delay`:
    /// the most of the peer's reported delay to take off it).
    ///
    /// A packet sent before this lone path's last probe timeout waited out
    /// the silence in a queue, and its round trip is the outage's, not the
    /// link's: it is not taken. Taken, the backlog an outage leaves (5.9 s
    /// on the AT&T uplink after a 3 s gap) raised the smoothed RTT to 4.3 s
    /// and its variation to 2.4 s, the probe timeout to 14 s, and when the
    /// next small flight died on the air the sender sat out all of it
    /// (`convoy simulate`, AT&T both ways, GE loss, seed 5). Packets sent
    /// after the timeout, the probe first, measure the link as it is.
    pub(crate) fn on_rtt_sample(
        &mut self,
        now: Duration,
        sample: crate::recovery::RttSample,
        max_ack_delay: Duration,
    ) {
        if let Some(g) = self.grader.as_mut() {
            g.on_rtt(now, sample.rtt);
        }
        if self.last_probe_timeout.is_some_and(|t| sample.sent < t) {
            return;
        }
        self.rtt
            .update(sample.rtt, sample.ack_delay.min(max_ack_delay));
    }

    /// Counts a datagram received at `now` into the recent bytes.
    pub(crate) fn count_received(&mut self, now: Duration, len: usize) {
        self.received_recent.add(now, len);
    }

    /// Bytes received over the last one or two windows.
    fn received_lately(&self, now: Duration) -> u64 {
        self.received_recent.total(now)
    }

    pub(crate) fn new(id: u8, remote: SocketAddr, cc: Box<dyn RateController>) -> Path {
        Path {
            id,
            remote,
            local: None,
            rtt: RttEstimator::default(),
            cc,
            state: PathState::Active,
            backup: false,
            status_seq: 0,
            status_repeats: 0,
            abandon_repeats: 0,
            validated: true,
            challenge: None,
            challenge_tries: 0,
            challenge_due: false,
            responses: Vec::new(),
            ping_due: false,
            peer_opened: false,
            unvalidated_received: 0,
            unvalidated_sent: 0,
            last_received: None,
            received_recent: RecentBytes::default(),
            last_progress: None,
            feedback_on_it: false,
            last_sent: Duration::ZERO,
            pto_count: 0,
            last_probe_timeout: None,
            newest_acked_sent: None,
            suspect_since: None,
            suspected_at: None,
            os_down: false,
            reprobe_at: None,
            newest_received: None,
            receive_time_due: false,
            counters: PathCounters::default(),
            grader: None,
            pair_stage: 0,
            pairs_sent: std::collections::VecDeque::new(),
            pair_received: None,
            pair_reports: Vec::new(),
            next_pair_at: Duration::ZERO,
            standby_pairs: 0,
            demoted: false,
            recent_suspicions: Vec::new(),
            probation: false,
            full_size_checked: false,
        }
    }

    /// A path that must prove itself first.
    pub(crate) fn unvalidated(id: u8, remote: SocketAddr, cc: Box<dyn RateController>) -> Path {
        let mut p = Path::new(id, remote, cc);
        p.state = PathState::Validating;
        p.validated = false;
        p.challenge_due = true;
        p
    }

    /// Unvalidated from now on, with a first challenge due and the 3×
    /// limit counted afresh.
    fn challenge_anew(&mut self) {
        self.validated = false;
        self.unvalidated_sent = 0;
        self.unvalidated_received = 0;
        self.challenge = None;
        self.challenge_due = true;
        self.challenge_tries = 0;
    }

    /// Whether sending `len` more bytes on it would break the 3× limit.
    pub(crate) fn amplification_limited(&self, len: usize) -> bool {
        self.peer_opened
            && !self.validated
            && self.unvalidated_sent + len as u64 > 3 * self.unvalidated_received
    }

    /// What a validated path that answers is: standby if it is a backup or
    /// graded bad, else active.
    fn working_state(&self) -> PathState {
        if self.backup || self.demoted {
            PathState::Standby
        } else {
            PathState::Active
        }
    }

    pub(crate) fn has_control(&self) -> bool {
        !self.responses.is_empty() || self.challenge_due || self.ping_due
    }
}

impl Connection {
    /// Client only: opens another path toward `remote`. Its datagrams come
    /// out of [`Connection::poll_transmit`] with `path_id` the returned id;
    /// the driver sends them from the socket (interface, local address) it
    /// opened the path for. It carries data once the peer has answered its
    /// challenge, about one RTT later; with `backup` it then stands by.
    pub fn open_path(
        &mut self,
        now: Duration,
        remote: SocketAddr,
        backup: bool,
    ) -> Result<u8, PathError> {
        if self.role != super::Role::Client {
            return Err(PathError::NotClient);
        }
        if !self.is_established() {
            return Err(PathError::NotEstablished);
        }
        if self.paths.len() >= MAX_PATHS {
            return Err(PathError::TooManyPaths);
        }
        let id = (0..=u8::MAX)
            .find(|id| self.paths.iter().all(|p| p.id != *id))
            .ok_or(PathError::TooManyPaths)?;
        let mut p = Path::unvalidated(id, remote, self.cfg.rate_control.build());
        p.backup = backup;
        // The peer learns the path's role from PATH_STATUS; it is sent on
        // the new path with the challenge's reply... and repeated in
        // feedback until it surely arrived.
        if backup {
            p.status_seq = 1;
            p.status_repeats = 3;
        }
        self.paths.push(p);
        self.record_event(now, id, PathState::Validating);
        Ok(id)
    }

    /// Makes a path standby (`true`) or available for data (`false`), and
    /// tells the peer.
    pub fn set_path_backup(
        &mut self,
        now: Duration,
        id: u8,
        backup: bool,
    ) -> Result<(), PathError> {
        let i = self.path_index(id).ok_or(PathError::UnknownPath(id))?;
        let p = &mut self.paths[i];
        if p.backup != backup {
            p.backup = backup;
            p.status_seq += 1;
            p.status_repeats = 3;
            self.feedback_due = true;
            if matches!(self.paths[i].state, PathState::Active | PathState::Standby) {
                let s = self.paths[i].working_state();
                self.set_state(now, i, s);
            }
        }
        Ok(())
    }

    /// The OS reported the path's interface (or address) gone: it is
    /// abandoned at once and its symbols in flight are repaired on the
    /// other paths.
    pub fn path_down(&mut self, now: Duration, id: u8) -> Result<(), PathError> {
        let i = self.path_index(id).ok_or(PathError::UnknownPath(id))?;
        self.paths[i].os_down = true;
        self.abandon(now, i);
        Ok(())
    }

    /// The interface came back: the path is validated again and, once the
    /// peer answers, used again.
    pub fn path_up(&mut self, now: Duration, id: u8) -> Result<(), PathError> {
        let i = self.path_index(id).ok_or(PathError::UnknownPath(id))?;
        self.paths[i].os_down = false;
        if self.paths[i].state == PathState::Abandoned {
            self.revalidate(now, i);
        }
        Ok(())
    }

    pub fn paths(&self) -> Vec<PathInfo> {
        self.paths
            .iter()
            .map(|p| PathInfo {
                id: p.id,
                remote: p.remote,
                state: p.state,
                backup: p.backup,
                srtt: p.rtt.smoothed(),
                min_rtt: p.rtt.min(),
                rate: p.cc.rate(),
                bytes_sent: p.counters.bytes_sent,
                bytes_received: p.counters.bytes_received,
                packets_sent: p.counters.packets_sent,
                packets_received: p.counters.packets_received,
                packets_lost: p.counters.packets_lost,
                bad: p.demoted,
                capacity_bps: p.grader.as_ref().and_then(|g| g.capacity_bps()),
            })
            .collect()
    }

    /// Every path state change so far (the oldest dropped past a few
    /// thousand).
    pub fn path_events(&self) -> &[PathEvent] {
        self.path_events.as_slices().0
    }

    pub(crate) fn path_index(&self, id: u8) -> Option<usize> {
        self.paths.iter().position(|p| p.id == id)
    }

    pub(crate) fn record_event(&mut self, at: Duration, path: u8, state: PathState) {
        if self.path_events.len() >= MAX_EVENTS {
            self.path_events.pop_front();
        }
        self.path_events.push_back(PathEvent { at, path, state });
        self.path_events.make_contiguous();
    }

    pub(crate) fn set_state(&mut self, now: Duration, i: usize, state: PathState) {
        if self.paths[i].state != state {
            self.paths[i].state = state;
            let id = self.paths[i].id;
            self.record_event(now, id, state);
        }
    }

    fn abandon(&mut self, now: Duration, i: usize) {
        let client = self.role == super::Role::Client;
        if self.paths[i].state == PathState::Abandoned {
            return;
        }
        if matches!(self.paths[i].state, PathState::Active | PathState::Standby) {
            self.last_suspicion = Some(now);
        }
        let id = self.paths[i].id;
        let lost = self.recovery.on_probe_timeout(id, now);
        self.on_path_lost(now, &lost);
        let p = &mut self.paths[i];
        p.suspect_since = None;
        p.suspected_at = None;
        p.challenge = None;
        p.challenge_due = false;
        p.ping_due = false;
        p.responses.clear();
        // Only the client, which owns the interfaces, abandons a path for
        // the peer too; a server's view is its own.
        p.abandon_repeats = if client { 3 } else { 0 };
        p.reprobe_at = (!p.os_down).then_some(now + REPROBE);
        self.feedback_due = true;
        self.set_state(now, i, PathState::Abandoned);
        self.on_backups_take_over(now);
    }

    /// Starts validating a path again (it came back, or is re-probed): a
    /// fresh rate controller, since what it carries now is unknown.
    pub(crate) fn revalidate(&mut self, now: Duration, i: usize) {
        let cc = self.cfg.rate_control.build();
        let p = &mut self.paths[i];
        p.cc = cc;
        p.challenge_anew();
        p.pto_count = 0;
        p.reprobe_at = None;
        p.abandon_repeats = 0;
        // Back on probation: once validated it stands by, graded by
        // CapProbe, and carries data again after its first good grade. A
        // path that answers but is still poor would otherwise take data
        // at every re-probe and stall it.
        p.probation = true;
        self.set_state(now, i, PathState::Validating);
    }

    /// The peer's address on path `i` changed (RFC 9000 §9.3): until a
    /// challenge to the new address is answered, it gets at most 3× what
    /// came from it, so a packet copied by an on-path attacker and sent
    /// from a victim's address cannot turn the server's data on the victim.
    /// The path keeps carrying data meanwhile (an unanswered challenge
    /// abandons it). A new host, not only a new port, also gets a fresh
    /// rate controller: what the old route carried says nothing of it.
    fn validate_new_address(&mut self, i: usize, same_host: bool) {
        let cc = (!same_host).then(|| self.cfg.rate_control.build());
        let p = &mut self.paths[i];
        if let Some(cc) = cc {
            p.cc = cc;
        }
        // Its address is the peer's choice now, as on a path it opened.
        p.peer_opened = true;
        p.challenge_anew();
    }

    /// The peer echoed a challenge: the path it was sent on is validated.
    pub(crate) fn on_path_response(&mut self, now: Duration, data: [u8; 8]) {
        let Some(i) = self
            .paths
            .iter()
            .position(|p| p.challenge.is_some_and(|(c, _)| c == data))
        else {
            return;
        };
        let (_, sent) = self.paths[i].challenge.take().expect("matched");
        let several = self.paths.len() > 1;
        let needed = !self.another_delivers(i, now);
        let p = &mut self.paths[i];
        if p.challenge_tries == 1 && !p.rtt.has_samples() {
            // One challenge, one answer: an RTT sample (Karn's rule).
            let rtt = now.saturating_sub(sent);
            if !rtt.is_zero() {
                p.rtt.update(rtt, Duration::ZERO);
                p.cc.on_handshake_rtt(now, rtt);
            }
        }
        p.validated = true;
        p.pto_count = 0;
        p.suspect_since = None;
        // On probation, unless no other path delivers now: then the
        // reader waits for this one anyway. A Wi-Fi back from a coverage
        // gap while the cell beside it was in an outage of its own stood
        // by for 0.4-0.5 s with the reader stalled since the gap began
        // (`scripts/mp-drive-sim.py`, the cross-town drive at 67 s).
        if std::mem::take(&mut p.probation) && several && !needed {
            p.demoted = true;
            p.forget_grades();
        }
        let p = &mut self.paths[i];
        let s = if p.demoted {
            PathState::Standby
        } else {
            p.working_state()
        };
        self.set_state(now, i, s);
    }

    /// A PATH_STATUS from the client: the newest wins. (A client takes no
    /// orders: its paths' roles are its own, and a server's grading of a
    /// path decides only what the server sends on it.)
    pub(crate) fn on_path_status(&mut self, now: Duration, id: u8, seq: u64, backup: bool) {
        if self.role == super::Role::Client {
            return;
        }
        let Some(i) = self.path_index(id) else { return };
        let p = &mut self.paths[i];
        if seq <= p.status_seq && !(seq == 0 && p.status_seq == 0) {
            return;
        }
        p.status_seq = seq;
        p.backup = backup;
        if matches!(p.state, PathState::Active | PathState::Standby) {
            let s = p.working_state();
            self.set_state(now, i, s);
        }
    }

    /// The peer stopped using a path: so do we (until it comes back).
    pub(crate) fn on_path_abandon(&mut self, now: Duration, id: u8) {
        if let Some(i) = self.path_index(id) {
            if self.paths.len() > 1 {
                self.paths[i].abandon_repeats = 0;
                self.abandon(now, i);
                self.paths[i].abandon_repeats = 0;
                // A client probes it again later (the server waits for
                // that probe: only the client knows its interfaces).
                if self.role == super::Role::Server {
                    self.paths[i].reprobe_at = None;
                }
            }
        }
    }

    /// A path is suspect when it is silent: for a PTO, nothing of ours on
    /// it acknowledged and nothing heard on it. A path the peer keeps
    /// sending on works at least one way (its acknowledgments may just be
    /// queued behind data), and one whose packets are being acknowledged
    /// works; suspecting either would throw away its symbols in flight.
    fn may_suspect(&self, i: usize, now: Duration) -> bool {
        let p = &self.paths[i];
        let pto = self.silence_limit(i);
        matches!(p.state, PathState::Active | PathState::Standby)
            && self
                .recovery
                .oldest_in_flight(Some(p.id))
                .is_some_and(|t| now.saturating_sub(t) >= pto)
            && self
                .last_heard(i)
                .is_none_or(|t| now.saturating_sub(t) >= pto)
            && self.another_works(i)
    }

    /// Whether a path in use is overtaken: acknowledgments cover a packet
    /// another active path sent so long after this one's oldest in flight
    /// that, had that one arrived, the same acknowledgment would have
    /// covered it (its smoothed RTT and four variations later). Judged by
    /// the live feedback, not by this path's own probe timer, which waits
    /// out its ACK delay and backs off, and is no help at all while the
    /// peer still sends on it: a link whose way up failed (a cell's
    /// uplink outage) kept its symbols, and the in-order reader, waiting
    /// 1.2 s beside a Wi-Fi that carried everything else
    /// (`scripts/mp-drive-sim.py`, the cross-town drive at 205.8 s). A
    /// packet of its own sent later and acknowledged means the oldest was
    /// lost on a working path (its packet threshold's business).
    fn overtaken(&self, i: usize) -> bool {
        let p = &self.paths[i];
        if p.state != PathState::Active || !p.rtt.has_samples() {
            return false;
        }
        let Some(oldest) = self.recovery.oldest_in_flight(Some(p.id)) else {
            return false;
        };
        if p.newest_acked_sent.is_some_and(|t| t > oldest) {
            return false;
        }
        let due = oldest + p.rtt.smoothed() + p.rtt.var() * 4 + MIN_SILENCE;
        self.paths.iter().enumerate().any(|(j, q)| {
            j != i
                && q.validated
                && q.state == PathState::Active
                && q.newest_acked_sent.is_some_and(|t| t >= due)
        })
    }

    /// Whether a path other than `i` carries data and is being heard: in
    /// use, and nothing of ours on it waiting unacknowledged for longer
    /// than its smoothed RTT.
    fn another_delivers(&self, i: usize, now: Duration) -> bool {
        self.paths.iter().enumerate().any(|(j, q)| {
            j != i
                && q.validated
                && q.state == PathState::Active
                && self
                    .recovery
                    .oldest_in_flight(Some(q.id))
                    .is_none_or(|oldest| {
                        let since = q.last_progress.map_or(oldest, |t| t.max(oldest));
                        now.saturating_sub(since) <= q.rtt.smoothed()
                    })
        })
    }

    /// Suspects every path an acknowledgment just showed overtaken.
    pub(crate) fn suspect_overtaken(&mut self, now: Duration) {
        for i in 0..self.paths.len() {
            if self.overtaken(i) && self.another_works(i) {
                self.suspect(now, i);
            }
        }
    }

    /// How long a path may be silent before it is suspect: its PTO, or
    /// less on an active path the peer was talking on (its feedback comes
    /// on it, within its ACK delay): four RTT variations and two ACK
    /// delays, at least [`MIN_SILENCE`]. A path that stops mid-transfer is
    /// suspected in a few tens of milliseconds instead of a full
    /// (queue-inflated) RTT and more; a false suspicion costs some repair
    /// symbols and ends with the next acknowledgment. A path whose
    /// acknowledgments come by another path keeps the PTO: when that other
    /// path dies, they stop too, and this one is not to blame.
    fn silence_limit(&self, i: usize) -> Duration {
        let p = &self.paths[i];
        let pto = self.base_pto(i);
        // Judged by where the acknowledgment that last covered its packets
        // arrived, not by whether anything arrived on it lately: with
        // feedback riding the faster path and the odd packet on this one,
        // the fast path's death silenced this one too, and this one was
        // suspected first (a 280-480 ms failover stall at some moments,
        // virtual time, Wi-Fi 30 + LTE 10 Mbit/s).
        let peer_talks_on_it =
            p.last_received.is_some() && (p.last_progress.is_none() || p.feedback_on_it);
        if p.state != PathState::Active || !p.rtt.has_samples() || !peer_talks_on_it {
            return pto;
        }
        // A lossy link loses acknowledgments too: as many in a row as its
        // loss rate makes plausible (one time in 500) are allowed
        // for, each an acknowledgment interval. Without that, a 2 Mbit/s
        // Wi-Fi at 10 % loss read a few lost in a row as silence every
        // few seconds, its data went to the backup for a round trip each
        // time, and three such suspicions in 10 s demoted a path CapProbe
        // measured at 2 Mbit/s.
        let loss = self.one_rtt.as_ref().map_or(0.0, |e| e.tx.loss_rate());
        let acks = 1 + plausible_losses_in_a_row(loss);
        (p.rtt.var() * 4 + self.cfg.max_ack_delay + self.peer_ack_delay(i) * acks)
            .max(MIN_SILENCE)
            .min(pto)
    }

    /// The last sign of life of a path: a packet from it, or an
    /// acknowledgment of one sent on it.
    fn last_heard(&self, i: usize) -> Option<Duration> {
        let p = &self.paths[i];
        p.last_received.max(p.last_progress)
    }

    /// Symbols lost with a path (suspect, abandoned); the loss rate that
    /// sizes the coding margin is left alone (a dead path is not a lossy
    /// link). Their source symbols go again first on the other paths (the
    /// sender only resends while the block could lack them all, so sources
    /// that did arrive cost at most a few repeats): the receiver reads a
    /// block in order and would otherwise wait for the whole block to
    /// decode over the remaining, slower path. A path that dies takes its
    /// queue with it, so what was in flight is taken as lost: guessing from
    /// when the path was last heard from which packets had got through,
    /// and not sending those again, measured 98-292 ms gaps against
    /// 58-68 ms (virtual time, eight moments, Wi-Fi 30 + LTE 10 Mbit/s).
    /// Only the order uses a guess: on an interface the OS took down, the
    /// sources that left more than the forward delay before go last.
    fn on_path_lost(&mut self, now: Duration, lost: &[crate::recovery::SentPacket]) {
        if lost.is_empty() {
            return;
        }
        // An interface the OS took down died now: what left it more than
        // its forward delay before had most likely arrived, and only its
        // acknowledgment was lost. The forward delay is the round trip
        // (the larger of smoothed and latest) less the way back, which
        // holds no queue of ours: half the smallest round trip. (A silent
        // path's moment of death is unknown: everything it held counts as
        // lost alike.)
        let arrived_before = self
            .path_index(lost[0].path)
            .map(|i| &self.paths[i])
            .filter(|path| path.os_down)
            .map(|path| {
                let rtt = &path.rtt;
                let forward = rtt
                    .smoothed()
                    .max(rtt.latest())
                    .saturating_sub(rtt.min() / 2);
                now.saturating_sub(forward)
            });
        if let Some(e) = self.one_rtt.as_mut() {
            for p in lost {
                if let Some(b) = p.block {
                    let probably_arrived = arrived_before.is_some_and(|t| p.time < t);
                    e.tx.on_path_lost(b, p.esi, probably_arrived);
                }
            }
        }
        self.charge_losses(now, lost);
    }

    /// Whether some path other than `i` can carry data.
    pub(crate) fn another_works(&self, i: usize) -> bool {
        self.paths.iter().enumerate().any(|(j, p)| {
            j != i && p.validated && matches!(p.state, PathState::Active | PathState::Standby)
        })
    }

    /// Paths data may go on: the active ones; if none, the standby ones
    /// graded good; if none, those graded bad. With one path, that path
    /// whatever its state (the single-path connection never suspects its
    /// only path).
    pub(crate) fn data_paths(&self) -> impl Iterator<Item = usize> + '_ {
        let rank = |p: &Path| match (p.state, p.demoted) {
            (PathState::Active, _) => Some(0),
            (PathState::Standby, false) => Some(1),
            (PathState::Standby, true) => Some(2),
            _ => None,
        };
        let best = self.paths.iter().filter_map(rank).min();
        let single = self.paths.len() == 1;
        (0..self.paths.len())
            .filter(move |&i| single || (best.is_some() && rank(&self.paths[i]) == best))
    }

    /// The path feedback goes on: the fastest of the paths the peer reached
    /// us on just now (an ACK on a fast path comes back soonest, and one on
    /// a path the peer no longer uses might never arrive); if none, the path
    /// of the newest packet received. "Just now" is twice the path's RTT
    /// variation, at least [`FEEDBACK_ALIVE`]: a path carrying data hears
    /// from the peer far more often, and when the peer moves its data to
    /// another path (ours died under it) the feedback follows within that.
    pub(crate) fn feedback_path(&self, now: Duration) -> usize {
        if self.paths.len() == 1 {
            return 0;
        }
        let alive = |p: &Path| {
            p.validated
                && matches!(p.state, PathState::Active | PathState::Standby)
                && p.last_received.is_some_and(|t| {
                    now <= t
                        + (p.rtt.var() * 2)
                            .max(FEEDBACK_ALIVE)
                            .min(p.rtt.pto(self.cfg.max_ack_delay))
                })
        };
        // The peer's data shows which paths work now; our RTT samples of
        // a path that carries only our feedback may be seconds old. A
        // path that brings a trickle (a Wi-Fi hotspot gone to 0.1 Mbit/s,
        // whose RTT we measured when it was fast) would queue and drop
        // our acknowledgments: the peer then found its good path silent
        // and suspected it.
        let busiest = self
            .paths
            .iter()
            .filter(|p| alive(p))
            .map(|p| p.received_lately(now))
            .max()
            .unwrap_or(0);
        let busy_enough = |p: &Path| p.received_lately(now) * FEEDBACK_MIN_SHARE >= busiest;
        let best = |standby: bool| {
            self.paths
                .iter()
                .enumerate()
                .filter(|(_, p)| {
                    alive(p) && busy_enough(p) && (p.state == PathState::Standby) == standby
                })
                .min_by_key(|(_, p)| p.rtt.smoothed())
                .map(|(i, _)| i)
        };
        best(false).or_else(|| best(true)).unwrap_or_else(|| {
            self.paths
                .iter()
                .enumerate()
                .filter(|(_, p)| p.state != PathState::Abandoned)
                .max_by_key(|(_, p)| p.last_received)
                .map_or(0, |(i, _)| i)
        })
    }

    /// The path's probe timeout, with its backoff.
    pub(crate) fn path_pto(&self, i: usize) -> Duration {
        self.base_pto(i) * 2u32.saturating_pow(self.paths[i].pto_count.min(6))
    }

    pub(crate) fn base_pto(&self, i: usize) -> Duration {
        self.paths[i].rtt.pto(self.peer_ack_delay(i))
    }

    /// How long the peer may hold an acknowledgment of this path's packets
    /// (ack_timing.rs): longer than `max_ack_delay` where our packets
    /// leave far enough apart for the peer to acknowledge them in batches.
    pub(crate) fn peer_ack_delay(&self, i: usize) -> Duration {
        if !self.cfg.rate_control.wants_receive_times() {
            // The peer holds for batches only for receive-time readers.
            return self.cfg.max_ack_delay;
        }
        let rate = self.paths[i].cc.rate().max(1);
        let spacing = Duration::from_secs_f64(self.cfg.max_datagram as f64 / rate as f64);
        let batch = super::ack_timing::ack_batch(self.paths.len());
        super::ack_timing::peer_ack_delay(spacing, self.cfg.max_ack_delay, batch)
    }

    /// Packets of these paths were acknowledged: they work.
    /// An acknowledgment covered packets of path `i`, the newest of them
    /// sent at `sent` (`None`: only packets already declared lost). It is a
    /// sign of life; a suspect path works again only if a packet sent since
    /// it became suspect got through (older ones may have drained from a
    /// queue just before it died).
    /// `via` is the path the acknowledgment arrived on.
    pub(crate) fn on_path_progress(
        &mut self,
        now: Duration,
        i: usize,
        sent: Option<Duration>,
        via: usize,
    ) {
        let p = &mut self.paths[i];
        p.pto_count = 0;
        p.last_progress = Some(now);
        p.feedback_on_it = via == i;
        if let Some(t) = sent {
            p.newest_acked_sent = Some(p.newest_acked_sent.map_or(t, |n| n.max(t)));
        }
        let revives = p
            .suspected_at
            .is_some_and(|since| sent.is_some_and(|t| t >= since));
        if p.state == PathState::Suspect && revives {
            p.suspect_since = None;
            p.suspected_at = None;
            let s = p.working_state();
            self.set_state(now, i, s);
        }
    }

    /// The earliest of the paths' timers: probe timeouts, challenge
    /// repeats, standby pings, re-probes, abandonment.
    pub(crate) fn path_timeout(&self) -> Option<Duration> {
        let mut t: Option<Duration> = None;
        let mut consider = |x: Duration| t = Some(t.map_or(x, |t| t.min(x)));
        for (i, p) in self.paths.iter().enumerate() {
            if let Some(oldest) = self.probe_timer_start(i) {
                consider(oldest + self.path_pto(i));
            }
            if let Some((_, sent)) = p.challenge.filter(|_| !p.challenge_due) {
                consider(sent + self.challenge_interval(i));
            }
            if let Some(at) = p.reprobe_at {
                consider(at);
            }
            if let Some(since) = p.suspect_since {
                consider(since + self.base_pto(i) * ABANDON_PTOS);
            }
            // Suspect once silent that long with a packet unanswered (only
            // with another path to go to: a lone path is never suspect, and
            // a deadline that fires without effect would wake its driver
            // again and again).
            if matches!(p.state, PathState::Active | PathState::Standby) && self.another_works(i) {
                if let Some(oldest) = self.recovery.oldest_in_flight(Some(p.id)) {
                    let heard = self.last_heard(i).unwrap_or(oldest);
                    consider(heard.max(oldest) + self.silence_limit(i));
                }
            }
            if p.state == PathState::Standby && p.validated {
                consider(p.last_sent + STANDBY_PROBE);
            }
            if p.state == PathState::Suspect || self.probing_backed_off(i) {
                consider(p.last_sent + self.ping_interval(i));
            }
        }
        if let Some(g) = self.grading_timeout() {
            consider(g);
        }
        t
    }

    fn challenge_interval(&self, i: usize) -> Duration {
        // A new path's RTT is unknown; path 0's is the best guess.
        let rtt = if self.paths[i].rtt.has_samples() {
            &self.paths[i].rtt
        } else {
            &self.paths[0].rtt
        };
        (rtt.pto(self.cfg.max_ack_delay) * 2u32.pow(self.paths[i].challenge_tries.min(4)))
            .min(MAX_CHALLENGE_INTERVAL)
    }

    /// Where a path's probe timer runs from: its oldest packet in flight,
    /// or, if later, its last probe timeout or the last time another path
    /// turned suspect. The peer's
    /// feedback for every path may have been riding the path that died
    /// (it is the fastest): until the peer notices and moves it, the
    /// others' acknowledgments are late, and a probe timeout there would
    /// throw away the one path that still works.
    fn probe_timer_start(&self, i: usize) -> Option<Duration> {
        let p = &self.paths[i];
        let oldest = self.recovery.oldest_in_flight(Some(p.id))?;
        // While what a lone path kept through a probe timeout drains
        // (acknowledged one by one after the silence), the timer runs from
        // the last acknowledgment, not from packets queued seconds ago:
        // with the backlog's round trips kept out of the RTT (`on_rtt_sample`)
        // it fired again and again while acknowledgments flowed, each time
        // silencing the controller (`scripts/stall-sim.py`, AT&T uplink,
        // 55 seeds: 0.820 of C(1 - p) against 0.839 with this).
        let draining = p.last_probe_timeout.is_some_and(|t| oldest < t);
        let progress = if draining {
            p.last_progress.unwrap_or(oldest)
        } else {
            oldest
        };
        Some(
            oldest
                .max(p.last_probe_timeout.unwrap_or(oldest))
                .max(self.last_suspicion.unwrap_or(oldest))
                .max(progress),
        )
    }

    /// Runs the paths' timers (see [`Connection::path_timeout`]).
    pub(crate) fn on_path_timers(&mut self, now: Duration) {
        for i in 0..self.paths.len() {
            let id = self.paths[i].id;
            if let Some(oldest) = self.probe_timer_start(i) {
                let pto = self.path_pto(i);
                if now >= oldest + pto {
                    let suspect = self.may_suspect(i, now);
                    // Lone: no other path left that is not abandoned. A
                    // backup that took over from a dead path is as alone
                    // as a connection's only path; counted as one of two,
                    // its first flight, queued behind the burst a takeover
                    // sends, was declared lost at its first timeout and
                    // every acknowledgment after came late, so its
                    // controller never learnt the link.
                    let lone = self
                        .paths
                        .iter()
                        .enumerate()
                        .all(|(j, p)| j == i || p.state == PathState::Abandoned);
                    // A standby path's pings say nothing about what it can
                    // carry: its controller keeps its start-up state for
                    // the moment it takes over.
                    if self.paths[i].state != PathState::Standby {
                        self.paths[i].cc.on_probe_timeout(now);
                    }
                    if suspect || !lone {
                        let lost = self.recovery.on_probe_timeout(id, now.saturating_sub(pto));
                        if suspect {
                            // Another path works: what this one holds is
                            // repaired there now.
                            self.on_path_lost(now, &lost);
                            self.suspect(now, i);
                        } else {
                            // Multipath keeps its rules: a standby taking
                            // over starts from its first window, and a
                            // failover counts on the symbols its timeouts
                            // free.
                            self.on_lost(now, &lost);
                        }
                    }
                    // A lone path only went quiet: the controller holds back
                    // and a PING goes out, but what is in flight is not
                    // declared lost. On a cellular link it is mostly waiting
                    // in a queue behind a scheduling gap or a drop in
                    // capacity, and arrives; declared lost, its symbols were
                    // replaced for nothing. The PING's acknowledgment (or the
                    // next data's) declares lost, by packet and time
                    // threshold, whatever really was. Tide over six drive
                    // directions at 12 offsets each in the simulator
                    // (`scripts/cellular-sim.py --offsets 12`): 0.915 -> 0.918 of
                    // capacity at 0 % loss, 0.893 -> 0.895 at 2 %, packets
                    // declared lost 43 k -> 21 k and redundant symbols
                    // 7.2 k -> 1.9 k at 0 %; links pausing 50-400 ms every
                    // second: tests/pauses.rs.
                    self.paths[i].pto_count += 1;
                    // (Only a lone path keeps its packets: elsewhere the
                    // oldest in flight moved on with the timeout.)
                    self.paths[i].last_probe_timeout = lone.then_some(now);
                    self.pto_count += 1;
                    if i == self.feedback_path(now) {
                        self.ping_due = true;
                    } else {
                        self.paths[i].ping_due = true;
                    }
                }
            }
            if self.may_suspect(i, now) {
                self.suspect(now, i);
            }
            let p = &self.paths[i];
            if let Some((_, sent)) = p.challenge {
                if now >= sent + self.challenge_interval(i) {
                    if p.challenge_tries >= CHALLENGE_TRIES {
                        self.abandon(now, i);
                    } else {
                        self.paths[i].challenge_due = true;
                    }
                }
            }
            let p = &self.paths[i];
            if p.reprobe_at.is_some_and(|t| now >= t) && !p.os_down {
                self.revalidate(now, i);
            }
            // A server keeps a suspect path suspect (unused until it
            // answers); the client decides when it is gone.
            let p = &self.paths[i];
            if self.role == super::Role::Client
                && p.suspect_since
                    .is_some_and(|s| now >= s + self.base_pto(i) * ABANDON_PTOS)
            {
                self.abandon(now, i);
            }
            let p = &mut self.paths[i];
            if p.state == PathState::Standby && p.validated && now >= p.last_sent + STANDBY_PROBE {
                p.ping_due = true;
            }
            // A suspect path is pinged at least every base PTO, whatever
            // its probe timeout has backed off to: it comes back that
            // soon, and it is abandoned only when several pings in a row
            // went unanswered (with one ping per backed-off timeout, one
            // lost ping or answer on a 10 % lossy link had it abandoned
            // three base PTOs later). So is a working path that has heard
            // nothing for several probe timeouts (an outage that took what
            // its queue held), every REPROBE: the backoff spaces the
            // timeouts that declare losses, not the pings that find the
            // link again.
            if (p.state == PathState::Suspect || self.probing_backed_off(i))
                && now >= self.paths[i].last_sent + self.ping_interval(i)
            {
                if i == self.feedback_path(now) {
                    self.ping_due = true;
                } else {
                    self.paths[i].ping_due = true;
                }
            }
        }
    }

    /// How often a suspect path, or one whose probing backed off, is
    /// pinged at least.
    fn ping_interval(&self, i: usize) -> Duration {
        // Only the client abandons a path, so only its pings decide when;
        // a server pings its suspect path every REPROBE until the client
        // says.
        if self.paths[i].state == PathState::Suspect && self.role == super::Role::Client {
            self.base_pto(i).min(REPROBE)
        } else {
            REPROBE
        }
    }

    /// A path in use whose probe timeout has backed off past `REPROBE`,
    /// with something in flight.
    fn probing_backed_off(&self, i: usize) -> bool {
        let p = &self.paths[i];
        matches!(p.state, PathState::Active | PathState::Standby)
            && p.pto_count >= 2
            && self.recovery.oldest_in_flight(Some(p.id)).is_some()
    }

    /// A probe timeout on path `i`: with another path working, `i` is
    /// suspect, and all its symbols in flight are repaired elsewhere now.
    fn suspect(&mut self, now: Duration, i: usize) {
        let id = self.paths[i].id;
        let lost = self.recovery.on_probe_timeout(id, now);
        self.on_path_lost(now, &lost);
        self.paths[i].suspect_since = Some(now);
        self.paths[i].suspected_at = Some(now);
        self.paths[i].recent_suspicions.push(now);
        // Probe it at once (and on every probe timeout after): the answer
        // to a packet sent since is what makes it work again.
        self.paths[i].ping_due = true;
        self.last_suspicion = Some(now);
        self.set_state(now, i, PathState::Suspect);
        // The data moves to the backups now, not when the path is
        // abandoned three probe timeouts later: a backup CapProbe measured
        // starts at that capacity rather than from its first flight.
        self.on_backups_take_over(now);
    }

    /// A packet with a new path id opens a path (validated before use); a
    /// packet on an abandoned path revives it the same way.
    pub(crate) fn path_for(
        &mut self,
        now: Duration,
        path_id: u8,
        remote: SocketAddr,
        newest: bool,
    ) -> Option<usize> {
        if let Some(i) = self.path_index(path_id) {
            if newest && self.paths[i].remote != remote {
                // NAT rebinding or migration on the same path.
                let same_host = self.paths[i].remote.ip() == remote.ip();
                self.paths[i].remote = remote;
                if self.role == super::Role::Server && self.paths[i].state != PathState::Abandoned {
                    self.validate_new_address(i, same_host);
                }
            }
            // A newer packet than any before (not one queued before the
            // path was abandoned, draining late) means the peer uses the
            // path again: validate it.
            if self.paths[i].state == PathState::Abandoned
                && self.role == super::Role::Server
                && newest
            {
                self.revalidate(now, i);
            }
            return Some(i);
        }
        if self.paths.len() >= MAX_PATHS {
            return None;
        }
        let mut p = Path::unvalidated(path_id, remote, self.cfg.rate_control.build());
        p.peer_opened = true;
        self.paths.push(p);
        self.record_event(now, path_id, PathState::Validating);
        Some(self.paths.len() - 1)
    }
}

/// How many packets in a row a link losing `loss` of them loses more often
/// than one time in 500: 0 on a clean link, 1 at 2 %, 2 at 10 %, at most 4
/// (the PTO bounds the silence limit anyway).
fn plausible_losses_in_a_row(loss: f64) -> u32 {
    (1..=4).take_while(|&k| loss.powi(k) > 2e-3).count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::tide::{Tide, TideConfig};

    #[test]
    fn lossier_links_allow_more_acknowledgments_lost_in_a_row() {
        let counts: Vec<u32> = [0.0, 0.001, 0.02, 0.1, 0.3, 1.0]
            .into_iter()
            .map(plausible_losses_in_a_row)
            .collect();
        assert_eq!(counts, [0, 0, 1, 2, 4, 4]);
    }

    #[test]
    fn bytes_received_lately_cover_one_or_two_windows() {
        let ms = |v: u64| Duration::from_millis(v);
        let mut p = Path::new(
            0,
            "10.0.0.1:1".parse().unwrap(),
            Box::new(Tide::new(TideConfig::default())),
        );
        assert_eq!(p.received_lately(ms(0)), 0);
        p.count_received(ms(0), 1000);
        p.count_received(ms(50), 500);
        assert_eq!(p.received_lately(ms(99)), 1500);
        // A new window: the last one still counts...
        p.count_received(ms(120), 200);
        assert_eq!(p.received_lately(ms(150)), 1700);
        // ...until it is two windows old.
        assert_eq!(p.received_lately(ms(230)), 200);
        assert_eq!(p.received_lately(ms(330)), 0);
        p.count_received(ms(400), 10);
        assert_eq!(p.received_lately(ms(400)), 10);
    }

    #[test]
    fn round_trips_that_waited_out_a_probe_timeout_are_not_taken() {
        let ms = |v: u64| Duration::from_millis(v);
        let sample = |sent: u64, rtt: u64| crate::recovery::RttSample {
            rtt: ms(rtt),
            ack_delay: Duration::ZERO,
            sent: ms(sent),
        };
        let mut p = Path::new(
            0,
            "10.0.0.1:1".parse().unwrap(),
            Box::new(Tide::new(TideConfig::default())),
        );
        for t in 0..20 {
            p.on_rtt_sample(ms(100 * t + 50), sample(100 * t, 50), ms(25));
        }
        let pto = p.rtt.pto(ms(25));
        // The lone path's probe timer fired at 3 s; what was sent before
        // it waited out the silence in the queue, and comes back seconds
        // late: the link's round trip is not that.
        p.last_probe_timeout = Some(ms(3000));
        for sent in [2500, 2600, 2700, 2900] {
            p.on_rtt_sample(ms(8000), sample(sent, 8000 - sent), ms(25));
        }
        assert_eq!(p.rtt.smoothed(), ms(50));
        assert_eq!(p.rtt.pto(ms(25)), pto, "the probe timeout is the link's");
        // The probe sent at the timeout, and data after it, measure the
        // link as it is now, however long that is.
        p.on_rtt_sample(ms(8100), sample(3000, 5100), ms(25));
        assert!(p.rtt.smoothed() > ms(600));
    }
}

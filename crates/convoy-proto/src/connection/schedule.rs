//! Which path the next packet goes on: path control packets to the path
//! they concern, symbols to the path where they arrive first.

use std::time::Duration;

use super::{Connection, Transmit};
use crate::wire::frame::write_frame;
use crate::wire::Frame;

impl Connection {
    /// Challenges, their responses and probe pings, each on its own path.
    pub(crate) fn path_control_packet(
        &mut self,
        now: Duration,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let max = self.cfg.max_datagram;
        let i = (0..self.paths.len())
            .find(|&i| self.paths[i].has_control() && !self.path_amplification_limited(i, 64))?;
        let p = &self.paths[i];
        // The first challenge on a path fills a datagram: the path must
        // carry full-size packets, and a server's 3× budget on it grows.
        let pad = p.challenge_due
            && p.challenge_tries == 0
            && !p.full_size_checked
            && !self.path_amplification_limited(i, max);
        let challenge = p.challenge_due.then(|| self.next_pn.to_le_bytes());
        let responses = std::mem::take(&mut self.paths[i].responses);
        let ping = std::mem::take(&mut self.paths[i].ping_due);
        let eliciting = ping || challenge.is_some();
        let t = self.protected(now, buf, i, eliciting, None, |w, _| {
            for r in &responses {
                if write_frame(w, &Frame::PathResponse(*r)).is_err() {
                    return false;
                }
            }
            if let Some(c) = challenge {
                if write_frame(w, &Frame::PathChallenge(c)).is_err() {
                    return false;
                }
            }
            if ping && write_frame(w, &Frame::Ping).is_err() {
                return false;
            }
            if pad {
                let _ = w.pad_to(w.len() + w.remaining());
            }
            true
        });
        if let Some(c) = challenge {
            let p = &mut self.paths[i];
            p.full_size_checked |= pad && t.is_some();
            p.challenge_due = false;
            p.challenge = Some((c, now));
            p.challenge_tries += 1;
        }
        t
    }

    /// The path for the next symbol, or `None` to wait: among the paths
    /// data may use (active, else standby) whose window has room, the one
    /// where a packet sent at its next send time arrives first. While that
    /// one's pacer holds it back, a slower path that is free now is used
    /// only if the blocks in flight still lack more data than the fast path
    /// would carry in the time the slow one takes longer (ECF, Lim et al.
    /// 2017, the blocks under way standing for its backlog): a symbol that
    /// arrives after the fast path finished its block only holds the
    /// in-order reader up, and at the end of a transfer waiting for the fast
    /// path finishes sooner. (The application's send buffer is not counted:
    /// 4 MB of it let a path 3 s behind take data.)
    pub(crate) fn data_path(&self, now: Duration) -> Option<usize> {
        let max = self.cfg.max_datagram;
        let ready = |i: usize| self.paths[i].cc.next_send_time().is_none_or(|t| t <= now);
        let usable: Vec<usize> = self
            .data_paths()
            .filter(|&i| {
                self.paths[i].validated
                    && !self.path_amplification_limited(i, max)
                    && !self.window_full(i)
            })
            .collect();
        if let [only] = usable[..] {
            return ready(only).then_some(only);
        }
        // A packet's time to the peer: its path's RTT less the way back.
        // Acknowledgments come back on one path, about the fastest (the
        // peer's feedback path), so the way back is about half the
        // smallest RTT, not half the path's own: a Wi-Fi whose queue held
        // its packets 250 ms, acknowledged over LTE, read as 140 ms away
        // and kept taking symbols that held up the in-order reader.
        let way_back = usable
            .iter()
            .map(|&i| self.expected_rtt(i))
            .min()
            .unwrap_or_default()
            / 2;
        let arrival = |i: usize| {
            let p = &self.paths[i];
            let one_way = self.expected_rtt(i).saturating_sub(way_back);
            p.cc.next_send_time().unwrap_or(now).max(now) + one_way
        };
        let best = *usable.iter().min_by_key(|&&i| arrival(i))?;
        if ready(best) {
            return Some(best);
        }
        let backlog = self
            .one_rtt
            .as_ref()
            .map_or(0, |e| e.tx.bytes_undelivered());
        let fast_rate = self.paths[best].cc.rate() as f64;
        let mut free: Vec<usize> = usable.iter().copied().filter(|&i| ready(i)).collect();
        free.sort_by_key(|&i| arrival(i));
        free.into_iter().find(|&i| {
            let lag = arrival(i).saturating_sub(arrival(best));
            backlog as f64 > fast_rate * lag.as_secs_f64()
        })
    }

    /// The round trip a packet sent on path `i` now should take: its
    /// smoothed RTT while our packets are on it; with none of ours on it,
    /// its smallest RTT, as whatever queue ours had built has drained. The
    /// smoothed RTT of a path passed over keeps the queue it last saw
    /// (it moves only with packets sent): LTE beside Wi-Fi read 300-400 ms
    /// for seconds after a dip in its capacity, took nothing, and idled
    /// while its drive trace offered 3-12 Mbit/s (`scripts/mp-drive-sim.py`,
    /// the cross-town drive).
    pub(crate) fn expected_rtt(&self, i: usize) -> Duration {
        let p = &self.paths[i];
        if p.rtt.has_samples() && self.recovery.path_bytes_in_flight(p.id) == 0 {
            p.rtt.min()
        } else {
            p.rtt.smoothed()
        }
    }
}

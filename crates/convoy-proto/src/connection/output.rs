//! Outgoing packets, most urgent first: close, handshake, path control
//! (challenges, responses, probes), a paced data packet (with feedback
//! riding along when it fits and goes the same way), feedback that is due,
//! a keep-alive ping.

use std::time::Duration;

use super::{CloseReason, Connection, Handshake, Role, Transmit};
use crate::cc::train::TrainReport;
use crate::recovery::SentPacket;
use crate::wire::cursor::Writer;
use crate::wire::frame::{
    names_k, symbol_header_len, write_ack, write_block_status, write_frame, write_symbol_header,
    MAX_ACK_RANGES,
};
use crate::wire::packet::{packet_number_len, write_handshake, write_initial, write_short_header};
use crate::wire::{Frame, SHORT_HEADER_LEN, TAG_LEN};

/// Every this many ACK frames, one names every range it has room for, not
/// only the newest ones (`ReceivedPackets::ack_ranges`): a sender that lost
/// the ACKs naming a range while it was new learns of it here.
pub(crate) const ACK_REFRESH_EVERY: u64 = 8;

impl Connection {
    /// Writes the next datagram into `buf` (at least `max_datagram` bytes),
    /// or returns `None` when nothing is due now.
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut [u8]) -> Option<Transmit> {
        // A connection ended by a peer's violation still owes it the CLOSE
        // frame saying why (`close` is set beside `closed` there): without
        // it the peer learned nothing and only timed out.
        if self.closed.is_some() && self.close.is_none() {
            return None;
        }
        if self.handshake_out && self.close.is_some() {
            // A server closing right after the handshake (an unknown or
            // revoked client key) sends its handshake reply first: without
            // it the client cannot read the close, and would only time out.
            if let Some(t) = self.handshake_packet(now, buf) {
                return Some(t);
            }
        }
        if let Some((code, reason)) = self.close.take() {
            let t = self.close_packet(now, buf, code, &reason);
            if !matches!(self.closed, Some(CloseReason::ProtocolViolation(_))) {
                self.terminate(CloseReason::Local { code });
            }
            self.closed.get_or_insert(CloseReason::Local { code });
            return t;
        }
        if let Some(t) = self.start_pair_second(now, buf) {
            return Some(t);
        }
        if self.handshake_out {
            if let Some(t) = self.handshake_packet(now, buf) {
                return Some(t);
            }
        }
        self.one_rtt.as_ref()?;
        if self.amplification_limited(self.cfg.max_datagram) {
            // Anti-amplification: nothing more until the client proves its
            // address (its first authenticated packet). A train cut here
            // would measure the wait, so it ends.
            self.paths[0].cc.on_app_limited(now);
            return None;
        }
        if let Some(t) = self.path_control_packet(now, buf) {
            return Some(t);
        }
        if let Some(t) = self.pair_packet(now, buf) {
            return Some(t);
        }
        let ack_due = self
            .ack_timing
            .due(now, self.cfg.ack_every, self.cfg.max_ack_delay);
        let feedback_due = ack_due || self.feedback_due || self.streams.credit_pending();
        if let Some(t) = self.data_packet(now, buf, feedback_due) {
            return Some(t);
        }
        if feedback_due || self.ping_due {
            if self.path_amplification_limited(self.feedback_path(now), 64) {
                // A new peer address not yet validated has had its 3×:
                // acknowledgments and probes wait for more from it.
                return None;
            }
            return Some(self.feedback_packet(now, buf));
        }
        // Nothing urgent left: a good moment to decode what is decodable.
        self.process_decodes();
        None
    }

    fn handshake_packet(&mut self, now: Duration, buf: &mut [u8]) -> Option<Transmit> {
        let len = match &self.handshake {
            Handshake::ClientWait { .. } => self.write_client_initial(buf)?,
            Handshake::ClientFinal { message } => {
                write_handshake(buf, self.remote_cid, self.local_cid, message).ok()?
            }
            Handshake::ServerWait { reply, .. } | Handshake::ServerDone { reply } => {
                write_handshake(buf, self.remote_cid, self.local_cid, reply).ok()?
            }
            Handshake::Done => {
                self.handshake_out = false;
                return None;
            }
        };
        if self.amplification_limited(len) {
            // Anti-amplification: wait for more from the client.
            return None;
        }
        self.handshake_out = false;
        self.handshake_first_sent.get_or_insert(now);
        self.handshake_sends += 1;
        if self.role == Role::Client {
            self.handshake_retransmit_after(now);
            if matches!(self.handshake, Handshake::ClientWait { .. }) {
                self.on_initial_sent(len);
            }
        }
        Some(self.sent(now, len, 0))
    }

    /// The client's Initial (with its Retry token, if it got one) into
    /// `buf`: its length, or `None` past the Initial or if it does not fit.
    pub(super) fn write_client_initial(&self, buf: &mut [u8]) -> Option<usize> {
        let Handshake::ClientWait {
            initial,
            token,
            initial_dcid,
            ..
        } = &self.handshake
        else {
            return None;
        };
        write_initial(buf, *initial_dcid, self.local_cid, token, initial).ok()
    }

    pub(super) fn sent(&mut self, now: Duration, len: usize, path_idx: usize) -> Transmit {
        if !self.validated {
            self.unvalidated_sent += len as u64;
        }
        let p = &mut self.paths[path_idx];
        if !p.validated {
            p.unvalidated_sent += len as u64;
        }
        p.last_sent = now;
        p.counters.packets_sent += 1;
        p.counters.bytes_sent += len as u64;
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
        self.last_sent = now;
        Transmit {
            remote: self.paths[path_idx].remote,
            local: self.paths[path_idx].local,
            len,
            path_id: self.paths[path_idx].id,
        }
    }

    fn close_packet(
        &mut self,
        now: Duration,
        buf: &mut [u8],
        code: u64,
        reason: &str,
    ) -> Option<Transmit> {
        self.one_rtt.as_ref()?;
        let reason = &reason.as_bytes()[..reason.len().min(200)];
        let path = self.feedback_path(now);
        self.protected(now, buf, path, false, None, |w, _| {
            write_frame(w, &Frame::Close { code, reason }).is_ok()
        })
    }

    /// Builds, seals and records one protected packet; `body` writes the
    /// frames and returns false to abandon the packet.
    pub(crate) fn protected(
        &mut self,
        now: Duration,
        buf: &mut [u8],
        path_idx: usize,
        ack_eliciting: bool,
        block: Option<(u32, u32)>,
        body: impl FnOnce(&mut Writer<'_>, &mut Self) -> bool,
    ) -> Option<Transmit> {
        let limit = self.cfg.max_datagram.min(buf.len());
        let pn = self.next_pn;
        let phase = self.one_rtt.as_ref()?.send.phase();
        let pn_len = packet_number_len(pn, self.recovery.largest_acked());
        let (len, header_len) = {
            let mut w = Writer::new(&mut buf[..limit - TAG_LEN]);
            let header_len = write_short_header(
                &mut w,
                self.remote_cid,
                self.paths[path_idx].id,
                pn,
                pn_len,
                phase,
            )
            .ok()?;
            if !body(&mut w, self) {
                return None;
            }
            (w.len() + TAG_LEN, header_len)
        };
        let (header, rest) = buf[..len].split_at_mut(header_len);
        self.one_rtt.as_mut()?.send.seal(pn, header, rest);
        self.next_pn += 1;
        self.recovery.on_sent(SentPacket {
            pn,
            time: now,
            bytes: len as u32,
            path: self.paths[path_idx].id,
            seq: 0,
            block: block.map(|(b, _)| b),
            esi: block.map_or(0, |(_, e)| e),
            ack_eliciting,
        });
        Some(self.sent(now, len, path_idx))
    }

    /// Feedback frames: path status, receive times, ACK, block status, the
    /// latest rate report, credit.
    fn write_feedback(&mut self, now: Duration, w: &mut Writer<'_>) {
        let refresh = self.acks_written.is_multiple_of(ACK_REFRESH_EVERY);
        let ranges = self.received.ack_ranges(MAX_ACK_RANGES + 1, refresh);
        let client = self.role == Role::Client;
        for p in &mut self.paths {
            if client && p.status_repeats > 0 {
                let status = Frame::PathStatus {
                    path: p.id,
                    seq: p.status_seq,
                    backup: p.backup || p.demoted,
                };
                if write_frame(w, &status).is_ok() {
                    p.status_repeats -= 1;
                }
            }
            for &(pair, first, dispersion) in &p.pair_reports {
                let report = Frame::PairReport {
                    pair,
                    first_us: first.as_micros() as u64,
                    dispersion_us: dispersion.as_micros() as u64,
                };
                let _ = write_frame(w, &report);
            }
            p.pair_reports.clear();
            if p.abandon_repeats > 0
                && write_frame(
                    w,
                    &Frame::PathAbandon {
                        path: p.id,
                        code: 0,
                    },
                )
                .is_ok()
            {
                p.abandon_repeats -= 1;
            }
        }
        if self.send_receive_times {
            // One per path, each its newest packet; before the ACK, so the
            // sender has them when it reads the ACK.
            for p in &self.paths {
                let Some((pn, at)) = p.newest_received else {
                    continue;
                };
                let time_us = at.as_micros() as u64;
                if write_frame(w, &Frame::ReceiveTime { pn, time_us }).is_err() {
                    return;
                }
            }
        }
        if !ranges.is_empty() {
            let delay = now.saturating_sub(self.largest_received_at).as_micros() as u64;
            if write_ack(w, &ranges, delay).is_err() {
                return;
            }
            self.acks_written += 1;
        }
        if let Some(e) = &self.one_rtt {
            let (done_below, entries) = e.rx.status();
            if write_block_status(w, done_below, &entries).is_err() {
                return;
            }
            let _ = write_frame(w, &Frame::MaxBlocks(e.rx.max_blocks()));
        }
        if let Some(TrainReport {
            train_id,
            bytes_per_sec,
        }) = self.trains.latest()
        {
            let _ = write_frame(
                w,
                &Frame::RateReport {
                    train_id,
                    bytes_per_sec,
                },
            );
        }
        self.streams.write_credit(w, refresh);
        self.ack_timing.on_ack_written();
        self.feedback_due = false;
        self.start_pair_reported();
    }

    fn feedback_packet(&mut self, now: Duration, buf: &mut [u8]) -> Transmit {
        let ping = std::mem::take(&mut self.ping_due);
        self.stats.feedback_packets_sent += 1;
        let path = self.feedback_path(now);
        self.protected(now, buf, path, ping, None, |w, c| {
            if ping {
                let _ = write_frame(w, &Frame::Ping);
            }
            c.write_feedback(now, w);
            true
        })
        .expect("a feedback packet fits any datagram")
    }

    /// A data packet if pacing and the window allow and there is a symbol.
    fn data_packet(
        &mut self,
        now: Duration,
        buf: &mut [u8],
        feedback_due: bool,
    ) -> Option<Transmit> {
        // The wait's end is acted on here too: a send due before the
        // timer's turn must not leave under the window from before it.
        self.start_pair_timeout(now);
        if self.start_pair_holds(now) {
            return None;
        }
        let path_idx = self.data_path(now)?;
        let Some(next) = self.next_symbol() else {
            for i in self.data_paths().collect::<Vec<_>>() {
                self.paths[i].cc.on_app_limited(now);
            }
            return None;
        };
        if feedback_due && path_idx != self.feedback_path(now) {
            // Feedback goes on its own path, so that what it acknowledges
            // is measured over the fast way back; the symbol waits.
            return None;
        }
        let symbol_size = usize::from(next.symbol_len);
        // The block's K travels on its first source and its repairs only.
        let block_len =
            names_k(next.esi, next.block_len, symbol_size, next.prefix).then_some(next.block_len);
        let train = self.paths[path_idx].cc.train_tag();
        // Feedback rides along when it fits; otherwise it goes first, alone.
        let mut feedback = Vec::new();
        if feedback_due {
            feedback = vec![0u8; 512];
            let mut fw = Writer::new(&mut feedback);
            self.write_feedback(now, &mut fw);
            let n = fw.len();
            feedback.truncate(n);
            // What the data packet leaves free (the train tag's share only
            // when there is one: without trains the symbol fills the rest).
            let room = self.cfg.max_datagram.saturating_sub(
                SHORT_HEADER_LEN
                    + TAG_LEN
                    + if train.is_some() { 24 } else { 0 }
                    + symbol_header_len(
                        next.block_id,
                        next.esi,
                        block_len,
                        next.prefix,
                        symbol_size,
                    )
                    + symbol_size,
            );
            if feedback.len() > room {
                self.stats.feedback_packets_sent += 1;
                let t = self.protected(now, buf, path_idx, false, None, |w, _| {
                    w.bytes(&feedback).is_ok()
                });
                return t;
            }
        }
        let t = self.protected(
            now,
            buf,
            path_idx,
            true,
            Some((next.block_id, next.esi)),
            |w, c| {
                if let Some(tag) = train {
                    if write_frame(w, &Frame::Train(tag)).is_err() {
                        return false;
                    }
                }
                // The symbol goes last: its length is the rest of the packet.
                if w.bytes(&feedback).is_err() {
                    return false;
                }
                if write_symbol_header(
                    w,
                    next.block_id,
                    next.esi,
                    block_len,
                    next.prefix,
                    symbol_size,
                )
                .is_err()
                {
                    return false;
                }
                let Ok(out) = w.reserve(symbol_size) else {
                    return false;
                };
                if c.one_rtt
                    .as_mut()
                    .expect("established")
                    .tx
                    .emit(next, out)
                    .is_err()
                {
                    return false;
                }
                true
            },
        )?;
        self.stats.data_packets_sent += 1;
        let in_flight = self.recovery.path_bytes_in_flight(self.paths[path_idx].id);
        self.paths[path_idx]
            .cc
            .on_sent(now, self.next_pn - 1, t.len, in_flight);
        Some(t)
    }

    /// The next symbol: a block short of its margin, else a new block from
    /// stream data, else an idle top-up (the cases `has_data` checks, in
    /// order, each scanned once).
    fn next_symbol(&mut self) -> Option<crate::coding::NextSymbol> {
        let (rate, rtt) = self.data_rate_and_rtt();
        let air_loss = self.data_air_loss();
        let e = self.one_rtt.as_mut()?;
        e.tx.set_air_loss(air_loss);
        if let Some(s) = e.tx.next_symbol() {
            return Some(s);
        }
        if e.tx.can_start_block() && self.streams.has_sendable() {
            let max = e.tx.config().block_bytes_at(rate, rtt);
            // Room for the padding of the last symbol too: the encoder
            // keeps this buffer as its source symbols.
            let symbol = usize::from(e.tx.config().symbol_size).max(1);
            let mut block = Vec::with_capacity(max.next_multiple_of(symbol));
            let packed = self.streams.fill_block(&mut block, max);
            if !block.is_empty() {
                // Whole symbols: SYMBOL frames carry the count of source
                // symbols, not the byte length, so the receiver's block is
                // this long; the zeros read as PADDING frames. A block of
                // less than a symbol is one symbol of its own length
                // (`CodedSender::start_block`): a telemetry segment or a
                // confirmation of 100 bytes went out padded to 1,432.
                if block.len() > symbol {
                    block.resize(block.len().next_multiple_of(symbol), 0);
                }
                let id = e.tx.start_block(block).ok()?;
                e.block_contents.insert(id, packed);
                return e.tx.next_symbol();
            }
        }
        e.tx.idle_symbol()
    }
}

#[cfg(feature = "hostile")]
impl Connection {
    /// Seals `frames` (encoded, as chosen by the caller) into one
    /// protected packet on the first path, whatever they say: what a
    /// hostile peer built on this crate sends. For `convoy bench hostile`;
    /// `None` if the connection has no keys yet or the frames do not fit.
    pub fn hostile_packet(
        &mut self,
        now: Duration,
        frames: &[u8],
        buf: &mut [u8],
    ) -> Option<Transmit> {
        self.protected(now, buf, 0, true, None, |w, _| w.bytes(frames).is_ok())
    }
}

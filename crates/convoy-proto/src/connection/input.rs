//! Incoming packets: handshake messages, then protected packets and their
//! frames.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::{CloseReason, Connection, Handshake};
use crate::cc::AckEvent;
use crate::coding::Received;
use crate::handshake::HandshakeError;
use crate::wire::{Frame, Frames, Packet, Protected};

impl Connection {
    /// Takes one parsed datagram addressed to this connection.
    pub(crate) fn handle_packet(
        &mut self,
        now: Duration,
        remote: SocketAddr,
        local: Option<IpAddr>,
        packet: Packet<'_>,
        len: usize,
    ) {
        if self.closed.is_some() {
            return;
        }
        if !self.validated {
            self.unvalidated_received += len as u64;
        }
        match packet {
            Packet::Initial { .. } => {
                // The start pair's copy is measured; a repeated Initial
                // says our reply was lost: it goes again.
                if matches!(
                    self.handshake,
                    Handshake::ServerWait { .. } | Handshake::ServerDone { .. }
                ) && !self.on_initial_again(now)
                {
                    self.handshake_out = true;
                }
            }
            Packet::Retry { token, .. } => self.on_retry(token),
            Packet::Handshake { scid, noise, .. } => self.on_handshake(now, scid, noise),
            Packet::Protected(p) => self.on_protected(now, remote, local, p, len),
            Packet::Version { versions, .. } => self.on_version(versions),
        }
    }

    /// A Version packet ends the handshake at once with the reason, not
    /// with a timeout. Only while waiting for the server's first reply (as
    /// QUIC): later, one could only be forged.
    fn on_version(&mut self, versions: &[u8]) {
        if !matches!(self.handshake, Handshake::ClientWait { .. }) {
            return;
        }
        let peer: Vec<u32> = crate::wire::packet::listed_versions(versions).collect();
        if peer.contains(&crate::wire::VERSION) {
            return;
        }
        self.terminate(CloseReason::Version {
            ours: crate::wire::VERSION,
            peer,
        });
    }

    fn on_retry(&mut self, new_token: &[u8]) {
        if let Handshake::ClientWait { token, .. } = &mut self.handshake {
            // One Retry per connection, as in QUIC: a second is ignored.
            if token.is_empty() && !new_token.is_empty() {
                *token = new_token.to_vec();
                self.handshake_out = true;
            }
        }
    }

    fn on_handshake(&mut self, now: Duration, scid: crate::wire::ConnectionId, noise: &[u8]) {
        let result = match std::mem::replace(&mut self.handshake, Handshake::Done) {
            Handshake::ClientWait { hs, .. } => hs.on_response(noise).map(|done| {
                self.take_handshake_rtt(now);
                self.remote_cid = scid;
                self.handshake = match done.final_message {
                    Some(message) => {
                        self.handshake_out = true;
                        Handshake::ClientFinal { message }
                    }
                    None => {
                        self.handshake_timer = None;
                        Handshake::Done
                    }
                };
                Some(done.established)
            }),
            Handshake::ServerWait { hs, reply } => match hs.on_final(noise) {
                Ok(est) => {
                    self.take_handshake_rtt(now);
                    self.handshake = Handshake::ServerDone { reply };
                    Ok(Some(est))
                }
                Err(e) => {
                    // The Noise state is spent; the client's retries will
                    // time out and it reconnects.
                    self.terminate(CloseReason::ProtocolViolation(format!(
                        "handshake failed: {e}"
                    )));
                    Err(e)
                }
            },
            other => {
                self.handshake = other;
                Ok(None)
            }
        };
        match result {
            Ok(Some(est)) => {
                if !self.peer_allowed(&est.peer_static) {
                    self.terminate(CloseReason::ProtocolViolation(
                        "peer key not allowed".into(),
                    ));
                    return;
                }
                self.last_received = now;
                self.establish(est);
            }
            Ok(None) => {}
            Err(HandshakeError::PeerNotAllowed) => {
                self.terminate(CloseReason::ProtocolViolation(
                    "peer key not allowed".into(),
                ));
            }
            Err(_) => self.stats.auth_failures += 1,
        }
    }

    pub(crate) fn peer_allowed(&self, key: &[u8; 32]) -> bool {
        self.cfg
            .allowed_peers
            .as_ref()
            .is_none_or(|allowed| allowed.contains(key))
    }

    fn on_protected(
        &mut self,
        now: Duration,
        remote: SocketAddr,
        local: Option<IpAddr>,
        p: Protected<'_>,
        len: usize,
    ) {
        let Some(e) = self.one_rtt.as_mut() else {
            // Keys not ready (XX server before the final message): dropped;
            // coding replaces whatever it carried.
            return;
        };
        let pn = crate::wire::packet::expand_packet_number(
            self.received.largest(),
            p.packet_number,
            p.pn_len,
        );
        if !self.received.is_new(pn) {
            self.stats.replays += 1;
            return;
        }
        let mut plain = std::mem::take(&mut self.scratch);
        if e.recv
            .open(pn, p.key_phase, p.header, p.sealed, &mut plain)
            .is_err()
        {
            self.stats.auth_failures += 1;
            self.scratch = plain;
            return;
        }
        let newest = self.received.largest().is_none_or(|l| pn > l);
        self.received.insert(pn);
        if self.paths.len() == 1
            && self
                .received
                .run_above_hole(crate::recovery::PACKET_THRESHOLD)
        {
            // A packet went missing and enough came after it for the
            // peer to declare it lost: acknowledge now, not after the ACK
            // delay, so its repair leaves up to that much sooner and the
            // reader, held at the gap, waits that much less. (On several
            // paths, holes are mostly packets still on a slower path.)
            self.feedback_due = true;
        }
        self.stats.packets_received += 1;
        self.stats.bytes_received += len as u64;
        self.last_received = now;
        self.pto_count = 0;
        if self.role == super::Role::Server {
            // The client's first protected packet follows our reply at
            // once (it pings on establishment).
            self.take_handshake_rtt(now);
        }
        // An authenticated packet proves the peer holds the keys, so its
        // address is validated.
        self.validated = true;
        if let Handshake::ClientFinal { .. } = self.handshake {
            self.handshake = Handshake::Done;
            self.handshake_timer = None;
            self.handshake_out = false;
        }
        let Some(path_idx) = self.path_for(now, p.path_id, remote, newest) else {
            // A path beyond the limit: its frames are not read.
            self.scratch = plain;
            return;
        };
        let path = &mut self.paths[path_idx];
        if newest && local.is_some() {
            // Answer from the address the peer's newest packet went to,
            // as its remote address follows the newest packet too.
            path.local = local;
        }
        if !path.validated {
            path.unvalidated_received += len as u64;
        }
        if path.newest_received.is_none_or(|(n, _)| pn > n) {
            path.newest_received = Some((pn, now));
            path.receive_time_due = true;
        }
        path.last_received = Some(now);
        path.count_received(now, len);
        path.pto_count = 0;
        if path.suspect_since.is_some() {
            // Heard from: not silent, so not abandoned yet (only an
            // acknowledgment makes it work again).
            path.suspect_since = Some(now);
        }
        path.counters.packets_received += 1;
        path.counters.bytes_received += len as u64;
        if let Err(why) = self.on_frames(now, path_idx, &plain, len) {
            self.close = Some((super::PROTOCOL_VIOLATION_CODE, why.clone()));
            self.terminate(CloseReason::ProtocolViolation(why));
        }
        self.enforce_memory_budget();
        self.scratch = plain;
    }

    fn on_frames(
        &mut self,
        now: Duration,
        path_idx: usize,
        plain: &[u8],
        len: usize,
    ) -> Result<(), String> {
        let mut eliciting = false;
        for frame in Frames::new(plain) {
            let frame = frame.map_err(|e| format!("malformed frame: {e}"))?;
            match frame {
                Frame::Padding => {}
                Frame::Ping => eliciting = true,
                Frame::ReceiveTime { pn, time_us } => {
                    if self.peer_receive_times.len() < super::MAX_PATHS {
                        self.peer_receive_times
                            .push((pn, Duration::from_micros(time_us)));
                    }
                }
                Frame::PathChallenge(data) => {
                    // Path frames elicit an ACK, as their sender counts
                    // them in flight on that path.
                    eliciting = true;
                    let responses = &mut self.paths[path_idx].responses;
                    // Only the newest few: a peer repeating challenges
                    // gets its latest answered.
                    if responses.len() >= 4 {
                        responses.remove(0);
                    }
                    responses.push(data);
                }
                Frame::PathResponse(data) => {
                    eliciting = true;
                    self.on_path_response(now, data)
                }
                Frame::PathStatus { path, seq, backup } => {
                    self.on_path_status(now, path, seq, backup)
                }
                Frame::PathAbandon { path, .. } => self.on_path_abandon(now, path),
                Frame::PairProbe { pair, second } => {
                    eliciting = true;
                    self.on_pair_probe(now, path_idx, pair, second);
                }
                Frame::PairReport {
                    pair,
                    dispersion_us,
                    ..
                } if pair == super::start_pair::START_PAIR_ID => {
                    self.on_start_pair_report(now, dispersion_us)
                }
                Frame::PairReport {
                    pair,
                    first_us,
                    dispersion_us,
                } => self.on_pair_report(now, pair, first_us, dispersion_us),
                Frame::Ack(ack) => {
                    let paths = &self.paths;
                    let out = self
                        .recovery
                        .on_ack(now, &ack, &|id| super::loss_delay_of(paths, id));
                    let receive_times = std::mem::take(&mut self.peer_receive_times);
                    // Newly acknowledged only: a packet declared lost and
                    // acknowledged late says nothing reliable.
                    let peer_receive = |path: u8| {
                        receive_times.iter().find_map(|&(pn, at)| {
                            let p = out
                                .acked
                                .iter()
                                .rev()
                                .find(|p| p.pn == pn && p.path == path)?;
                            Some(crate::cc::PeerReceive {
                                pn,
                                sent: p.time,
                                received: at,
                            })
                        })
                    };
                    let max_delay = self.cfg.max_ack_delay * 4;
                    let largest = out
                        .rtt_sample
                        .map(|s| (out.acked.last().map_or(0, |p| p.path), s));
                    for (id, sample) in largest
                        .into_iter()
                        .chain(out.path_rtt_samples.iter().copied())
                    {
                        if let Some(p) = self.paths.iter_mut().find(|p| p.id == id) {
                            p.on_rtt_sample(now, sample, max_delay);
                        }
                    }
                    let e = self.one_rtt.as_mut().expect("established");
                    e.send.on_acked(ack.largest);
                    for p in &out.acked {
                        if let Some(b) = p.block {
                            e.tx.on_acked(b, p.esi);
                        }
                    }
                    let mut progressed = Vec::new();
                    // Only paths carrying data teach their controller: a
                    // standby path's pings would make it learn a rate of a
                    // few bytes a second, and take over at that.
                    // (A bit per path index: this runs on every ACK.)
                    let carrying: u64 = self.data_paths().fold(0, |m, i| m | 1 << i);
                    for (i, path) in self.paths.iter_mut().enumerate() {
                        let mine: Vec<_> = out
                            .acked
                            .iter()
                            .filter(|p| p.path == path.id)
                            .copied()
                            .collect();
                        if !mine.is_empty() {
                            if carrying & (1 << i) != 0 {
                                path.cc.set_only_path(carrying.count_ones() == 1);
                                path.cc.on_ack(&AckEvent {
                                    now,
                                    acked: &mine,
                                    rtt: &path.rtt,
                                    bytes_in_flight: self.recovery.path_bytes_in_flight(path.id),
                                    peer_receive: peer_receive(path.id),
                                });
                            }
                            let newest_sent = mine
                                .iter()
                                .filter(|p| p.ack_eliciting)
                                .map(|p| p.time)
                                .max();
                            if let Some(sent) = newest_sent {
                                progressed.push((i, Some(sent)));
                            }
                        }
                    }
                    for &id in &out.late_paths {
                        if let Some(i) = self.path_index(id) {
                            progressed.push((i, None));
                        }
                    }
                    if let Some(e) = self.one_rtt.as_mut() {
                        for p in &out.late {
                            if let Some(b) = p.block {
                                e.tx.on_late_ack(b, p.esi);
                            }
                        }
                    }
                    for (i, sent) in progressed {
                        self.on_path_progress(now, i, sent, path_idx);
                    }
                    self.suspect_overtaken(now);
                    self.on_lost(now, &out.lost);
                    if out.acked.is_empty() {
                        self.on_empty_ack(now, Duration::from_micros(ack.delay_us));
                    }
                }
                Frame::Train(tag) => {
                    if self.trains.on_packet(tag, now, len).is_some() {
                        self.feedback_due = true;
                    }
                }
                Frame::Symbol(s) => {
                    eliciting = true;
                    self.on_data_for_stall(now);
                    let e = self.one_rtt.as_mut().expect("established");
                    e.rx.set_keep_early(self.paths.len() > 1);
                    let in_order = e.rx.is_next_source(&s);
                    let received = e.rx.on_symbol(&s);
                    if matches!(received, Received::Useful | Received::Completed) {
                        // A source symbol in order: the block's bytes at its
                        // place, readable now. Then those known behind it:
                        // sources that came early, and sources a repair
                        // solved (a repair over a prefix fills its gap as
                        // it arrives).
                        let reader = e.readers.entry(s.block_id).or_default();
                        if in_order {
                            read_source(reader, s.esi, s.payload, &mut self.streams)?;
                        }
                        while let Some((esi, payload)) = e.rx.take_early(s.block_id) {
                            let reader = e.readers.entry(s.block_id).or_default();
                            read_source(reader, esi, &payload, &mut self.streams)?;
                        }
                    }
                    // Reported at once, not with the next ACK: leaving
                    // it to the ACK timer would save 11 % of the feedback
                    // at 3-10 Mbit/s, but on the AT&T drive at half rate
                    // (`slow_links`, coasting through a feedback gap) the
                    // sender then read the link's fall later and 1.1 %
                    // of its packets died at the queue, not 0.8 %.
                    if received == Received::Completed {
                        self.feedback_due = true;
                    }
                }
                Frame::BlockStatus(status) => {
                    let e = self.one_rtt.as_mut().expect("established");
                    for id in e.tx.on_status(&status) {
                        for (stream, bytes) in e.block_contents.remove(&id).unwrap_or_default() {
                            *self.acked_stream_bytes.entry(stream).or_default() += bytes;
                        }
                    }
                }
                Frame::RateReport {
                    train_id,
                    bytes_per_sec,
                } => {
                    let path = &mut self.paths[path_idx];
                    path.cc
                        .on_rate_report(now, train_id, bytes_per_sec, &path.rtt);
                }
                Frame::MaxData(m) => self.streams.on_max_data(m),
                Frame::MaxStreams(m) => self.streams.on_max_streams(m),
                Frame::MaxStreamData { stream, max } => {
                    self.streams.on_max_stream_data(stream, max)
                }
                Frame::MaxBlocks(m) => self
                    .one_rtt
                    .as_mut()
                    .expect("established")
                    .tx
                    .on_max_blocks(m),
                Frame::DataBlocked(_) => {
                    self.streams.on_data_blocked();
                    self.feedback_due = true;
                }
                Frame::StreamDataBlocked { stream, .. } => {
                    self.streams.on_stream_blocked(stream);
                    self.feedback_due = true;
                }
                Frame::Close { code, reason } => {
                    self.terminate(CloseReason::Peer {
                        code,
                        reason: String::from_utf8_lossy(reason).into_owned(),
                    });
                    return Ok(());
                }
                Frame::Stream { .. } | Frame::ResetStream { .. } => {
                    return Err("stream frame outside a coded block".into());
                }
            }
        }
        if eliciting {
            self.ack_timing.batch = super::ack_timing::ack_batch(self.paths.len());
            self.ack_timing.on_eliciting(now);
            self.largest_received_at = now;
        }
        Ok(())
    }
}

/// Hands source symbol `esi` of a block to the block's reader if it is
/// where the reader stands.
fn read_source(
    reader: &mut super::block_reader::BlockReader,
    esi: u32,
    payload: &[u8],
    streams: &mut crate::stream::Streams,
) -> Result<(), String> {
    // A block is whole symbols (its last source padded), so a source
    // symbol is its `size` bytes at `esi × size`.
    let start = esi as usize * payload.len();
    if reader.position() == start {
        reader.feed(payload, streams)?;
    }
    Ok(())
}

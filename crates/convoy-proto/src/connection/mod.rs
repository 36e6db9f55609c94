//! One connection: handshake, packet protection, paths, coded streams.
//!
//! The state machine is driven from outside: [`Connection::handle_packet`]
//! (through the endpoint), [`Connection::poll_transmit`],
//! [`Connection::poll_timeout`] / [`Connection::handle_timeout`], and the
//! stream calls. Time is whatever the driver says it is.

mod ack_timing;
mod block_reader;
mod grading;
mod input;
mod output;
mod paths;
mod schedule;
mod stall;
mod start_pair;

pub(crate) use paths::Path;
pub use paths::{PathError, PathEvent, PathInfo, PathState, MAX_PATHS};

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use crate::cc::TrainEstimator;
use crate::coding::{CodedReceiver, CodedSender, ReceiverStats, SenderStats};
use crate::config::Config;
use crate::crypto::{RecvKeys, SendKeys};
use crate::handshake::{ClientHandshake, Established, ServerHandshake, TransportParams};
use crate::received::ReceivedPackets;
use crate::recovery::Recovery;
use crate::stream::{StreamError, StreamId, Streams};
use crate::wire::ConnectionId;

/// First handshake retransmission; doubles once, then repeats every
/// 1.2 s. Doubling on (QUIC's way) leaves room for only five tries in the
/// 10 s handshake timeout, and at 30 % loss each way a try succeeds with
/// probability 0.49, so 3.4 % of handshakes failed and one in fifteen took
/// 9 s (`convoy simulate --loss 30% --seed 2`). Nine tries fail 0.2 % of the
/// time, for one 1200-byte Initial per 1.2 s at worst.
const HANDSHAKE_RETRANSMIT: Duration = Duration::from_millis(600);

/// The application may keep this much sending time queued beyond what is
/// in flight (or a round trip at the sending rate, if more) and one block:
/// enough that a sender woken every few milliseconds never leaves the path
/// idle, little enough that a write is on the wire a fraction of a second
/// later and a timed sender that stops writing is done within about a round
/// trip. Before this bound a stream buffered 4 MB, 40 s of a 0.8 Mbit/s
/// uplink. Measured at 20 Mbit/s, 40 ms (`convoy simulate --mode tide
/// --duration 10s`): write-to-read p50 340 ms with the controller's whole
/// window counted as in flight and 100 ms here, 208 ms with what is in
/// flight and 50 ms, for the same goodput (0.944 of the link); with 25 ms
/// blocks, 25 ms here.
const SEND_HORIZON: Duration = Duration::from_millis(25);
/// ...and never less than this, however slow the path (16 packets: at
/// 0.1 Mbit/s 64 KiB was 5 s of writes waiting).
const MIN_SEND_BUDGET: u64 = 16 * 1472;
const HANDSHAKE_BACKOFF_DOUBLINGS: u32 = 1;

/// The close code of a peer that broke the protocol (a malformed frame, a
/// flow-control, stream-limit or final-size violation).
pub const PROTOCOL_VIOLATION_CODE: u64 = 1;
/// The close code of a connection whose peer made it hold more than
/// [`Config::max_connection_memory`].
pub const MEMORY_BUDGET_CODE: u64 = 0x0d;
/// The close code of a connection proposing a code the server does not
/// take ([`Config::accept_codes`]).
pub const CODE_REFUSED_CODE: u64 = 0x0e;
/// Protected datagrams held per connection while its key awaits the
/// application's word ([`Config::authorize_before_data`]); later ones are
/// dropped, and the peer's loss recovery sends their content again.
pub const HELD_PACKETS: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// Why a connection ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// Nothing arrived for the idle timeout (the peer vanished).
    IdleTimeout,
    /// The handshake did not finish in time: unreachable server, or a
    /// server that does not have the key the client expected.
    HandshakeTimeout,
    /// We closed it.
    Local { code: u64 },
    /// The peer closed it.
    Peer { code: u64, reason: String },
    /// The peer broke the protocol.
    ProtocolViolation(String),
    /// The server answered our Initial with the wire versions it speaks,
    /// none of them ours.
    Version { ours: u32, peer: Vec<u32> },
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseReason::IdleTimeout => write!(f, "idle timeout: nothing heard from the peer"),
            CloseReason::HandshakeTimeout => write!(
                f,
                "handshake timed out: server unreachable, its key is not the one given, or it runs convoy wire version 1 (which ignores this build's version 2)"
            ),
            CloseReason::Local { code } => write!(f, "closed locally (code {code})"),
            CloseReason::Peer { code, reason } => {
                write!(f, "closed by peer (code {code}): {reason}")
            }
            CloseReason::ProtocolViolation(why) => write!(f, "protocol violation: {why}"),
            CloseReason::Version { ours, peer } => {
                let peer: Vec<String> = peer.iter().map(|v| format!("{v:#010x}")).collect();
                write!(
                    f,
                    "the server speaks convoy wire version {}, this build {ours:#010x}: upgrade the older side",
                    peer.join(", ")
                )
            }
        }
    }
}

/// What the application learns from [`Connection::poll_event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Connected,
    StreamOpened(StreamId),
    StreamReadable(StreamId),
    Closed(CloseReason),
}

/// A datagram to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub remote: SocketAddr,
    /// The source address to send from, when the path knows the address
    /// the peer sent to ([`crate::Endpoint::handle_to`]); `None`: the
    /// socket's own.
    pub local: Option<IpAddr>,
    pub len: usize,
    pub path_id: u8,
}

/// Counters, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ConnectionStats {
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub data_packets_sent: u64,
    pub feedback_packets_sent: u64,
    pub packets_lost: u64,
    /// Packets declared lost and acknowledged afterwards.
    pub spurious_losses: u64,
    pub auth_failures: u64,
    pub replays: u64,
    pub malformed: u64,
    /// Key updates we made, and the peer made (crate::crypto::SendKeys).
    pub key_updates: u64,
    pub peer_key_updates: u64,
    pub sender: SenderStats,
    pub receiver: ReceiverStats,
    pub smoothed_rtt: Duration,
    pub min_rtt: Duration,
    /// The rate controller's sending rate, bytes/s.
    pub rate: u64,
    /// The measured loss rate of our data packets.
    pub loss_rate: f64,
    /// What limits sending now: the rate controller's own state ("track",
    /// "silent", ...), or "window" when its window is full.
    pub limited_by: &'static str,
    /// The packet AEAD the handshake chose (`crate::crypto::Aead::name`);
    /// empty before the handshake ends.
    pub aead: &'static str,
}

pub(crate) enum Handshake {
    /// Client waiting for the server's reply.
    ClientWait {
        hs: Box<ClientHandshake>,
        initial: Vec<u8>,
        token: Vec<u8>,
        initial_dcid: ConnectionId,
    },
    /// Client done (XX): repeat the final message until the server shows it has it.
    ClientFinal {
        message: Vec<u8>,
    },
    /// Server (XX) waiting for the client's final message; `reply` is
    /// resent if the client repeats its Initial.
    ServerWait {
        hs: Box<ServerHandshake>,
        reply: Vec<u8>,
    },
    /// Server done; `reply` still answers repeated Initials.
    ServerDone {
        reply: Vec<u8>,
    },
    Done,
}

/// Only a finished handshake is copied: snow's handshake state cannot be,
/// and a fuzzing snapshot is taken of established connections only.
#[cfg(feature = "fuzzing")]
impl Clone for Handshake {
    fn clone(&self) -> Self {
        match self {
            Handshake::ClientFinal { message } => Handshake::ClientFinal {
                message: message.clone(),
            },
            Handshake::ServerDone { reply } => Handshake::ServerDone {
                reply: reply.clone(),
            },
            Handshake::Done => Handshake::Done,
            Handshake::ClientWait { .. } | Handshake::ServerWait { .. } => {
                panic!("a connection in the middle of its handshake cannot be copied")
            }
        }
    }
}

/// What the endpoint learned from a client's Initial.
#[cfg_attr(feature = "fuzzing", derive(Clone))]
pub(crate) struct Accepted {
    pub local_cid: ConnectionId,
    pub client_cid: ConnectionId,
    pub remote: SocketAddr,
    /// Our address the Initial was sent to, when the driver knows it.
    pub local: Option<IpAddr>,
    pub handshake: Handshake,
    pub established: Option<Established>,
    pub initial_len: usize,
    /// The client came back with a valid Retry cookie.
    pub validated: bool,
}

#[cfg_attr(feature = "fuzzing", derive(Clone))]
pub(crate) struct Established1Rtt {
    pub send: SendKeys,
    pub recv: RecvKeys,
    pub tx: CodedSender,
    pub rx: CodedReceiver,
    /// Per block being received, how far its frames were read in order.
    pub readers: std::collections::BTreeMap<u32, block_reader::BlockReader>,
    /// Per block sent and not yet decodable, the stream bytes it carries.
    pub block_contents: std::collections::BTreeMap<u32, Vec<(u64, u64)>>,
}

#[cfg_attr(feature = "fuzzing", derive(Clone))]
pub struct Connection {
    pub(crate) role: Role,
    pub(crate) cfg: Arc<Config>,
    pub(crate) local_cid: ConnectionId,
    pub(crate) remote_cid: ConnectionId,
    pub(crate) paths: Vec<Path>,
    pub(crate) handshake: Handshake,
    /// Handshake datagram to (re)send, and when to repeat it.
    pub(crate) handshake_out: bool,
    pub(crate) handshake_timer: Option<Duration>,
    pub(crate) handshake_backoff: u32,
    pub(crate) handshake_deadline: Duration,
    /// When our first handshake datagram left, and how many we sent: the
    /// peer's answer gives an RTT sample only if we sent exactly one
    /// (Karn's rule: an answer to a repeat is ambiguous).
    pub(crate) handshake_first_sent: Option<Duration>,
    pub(crate) handshake_sends: u32,
    pub(crate) handshake_rtt_taken: bool,
    /// The Initial sent twice to size the first flight (start_pair.rs).
    pub(crate) start_pair: start_pair::StartPair,
    pub(crate) one_rtt: Option<Established1Rtt>,
    pub(crate) peer_static: Option<[u8; 32]>,
    pub(crate) next_pn: u64,
    pub(crate) received: ReceivedPackets,
    pub(crate) recovery: Recovery,
    pub(crate) ack_timing: ack_timing::AckTiming,
    /// ACK frames written so far: every [`output::ACK_REFRESH_EVERY`]th
    /// names every range it has room for.
    pub(crate) acks_written: u64,
    pub(crate) largest_received_at: Duration,
    /// When to tell the peer its data stopped arriving (stall.rs).
    pub(crate) stall_reports: stall::StallReports,
    /// The peer's RECEIVE_TIME frames (one per path), until the ACK beside
    /// them is read.
    pub(crate) peer_receive_times: Vec<(u64, Duration)>,
    /// Every path state change (paths.rs).
    pub(crate) path_events: VecDeque<paths::PathEvent>,
    /// When a path last turned suspect or was abandoned.
    pub(crate) last_suspicion: Option<Duration>,
    pub(crate) next_pair_id: u64,
    /// The peer asked for RECEIVE_TIME frames.
    pub(crate) send_receive_times: bool,
    /// Something the peer must hear soon (a block completed, a new rate
    /// report, credit raised, a stall).
    pub(crate) feedback_due: bool,
    pub(crate) trains: TrainEstimator,
    pub(crate) streams: Streams,
    pub(crate) events: VecDeque<Event>,
    pub(crate) last_received: Duration,
    pub(crate) last_sent: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) pto_count: u32,
    pub(crate) ping_due: bool,
    pub(crate) close: Option<(u64, String)>,
    pub(crate) closed: Option<CloseReason>,
    /// Server: until the client proves its address, send at most 3× what
    /// arrived from it.
    pub(crate) validated: bool,
    pub(crate) unvalidated_received: u64,
    pub(crate) unvalidated_sent: u64,
    pub(crate) stats: ConnectionStats,
    pub(crate) scratch: Vec<u8>,
    /// Stream bytes the peer holds (in blocks it reported decodable).
    pub(crate) acked_stream_bytes: std::collections::BTreeMap<u64, u64>,
    /// The application let the peer's key in (always, without
    /// [`Config::authorize_before_data`]).
    pub(crate) authorized: bool,
    /// Protected datagrams that arrived before `authorized`, with their
    /// source address, replayed once it is set.
    pub(crate) held: Vec<(SocketAddr, Option<IpAddr>, Vec<u8>)>,
}

impl Connection {
    fn new(
        role: Role,
        cfg: Arc<Config>,
        local_cid: ConnectionId,
        remote_cid: ConnectionId,
        remote: SocketAddr,
        now: Duration,
        handshake: Handshake,
    ) -> Connection {
        let streams = Streams::new(role == Role::Client, cfg.streams);
        let path = Path::new(0, remote, cfg.rate_control.build());
        Connection {
            role,
            local_cid,
            remote_cid,
            paths: vec![path],
            handshake,
            handshake_out: false,
            handshake_timer: None,
            handshake_backoff: 0,
            handshake_deadline: now + cfg.handshake_timeout,
            handshake_first_sent: None,
            handshake_sends: 0,
            handshake_rtt_taken: false,
            start_pair: start_pair::StartPair::Off,
            one_rtt: None,
            peer_static: None,
            next_pn: 0,
            received: ReceivedPackets::default(),
            recovery: Recovery::default(),
            ack_timing: ack_timing::AckTiming::default(),
            acks_written: 0,
            largest_received_at: now,
            stall_reports: stall::StallReports::default(),
            peer_receive_times: Vec::new(),
            path_events: VecDeque::new(),
            last_suspicion: None,
            next_pair_id: 0,
            send_receive_times: false,
            feedback_due: false,
            trains: TrainEstimator::default(),
            streams,
            events: VecDeque::new(),
            last_received: now,
            last_sent: now,
            idle_timeout: cfg.idle_timeout,
            pto_count: 0,
            ping_due: false,
            close: None,
            closed: None,
            validated: role == Role::Client,
            unvalidated_received: 0,
            unvalidated_sent: 0,
            stats: ConnectionStats::default(),
            scratch: Vec::with_capacity(2048),
            acked_stream_bytes: Default::default(),
            authorized: role == Role::Client || !cfg.authorize_before_data,
            held: Vec::new(),
            cfg,
        }
    }

    pub(crate) fn params(cfg: &Config) -> TransportParams {
        TransportParams {
            code: cfg.coding.code,
            max_data: cfg.streams.max_data,
            max_stream_data: cfg.streams.max_stream_data,
            max_blocks: u64::from(cfg.coding.window),
            idle_timeout_ms: cfg.idle_timeout.as_millis() as u64,
            receive_times: cfg.rate_control.wants_receive_times(),
            aes_gcm: cfg.aead.offers_aes_gcm(),
            // Our receiver takes prefix repairs (of RLNC blocks; a sender
            // never codes RaptorQ blocks that way).
            prefix_repairs: true,
            // A server measures start pairs (start_pair.rs).
            start_pairs: true,
            max_streams: Some(cfg.streams.max_streams),
        }
    }

    /// A client connection whose Initial is ready to send.
    pub(crate) fn client(
        cfg: Arc<Config>,
        local_cid: ConnectionId,
        initial_dcid: ConnectionId,
        remote: SocketAddr,
        now: Duration,
        server_key: Option<&[u8; 32]>,
    ) -> Result<Connection, crate::handshake::HandshakeError> {
        let (hs, initial) = ClientHandshake::start(&cfg.keypair, server_key, Self::params(&cfg))?;
        let handshake = Handshake::ClientWait {
            hs: Box::new(hs),
            initial,
            token: Vec::new(),
            initial_dcid,
        };
        let mut c = Connection::new(
            Role::Client,
            cfg,
            local_cid,
            initial_dcid,
            remote,
            now,
            handshake,
        );
        c.handshake_out = true;
        if server_key.is_some() && c.paths[0].cc.wants_start_capacity() {
            c.start_pair = start_pair::StartPair::Ready;
        }
        Ok(c)
    }

    /// A server connection after reading a client's Initial.
    pub(crate) fn server(cfg: Arc<Config>, a: Accepted, now: Duration) -> Connection {
        let mut c = Connection::new(
            Role::Server,
            cfg,
            a.local_cid,
            a.client_cid,
            a.remote,
            now,
            a.handshake,
        );
        c.validated = a.validated;
        c.start_pair = start_pair::StartPair::Measuring { first: now };
        c.paths[0].local = a.local;
        c.unvalidated_received = a.initial_len as u64;
        c.handshake_out = true;
        if let Some(est) = a.established {
            c.establish(est);
        }
        c
    }

    /// Installs keys and the coding state once the handshake is done.
    pub(crate) fn establish(&mut self, mut est: Established) {
        est.send.set_update_after(self.cfg.key_update_packets);
        let mut coding = self.cfg.coding;
        // Both directions use the code the client proposed.
        if self.role == Role::Server {
            coding.code = est.peer_params.code;
            if coding.code != self.cfg.coding.code {
                coding = crate::coding::CodingConfig {
                    code: coding.code,
                    ..crate::coding::CodingConfig::defaults_for(coding.code)
                };
                // The default symbols must still fit this connection's
                // datagrams (smaller to an IPv6 peer, Config::for_ipv6).
                let room = self.cfg.max_datagram - self.cfg.data_packet_overhead();
                coding.symbol_size = coding
                    .symbol_size
                    .min(u16::try_from(room).unwrap_or(u16::MAX));
            }
        }
        self.streams
            .set_peer_limits(est.peer_params.max_data, est.peer_params.max_stream_data);
        self.streams
            .set_peer_max_streams(est.peer_params.max_streams);
        let refused_code =
            self.role == Role::Server && !self.cfg.accept_codes.contains(&est.peer_params.code);
        let peer_idle = Duration::from_millis(est.peer_params.idle_timeout_ms.max(1));
        self.idle_timeout = self.cfg.idle_timeout.min(peer_idle);
        self.peer_static = Some(est.peer_static);
        if !est.peer_params.start_pairs {
            self.start_pair_unmeasured();
        }
        self.send_receive_times = est.peer_params.receive_times;
        self.ack_timing.batches = self.send_receive_times;
        self.one_rtt = Some(Established1Rtt {
            send: est.send,
            recv: est.recv,
            tx: {
                let mut tx = CodedSender::new(coding, est.peer_params.max_blocks);
                tx.set_prefix_repairs(est.peer_params.prefix_repairs);
                tx
            },
            rx: {
                let mut rx = CodedReceiver::new(coding.code, self.cfg.coding.window);
                rx.set_limits(crate::coding::ReceiveLimits {
                    // A refused code's symbols are never decoded.
                    max_block_symbols: if refused_code {
                        0
                    } else {
                        self.cfg.max_block_symbols
                    },
                    max_symbol_size: u16::try_from(self.cfg.max_datagram).unwrap_or(u16::MAX),
                    max_decoder_bytes: self.cfg.max_decoder_memory,
                });
                rx
            },
            readers: Default::default(),
            block_contents: Default::default(),
        });
        if refused_code {
            self.close = Some((
                CODE_REFUSED_CODE,
                format!(
                    "this server does not take {} blocks",
                    est.peer_params.code.name()
                ),
            ));
            self.terminate(CloseReason::ProtocolViolation(format!(
                "the peer proposed {}, which this server does not take",
                est.peer_params.code.name()
            )));
            return;
        }
        self.events.push_back(Event::Connected);
        if self.role == Role::Client {
            // An ack-eliciting packet at once: it validates our address at
            // the server (lifting its 3× limit) and gives both sides an RTT.
            self.ping_due = true;
        }
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn is_established(&self) -> bool {
        self.one_rtt.is_some() && self.closed.is_none()
    }

    /// Closed, and the CLOSE frame telling the peer why (if one is owed)
    /// has been handed out by `poll_transmit`: the connection may go.
    pub fn is_closed(&self) -> bool {
        self.closed.is_some() && self.close.is_none()
    }

    pub fn close_reason(&self) -> Option<&CloseReason> {
        self.closed.as_ref()
    }

    /// The peer's static public key, once authenticated.
    pub fn peer_static(&self) -> Option<[u8; 32]> {
        self.peer_static
    }

    pub fn local_cid(&self) -> ConnectionId {
        self.local_cid
    }

    pub fn remote_address(&self) -> SocketAddr {
        self.paths[0].remote
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        if self.events.is_empty() {
            for id in self.streams.take_readable() {
                self.events.push_back(Event::StreamReadable(id));
            }
        }
        self.events.pop_front()
    }

    pub fn stats(&self) -> ConnectionStats {
        let mut s = self.stats;
        s.spurious_losses = self.recovery.spurious_losses();
        // The first path data goes on stands for the connection; the rate
        // is all data paths' together.
        let primary = self.data_paths().next().unwrap_or(0);
        let path = &self.paths[primary];
        s.smoothed_rtt = path.rtt.smoothed();
        s.min_rtt = path.rtt.min();
        s.rate = self.data_paths().map(|i| self.paths[i].cc.rate()).sum();
        s.limited_by = if self.one_rtt.is_some() && self.window_full(primary) {
            "window"
        } else {
            path.cc.state()
        };
        if let Some(e) = &self.one_rtt {
            s.sender = e.tx.stats();
            s.receiver = e.rx.stats();
            s.loss_rate = e.tx.loss_rate();
            s.key_updates = e.send.updates();
            s.aead = e.send.aead().name();
            s.peer_key_updates = e.recv.updates();
        }
        s
    }

    /// The sending side's blocks in flight, for traces.
    pub fn describe_blocks(&self) -> String {
        let blocks = self
            .one_rtt
            .as_ref()
            .map(|e| e.tx.describe_blocks())
            .unwrap_or_default();
        format!(
            "in flight {} B, pto #{}, oldest {:?}, timeout {:?} | {blocks}",
            self.recovery.bytes_in_flight(),
            self.pto_count,
            self.recovery.oldest_in_flight(None),
            self.poll_timeout()
        )
    }

    /// Bytes this connection holds in stream buffers and undecoded blocks.
    pub fn buffered_bytes(&self) -> usize {
        self.streams.buffered_bytes() + self.one_rtt.as_ref().map_or(0, |e| e.rx.buffered_bytes())
    }

    /// What the budget ([`Config::max_connection_memory`]) counts: stream
    /// buffers, the decoders' allocations and held datagrams.
    pub fn memory_in_use(&self) -> usize {
        self.streams.buffered_bytes()
            + self.one_rtt.as_ref().map_or(0, |e| e.rx.allocated_bytes())
            + self.held.iter().map(|(_, _, d)| d.len()).sum::<usize>()
    }

    /// Closes the connection if its peer made it hold more than the
    /// budget.
    pub(crate) fn enforce_memory_budget(&mut self) {
        let used = self.memory_in_use();
        if used > self.cfg.max_connection_memory && self.closed.is_none() {
            let why = format!(
                "over its memory budget ({used} > {} bytes)",
                self.cfg.max_connection_memory
            );
            self.close = Some((MEMORY_BUDGET_CODE, why.clone()));
            self.terminate(CloseReason::ProtocolViolation(why));
        }
    }

    /// Whether the application has yet to let this peer's key in (see
    /// [`Config::authorize_before_data`]).
    pub fn awaiting_authorization(&self) -> bool {
        !self.authorized
    }

    // ---- streams ----

    fn require_established(&self) -> Result<(), StreamError> {
        if self.is_established() {
            Ok(())
        } else {
            Err(StreamError::NotConnected)
        }
    }

    pub fn open_stream(&mut self) -> Result<StreamId, StreamError> {
        self.require_established()?;
        if !self.streams.can_open() {
            return Err(StreamError::StreamLimit);
        }
        Ok(self.streams.open())
    }

    pub fn accept_stream(&mut self) -> Option<StreamId> {
        self.streams.accept()
    }

    /// Writes what the stream and the send budget take now (see
    /// [`Connection::write_room`]); `Err(Blocked)` if nothing.
    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, StreamError> {
        self.require_established()?;
        let room = self.send_budget_room();
        if room == 0 && !data.is_empty() {
            // Unknown or finished streams still say so.
            self.streams.write(id, &[])?;
            return Err(StreamError::Blocked);
        }
        self.streams.write(id, &data[..data.len().min(room)])
    }

    /// Bytes `write` takes now: the stream's buffer room, within what the
    /// path can carry soon. Data written and not yet at the peer (unsent,
    /// and what blocks in flight still lack) is kept to what is in flight
    /// (at least a round trip at the sending rate), one block and
    /// `SEND_HORIZON` at that rate, so writes are back-pressured to the path
    /// instead of queueing seconds of data in the sender.
    /// Bytes of stream `id` the peer holds: in blocks it reported
    /// decodable (delivered, or about to be), whatever the application on
    /// the other side has read. What a progress display should show.
    pub fn stream_acked(&self, id: StreamId) -> u64 {
        self.acked_stream_bytes.get(&id.0).copied().unwrap_or(0)
    }

    /// Whether everything written on every stream is at the peer (sent,
    /// and each block reported decodable): what a server that is shutting
    /// down waits for before closing, so a reply it wrote is not lost.
    pub fn all_delivered(&self) -> bool {
        self.streams.unsent_bytes() == 0
            && self
                .one_rtt
                .as_ref()
                .is_none_or(|e| e.tx.bytes_undelivered() == 0)
    }

    pub fn write_room(&self, id: StreamId) -> usize {
        self.streams.write_room(id).min(self.send_budget_room())
    }

    fn send_budget_room(&self) -> usize {
        let Some(e) = &self.one_rtt else { return 0 };
        let (rate, rtt) = self.data_rate_and_rtt();
        let at_rate = |d: Duration| (rate as f64 * d.as_secs_f64()) as u64;
        // What is in flight, or a round trip at the rate if more.
        let network = self.recovery.bytes_in_flight().max(at_rate(rtt));
        let block = e.tx.config().block_bytes_at(rate, rtt) as u64;
        let budget = (network + block + at_rate(SEND_HORIZON)).max(MIN_SEND_BUDGET);
        let queued = self.streams.unsent_bytes() as u64 + e.tx.bytes_undelivered();
        budget.saturating_sub(queued) as usize
    }

    /// What the data paths carry together (bytes/s), and the longest of
    /// their RTTs: what a block and the send budget are sized on.
    pub(crate) fn data_rate_and_rtt(&self) -> (u64, Duration) {
        self.data_paths()
            .fold((0, Duration::ZERO), |(rate, rtt), i| {
                let p = &self.paths[i];
                (rate + p.cc.rate(), rtt.max(p.rtt.smoothed()))
            })
    }

    /// The loss a block's symbols meet on the air, if every data path's
    /// controller tells air loss from queue drops: each path's reading
    /// weighted by its rate, the share of the symbols it carries. The
    /// worst path's reading, used before, sized every block for the
    /// slowest, lossiest path: beside a Wi-Fi hotspot gone to 0.1 Mbit/s
    /// (its one-packet queue's drops read as air loss), LTE's blocks
    /// carried up to 0.46 repair symbols per source symbol, and LTE
    /// delivered 6.7-8.2 of its 10 Mbit/s.
    /// (The mix's variance is at most that of one path at the mean loss,
    /// so the margin's standard deviations stay on the safe side.)
    pub(crate) fn data_air_loss(&self) -> Option<f64> {
        let (mut weighted, mut total, mut paths) = (0.0, 0.0, 0);
        let mut last = 0.0;
        for i in self.data_paths() {
            let cc = &self.paths[i].cc;
            last = cc.air_loss()?;
            weighted += cc.rate() as f64 * last;
            total += cc.rate() as f64;
            paths += 1;
        }
        Some(match paths {
            // One path: its own reading, exactly.
            1 => last,
            _ if total > 0.0 => weighted / total,
            _ => 0.0,
        })
    }

    pub fn finish(&mut self, id: StreamId) -> Result<(), StreamError> {
        self.streams.finish(id)
    }

    pub fn reset(&mut self, id: StreamId, code: u64) -> Result<(), StreamError> {
        self.streams.reset(id, code)
    }

    /// Reads in order; `Ok(0)` means the stream finished.
    pub fn read(&mut self, id: StreamId, buf: &mut [u8]) -> Result<usize, StreamError> {
        self.process_decodes();
        let before = self.streams.credit_pending();
        let r = self.streams.read(id, buf);
        if !before && self.streams.credit_pending() {
            self.feedback_due = true;
        }
        r
    }

    /// Closes the connection: the peer is told, then the state is dropped.
    pub fn close(&mut self, code: u64, reason: &str) {
        if self.closed.is_none() && self.close.is_none() {
            self.close = Some((code, reason.to_owned()));
        }
    }

    pub(crate) fn terminate(&mut self, reason: CloseReason) {
        if self.closed.is_none() {
            self.closed = Some(reason.clone());
            self.events.push_back(Event::Closed(reason));
        }
    }

    /// Runs pending decodes and hands the rest of their frames (what was
    /// not read in order as source symbols arrived) to the streams.
    pub(crate) fn process_decodes(&mut self) {
        let Some(e) = self.one_rtt.as_mut() else {
            return;
        };
        let mut failure = None;
        while let Some((id, len)) = e.rx.next_ready() {
            let mut reader = e.readers.remove(&id).unwrap_or_default();
            let all_read = reader.position() >= len as usize;
            let Some(result) = e.rx.decode_next(all_read) else {
                break;
            };
            let outcome = result
                .map_err(|err| format!("block failed to decode: {err}"))
                .and_then(|(_, bytes)| {
                    let from = reader.position().min(bytes.len());
                    reader.feed(&bytes[from..], &mut self.streams)?;
                    reader.finish()
                });
            if let Err(why) = outcome {
                failure = Some(why);
                break;
            }
        }
        if let Some(why) = failure {
            self.close = Some((PROTOCOL_VIOLATION_CODE, why.clone()));
            self.terminate(CloseReason::ProtocolViolation(why));
        }
    }

    // ---- timers ----

    /// The next time [`Connection::handle_timeout`] must run.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if self.closed.is_some() {
            return None;
        }
        let mut t = self.last_received + self.idle_timeout;
        let mut consider = |x: Option<Duration>| {
            if let Some(x) = x {
                t = t.min(x);
            }
        };
        if self.one_rtt.is_none() {
            consider(Some(self.handshake_deadline));
        }
        consider(self.handshake_timer);
        consider(self.start_pair_deadline());
        consider(self.ack_timing.deadline(self.cfg.max_ack_delay));
        consider(self.stall_reports.deadline());
        if self.one_rtt.is_some() {
            let paths = &self.paths;
            consider(self.recovery.loss_time(&|id| loss_delay_of(paths, id)));
            consider(self.path_timeout());
            // A full window waits for acknowledgments or loss timers, not
            // for the pacer; so does a client address not yet validated,
            // and data held for the start pair's report (its deadline is
            // the timer; while only the flight is small, the pacer runs).
            if self.has_data() && !self.start_pair_holds_data() {
                for i in self.data_paths() {
                    if !self.path_amplification_limited(i, self.cfg.max_datagram)
                        && !self.window_full(i)
                    {
                        consider(Some(
                            self.paths[i].cc.next_send_time().unwrap_or(self.last_sent),
                        ));
                    }
                }
            }
            // Path control to send now (not what the 3× limit holds back:
            // that waits for the peer, and would wake the driver in vain).
            let control_due = (0..self.paths.len()).any(|i| {
                let p = &self.paths[i];
                (p.has_control() && !self.path_amplification_limited(i, 64)) || p.pair_stage > 0
            });
            if control_due {
                consider(Some(self.last_sent));
            }
            consider(self.credit_probe_time());
            consider(Some(
                self.last_sent.max(self.last_received) + self.idle_timeout / 3,
            ));
        }
        Some(t)
    }

    /// When to ask again for credit. Data waiting for credit with nothing in
    /// flight means no acknowledgment will bring the peer's credit (its
    /// update may have been lost), so after a PTO we elicit one (the reply
    /// carries MAX_DATA); otherwise only the keep-alive would, seconds later.
    /// Only the paths data goes on count: a dead path's probes stay "in
    /// flight" until declared lost, and waiting for them held a sender
    /// whose credit update had died with its Wi-Fi for 400 ms (virtual
    /// time, Wi-Fi 120 + LTE 40 Mbit/s).
    fn credit_probe_time(&self) -> Option<Duration> {
        let starved = self.streams.waiting_for_credit()
            && self.data_paths().all(|i| {
                self.recovery
                    .oldest_in_flight(Some(self.paths[i].id))
                    .is_none()
            });
        starved.then(|| self.last_sent.max(self.last_received) + self.pto())
    }

    /// Whether sending `len` more bytes would break the 3× limit toward a
    /// client address not yet validated.
    pub(crate) fn amplification_limited(&self, len: usize) -> bool {
        !self.validated && self.unvalidated_sent + len as u64 > 3 * self.unvalidated_received
    }

    /// The same for one path: path 0's peer address is validated by the
    /// handshake, the others' by their own challenge, and any path's new
    /// address (the peer's NAT rebound) by a challenge too.
    pub(crate) fn path_amplification_limited(&self, i: usize, len: usize) -> bool {
        let path = self.paths[i].amplification_limited(len);
        if i == 0 {
            self.amplification_limited(len) || path
        } else {
            path
        }
    }

    /// Whether the path's window has no room for another full datagram.
    pub(crate) fn window_full(&self, path_idx: usize) -> bool {
        let p = &self.paths[path_idx];
        p.cc.window().is_some_and(|w| {
            self.recovery.path_bytes_in_flight(p.id) + self.cfg.max_datagram as u64 > w
        })
    }

    /// Whether a symbol is waiting, stream data could start a block, or an
    /// idle link could top a block up.
    pub(crate) fn has_data(&self) -> bool {
        self.one_rtt.as_ref().is_some_and(|e| {
            e.tx.next_symbol().is_some()
                || (e.tx.can_start_block() && self.streams.has_sendable())
                || e.tx.idle_symbol().is_some()
        })
    }

    pub(crate) fn pto(&self) -> Duration {
        self.base_pto(0) * 2u32.saturating_pow(self.pto_count.min(6))
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        if self.closed.is_some() {
            return;
        }
        if now >= self.last_received + self.idle_timeout {
            self.terminate(CloseReason::IdleTimeout);
            return;
        }
        if self.one_rtt.is_none() && now >= self.handshake_deadline {
            self.terminate(CloseReason::HandshakeTimeout);
            return;
        }
        if self.handshake_timer.is_some_and(|t| now >= t) {
            self.handshake_out = true;
            self.handshake_timer = None;
        }
        self.start_pair_timeout(now);
        if self.one_rtt.is_none() {
            return;
        }
        let paths = &self.paths;
        let lost = self
            .recovery
            .detect_lost(now, &|id| loss_delay_of(paths, id));
        self.on_lost(now, &lost);
        self.on_stall_timer(now);
        self.on_path_timers(now);
        self.on_grading_timers(now);
        if self.credit_probe_time().is_some_and(|t| now >= t) {
            self.pto_count += 1;
            self.ping_due = true;
        }
        if now >= self.last_sent.max(self.last_received) + self.idle_timeout / 3 {
            self.ping_due = true;
        }
        self.process_decodes();
    }

    pub(crate) fn on_lost(&mut self, now: Duration, lost: &[crate::recovery::SentPacket]) {
        if lost.is_empty() {
            return;
        }
        let Some(e) = self.one_rtt.as_mut() else {
            return;
        };
        for p in lost {
            if let Some(b) = p.block {
                e.tx.on_lost(b, p.esi);
            }
        }
        self.charge_losses(now, lost);
    }

    /// Counts lost packets, per connection and per path, and tells each
    /// path's controller of its own (a standby path's pings say nothing
    /// about what it can carry).
    pub(crate) fn charge_losses(&mut self, now: Duration, lost: &[crate::recovery::SentPacket]) {
        self.stats.packets_lost += lost.iter().filter(|p| p.ack_eliciting).count() as u64;
        for path in &mut self.paths {
            let mine: Vec<_> = lost.iter().filter(|p| p.path == path.id).copied().collect();
            if !mine.is_empty() {
                path.counters.packets_lost +=
                    mine.iter().filter(|p| p.ack_eliciting).count() as u64;
                if path.state != PathState::Standby {
                    path.cc.on_loss(now, &mine);
                }
            }
        }
    }

    pub(crate) fn handshake_retransmit_after(&mut self, now: Duration) {
        let doublings = self.handshake_backoff.min(HANDSHAKE_BACKOFF_DOUBLINGS);
        self.handshake_timer = Some(now + HANDSHAKE_RETRANSMIT * 2u32.pow(doublings));
        self.handshake_backoff += 1;
    }

    /// The peer answered our handshake datagram. With one datagram sent
    /// the time since is an RTT sample: it seeds the RTT estimator (so the
    /// first PTO is not the 1 s default) and the rate controller (BBR's
    /// first flight is paced over this RTT instead of an assumed 100 ms).
    pub(crate) fn take_handshake_rtt(&mut self, now: Duration) {
        if self.handshake_rtt_taken {
            return;
        }
        self.handshake_rtt_taken = true;
        let rtt = self
            .handshake_first_sent
            .filter(|_| self.handshake_sends == 1)
            .map(|sent| now.saturating_sub(sent))
            .filter(|rtt| !rtt.is_zero());
        self.start_pair_established(now, rtt);
        let Some(rtt) = rtt else {
            return;
        };
        let path = &mut self.paths[0];
        path.rtt.update(rtt, Duration::ZERO);
        path.cc.on_handshake_rtt(now, rtt);
    }
}

/// A path's time threshold for loss (recovery::loss_delay), by path id.
pub(crate) fn loss_delay_of(paths: &[Path], id: u8) -> Duration {
    paths
        .iter()
        .find(|p| p.id == id)
        .map_or(Duration::from_millis(1), |p| {
            crate::recovery::loss_delay(&p.rtt)
        })
}

//! Everything an endpoint can be told, with documented defaults.

use std::sync::Arc;
use std::time::Duration;

use convoy_codec::CodeKind;

use crate::cc::{
    Background, BackgroundConfig, Bbr, BbrConfig, RateController, Rcdp, RcdpConfig, Tide,
    TideConfig,
};
use crate::coding::CodingConfig;
use crate::crypto::{cpu_has_aes_gcm, Aead, Keypair};
use crate::stream::StreamLimits;
use crate::wire::packet::{SHORT_HEADER_LEN, TAG_LEN};

/// How much longer an IPv6 header is than an IPv4 one (40 against 20
/// bytes): what [`Config::for_ipv6`] takes off a datagram.
pub const IPV6_EXTRA_HEADER: usize = 20;

/// The transport's named operating modes, the `--mode` of every command:
/// which code carries the data and which controller paces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The default: RLNC generations sized to the measured rate, paced by
    /// Tide (receiver-measured delivery rate, a small queueing-delay
    /// target), made for links whose capacity changes every second.
    Tide,
    /// RaptorQ blocks paced by RCDP's packet trains (SPEC S1).
    Rcdp,
    /// RLNC generations paced by BBR (ScalaNC, SPEC S2).
    RlncBbr,
}

impl Mode {
    pub const NAMES: &'static [&'static str] = &["tide", "rcdp", "rlnc-bbr"];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Tide => "tide",
            Mode::Rcdp => "rcdp",
            Mode::RlncBbr => "rlnc-bbr",
        }
    }

    /// The code this mode uses unless told otherwise.
    pub fn default_code(self) -> CodeKind {
        match self {
            Mode::Tide => CodeKind::Rlnc,
            Mode::Rcdp => CodeKind::RaptorQ,
            Mode::RlncBbr => CodeKind::Rlnc,
        }
    }

    pub fn rate_control(self) -> RateControl {
        match self {
            Mode::Tide => RateControl::Tide(TideConfig::default()),
            Mode::Rcdp => RateControl::Rcdp(RcdpConfig::default()),
            Mode::RlncBbr => RateControl::Bbr(BbrConfig::default()),
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "tide" => Ok(Mode::Tide),
            "rcdp" => Ok(Mode::Rcdp),
            "rlnc-bbr" => Ok(Mode::RlncBbr),
            _ => Err(format!(
                "unknown mode {s:?}: valid modes are {}",
                Mode::NAMES.join(", ")
            )),
        }
    }
}

/// Builds a path's rate controller.
pub type ControllerFactory = Arc<dyn Fn() -> Box<dyn RateController> + Send + Sync>;

/// Which rate controller each new path gets.
#[derive(Clone)]
pub enum RateControl {
    /// RCDP's receiver-driven packet trains (SPEC S1).
    Rcdp(RcdpConfig),
    /// BBR (v1): bottleneck bandwidth and min-RTT model, pacing, cwnd = 2 BDP.
    Bbr(BbrConfig),
    /// Tide: receiver-measured delivery rate and a queueing-delay target.
    Tide(TideConfig),
    /// The scavenger of `--priority background`: yields on queueing delay,
    /// never on loss (cc/background.rs).
    Background(BackgroundConfig),
    /// Any other controller on the trait (BBR, the simulator's references).
    Custom {
        name: &'static str,
        factory: ControllerFactory,
    },
}

impl std::fmt::Debug for RateControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RateControl::Rcdp(c) => f.debug_tuple("Rcdp").field(c).finish(),
            RateControl::Bbr(c) => f.debug_tuple("Bbr").field(c).finish(),
            RateControl::Tide(c) => f.debug_tuple("Tide").field(c).finish(),
            RateControl::Background(c) => f.debug_tuple("Background").field(c).finish(),
            RateControl::Custom { name, .. } => f.debug_tuple("Custom").field(name).finish(),
        }
    }
}

impl RateControl {
    /// Whether this controller measures the forward path with the peer's
    /// RECEIVE_TIME frames (asked for in the transport parameters: others
    /// do without the bytes).
    pub fn wants_receive_times(&self) -> bool {
        matches!(self, RateControl::Tide(_) | RateControl::Background(_))
    }

    pub fn build(&self) -> Box<dyn RateController> {
        match self {
            RateControl::Rcdp(c) => Box::new(Rcdp::new(c.clone())),
            RateControl::Bbr(c) => Box::new(Bbr::new(c.clone())),
            RateControl::Tide(c) => Box::new(Tide::new(c.clone())),
            RateControl::Background(c) => Box::new(Background::new(c.clone())),
            RateControl::Custom { factory, .. } => factory(),
        }
    }
}

/// Which packet AEADs an endpoint offers in its handshake
/// (`crate::crypto::Aead`): ChaCha20-Poly1305 always, AES-256-GCM per this
/// choice. The connection uses AES-256-GCM only if both ends offer it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AeadChoice {
    /// Offer AES-256-GCM where this CPU has AES instructions, where it is
    /// about three times as fast as ChaCha20-Poly1305 (the default).
    #[default]
    Auto,
    /// Offer only ChaCha20-Poly1305, so the connection uses it.
    ChaCha20Poly1305,
    /// Offer AES-256-GCM whatever the CPU.
    Aes256Gcm,
}

impl AeadChoice {
    /// The name `FromStr` reads (the `--aead` of every command).
    pub fn name(self) -> &'static str {
        match self {
            AeadChoice::Auto => "auto",
            AeadChoice::ChaCha20Poly1305 => Aead::ChaCha20Poly1305.name(),
            AeadChoice::Aes256Gcm => Aead::Aes256Gcm.name(),
        }
    }

    pub fn offers_aes_gcm(self) -> bool {
        match self {
            AeadChoice::Auto => cpu_has_aes_gcm(),
            AeadChoice::ChaCha20Poly1305 => false,
            AeadChoice::Aes256Gcm => true,
        }
    }
}

impl std::str::FromStr for AeadChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<AeadChoice, String> {
        [
            AeadChoice::Auto,
            AeadChoice::ChaCha20Poly1305,
            AeadChoice::Aes256Gcm,
        ]
        .into_iter()
        .find(|c| c.name() == s)
        .ok_or_else(|| format!("{s:?}: expected auto, chacha20-poly1305 or aes-256-gcm"))
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    /// This endpoint's static key (its identity).
    pub keypair: Keypair,
    /// Coding of what we send. A client's `coding.code` is proposed to the
    /// server and both directions use it.
    pub coding: CodingConfig,
    pub rate_control: RateControl,
    pub streams: StreamLimits,
    /// A connection with nothing received for this long is closed.
    pub idle_timeout: Duration,
    /// A handshake not finished in this time fails.
    pub handshake_timeout: Duration,
    /// Largest UDP payload we send (1472 fits a 1500-byte IPv4 MTU).
    pub max_datagram: usize,
    /// Acknowledge after this many ack-eliciting packets...
    pub ack_every: u32,
    /// ...or this long after the first unacknowledged one.
    pub max_ack_delay: Duration,
    /// Server: accepted client keys (`None` accepts any).
    pub allowed_peers: Option<Vec<[u8; 32]>>,
    /// Server: with more handshakes than this pending, new clients must
    /// first prove their address with a Retry cookie.
    pub retry_threshold: usize,
    /// Server: handshakes per second (burst: one second's worth) begun for
    /// clients that have not proven their address; beyond it, Retry. A
    /// flood of spoofed Initials then costs one MAC each, not a Noise DH.
    pub retry_rate: u32,
    /// Server: handshakes per second an address may begin for
    /// `offender_hold` after a connection from it was closed for its own
    /// fault (a protocol violation, or refused by the application);
    /// beyond it, its Initials are dropped before any key exchange. A
    /// rate, not a ban: vehicles share addresses behind carrier NAT.
    /// 0 turns the gate off.
    pub offender_rate: u32,
    pub offender_hold: Duration,
    /// The server and worker our connection ids name (QUIC-LB layout,
    /// `crate::cid`).
    pub routing: crate::cid::Routing,
    /// Packets sealed under one key before the sender moves to the next
    /// (a key update, `crate::crypto::KeyUpdate`).
    pub key_update_packets: u64,
    /// Which packet AEADs the handshake offers.
    pub aead: AeadChoice,
    /// Seeds connection ids and cookie keys, so simulations replay exactly.
    pub seed: Option<u64>,
    /// Server: the codes a client may propose; a connection proposing
    /// another is closed. Default: both.
    pub accept_codes: Vec<CodeKind>,
    /// The largest block, in source symbols, the peer may send (its
    /// symbols are larger than our `max_datagram` never). Default: 256,
    /// the larger of the two codes' default blocks.
    pub max_block_symbols: u32,
    /// Decoders of the peer's blocks held at once, bytes (K × symbol size
    /// each): symbols of a block beyond it are refused until older blocks
    /// decode. Default: 8 MB, 22 full blocks of 1427-byte symbols.
    pub max_decoder_memory: usize,
    /// Everything one connection may hold for its peer (stream buffers,
    /// decoders, held packets), bytes; over it the connection is closed
    /// with [`crate::connection::MEMORY_BUDGET_CODE`]. Default: 32 MB,
    /// above the default windows' sum (16 MB of streams, 8 MB of
    /// decoders), so only a peer that breaks them reaches it.
    pub max_connection_memory: usize,
    /// Server: protected packets of a new connection are held (at most
    /// [`crate::connection::HELD_PACKETS`]) and not read until
    /// [`crate::Endpoint::authorize`] says its key may connect.
    pub authorize_before_data: bool,
    /// Server: answer XX handshakes (clients that do not know our key). A
    /// server that only takes registered keys gains nothing from them.
    pub accept_xx: bool,
}

impl Config {
    pub fn new(keypair: Keypair) -> Config {
        Config {
            keypair,
            coding: CodingConfig::defaults_for(CodeKind::RaptorQ),
            rate_control: RateControl::Rcdp(RcdpConfig::default()),
            streams: StreamLimits::default(),
            idle_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            max_datagram: 1472,
            ack_every: 16,
            max_ack_delay: Duration::from_millis(5),
            allowed_peers: None,
            retry_threshold: 64,
            retry_rate: 500,
            offender_rate: 16,
            offender_hold: Duration::from_secs(10),
            routing: crate::cid::Routing::default(),
            key_update_packets: 1 << 30,
            aead: AeadChoice::Auto,
            seed: None,
            accept_codes: vec![CodeKind::Rlnc, CodeKind::RaptorQ],
            max_block_symbols: 256,
            max_decoder_memory: 8 << 20,
            max_connection_memory: 32 << 20,
            authorize_before_data: false,
            accept_xx: true,
        }
    }

    /// A configuration for one of the named modes, with its default code.
    /// Without packet trains, the symbol fills the whole datagram (1427 B
    /// in 1472): at 30 % loss that measured 0.907/0.932/0.924 of C·(1 − p)
    /// over seeds 1–3, against 0.904/0.920/0.912 with 1400-byte symbols.
    pub fn for_mode(keypair: Keypair, mode: Mode) -> Config {
        let mut cfg = Config::new(keypair).with_code(mode.default_code());
        cfg.rate_control = mode.rate_control();
        if mode == Mode::Tide {
            // Blocks of about 25 ms on the air: a generation is decodable
            // that soon after its first symbol left, at any rate (g = 255
            // at 0.8 Mbit/s was 3.6 s), and a reader held up by a gap that
            // a repair fills waits at most that long for the decode.
            // `convoy simulate --rate 20mbit --delay 25ms --size 10MB`,
            // write-to-read p95 at 0 / 2 / 10 % loss: 100 ms blocks 262 /
            // 386 / 511 ms, 25 ms 169 / 265 / 343 ms (131 / 234 / 319 with
            // the 25 ms send horizon), goodput within 1 % up to 10 %; at
            // 20-30 % loss about 1 % less (more blocks need a second
            // round). The paper modes keep their fixed blocks.
            cfg.coding.block_airtime = Some(Duration::from_millis(25));
        }
        let fill = cfg.max_datagram - cfg.data_packet_overhead();
        cfg.coding.symbol_size = u16::try_from(fill).unwrap_or(u16::MAX);
        cfg
    }

    /// The same configuration with another code and that code's default
    /// block size (symbol size and margin stay).
    pub fn with_code(mut self, code: CodeKind) -> Config {
        self.coding.code = code;
        self.coding.block_symbols = CodingConfig::defaults_for(code).block_symbols;
        self
    }

    /// The most a data packet adds around its symbol: the longest short
    /// header, AEAD tag, the longest SYMBOL frame header (type, ids below
    /// 2^30, K and a prefix's n below 2^14: 13), and a TRAIN tag when the
    /// controller uses trains (24, the room the sender keeps for it). A
    /// typical packet takes less (docs/PROTOCOL.md, "Bytes per packet").
    pub fn data_packet_overhead(&self) -> usize {
        let trains = matches!(self.rate_control, RateControl::Rcdp(_));
        SHORT_HEADER_LEN + TAG_LEN + 13 + if trains { 24 } else { 0 }
    }

    /// The configuration for a connection to an IPv6 address (not
    /// IPv4-mapped): IPv6's header is [`IPV6_EXTRA_HEADER`] bytes longer
    /// than IPv4's, so datagrams (and symbols, where they would not fit)
    /// are that much smaller and a packet fills the same MTU: 1452 bytes
    /// for the default 1472, which fits 1500. Never below the 1200 bytes
    /// every path must carry (IPv6's minimum MTU, 1280, carries 1232).
    pub fn for_ipv6(&self) -> Config {
        let mut c = self.clone();
        let cut = IPV6_EXTRA_HEADER.min(self.max_datagram.saturating_sub(1200));
        c.max_datagram -= cut;
        let room = c.max_datagram.saturating_sub(c.data_packet_overhead());
        c.coding.symbol_size = c
            .coding
            .symbol_size
            .min(u16::try_from(room).unwrap_or(u16::MAX));
        c
    }

    pub fn validate(&self) -> Result<(), String> {
        self.coding.validate()?;
        match &self.rate_control {
            RateControl::Rcdp(c) => c.validate()?,
            RateControl::Tide(c) => c.validate()?,
            _ => {}
        }
        let smallest = usize::from(self.coding.symbol_size) + self.data_packet_overhead();
        if self.max_datagram < smallest.max(1200) || self.max_datagram > 65_507 {
            return Err(format!(
                "max datagram {} must be in {}..=65507 for {}-byte symbols",
                self.max_datagram,
                smallest.max(1200),
                self.coding.symbol_size
            ));
        }
        if self.ack_every == 0 {
            return Err("ack_every must be at least 1".into());
        }
        if self.idle_timeout.is_zero() || self.handshake_timeout.is_zero() {
            return Err("timeouts must be positive".into());
        }
        Ok(())
    }
}

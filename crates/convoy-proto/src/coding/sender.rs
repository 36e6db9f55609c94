//! Which symbol goes out next.
//!
//! Stream frames are packed into blocks (RaptorQ) or generations (RLNC).
//! Several blocks are in flight at once (a window), so the link never idles
//! waiting for one block's feedback. For each block the sender keeps an
//! account: useful symbols the receiver reported, symbols acknowledged since
//! that report, and symbols still in flight. From the measured loss rate p̂
//! it computes how many symbols must be in flight for the block to complete
//! with margin:
//!
//! ```text
//! need = K − useful
//! in flight n such that  n(1 − p̂) − z·√(n·p̂(1 − p̂)) ≥ need
//! ```
//!
//! and a block whose account falls short gets fresh repair symbols *before*
//! any newer block gets source symbols. This generalises RCDP's "mixed
//! blocks" (repair of block n mixed with source of block n + 1): the mix is
//! not a fixed ratio but whatever the measured losses require, and with no
//! loss it is plain source symbols. A lost symbol is never sent again; the
//! account simply reopens and a new repair id goes out.

use std::collections::VecDeque;

use convoy_codec::{new_encoder_owned, BlockEncoder, CodeKind, CodecError};

use crate::wire::BlockStatus;

/// The shortest symbol: a block of less data is zero-padded to it.
pub const MIN_SYMBOL_SIZE: u16 = 16;

/// Coding parameters of one connection's sending side.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CodingConfig {
    pub code: CodeKind,
    /// Bytes per symbol (one symbol per packet).
    pub symbol_size: u16,
    /// Source symbols in a full block.
    pub block_symbols: u32,
    /// Blocks in flight at once (also the receiver's window).
    pub window: u32,
    /// Safety margin in standard deviations of the binomial arrivals.
    pub margin_z: f64,
    /// The margin blocks are topped up to when the sender would otherwise
    /// be idle (the end of a transfer, or waiting for data or credit): the
    /// spare capacity buys the block's completion without another round
    /// trip, so the bulk can run at a lean `margin_z`.
    pub idle_margin_z: f64,
    /// Size each new block to about this much time on the air at the rate
    /// the controller paces at (never above `block_symbols`): a block is
    /// decodable, and its bytes readable, this soon after its first symbol
    /// left. `None`: every block is `block_symbols` long.
    pub block_airtime: Option<std::time::Duration>,
}

impl CodingConfig {
    pub fn defaults_for(code: CodeKind) -> CodingConfig {
        CodingConfig {
            code,
            symbol_size: 1400,
            block_symbols: match code {
                CodeKind::RaptorQ => 256,
                CodeKind::Rlnc => 255,
            },
            window: 32,
            // Measured with `convoy simulate --mode rlnc-bbr --size 10MB`,
            // seeds 1-8, 1-30 % loss (ratio to C(1 - p); share of blocks
            // needing symbols beyond their up-front plan):
            //   z = +1: 0.89-0.92, ~10 %  (a full margin costs ~3 % goodput)
            //   z =  0: 0.90-0.93, 10-35 %
            //   z = -1: 0.920-0.938, 23-69 %
            //   z = -2: 0.924-0.943, 69-96 %
            // A second round costs a block about one RTT of completion
            // time, not link time (32 blocks are in flight), so the lean
            // side wins on goodput; -1 keeps every run above 92 % with the
            // smaller share. The idle top-up (z = +1) shortens the tail.
            margin_z: -1.0,
            idle_margin_z: 1.0,
            block_airtime: None,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.symbol_size < MIN_SYMBOL_SIZE {
            return Err(format!(
                "symbol size {} is below {MIN_SYMBOL_SIZE} bytes",
                self.symbol_size
            ));
        }
        let max = self.code.max_source_symbols();
        if self.block_symbols == 0 || self.block_symbols > max {
            return Err(format!(
                "{} blocks hold 1 to {max} symbols, not {}",
                self.code.name(),
                self.block_symbols
            ));
        }
        if self.window == 0 || self.window > 1024 {
            return Err(format!(
                "window must be 1..=1024 blocks, not {}",
                self.window
            ));
        }
        for (what, z) in [
            ("margin z", self.margin_z),
            ("idle margin z", self.idle_margin_z),
        ] {
            if !(-3.0..=6.0).contains(&z) {
                return Err(format!("{what} must be in [-3, 6], not {z}"));
            }
        }
        Ok(())
    }

    pub fn block_bytes(&self) -> usize {
        self.block_symbols as usize * usize::from(self.symbol_size)
    }

    /// Bytes for the next block when the sender paces at `rate` bytes/s
    /// over round trips of `rtt`: `block_airtime` of sending, but enough
    /// that the window of blocks spans two round trips (else the window,
    /// not the rate, would limit the sender), within one symbol and
    /// `block_bytes`.
    pub fn block_bytes_at(&self, rate: u64, rtt: std::time::Duration) -> usize {
        let Some(air) = self.block_airtime else {
            return self.block_bytes();
        };
        let by_air = rate as f64 * air.as_secs_f64();
        let by_window = rate as f64 * 2.0 * rtt.as_secs_f64() / f64::from(self.window);
        let symbol = usize::from(self.symbol_size);
        let symbols = (by_air.max(by_window) / symbol as f64).ceil() as usize;
        symbols.clamp(1, self.block_symbols as usize) * symbol
    }

    /// Symbols beyond K planned up front. RaptorQ decodes from K symbols
    /// about 99 % of the time; the rare block that needs one more is told
    /// by its status report, which costs less than one extra symbol on
    /// every block.
    fn overhead(&self) -> u32 {
        0
    }
}

/// Symbols needed in flight so that, with each arriving with probability
/// 1 − p, at least `need` arrive with margin `z` standard deviations.
pub fn symbols_for(need: u32, p: f64, z: f64) -> u32 {
    if need == 0 {
        return 0;
    }
    let p = p.clamp(0.0, 0.95);
    let q = 1.0 - p;
    let s = z * (p * q).sqrt();
    let x = (s + (s * s + 4.0 * q * f64::from(need)).sqrt()) / (2.0 * q);
    (x * x - 1e-9).ceil().max(f64::from(need)) as u32
}

#[derive(Clone)]
struct TxBlock {
    id: u32,
    encoder: Box<dyn BlockEncoder>,
    k: u32,
    len: u32,
    next_source: u32,
    next_repair: u32,
    in_flight: u32,
    acked: u32,
    useful_reported: u32,
    acked_at_report: u32,
    sent: u32,
    /// Symbols planned up front: K at the margin for the loss rate, as
    /// measured while the block's first pass goes out. A symbol sent after
    /// the first pass (other than an idle top-up) answers feedback: the
    /// block needed a second round.
    first_round: u32,
    second_round: bool,
    /// What acknowledgments and loss detection told of each source:
    /// `UNKNOWN` (in flight, or not sent), `ARRIVED` or `LOST`.
    fate: Vec<u8>,
    /// Sources `0..known_fate` all have a known fate.
    known_fate: u32,
    /// The lowest source declared lost (`u32::MAX`: none).
    lowest_lost: u32,
    /// Sources declared lost that no prefix repair answered yet: one
    /// prefix repair goes out per loss, never more (repairs beyond that
    /// are the margin for losses not yet seen, which may lie past the
    /// prefix, so they cover the whole block).
    unanswered: u32,
    /// Prefix repairs in flight: one lost is a loss to answer again.
    prefix_in_flight: Vec<u32>,
    /// Sources declared lost among `0..known_fate`, and the prefix repairs
    /// sent (and not lost) that answer them: every prefix repair covered
    /// at most today's `known_fate`, so each answers one loss there. With
    /// fates learnt out of order (several paths), an unanswered loss may
    /// lie past the prefix while the prefix's own losses are answered
    /// already: a prefix repair then would be useless.
    lost_in_prefix: u32,
    prefix_answered: u32,
    done: bool,
    /// Source symbols lost with a path that died: sent again as they were,
    /// before anything else of the block. Any repair would do for decoding,
    /// but the receiver reads a block in order: without its first sources
    /// back it waits for the whole block to decode, which after a failover
    /// to a slower path takes the whole block's time on that path.
    resend: Vec<u32>,
    /// Of `resend`, the sources that had most likely arrived when their
    /// path went down (sent more than its forward delay before): only
    /// their acknowledgments died with it. They give way to newer blocks'
    /// other lost sources, and the acknowledgment the receiver sends over
    /// the new path usually takes them off the list before their turn.
    probably_arrived: Vec<u32>,
    /// Sources lost with a dead path and sent again, whose first copy's
    /// fate is still unknown (its acknowledgment may yet come late).
    resent: Vec<u32>,
    /// Of those, the ones whose first copy was acknowledged late, after
    /// the copy went: the copy still in flight cannot be useful, so it is
    /// no longer counted in flight, and its own acknowledgment or loss,
    /// when it comes, changes nothing.
    redundant: Vec<u32>,
    /// The last `symbols_for` this block computed, with its inputs
    /// (missing, p, z): every packet scans the blocks in flight, and the
    /// inputs rarely change between two packets.
    target: std::cell::Cell<(u32, u64, u64, u32)>,
}

impl TxBlock {
    /// The fate of a copy of source `esi` that went again after its path
    /// died: true if the copy was already known redundant (nothing more
    /// to count). Otherwise its first copy's late acknowledgment, if any
    /// comes now, no longer concerns a copy in flight.
    fn settle_resent(&mut self, esi: u32) -> bool {
        if let Some(i) = self.redundant.iter().position(|&e| e == esi) {
            self.redundant.swap_remove(i);
            return true;
        }
        if let Some(i) = self.resent.iter().position(|&e| e == esi) {
            self.resent.swap_remove(i);
        }
        false
    }

    /// The next lost source to send again, while the block could lack
    /// every one of them (past that, some surely arrived, and repairs,
    /// always useful, finish it); `likely_lost_only`: skipping those that
    /// most likely arrived.
    fn next_resend(&self, overhead: u32, likely_lost_only: bool) -> Option<u32> {
        if self.resend.len() as u32 > self.missing(overhead) {
            return None;
        }
        self.resend
            .iter()
            .copied()
            .find(|e| !likely_lost_only || !self.probably_arrived.contains(e))
    }

    /// Symbols the receiver still lacks, as far as the sender knows.
    fn missing(&self, overhead: u32) -> u32 {
        let useful = self.useful_reported + (self.acked - self.acked_at_report);
        (self.k + overhead).saturating_sub(useful)
    }

    /// Records what the sender learnt of symbol `esi`.
    fn note_fate(&mut self, esi: u32, fate: u8) {
        let Some(f) = self.fate.get_mut(esi as usize) else {
            // A repair: a prefix repair lost leaves its loss unanswered.
            if let Some(i) = self.prefix_in_flight.iter().position(|&e| e == esi) {
                self.prefix_in_flight.swap_remove(i);
                self.unanswered += u32::from(fate == LOST);
                if fate == LOST {
                    self.prefix_answered = self.prefix_answered.saturating_sub(1);
                }
            }
            return;
        };
        let was = *f;
        *f = fate;
        if esi < self.known_fate {
            self.lost_in_prefix += u32::from(fate == LOST);
            self.lost_in_prefix = self.lost_in_prefix.saturating_sub(u32::from(was == LOST));
        }
        if fate == LOST {
            self.lowest_lost = self.lowest_lost.min(esi);
            self.unanswered += u32::from(was != LOST);
        } else if was == LOST {
            self.unanswered = self.unanswered.saturating_sub(1);
        }
        if was == LOST && fate != LOST && esi == self.lowest_lost {
            // Declared lost, then acknowledged after all (a source sent
            // again, or a late acknowledgment): the next lost one is lowest.
            self.lowest_lost = (esi..self.k)
                .find(|&i| self.fate[i as usize] == LOST)
                .unwrap_or(u32::MAX);
        }
        while self.known_fate < self.k && self.fate[self.known_fate as usize] != UNKNOWN {
            self.lost_in_prefix += u32::from(self.fate[self.known_fate as usize] == LOST);
            self.known_fate += 1;
        }
    }

    /// The sources a repair answering loss reports covers, when fewer than
    /// the block: `0..known_fate`, every one of which the sender knows
    /// arrived or was declared lost, and which holds a lost one. While the
    /// block is not decodable, such a repair is innovative exactly when a
    /// repair over the whole block would be (the received symbols cannot
    /// determine the lost sources of the prefix without all the block's
    /// missing rank), so it costs nothing; and it fills the prefix's gap
    /// as it arrives, where a repair over the whole block waits for the
    /// repairs of the losses behind it, declared later.
    fn reactive_prefix(&self) -> Option<u32> {
        (self.next_source >= self.k
            && self.unanswered > 0
            && self.lowest_lost < self.known_fate
            && self.lost_in_prefix > self.prefix_answered
            && self.known_fate < self.k)
            .then_some(self.known_fate)
    }

    /// Whether the block needs another symbol in flight: fewer than
    /// `symbols_for(missing)` are (the margin for loss rate `p`).
    fn wants_more(&self, overhead: u32, p: f64, z: f64) -> bool {
        if self.done {
            return false;
        }
        let missing = self.missing(overhead);
        if self.in_flight < missing {
            // symbols_for(missing, ..) >= missing: no need to compute it.
            return true;
        }
        let key = (missing, p.to_bits(), z.to_bits());
        let (m, pb, zb, cached) = self.target.get();
        let target = if (m, pb, zb) == key {
            cached
        } else {
            let t = symbols_for(missing, p, z);
            self.target.set((key.0, key.1, key.2, t));
            t
        };
        target > self.in_flight
    }
}

/// Counters for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    pub blocks: u64,
    pub source_symbols: u64,
    pub repair_symbols: u64,
    pub blocks_done: u64,
    /// Completed blocks that needed symbols beyond their up-front plan
    /// (losses above the margin, repaired on feedback).
    pub second_round_blocks: u64,
}

/// The next symbol to send: block id, symbol id, block length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextSymbol {
    pub block_id: u32,
    pub esi: u32,
    pub block_len: u32,
    /// The block's symbol length: the configured one, or less for a block
    /// shorter than a symbol (`start_block`).
    pub symbol_len: u16,
    /// A top-up sent because the sender was otherwise idle, not because
    /// the block was short of its margin.
    pub top_up: bool,
    /// `Some(n)`: a repair over source symbols `0..n` only, sent among
    /// the block's sources (a PREFIX_SYMBOL frame).
    pub prefix: Option<u32>,
}

#[derive(Clone)]
pub struct CodedSender {
    cfg: CodingConfig,
    blocks: VecDeque<TxBlock>,
    next_block_id: u32,
    peer_max_blocks: u64,
    /// Share of symbols lost, over about the last 200 (every loss the
    /// connection proved, drops at a full queue included).
    loss: f64,
    /// The paths' own reading of loss on the air, where their rate
    /// controllers tell it apart (`RateController::air_loss`): when
    /// known, it sizes the margins instead of `loss`.
    air_loss: Option<f64>,
    /// The peer takes prefix repairs (negotiated; RLNC only).
    prefix_repairs: bool,
    stats: SenderStats,
}

/// A source's fate as far as the sender knows (`TxBlock::fate`).
const UNKNOWN: u8 = 0;
const ARRIVED: u8 = 1;
const LOST: u8 = 2;

/// Weight of one packet in the loss-rate average (about the last 200).
const LOSS_EWMA: f64 = 1.0 / 200.0;

impl CodedSender {
    pub fn new(cfg: CodingConfig, peer_max_blocks: u64) -> CodedSender {
        CodedSender {
            cfg,
            blocks: VecDeque::new(),
            next_block_id: 0,
            peer_max_blocks,
            loss: 0.0,
            air_loss: None,
            prefix_repairs: false,
            stats: SenderStats::default(),
        }
    }

    pub fn config(&self) -> &CodingConfig {
        &self.cfg
    }

    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// The measured loss rate p̂ of data packets.
    pub fn loss_rate(&self) -> f64 {
        self.loss
    }

    /// One line per block in flight: id, K, sent, in flight, acked,
    /// reported useful (for traces and debugging stalls).
    pub fn describe_blocks(&self) -> String {
        self.blocks
            .iter()
            .map(|b| {
                format!(
                    "#{} k{} sent{} fl{} ack{} use{}",
                    b.id, b.k, b.sent, b.in_flight, b.acked, b.useful_reported
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub fn on_max_blocks(&mut self, max: u64) {
        self.peer_max_blocks = self.peer_max_blocks.max(max);
    }

    /// Whether a new block may be started (window and receiver credit).
    pub fn can_start_block(&self) -> bool {
        self.blocks.len() < self.cfg.window as usize
            && u64::from(self.next_block_id) < self.peer_max_blocks
    }

    /// Blocks sent but not yet reported decodable.
    pub fn blocks_in_flight(&self) -> usize {
        self.blocks.len()
    }

    /// Bytes of data in blocks the receiver does not hold yet: per block
    /// in flight, the symbols it still lacks (neither reported useful nor
    /// acknowledged since), as a share of the block's length.
    pub fn bytes_undelivered(&self) -> u64 {
        self.blocks
            .iter()
            .filter(|b| !b.done)
            .map(|b| {
                let useful = b.useful_reported + (b.acked - b.acked_at_report);
                let missing = b.k.saturating_sub(useful);
                u64::from(b.len) * u64::from(missing) / u64::from(b.k.max(1))
            })
            .sum()
    }

    /// Seals `data` (at most `block_bytes`) as the next block. Data
    /// shorter than a symbol is a block of one symbol that long: the
    /// receiver takes a symbol's length from its packet and the block's
    /// from K, so nothing on the wire changes, and a small message costs a
    /// small packet (and its repairs as little).
    pub fn start_block(&mut self, data: Vec<u8>) -> Result<u32, CodecError> {
        let id = self.next_block_id;
        let len = data.len() as u32;
        let symbol_size = match u16::try_from(data.len()) {
            Ok(short) if short < self.cfg.symbol_size => short.max(MIN_SYMBOL_SIZE),
            _ => self.cfg.symbol_size,
        };
        let encoder = new_encoder_owned(self.cfg.code, id, data, symbol_size)?;
        let k = encoder.info().source_symbols();
        let first_round = symbols_for(k + self.cfg.overhead(), self.loss, self.cfg.margin_z);
        self.blocks.push_back(TxBlock {
            id,
            encoder,
            k,
            len,
            next_source: 0,
            next_repair: k,
            in_flight: 0,
            acked: 0,
            useful_reported: 0,
            acked_at_report: 0,
            sent: 0,
            first_round,
            second_round: false,
            fate: vec![UNKNOWN; k as usize],
            known_fate: 0,
            lowest_lost: u32::MAX,
            unanswered: 0,
            prefix_in_flight: Vec::new(),
            lost_in_prefix: 0,
            prefix_answered: 0,
            resend: Vec::new(),
            probably_arrived: Vec::new(),
            resent: Vec::new(),
            redundant: Vec::new(),
            done: false,
            target: std::cell::Cell::new((u32::MAX, 0, 0, 0)),
        });
        self.next_block_id += 1;
        self.stats.blocks += 1;
        Ok(id)
    }

    /// Picks the next symbol, oldest block first; `None` when every block
    /// in flight has enough on its way (start a new block, or wait).
    pub fn next_symbol(&self) -> Option<NextSymbol> {
        self.symbol_with_margin(self.cfg.margin_z, false)
    }

    /// A symbol for when there is nothing else to send: a repair for the
    /// oldest block short of the idle margin.
    pub fn idle_symbol(&self) -> Option<NextSymbol> {
        self.symbol_with_margin(self.cfg.idle_margin_z.max(self.cfg.margin_z), true)
    }

    /// Tells the sender what the paths' controllers read as loss on the
    /// air (`None`: they cannot tell, use every proven loss).
    pub fn set_air_loss(&mut self, air_loss: Option<f64>) {
        self.air_loss = air_loss;
    }

    /// Whether repairs may go out among a block's sources, each over the
    /// sources sent before it: only to a peer that said it takes them, and
    /// only with RLNC (RaptorQ has no prefix repairs).
    pub fn set_prefix_repairs(&mut self, on: bool) {
        self.prefix_repairs = on && self.cfg.code == CodeKind::Rlnc;
    }

    /// The loss rate margins are sized for.
    fn margin_loss(&self) -> f64 {
        self.air_loss.unwrap_or(self.loss)
    }

    fn symbol_with_margin(&self, z: f64, top_up: bool) -> Option<NextSymbol> {
        let (h, p) = (self.cfg.overhead(), self.margin_loss());
        let symbol = |b: &TxBlock, esi: u32, prefix: Option<u32>| NextSymbol {
            block_id: b.id,
            esi,
            block_len: b.len,
            symbol_len: b.encoder.info().symbol_size,
            top_up,
            prefix,
        };
        // Oldest block first. After a path went down, a block whose next
        // symbol would be a source that most likely arrived (only its
        // acknowledgment died) gives way to newer blocks' sources that
        // were most likely lost, and to nothing else: the reader waits on
        // those, and the late acknowledgment over the new path usually
        // takes the others off the list before their turn. If the guess
        // was wrong, they wait for no more than the other lost sources.
        // With nothing of the kind on the list, this is plain
        // oldest-block-first.
        let mut deferred = None;
        for b in self.blocks.iter().filter(|b| b.wants_more(h, p, z)) {
            if let Some(esi) = b.next_resend(h, true) {
                return Some(symbol(b, esi, None));
            }
            if let Some(esi) = b.next_resend(h, false) {
                deferred = deferred.or(Some((b, esi)));
                continue;
            }
            if let Some((b, esi)) = deferred {
                return Some(symbol(b, esi, None));
            }
            let (esi, prefix) = if b.next_source < b.k {
                (b.next_source, None)
            } else if self.prefix_repairs && !top_up {
                (b.next_repair, b.reactive_prefix())
            } else {
                (b.next_repair, None)
            };
            return Some(symbol(b, esi, prefix));
        }
        deferred.map(|(b, esi)| symbol(b, esi, None))
    }

    /// Blocks are in id order but not contiguous (a newer block may finish
    /// before an older one), so look the id up.
    fn block_mut(&mut self, id: u32) -> Option<&mut TxBlock> {
        let i = self.blocks.binary_search_by_key(&id, |b| b.id).ok()?;
        self.blocks.get_mut(i)
    }

    /// Encodes symbol `esi` of block `block_id` into `out` and counts it as
    /// in flight.
    pub fn emit(&mut self, s: NextSymbol, out: &mut [u8]) -> Result<(), CodecError> {
        let (overhead, loss, z) = (self.cfg.overhead(), self.margin_loss(), self.cfg.margin_z);
        let Some(b) = self.block_mut(s.block_id) else {
            return Err(CodecError::InvalidParams(
                "block no longer in flight".into(),
            ));
        };
        match s.prefix {
            Some(covered) => {
                b.encoder.write_prefix_symbol(s.esi, covered, out)?;
                b.unanswered = b.unanswered.saturating_sub(1);
                b.prefix_answered += 1;
                b.prefix_in_flight.push(s.esi);
            }
            None => b.encoder.write_symbol(s.esi, out)?,
        }
        if let Some(i) = b.resend.iter().position(|&e| e == s.esi) {
            b.resend.remove(i);
            b.probably_arrived.retain(|&e| e != s.esi);
            b.resent.push(s.esi);
        }
        let source = s.esi < b.k;
        if source {
            b.next_source = b.next_source.max(s.esi + 1);
        } else {
            b.next_repair = b.next_repair.max(s.esi + 1);
        }
        if b.sent < b.first_round {
            b.first_round = b.first_round.max(symbols_for(b.k + overhead, loss, z));
        } else if !s.top_up {
            b.second_round = true;
        }
        b.in_flight += 1;
        b.sent += 1;
        if source {
            self.stats.source_symbols += 1;
        } else {
            self.stats.repair_symbols += 1;
        }
        Ok(())
    }

    pub fn on_acked(&mut self, block_id: u32, esi: u32) {
        self.loss *= 1.0 - LOSS_EWMA;
        if let Some(b) = self.block_mut(block_id) {
            if b.settle_resent(esi) {
                return;
            }
            b.in_flight = b.in_flight.saturating_sub(1);
            b.acked += 1;
            b.note_fate(esi, ARRIVED);
        }
    }

    pub fn on_lost(&mut self, block_id: u32, esi: u32) {
        self.loss = self.loss * (1.0 - LOSS_EWMA) + LOSS_EWMA;
        if let Some(b) = self.block_mut(block_id) {
            if b.settle_resent(esi) {
                return;
            }
            b.in_flight = b.in_flight.saturating_sub(1);
            b.note_fate(esi, LOST);
        }
    }

    /// A symbol declared lost was acknowledged after all. If it was lost
    /// with its path and waits to go again, it arrived and need not. (A
    /// dying path's packets are all declared lost, but those that had
    /// just left arrive, and their acknowledgments come late over another
    /// path; counted as missing, the block looked short of more sources
    /// than it lacked, and was finished with repairs, which the in-order
    /// reader cannot use before the whole block decodes.)
    ///
    /// If it went again already, the copy in flight is redundant: counted
    /// in flight, it made a block whose last sources were really lost
    /// look as if it had all it lacked on the way, so the last lost
    /// source waited behind the next block's sources until the redundant
    /// copies were acknowledged, and the in-order reader with it (a 90 ms
    /// stall after a failover to LTE, multipath grid, window 36 seed 2).
    pub fn on_late_ack(&mut self, block_id: u32, esi: u32) {
        if let Some(b) = self.block_mut(block_id) {
            if let Some(i) = b.resend.iter().position(|&e| e == esi) {
                b.resend.remove(i);
                b.probably_arrived.retain(|&e| e != esi);
                b.acked += 1;
                b.note_fate(esi, ARRIVED);
            } else if let Some(i) = b.resent.iter().position(|&e| e == esi) {
                b.resent.swap_remove(i);
                b.redundant.push(esi);
                b.in_flight = b.in_flight.saturating_sub(1);
                b.acked += 1;
                b.note_fate(esi, ARRIVED);
            }
        }
    }

    /// A symbol lost because its path died (not to the link's random loss:
    /// the loss rate that sizes the margins is left alone). A source
    /// symbol is sent again first; one that `probably_arrived` (sent more
    /// than the path's forward delay before it went down), after the
    /// others.
    pub fn on_path_lost(&mut self, block_id: u32, esi: u32, probably_arrived: bool) {
        if let Some(b) = self.block_mut(block_id) {
            if b.settle_resent(esi) {
                return;
            }
            b.in_flight = b.in_flight.saturating_sub(1);
            b.note_fate(esi, LOST);
            if esi < b.k && !b.resend.contains(&esi) {
                let at = b.resend.partition_point(|&e| e < esi);
                b.resend.insert(at, esi);
                if probably_arrived {
                    b.probably_arrived.push(esi);
                }
            }
        }
    }

    /// Takes the receiver's BLOCK_STATUS (after the ACK of the same packet,
    /// so `acked` and `useful` describe the same moment); returns the ids of
    /// the blocks it reports decodable for the first time.
    pub fn on_status(&mut self, status: &BlockStatus<'_>) -> Vec<u32> {
        for b in self.blocks.iter_mut() {
            if b.id < status.done_below {
                b.done = true;
            }
        }
        for e in status.entries() {
            if let Some(b) = self.block_mut(e.block_id) {
                b.done |= e.done;
                b.useful_reported = e.useful.min(b.k);
                b.acked_at_report = b.acked;
            }
        }
        let stats = &mut self.stats;
        let mut done = Vec::new();
        self.blocks.retain(|b| {
            if b.done {
                stats.blocks_done += 1;
                stats.second_round_blocks += u64::from(b.second_round);
                done.push(b.id);
            }
            !b.done
        });
        done
    }
}

#[cfg(test)]
mod tests;

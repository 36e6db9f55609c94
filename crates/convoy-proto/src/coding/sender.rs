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
        if self.symbol_size < 16 {
            return Err(format!(
                "symbol size {} is below 16 bytes",
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
    done: bool,
    /// Source symbols lost with a path that died: sent again as they were,
    /// before anything else of the block. Any repair would do for decoding,
    /// but the receiver reads a block in order: without its first sources
    /// back it waits for the whole block to decode, which after a failover
    /// to a slower path takes the whole block's time on that path.
    resend: Vec<u32>,
    /// The last `symbols_for` this block computed, with its inputs
    /// (missing, p, z): every packet scans the blocks in flight, and the
    /// inputs rarely change between two packets.
    target: std::cell::Cell<(u32, u64, u64, u32)>,
}

impl TxBlock {
    /// Symbols the receiver still lacks, as far as the sender knows.
    fn missing(&self, overhead: u32) -> u32 {
        let useful = self.useful_reported + (self.acked - self.acked_at_report);
        (self.k + overhead).saturating_sub(useful)
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
    /// A top-up sent because the sender was otherwise idle, not because
    /// the block was short of its margin.
    pub top_up: bool,
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
    stats: SenderStats,
}

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

    /// Seals `data` (at most `block_bytes`) as the next block.
    pub fn start_block(&mut self, data: Vec<u8>) -> Result<u32, CodecError> {
        let id = self.next_block_id;
        let len = data.len() as u32;
        let encoder = new_encoder_owned(self.cfg.code, id, data, self.cfg.symbol_size)?;
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
            resend: Vec::new(),
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

    /// The loss rate margins are sized for.
    fn margin_loss(&self) -> f64 {
        self.air_loss.unwrap_or(self.loss)
    }

    fn symbol_with_margin(&self, z: f64, top_up: bool) -> Option<NextSymbol> {
        let (h, p) = (self.cfg.overhead(), self.margin_loss());
        self.blocks
            .iter()
            .find(|b| b.wants_more(h, p, z))
            .map(|b| NextSymbol {
                block_id: b.id,
                // Lost sources go again while they could all be missing; once
                // the block lacks fewer symbols than that, some of them
                // surely arrived, and repairs (always useful) finish it.
                esi: if let Some(&esi) = b
                    .resend
                    .first()
                    .filter(|_| b.resend.len() as u32 <= b.missing(h))
                {
                    esi
                } else if b.next_source < b.k {
                    b.next_source
                } else {
                    b.next_repair
                },
                block_len: b.len,
                top_up,
            })
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
        b.encoder.write_symbol(s.esi, out)?;
        b.resend.retain(|&e| e != s.esi);
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

    pub fn on_acked(&mut self, block_id: u32) {
        self.loss *= 1.0 - LOSS_EWMA;
        if let Some(b) = self.block_mut(block_id) {
            b.in_flight = b.in_flight.saturating_sub(1);
            b.acked += 1;
        }
    }

    pub fn on_lost(&mut self, block_id: u32) {
        self.loss = self.loss * (1.0 - LOSS_EWMA) + LOSS_EWMA;
        if let Some(b) = self.block_mut(block_id) {
            b.in_flight = b.in_flight.saturating_sub(1);
        }
    }

    /// A symbol declared lost was acknowledged after all. If it was lost
    /// with its path and waits to go again, it arrived and need not. (A
    /// dying path's packets are all declared lost, but those that had
    /// just left arrive, and their acknowledgments come late over another
    /// path; counted as missing, the block looked short of more sources
    /// than it lacked, and was finished with repairs, which the in-order
    /// reader cannot use before the whole block decodes.)
    pub fn on_late_ack(&mut self, block_id: u32, esi: u32) {
        if let Some(b) = self.block_mut(block_id) {
            if let Some(i) = b.resend.iter().position(|&e| e == esi) {
                b.resend.remove(i);
                b.acked += 1;
            }
        }
    }

    /// A symbol lost because its path died (not to the link's random loss:
    /// the loss rate that sizes the margins is left alone). A source
    /// symbol is sent again first.
    pub fn on_path_lost(&mut self, block_id: u32, esi: u32) {
        if let Some(b) = self.block_mut(block_id) {
            b.in_flight = b.in_flight.saturating_sub(1);
            if esi < b.k && !b.resend.contains(&esi) {
                let at = b.resend.partition_point(|&e| e < esi);
                b.resend.insert(at, esi);
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
mod tests {
    use super::*;

    #[test]
    fn symbols_for_matches_expectation_with_margin() {
        assert_eq!(symbols_for(10, 0.0, 1.0), 10);
        assert_eq!(symbols_for(0, 0.5, 1.0), 0);
        let n = symbols_for(100, 0.3, 1.0);
        let (mean, sd) = (f64::from(n) * 0.7, (f64::from(n) * 0.21).sqrt());
        assert!(mean - sd >= 100.0 && mean - sd < 101.0, "n = {n}");
        assert!(symbols_for(100, 0.3, 2.0) > n);
    }

    #[test]
    fn a_controller_that_tells_air_loss_from_drops_sizes_the_margins() {
        let mut s = sender();
        s.start_block(vec![7u8; 400]).unwrap();
        // Every loss counts into the sender's own rate (a burst of drops
        // at a full queue, here)...
        for _ in 0..100 {
            s.on_lost(0);
        }
        assert!(s.loss_rate() > 0.3);
        let inflated = symbols_for(4, s.margin_loss(), 1.0);
        assert!(inflated > 6, "{inflated}");
        // ...but a path's controller that tells loss on the air from drops
        // at a full queue and timeouts sizes the margins with its reading.
        s.set_air_loss(Some(0.0));
        assert_eq!(symbols_for(4, s.margin_loss(), 1.0), 4);
        s.set_air_loss(None);
        assert_eq!(symbols_for(4, s.margin_loss(), 1.0), inflated);
    }

    fn sender() -> CodedSender {
        let cfg = CodingConfig {
            code: CodeKind::Rlnc,
            symbol_size: 100,
            block_symbols: 4,
            window: 2,
            margin_z: 1.0,
            idle_margin_z: 2.0,
            block_airtime: None,
        };
        CodedSender::new(cfg, 10)
    }

    /// A sender with one block of four source symbols, all sent.
    fn one_block_sent() -> (CodedSender, [u8; 100]) {
        let mut s = sender();
        s.start_block(vec![1u8; 400]).unwrap();
        let mut out = [0u8; 100];
        for _ in 0..4 {
            let n = s.next_symbol().unwrap();
            s.emit(n, &mut out).unwrap();
        }
        (s, out)
    }

    #[test]
    fn sources_lost_with_a_path_go_again_first_while_they_could_all_be_missing() {
        let (mut s, mut out) = one_block_sent();
        let before = s.loss_rate();
        // Sources 1 and 3 died with their path (2 and 0 were acknowledged).
        s.on_acked(0);
        s.on_acked(0);
        s.on_path_lost(0, 3);
        s.on_path_lost(0, 1);
        assert_eq!(s.loss_rate(), before, "a dead path is not link loss");
        let n = s.next_symbol().unwrap();
        assert_eq!(n.esi, 1, "the first lost source first");
        s.emit(n, &mut out).unwrap();
        let n = s.next_symbol().unwrap();
        assert_eq!(n.esi, 3);
        s.emit(n, &mut out).unwrap();
        assert_eq!(s.next_symbol(), None, "both on their way again");
    }

    #[test]
    fn resends_give_way_to_repairs_once_the_block_lacks_fewer_symbols() {
        let (mut s, _) = one_block_sent();
        // Three acknowledged, then all four declared lost with the path:
        // the block lacks one symbol, so of four candidates at most one is
        // missing and a repair (always useful) is the better bet.
        for _ in 0..3 {
            s.on_acked(0);
        }
        for esi in 0..4 {
            s.on_path_lost(0, esi);
        }
        let n = s.next_symbol().unwrap();
        assert!(n.esi >= 4, "a repair, not source {}", n.esi);
    }

    #[test]
    fn a_late_acknowledgment_takes_a_source_off_the_resend_list() {
        let (mut s, mut out) = one_block_sent();
        // Source 0 was acknowledged; 1, 2 and 3 were in flight on a path
        // that died, but 1 and 2 had got through: their acknowledgments
        // arrive late, over another path.
        s.on_acked(0);
        for esi in 1..4 {
            s.on_path_lost(0, esi);
        }
        s.on_late_ack(0, 1);
        s.on_late_ack(0, 2);
        // Only 3 goes again, as a source the in-order reader can use at
        // once (three candidates for one missing symbol would have been
        // a repair).
        let n = s.next_symbol().unwrap();
        assert_eq!(n.esi, 3);
        s.emit(n, &mut out).unwrap();
        assert_eq!(s.next_symbol(), None);
        // A late acknowledgment of a symbol no longer waiting changes
        // nothing (it was counted when it went again).
        s.on_late_ack(0, 3);
        assert_eq!(s.next_symbol(), None);
    }

    #[test]
    fn sends_sources_then_waits_then_repairs_after_loss() {
        let mut s = sender();
        s.start_block(vec![1u8; 400]).unwrap();
        let mut out = [0u8; 100];
        for esi in 0..4 {
            let n = s.next_symbol().unwrap();
            assert_eq!((n.block_id, n.esi), (0, esi));
            s.emit(n, &mut out).unwrap();
        }
        assert_eq!(
            s.next_symbol(),
            None,
            "no loss seen: four in flight suffice"
        );
        s.on_lost(0);
        let n = s.next_symbol().unwrap();
        assert_eq!(n.esi, 4, "a fresh repair id, not a resend");
    }

    fn report_done_below(s: &mut CodedSender, done_below: u32) {
        let mut buf = [0u8; 16];
        let mut w = crate::wire::cursor::Writer::new(&mut buf);
        crate::wire::frame::write_block_status(&mut w, done_below, &[]).unwrap();
        let n = w.len();
        match crate::wire::Frames::new(&buf[..n]).next() {
            Some(Ok(crate::wire::Frame::BlockStatus(status))) => {
                s.on_status(&status);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_idle_sender_tops_blocks_up_to_the_idle_margin() {
        let mut s = sender();
        let mut out = [0u8; 100];
        s.start_block(vec![1u8; 400]).unwrap();
        for _ in 0..20 {
            s.on_lost(0);
        }
        while let Some(n) = s.next_symbol() {
            s.emit(n, &mut out).unwrap();
        }
        let planned = s.blocks[0].sent;
        let extra = s.idle_symbol().expect("the idle margin (z 2) is above z 1");
        assert_eq!((extra.block_id, extra.esi), (0, planned));
        s.emit(extra, &mut out).unwrap();
        while let Some(n) = s.idle_symbol() {
            s.emit(n, &mut out).unwrap();
        }
        assert!(s.blocks[0].sent > planned);
        assert_eq!(s.next_symbol(), None, "the lean margin is long satisfied");
    }

    #[test]
    fn blocks_that_needed_more_than_their_plan_are_counted() {
        let mut s = sender();
        let mut out = [0u8; 100];
        s.start_block(vec![1u8; 400]).unwrap();
        while let Some(n) = s.next_symbol() {
            s.emit(n, &mut out).unwrap();
        }
        s.start_block(vec![2u8; 400]).unwrap();
        while let Some(n) = s.next_symbol() {
            s.emit(n, &mut out).unwrap();
        }
        // Block 0 decodes from its plan; block 1 loses one symbol and gets
        // a repair beyond its plan.
        report_done_below(&mut s, 1);
        s.on_lost(1);
        let n = s.next_symbol().unwrap();
        assert_eq!(n.block_id, 1);
        s.emit(n, &mut out).unwrap();
        report_done_below(&mut s, 2);
        let st = s.stats();
        assert_eq!((st.blocks_done, st.second_round_blocks), (2, 1));
    }

    #[test]
    fn repair_of_an_older_block_goes_before_newer_sources() {
        let mut s = sender();
        let mut out = [0u8; 100];
        s.start_block(vec![1u8; 400]).unwrap();
        while let Some(n) = s.next_symbol() {
            s.emit(n, &mut out).unwrap();
        }
        s.start_block(vec![2u8; 400]).unwrap();
        assert!(!s.can_start_block(), "window of 2");
        s.on_lost(0);
        assert_eq!(s.next_symbol().unwrap().block_id, 0);
    }
}

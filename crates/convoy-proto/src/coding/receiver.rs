//! Collects symbols per block, says as soon as a block is decodable, and
//! decodes later (RCDP's early feedback: the status frame leaves before the
//! decode runs).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use convoy_codec::{new_decoder, BlockDecoder, BlockInfo, CodeKind, CodecError, Pushed};

use crate::wire::{BlockProgress, Symbol};

/// What became of one received symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    Useful,
    /// Duplicate, dependent, or for a block already decodable.
    Redundant,
    /// The block just became decodable with this symbol.
    Completed,
    /// Outside the window we granted, or inconsistent with the block.
    Refused,
}

#[derive(Clone)]
struct RxBlock {
    decoder: Box<dyn BlockDecoder>,
    k: u32,
    decodable: bool,
    /// Source symbols 0..next_source arrived, in order.
    next_source: u32,
    /// Source symbols that arrived ahead of `next_source` (kept only with
    /// `keep_early`), handed out in order once the gap before them fills.
    early: BTreeMap<u32, Vec<u8>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    pub useful: u64,
    pub redundant: u64,
    pub refused: u64,
    pub blocks_decoded: u64,
}

#[derive(Clone)]
pub struct CodedReceiver {
    code: CodeKind,
    window: u32,
    blocks: BTreeMap<u32, RxBlock>,
    /// Every block below is decodable.
    done_below: u32,
    /// Decodable blocks at or above `done_below`.
    done_above: BTreeSet<u32>,
    /// Decodable blocks waiting for their decode, in order.
    ready: VecDeque<u32>,
    stats: ReceiverStats,
    /// Keep sources that arrive ahead of their turn. On several paths the
    /// slow path's sources always arrive after the fast path's later ones;
    /// without this a block would be read only once it decodes, so the
    /// application would get its data a block at a time. On one path a
    /// source arrives out of turn only after a loss, which no source fills
    /// (repair symbols do), so there it would only cost memory.
    keep_early: bool,
    /// The largest block and symbol this receiver takes: the peer names
    /// both in every symbol, and a decoder allocates K × symbol size as
    /// the block's first symbol arrives, so without these one symbol of a
    /// maximal RaptorQ block cost about 100 MB.
    max_block_symbols: u32,
    max_symbol_size: u16,
    /// Decoders beyond this many bytes are not started: the block's
    /// symbols are refused, as beyond the window, until older blocks
    /// decode.
    max_decoder_bytes: usize,
    /// Bytes the held decoders allocated (K × symbol size each), and the
    /// sources held in `pending`.
    decoder_bytes: usize,
    /// Source symbols of blocks whose K has not arrived yet (a source
    /// frame leaves K to the block's first source and its repairs): they
    /// join the block's decoder once one of those arrives.
    pending: BTreeMap<u32, BTreeMap<u32, Vec<u8>>>,
}

/// What a receiver takes of the blocks its peer chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiveLimits {
    pub max_block_symbols: u32,
    pub max_symbol_size: u16,
    pub max_decoder_bytes: usize,
}

impl ReceiveLimits {
    /// No limit beyond the code's own (simulations and tests).
    pub const UNLIMITED: ReceiveLimits = ReceiveLimits {
        max_block_symbols: u32::MAX,
        max_symbol_size: u16::MAX,
        max_decoder_bytes: usize::MAX,
    };
}

impl CodedReceiver {
    pub fn new(code: CodeKind, window: u32) -> CodedReceiver {
        CodedReceiver {
            code,
            window,
            blocks: BTreeMap::new(),
            done_below: 0,
            done_above: BTreeSet::new(),
            ready: VecDeque::new(),
            keep_early: false,
            stats: ReceiverStats::default(),
            max_block_symbols: u32::MAX,
            max_symbol_size: u16::MAX,
            max_decoder_bytes: usize::MAX,
            decoder_bytes: 0,
            pending: BTreeMap::new(),
        }
    }

    pub fn set_limits(&mut self, limits: ReceiveLimits) {
        self.max_block_symbols = limits.max_block_symbols;
        self.max_symbol_size = limits.max_symbol_size;
        self.max_decoder_bytes = limits.max_decoder_bytes;
    }

    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }

    fn is_done(&self, id: u32) -> bool {
        id < self.done_below || self.done_above.contains(&id)
    }

    /// The highest block id (exclusive) the peer may start: a window above
    /// the oldest block we still hold, so memory stays bounded even while
    /// decodes wait.
    pub fn max_blocks(&self) -> u64 {
        let oldest = [self.blocks.keys().next(), self.pending.keys().next()]
            .into_iter()
            .flatten()
            .copied()
            .fold(self.done_below, u32::min);
        u64::from(oldest) + u64::from(self.window)
    }

    pub fn on_symbol(&mut self, s: &Symbol<'_>) -> Received {
        let outcome = self.take_symbol(s);
        match outcome {
            Received::Useful | Received::Completed => self.stats.useful += 1,
            Received::Redundant => self.stats.redundant += 1,
            Received::Refused => self.stats.refused += 1,
        }
        outcome
    }

    fn take_symbol(&mut self, s: &Symbol<'_>) -> Received {
        if self.is_done(s.block_id) {
            return Received::Redundant;
        }
        if u64::from(s.block_id) >= self.max_blocks() {
            return Received::Refused;
        }
        let Ok(symbol_size) = u16::try_from(s.payload.len()) else {
            return Received::Refused;
        };
        if symbol_size > self.max_symbol_size {
            return Received::Refused;
        }
        if !self.blocks.contains_key(&s.block_id) {
            let Some(block_len) = s.block_len else {
                return self.hold_pending(s, symbol_size);
            };
            if let Err(refused) = self.start_block(s.block_id, block_len, symbol_size) {
                return refused;
            }
        }
        let block = self.blocks.get_mut(&s.block_id).expect("started above");
        let info = block.decoder.info();
        if s.block_len.is_some_and(|len| len != info.data_len)
            || usize::from(info.symbol_size) != s.payload.len()
            || (s.block_len.is_none() && s.esi >= block.k)
        {
            // A frame without K is a source's: an id past K is garbage.
            return Received::Refused;
        }
        let pushed = match s.prefix {
            Some(covered) => block
                .decoder
                .push_prefix(s.block_id, s.esi, covered, s.payload),
            None => block.decoder.push(s.block_id, s.esi, s.payload),
        };
        let outcome = match pushed {
            Err(_) => return Received::Refused,
            Ok(Pushed::Redundant) => Received::Redundant,
            Ok(Pushed::Useful) => {
                if s.esi == block.next_source {
                    block.next_source += 1;
                } else if self.keep_early
                    && self.code != CodeKind::Rlnc
                    && s.esi > block.next_source
                    && s.esi < block.k
                {
                    // (RLNC's decoder holds the sources it took, and
                    // `take_early` reads them there.)
                    block.early.insert(s.esi, s.payload.to_vec());
                }
                Received::Useful
            }
        };
        // The sources held for K may have completed the block before this
        // symbol did.
        if block.decoder.useful_symbols() as u32 >= block.k && block.decoder.is_decodable() {
            block.decodable = true;
            self.mark_done(s.block_id);
            return Received::Completed;
        }
        outcome
    }

    /// Starts block `id` once its K is known, and gives its decoder the
    /// sources held for it. They are not read in order here: `take_early`
    /// hands them out (a source the reader already took is skipped there).
    fn start_block(&mut self, id: u32, block_len: u32, symbol_size: u16) -> Result<(), Received> {
        let info =
            BlockInfo::new(self.code, id, block_len, symbol_size).map_err(|_| Received::Refused)?;
        if info.source_symbols() > self.max_block_symbols {
            return Err(Received::Refused);
        }
        let held = self.pending.remove(&id).unwrap_or_default();
        let held_bytes: usize = held.values().map(Vec::len).sum();
        self.decoder_bytes -= held_bytes;
        let cost = decoder_cost(&info);
        let decoder = (self.decoder_bytes.saturating_add(cost) <= self.max_decoder_bytes)
            .then(|| new_decoder(info).ok())
            .flatten();
        let Some(mut decoder) = decoder else {
            self.pending.insert(id, held);
            self.decoder_bytes += held_bytes;
            return Err(Received::Refused);
        };
        self.decoder_bytes += cost;
        let k = info.source_symbols();
        let mut early = BTreeMap::new();
        for (esi, payload) in held {
            if esi >= k || payload.len() != usize::from(symbol_size) {
                continue;
            }
            let useful = matches!(decoder.push(id, esi, &payload), Ok(Pushed::Useful));
            if useful && self.code != CodeKind::Rlnc {
                early.insert(esi, payload);
            }
        }
        self.blocks.insert(
            id,
            RxBlock {
                k,
                decoder,
                decodable: false,
                next_source: 0,
                early,
            },
        );
        Ok(())
    }

    /// Holds a source symbol of a block whose K has not arrived, within
    /// the same bounds as a decoder: at most `max_block_symbols` sources a
    /// block, their bytes counted against `max_decoder_bytes`.
    fn hold_pending(&mut self, s: &Symbol<'_>, symbol_size: u16) -> Received {
        let size = usize::from(symbol_size);
        let budget_left = self.decoder_bytes.saturating_add(size) <= self.max_decoder_bytes;
        let held = self.pending.entry(s.block_id).or_default();
        if held.contains_key(&s.esi) {
            return Received::Redundant;
        }
        let same_size = held.values().next().is_none_or(|p| p.len() == size);
        if !budget_left || !same_size || held.len() as u64 >= u64::from(self.max_block_symbols) {
            if held.is_empty() {
                self.pending.remove(&s.block_id);
            }
            return Received::Refused;
        }
        held.insert(s.esi, s.payload.to_vec());
        self.decoder_bytes += size;
        Received::Useful
    }

    fn mark_done(&mut self, id: u32) {
        self.done_above.insert(id);
        self.ready.push_back(id);
        while self.done_above.remove(&self.done_below) {
            self.done_below += 1;
        }
    }

    /// Progress of every block not yet decodable, plus decodable ones above
    /// the contiguous prefix, for a BLOCK_STATUS frame.
    pub fn status(&self) -> (u32, Vec<BlockProgress>) {
        let mut entries: Vec<BlockProgress> = self
            .blocks
            .range(self.done_below..)
            .filter(|(_, b)| !b.decodable)
            .map(|(&id, b)| {
                let useful = b.decoder.useful_symbols() as u32;
                BlockProgress {
                    block_id: id,
                    // Not decodable yet: the sender must see that at least one more is needed.
                    useful: useful.min(b.k.saturating_sub(1)),
                    done: false,
                }
            })
            .chain(self.pending.iter().map(|(&id, held)| BlockProgress {
                block_id: id,
                useful: held.len() as u32,
                done: false,
            }))
            .chain(self.done_above.iter().map(|&id| BlockProgress {
                block_id: id,
                useful: 0,
                done: true,
            }))
            .collect();
        entries.sort_by_key(|e| e.block_id);
        (self.done_below, entries)
    }

    pub fn set_keep_early(&mut self, keep: bool) {
        self.keep_early = keep;
    }

    /// The next source symbol of a block in order, if it is known now
    /// (it arrived early, or elimination solved it from a repair): its
    /// payload, and the block's next source moves on. RLNC's decoder holds
    /// every source it knows on its own, so a gap filled by a repair over
    /// a prefix releases the sources behind it at once, without waiting
    /// for the block to decode.
    pub fn take_early(&mut self, block_id: u32) -> Option<(u32, Vec<u8>)> {
        let b = self.blocks.get_mut(&block_id)?;
        let esi = b.next_source;
        if esi >= b.k {
            return None;
        }
        let payload = match b.early.remove(&esi) {
            Some(payload) => payload,
            None => b.decoder.source_symbol(esi)?.to_vec(),
        };
        b.next_source += 1;
        Some((esi, payload))
    }

    /// Whether `s` is the next source symbol of its block in order: the
    /// block's bytes up to the end of it are then known as it arrives.
    pub fn is_next_source(&self, s: &Symbol<'_>) -> bool {
        !self.is_done(s.block_id)
            && self
                .blocks
                .get(&s.block_id)
                .map_or(s.esi == 0, |b| s.esi == b.next_source)
    }

    /// The oldest decodable block waiting for its decode: (id, length).
    pub fn next_ready(&self) -> Option<(u32, u32)> {
        let id = *self.ready.front()?;
        Some((id, self.blocks[&id].decoder.info().data_len))
    }

    /// Decodes the oldest decodable block and returns (id, its bytes); with
    /// `skip`, forgets it undecoded (its bytes were all read in order).
    pub fn decode_next(&mut self, skip: bool) -> Option<Result<(u32, Vec<u8>), CodecError>> {
        let id = self.ready.pop_front()?;
        let mut block = self.blocks.remove(&id).expect("ready blocks are held");
        self.decoder_bytes -= decoder_cost(block.decoder.info());
        self.stats.blocks_decoded += 1;
        if skip {
            return Some(Ok((id, Vec::new())));
        }
        Some(block.decoder.data().map(|d| (id, d.to_vec())))
    }

    /// Bytes the held decoders allocated (K × symbol size each, what both
    /// codes' decoders allocate for a block), plus early sources.
    pub fn allocated_bytes(&self) -> usize {
        self.decoder_bytes
            + self
                .blocks
                .values()
                .map(|b| b.early.len() * usize::from(b.decoder.info().symbol_size))
                .sum::<usize>()
    }

    /// Bytes held in undecoded blocks (approximate: symbols × size), and
    /// sources held for their block's K.
    pub fn buffered_bytes(&self) -> usize {
        self.blocks
            .values()
            .map(|b| b.decoder.useful_symbols() * usize::from(b.decoder.info().symbol_size))
            .chain(
                self.pending
                    .values()
                    .flat_map(|held| held.values().map(Vec::len)),
            )
            .sum()
    }
}

/// What a block's decoder allocates: K × symbol size.
fn decoder_cost(info: &BlockInfo) -> usize {
    info.source_symbols() as usize * usize::from(info.symbol_size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use convoy_codec::new_encoder;

    #[test]
    fn sources_that_arrive_early_are_handed_out_once_the_gap_fills() {
        let data: Vec<u8> = (0..250u32).map(|i| i as u8).collect();
        for code in [CodeKind::Rlnc, CodeKind::RaptorQ] {
            let enc = new_encoder(code, 0, &data, 50).unwrap();
            let symbol = |esi: u32| {
                let mut out = vec![0u8; 50];
                enc.write_symbol(esi, &mut out).unwrap();
                out
            };
            for keep in [false, true] {
                let mut rx = CodedReceiver::new(code, 4);
                rx.set_keep_early(keep);
                for esi in [0u32, 2, 3, 1] {
                    let payload = symbol(esi);
                    let s = Symbol {
                        block_id: 0,
                        esi,
                        block_len: Some(250),
                        prefix: None,
                        payload: &payload,
                    };
                    let in_order = rx.is_next_source(&s);
                    assert_eq!(in_order, esi < 2 && (esi == 0 || esi == 1));
                    rx.on_symbol(&s);
                }
                let early: Vec<u32> = std::iter::from_fn(|| rx.take_early(0))
                    .map(|(esi, payload)| {
                        assert_eq!(payload, symbol(esi));
                        esi
                    })
                    .collect();
                // RLNC's decoder holds every source it knows, so it hands
                // them out either way; RaptorQ's only with `keep_early`.
                let want: Vec<u32> = if keep || code == CodeKind::Rlnc {
                    vec![2, 3]
                } else {
                    vec![]
                };
                assert_eq!(early, want, "{code:?} keep_early {keep}");
            }
        }
    }

    /// Block 0 of 250 bytes in 50-byte symbols (K = 5), coded by `code`.
    fn five_sources(code: CodeKind) -> (Vec<u8>, impl Fn(u32) -> Vec<u8>) {
        let data: Vec<u8> = (0..250u32).map(|i| (i * 3 + 1) as u8).collect();
        let enc = new_encoder(code, 0, &data, 50).unwrap();
        let symbol = move |esi: u32| {
            let mut out = vec![0u8; 50];
            enc.write_symbol(esi, &mut out).unwrap();
            out
        };
        (data, symbol)
    }

    fn without_k(esi: u32, payload: &[u8]) -> Symbol<'_> {
        Symbol {
            block_id: 0,
            esi,
            block_len: None,
            prefix: None,
            payload,
        }
    }

    #[test]
    fn sources_without_k_are_held_until_a_repair_names_it() {
        for code in [CodeKind::Rlnc, CodeKind::RaptorQ] {
            let (data, symbol) = five_sources(code);
            let mut rx = CodedReceiver::new(code, 4);
            // Source 0, the one that names K, is lost.
            for esi in 1..5 {
                let payload = symbol(esi);
                assert!(!rx.is_next_source(&without_k(esi, &payload)));
                assert_eq!(rx.on_symbol(&without_k(esi, &payload)), Received::Useful);
            }
            let again = symbol(2);
            assert_eq!(rx.on_symbol(&without_k(2, &again)), Received::Redundant);
            assert_eq!(rx.take_early(0), None, "no block without its K");
            assert_eq!(
                rx.status().1,
                [BlockProgress {
                    block_id: 0,
                    useful: 4,
                    done: false
                }],
                "held sources count as progress, so the sender sends one repair, not five"
            );
            assert_eq!(rx.allocated_bytes(), 4 * 50);
            let repair = symbol(5);
            let s = Symbol {
                block_len: Some(250),
                ..without_k(5, &repair)
            };
            assert_eq!(rx.on_symbol(&s), Received::Completed, "{code:?}");
            assert_eq!(rx.decode_next(false).unwrap().unwrap(), (0, data.clone()));
            assert_eq!(rx.allocated_bytes(), 0, "{code:?}");
        }
    }

    #[test]
    fn a_first_source_arriving_late_releases_those_held_behind_it() {
        for code in [CodeKind::Rlnc, CodeKind::RaptorQ] {
            let (_, symbol) = five_sources(code);
            let mut rx = CodedReceiver::new(code, 4);
            for esi in [2u32, 1, 3] {
                rx.on_symbol(&without_k(esi, &symbol(esi)));
            }
            let first = symbol(0);
            let s = Symbol {
                block_len: Some(250),
                ..without_k(0, &first)
            };
            assert!(rx.is_next_source(&s));
            assert_eq!(rx.on_symbol(&s), Received::Useful);
            let released: Vec<u32> = std::iter::from_fn(|| rx.take_early(0))
                .map(|(esi, payload)| {
                    assert_eq!(payload, symbol(esi));
                    esi
                })
                .collect();
            assert_eq!(released, [1, 2, 3], "{code:?}");
        }
    }

    #[test]
    fn a_source_without_k_past_its_block_is_refused() {
        let (_, symbol) = five_sources(CodeKind::Rlnc);
        let mut rx = CodedReceiver::new(CodeKind::Rlnc, 4);
        // Held before K is known, dropped once it is.
        rx.on_symbol(&without_k(9, &symbol(1)));
        let first = symbol(0);
        let s = Symbol {
            block_len: Some(250),
            ..without_k(0, &first)
        };
        assert_eq!(rx.on_symbol(&s), Received::Useful);
        assert_eq!(rx.status().1[0].useful, 1);
        // Once K is known, refused at once.
        assert_eq!(rx.on_symbol(&without_k(7, &symbol(2))), Received::Refused);
    }

    #[test]
    fn a_prefix_repair_releases_the_gap_and_the_sources_behind_it_before_the_block_decodes() {
        let data: Vec<u8> = (0..250u32).map(|i| (i * 7) as u8).collect();
        let enc = new_encoder(CodeKind::Rlnc, 0, &data, 50).unwrap();
        let mut rx = CodedReceiver::new(CodeKind::Rlnc, 4);
        let mut out = [0u8; 50];
        // Source 1 is lost; 0, 2 and 3 arrive; 4 is not sent yet.
        for esi in [0u32, 2, 3] {
            enc.write_symbol(esi, &mut out).unwrap();
            let s = Symbol {
                block_id: 0,
                esi,
                block_len: Some(250),
                prefix: None,
                payload: &out,
            };
            rx.on_symbol(&s);
        }
        assert_eq!(rx.take_early(0), None, "source 1 is missing");
        enc.write_prefix_symbol(5, 4, &mut out).unwrap();
        let s = Symbol {
            block_id: 0,
            esi: 5,
            block_len: Some(250),
            prefix: Some(4),
            payload: &out,
        };
        assert_eq!(rx.on_symbol(&s), Received::Useful);
        let released: Vec<u32> = std::iter::from_fn(|| rx.take_early(0))
            .map(|(esi, payload)| {
                assert_eq!(payload, data[esi as usize * 50..][..50]);
                esi
            })
            .collect();
        assert_eq!(
            released,
            vec![1, 2, 3],
            "all before source 4, which is not in"
        );
        assert_eq!(rx.status().0, 0, "the block is not decodable yet");
    }

    #[test]
    fn completes_reports_then_decodes_out_of_order_blocks() {
        for code in [CodeKind::Rlnc, CodeKind::RaptorQ] {
            let mut rx = CodedReceiver::new(code, 4);
            let data: Vec<Vec<u8>> = (0..2u8)
                .map(|b| (0..250).map(|i| i as u8 ^ b).collect())
                .collect();
            for id in [1u32, 0] {
                let enc = new_encoder(code, id, &data[id as usize], 50).unwrap();
                let mut out = [0u8; 50];
                let mut completed = false;
                // Skip source symbol 2: repair symbols make up for it.
                for esi in (0..12).filter(|&e| e != 2) {
                    enc.write_symbol(esi, &mut out).unwrap();
                    let s = Symbol {
                        block_id: id,
                        esi,
                        block_len: Some(250),
                        prefix: None,
                        payload: &out,
                    };
                    if rx.on_symbol(&s) == Received::Completed {
                        completed = true;
                        break;
                    }
                }
                assert!(completed, "{code:?} block {id}");
            }
            let (done_below, entries) = rx.status();
            assert_eq!((done_below, entries.len()), (2, 0));
            let mut got: Vec<(u32, Vec<u8>)> = std::iter::from_fn(|| rx.decode_next(false))
                .map(Result::unwrap)
                .collect();
            got.sort();
            assert_eq!(got, vec![(0, data[0].clone()), (1, data[1].clone())]);
        }
    }

    #[test]
    fn refuses_blocks_outside_the_window_and_inconsistent_symbols() {
        let mut rx = CodedReceiver::new(CodeKind::Rlnc, 4);
        let s = Symbol {
            block_id: 4,
            esi: 0,
            block_len: Some(10),
            prefix: None,
            payload: &[0; 10],
        };
        assert_eq!(rx.on_symbol(&s), Received::Refused);
        let s = Symbol {
            block_id: 0,
            esi: 0,
            block_len: Some(100),
            prefix: None,
            payload: &[0; 10],
        };
        assert_eq!(rx.on_symbol(&s), Received::Useful);
        let s = Symbol {
            block_id: 0,
            esi: 1,
            block_len: Some(90),
            prefix: None,
            payload: &[0; 10],
        };
        assert_eq!(rx.on_symbol(&s), Received::Refused, "block length changed");
        let (_, entries) = rx.status();
        assert_eq!(
            entries,
            vec![BlockProgress {
                block_id: 0,
                useful: 1,
                done: false
            }]
        );
    }
}

#[cfg(test)]
mod hostile_tests {
    //! Blocks whose size the peer chose to hurt the receiver.
    use super::*;

    fn limited(code: CodeKind) -> CodedReceiver {
        let mut rx = CodedReceiver::new(code, 32);
        rx.set_limits(ReceiveLimits {
            max_block_symbols: 256,
            max_symbol_size: 1472,
            max_decoder_bytes: 4 << 20,
        });
        rx
    }

    #[test]
    fn a_maximal_raptorq_block_is_refused_before_any_allocation() {
        let mut rx = limited(CodeKind::RaptorQ);
        let payload = [0u8; 1400];
        for block_id in 0..32 {
            let s = Symbol {
                block_id,
                esi: 0,
                block_len: Some(56_403 * 1400),
                prefix: None,
                payload: &payload,
            };
            assert_eq!(rx.on_symbol(&s), Received::Refused);
        }
        assert_eq!(rx.allocated_bytes(), 0);
    }

    #[test]
    fn symbols_larger_than_a_datagram_are_refused() {
        let mut rx = limited(CodeKind::Rlnc);
        let payload = vec![0u8; 60_000];
        let s = Symbol {
            block_id: 0,
            esi: 0,
            block_len: Some(255 * 60_000),
            prefix: None,
            payload: &payload,
        };
        assert_eq!(rx.on_symbol(&s), Received::Refused);
        assert_eq!(rx.allocated_bytes(), 0);
    }

    #[test]
    fn sources_held_for_their_k_stop_at_the_decoders_budget() {
        let mut rx = limited(CodeKind::RaptorQ);
        let payload = [0u8; 1400];
        let mut taken = 0usize;
        // Never naming K: a peer that would have the receiver hold
        // symbols for ever, across every block of the window.
        for block_id in 0..32 {
            for esi in 1..200 {
                let s = Symbol {
                    block_id,
                    esi,
                    block_len: None,
                    prefix: None,
                    payload: &payload,
                };
                if rx.on_symbol(&s) == Received::Useful {
                    taken += 1;
                }
            }
        }
        assert_eq!(taken, (4 << 20) / 1400);
        assert!(rx.allocated_bytes() <= 4 << 20);
        // Past the block size it takes, even within budget.
        let mut rx = limited(CodeKind::Rlnc);
        let held = (1..=300)
            .filter(|&esi| {
                let s = Symbol {
                    block_id: 0,
                    esi,
                    block_len: None,
                    prefix: None,
                    payload: &payload[..10],
                };
                rx.on_symbol(&s) == Received::Useful
            })
            .count();
        assert_eq!(held, 256);
    }

    #[test]
    fn decoders_stop_at_their_budget_and_start_again_as_blocks_decode() {
        let mut rx = limited(CodeKind::Rlnc);
        let payload = [0u8; 1400];
        let full = 255 * 1400;
        let mut taken = 0;
        for block_id in 0..32 {
            let s = Symbol {
                block_id,
                esi: 1,
                block_len: Some(full),
                prefix: None,
                payload: &payload,
            };
            if rx.on_symbol(&s) == Received::Useful {
                taken += 1;
            }
        }
        // 4 MB of 357 kB decoders: 11 of them.
        assert_eq!(taken, (4 << 20) / (255 * 1400));
        assert!(rx.allocated_bytes() <= 4 << 20);
    }
}

#[cfg(test)]
mod props;

//! RaptorQ (RFC 6330) from the `raptorq` crate, behind the block-code trait.
//!
//! The crate panics on parameters it does not accept, so every value is
//! checked here first. One block is one RFC 6330 source block with a single
//! sub-block; the block id travels in convoy's own header, so the crate's
//! 8-bit source block number is always 0.

use std::cell::OnceCell;
use std::collections::HashSet;

use raptorq::{
    EncodingPacket, ObjectTransmissionInformation, PayloadId, SourceBlockDecoder,
    SourceBlockEncoder,
};

use crate::block::{BlockDecoder, BlockEncoder, BlockInfo, CodeKind, Pushed};
use crate::error::CodecError;

/// RFC 6330's K'max: source symbols one block may hold.
pub const MAX_SOURCE_SYMBOLS: u32 = 56_403;
/// Encoding symbol ids are 24-bit.
pub const MAX_ESI: u32 = (1 << 24) - 1;
/// Symbols a decoder keeps beyond K before it stops storing more. With K + h
/// distinct symbols RaptorQ fails with probability about 256^-(h+1), so a
/// block not decodable from K + 64 is not going to be; the cap bounds the
/// memory a peer can make one block hold, whatever ids it sends.
pub const MAX_EXTRA_SYMBOLS: usize = 64;

fn check_esi(esi: u32) -> Result<(), CodecError> {
    if esi > MAX_ESI {
        return Err(CodecError::IndexOutOfRange {
            index: esi,
            limit: MAX_ESI + 1,
        });
    }
    Ok(())
}

/// Transmission parameters for a block of `k` symbols of `symbol_size` bytes.
fn oti(k: u32, symbol_size: u16) -> ObjectTransmissionInformation {
    ObjectTransmissionInformation::new(u64::from(k) * u64::from(symbol_size), symbol_size, 1, 1, 1)
}

#[derive(Clone)]
pub struct RaptorQEncoder {
    info: BlockInfo,
    /// The block, zero-padded to K symbols: source symbol i is slice i.
    padded: Vec<u8>,
    /// The crate's encoder, built on the first repair symbol. It computes
    /// all intermediate symbols up front (a full encode, ~400-550 MB/s
    /// here), which source symbols never need: without loss a block is
    /// sent without it, and building it for every block was a third of
    /// the sender's CPU at 1 Gbit/s on loopback.
    inner: OnceCell<SourceBlockEncoder>,
}

impl RaptorQEncoder {
    pub fn new(info: BlockInfo, mut padded: Vec<u8>) -> Result<Self, CodecError> {
        info.validate_for(CodeKind::RaptorQ)?;
        info.check_data(&padded)?;
        let k = info.source_symbols();
        padded.resize(k as usize * usize::from(info.symbol_size), 0);
        Ok(RaptorQEncoder {
            info,
            padded,
            inner: OnceCell::new(),
        })
    }
}

impl BlockEncoder for RaptorQEncoder {
    fn info(&self) -> &BlockInfo {
        &self.info
    }

    fn boxed_clone(&self) -> Box<dyn BlockEncoder> {
        Box::new(self.clone())
    }

    fn write_symbol(&self, esi: u32, out: &mut [u8]) -> Result<(), CodecError> {
        self.info.check_symbol_len(out.len())?;
        check_esi(esi)?;
        let k = self.info.source_symbols();
        let s = usize::from(self.info.symbol_size);
        if esi < k {
            let i = esi as usize;
            out.copy_from_slice(&self.padded[i * s..(i + 1) * s]);
        } else {
            let inner = self.inner.get_or_init(|| {
                SourceBlockEncoder::new(0, &oti(k, self.info.symbol_size), &self.padded)
            });
            let packet = inner.repair_packets(esi - k, 1);
            out.copy_from_slice(packet[0].data());
        }
        Ok(())
    }
}

#[derive(Clone)]
pub struct RaptorQDecoder {
    info: BlockInfo,
    seen: HashSet<u32>,
    /// Source symbols, each in its place (allocated on the first one): with
    /// all K of them the block is its own data, no decode and no copy.
    source: Vec<u8>,
    source_count: u32,
    /// Repair symbols, for the decode when some source symbols are missing.
    repairs: Vec<EncodingPacket>,
    /// Decodability depends only on which ids arrived, not on their bytes, so
    /// it is settled on a twin block of 1-byte symbols: the same constraint
    /// matrix, solved without the cost of moving real payloads. The real
    /// decode solves the matrix once more, so an early answer costs one extra
    /// symbol-free solve per new batch of ids it is asked about.
    shadow: SourceBlockDecoder,
    shadow_pending: Vec<u32>,
    decodable: bool,
    data: Option<Vec<u8>>,
}

impl RaptorQDecoder {
    pub fn new(info: BlockInfo) -> Result<Self, CodecError> {
        info.validate_for(CodeKind::RaptorQ)?;
        let k = info.source_symbols();
        let shadow = SourceBlockDecoder::new(0, &oti(k, 1), u64::from(k));
        Ok(RaptorQDecoder {
            info,
            seen: HashSet::new(),
            source: Vec::new(),
            source_count: 0,
            repairs: Vec::new(),
            shadow,
            shadow_pending: Vec::new(),
            decodable: false,
            data: None,
        })
    }

    fn all_sources(&self) -> bool {
        self.source_count == self.info.source_symbols()
    }
}

impl BlockDecoder for RaptorQDecoder {
    fn info(&self) -> &BlockInfo {
        &self.info
    }

    fn boxed_clone(&self) -> Box<dyn BlockDecoder> {
        Box::new(self.clone())
    }

    fn push(&mut self, block_id: u32, esi: u32, payload: &[u8]) -> Result<Pushed, CodecError> {
        self.info.check_block(block_id)?;
        self.info.check_symbol_len(payload.len())?;
        check_esi(esi)?;
        let k = self.info.source_symbols();
        let cap = k as usize + MAX_EXTRA_SYMBOLS;
        if self.decodable || self.seen.len() >= cap || !self.seen.insert(esi) {
            return Ok(Pushed::Redundant);
        }
        if esi < k {
            let s = usize::from(self.info.symbol_size);
            if self.source.is_empty() {
                self.source = vec![0; k as usize * s];
            }
            let i = esi as usize;
            self.source[i * s..(i + 1) * s].copy_from_slice(payload);
            self.source_count += 1;
        } else {
            self.repairs.push(EncodingPacket::new(
                PayloadId::new(0, esi),
                payload.to_vec(),
            ));
        }
        self.shadow_pending.push(esi);
        Ok(Pushed::Useful)
    }

    fn useful_symbols(&self) -> usize {
        self.seen.len()
    }

    fn is_decodable(&mut self) -> bool {
        if self.decodable {
            return true;
        }
        if self.all_sources() {
            self.decodable = true;
            return true;
        }
        // The answer changes only when new ids arrive; asking again without
        // them would re-solve the same system.
        if self.seen.len() < self.info.source_symbols() as usize || self.shadow_pending.is_empty() {
            return false;
        }
        let pending = self
            .shadow_pending
            .drain(..)
            .map(|esi| EncodingPacket::new(PayloadId::new(0, esi), vec![0]));
        self.decodable = self.shadow.decode(pending).is_some();
        self.decodable
    }

    fn data(&mut self) -> Result<&[u8], CodecError> {
        if self.data.is_none() {
            let not_yet = CodecError::NotDecodable {
                have: self.seen.len(),
                needed: self.info.source_symbols() as usize,
            };
            if !self.is_decodable() {
                return Err(not_yet);
            }
            if self.all_sources() {
                let mut data = std::mem::take(&mut self.source);
                data.truncate(self.info.data_len as usize);
                self.data = Some(data);
                self.repairs = Vec::new();
                return Ok(self.data.as_deref().expect("set above"));
            }
            let k = self.info.source_symbols();
            let s = usize::from(self.info.symbol_size);
            let mut decoder = SourceBlockDecoder::new(
                0,
                &oti(k, self.info.symbol_size),
                u64::from(k) * u64::from(self.info.symbol_size),
            );
            let sources = self
                .seen
                .iter()
                .filter(|&&esi| esi < k)
                .map(|&esi| {
                    let i = esi as usize;
                    EncodingPacket::new(
                        PayloadId::new(0, esi),
                        self.source[i * s..(i + 1) * s].to_vec(),
                    )
                })
                .collect::<Vec<_>>();
            // Cloned rather than moved: should the real decode ever disagree
            // with the twin, the symbols are still here for the next try.
            let mut data = decoder
                .decode(sources.into_iter().chain(self.repairs.iter().cloned()))
                .ok_or(not_yet)?;
            data.truncate(self.info.data_len as usize);
            self.data = Some(data);
            self.source = Vec::new();
            self.repairs = Vec::new();
        }
        Ok(self.data.as_deref().expect("set above"))
    }
}

//! The decoder's input path as one function of arbitrary bytes, shared by the
//! cargo-fuzz target (fuzz/) and a property test that runs it on every
//! `cargo test`, so the fuzz harness cannot rot unnoticed.

use crate::block::{new_decoder, BlockInfo, CodeKind};
use crate::rlnc::{Decoder, Generation, Recoder, SymbolKind};

/// Reads block parameters and then a stream of symbols from `input` and feeds
/// them to decoders, which must answer every one with a value or a typed
/// error, never a panic. Layout: code (1 byte), symbol size (1), data length
/// (2, LE), block id (1); then records of flags (1: low 6 bits block id,
/// 0x40 ask "decodable?", 0x80 explicit RLNC coefficients from the payload's
/// head; both: a prefix repair over as many sources as the esi's top byte
/// says), esi (4, LE), payload length (1), payload.
pub fn decoder_input(input: &[u8]) {
    let Some((head, mut rest)) = input.split_first_chunk::<5>() else {
        return;
    };
    let code = if head[0] & 1 == 0 {
        CodeKind::Rlnc
    } else {
        CodeKind::RaptorQ
    };
    let symbol_size = u16::from(head[1]);
    let data_len = u32::from(u16::from_le_bytes([head[2], head[3]]));
    let block_id = u32::from(head[4] & 0x3f);
    // RaptorQ's solver is cubic in the worst case: keep blocks small so the
    // fuzzer explores inputs instead of waiting on one big decode.
    let info = match BlockInfo::new(code, block_id, data_len, symbol_size) {
        Ok(info) if info.source_symbols() <= 64 => info,
        _ => return,
    };
    let mut decoder = new_decoder(info).expect("validated parameters");
    let generation = Generation::new(info.source_symbols().min(255) as usize, symbol_size.into());
    let mut raw = generation.ok().map(|g| (Decoder::new(g), Recoder::new(g)));

    while let Some((record, tail)) = rest.split_first_chunk::<6>() {
        let esi = u32::from_le_bytes([record[1], record[2], record[3], record[4]]);
        let len = usize::from(record[5]).min(tail.len());
        let (payload, tail) = tail.split_at(len);
        rest = tail;
        let prefix = record[0] & 0xc0 == 0xc0;
        let covered = u32::from(record[4]);
        let id = u32::from(record[0] & 0x3f);
        let _ = if prefix {
            decoder.push_prefix(id, esi, covered, payload)
        } else {
            decoder.push(id, esi, payload)
        };
        for i in 0..info.source_symbols() {
            if let Some(s) = decoder.source_symbol(i) {
                assert_eq!(s.len(), usize::from(symbol_size));
            }
        }
        if let Some((dec, rec)) = raw.as_mut() {
            // The explicit form reads its coefficients from the payload's head.
            let g = dec.generation().size();
            let kind = if prefix {
                SymbolKind::Prefix { seed: esi, covered }
            } else if record[0] & 0x80 != 0 && payload.len() >= g {
                SymbolKind::Explicit(&payload[..g])
            } else {
                SymbolKind::from_esi(block_id, esi, g)
            };
            let _ = dec.push(kind, payload);
            let _ = rec.push(kind, payload);
        }
        if record[0] & 0x40 != 0 && !prefix {
            let _ = decoder.is_decodable();
        }
    }
    if decoder.is_decodable() {
        let data = decoder.data().expect("decodable blocks decode");
        assert_eq!(data.len(), info.data_len as usize);
    }
    if let Some((_, rec)) = raw {
        let g = rec.generation();
        let mut coeffs = vec![0; g.size()];
        let mut payload = vec![0; g.symbol_size()];
        let _ = rec.recode(1, &mut coeffs, &mut payload);
    }
}

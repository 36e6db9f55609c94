//! RLNC encoder: hands out source symbols as they are and coded symbols on
//! demand, each from nothing but its seed or coefficient vector.

use super::{combine_into, Generation, SymbolKind};
use crate::error::CodecError;

/// Encodes one generation.
#[derive(Clone, Debug)]
pub struct Encoder {
    generation: Generation,
    /// g·s bytes: the data, zero-padded to whole symbols.
    source: Vec<u8>,
    data_len: usize,
}

impl Encoder {
    /// Cuts `data` into `symbol_size`-byte source symbols, zero-padding the
    /// last; the generation size is however many symbols that makes (≤ 255).
    pub fn new(data: &[u8], symbol_size: usize) -> Result<Self, CodecError> {
        Encoder::from_vec(data.to_vec(), symbol_size)
    }

    /// [`Encoder::new`] on data it may keep: the block's bytes become the
    /// source symbols where they lie, only the padding is written.
    pub fn from_vec(mut data: Vec<u8>, symbol_size: usize) -> Result<Self, CodecError> {
        let generation = Generation::for_data(data.len(), symbol_size)?;
        let data_len = data.len();
        data.resize(generation.size() * symbol_size, 0);
        Ok(Encoder {
            generation,
            source: data,
            data_len,
        })
    }

    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// Bytes of real data (the last symbol's padding excluded).
    pub fn data_len(&self) -> usize {
        self.data_len
    }

    /// Source symbol `i`, borrowed: sending it costs no coding work.
    pub fn systematic(&self, i: usize) -> Result<&[u8], CodecError> {
        let g = self.generation.size();
        if i >= g {
            return Err(CodecError::IndexOutOfRange {
                index: u32::try_from(i).unwrap_or(u32::MAX),
                limit: g as u32,
            });
        }
        let s = self.generation.symbol_size();
        Ok(&self.source[i * s..(i + 1) * s])
    }

    /// Writes the symbol `kind` names into `out` (`symbol_size` bytes).
    pub fn write(&self, kind: SymbolKind<'_>, out: &mut [u8]) -> Result<(), CodecError> {
        self.generation.check_payload(out)?;
        self.generation.check_symbol(&kind)?;
        match kind {
            SymbolKind::Systematic(i) => out.copy_from_slice(self.systematic(i as usize)?),
            SymbolKind::Seeded(_) | SymbolKind::Prefix { .. } => {
                let mut coeffs = [0u8; super::MAX_GENERATION];
                let coeffs = &mut coeffs[..self.generation.size()];
                super::expand_kind(kind, coeffs);
                self.combine(coeffs, out);
            }
            SymbolKind::Explicit(coeffs) => self.combine(coeffs, out),
        }
        Ok(())
    }

    fn combine(&self, coeffs: &[u8], out: &mut [u8]) {
        out.fill(0);
        combine_into(out, coeffs.iter().copied().zip(0..), &self.source);
    }
}

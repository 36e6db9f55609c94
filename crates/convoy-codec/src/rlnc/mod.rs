//! Random linear network coding over GF(2^8).
//!
//! A generation is g ≤ 255 source symbols of s bytes. Symbols i < g go out
//! as they are (systematic); every other symbol is a random linear
//! combination of all g, whose coefficient vector either expands from a
//! 32-bit seed ([`SymbolKind::Seeded`], 4 bytes on the wire) or travels in
//! full ([`SymbolKind::Explicit`], g bytes), which is what a [`Recoder`]
//! emits because its combinations of combinations have no seed. Any g
//! linearly independent symbols decode the generation.

mod basis;
mod block_code;
pub mod coefficients;
mod decoder;
mod encoder;
mod recoder;

pub use block_code::{RlncBlockDecoder, RlncBlockEncoder};
pub use decoder::{Decoder, DecoderStats};
pub use encoder::Encoder;
pub use recoder::Recoder;

use crate::error::CodecError;

/// Largest generation: coefficient vectors index symbols with one byte.
pub const MAX_GENERATION: usize = 255;

/// How one symbol was formed from the generation's source symbols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind<'a> {
    /// Source symbol `i` itself.
    Systematic(u32),
    /// The combination whose coefficients [`coefficients::expand`] gives.
    Seeded(u32),
    /// An explicit coefficient vector, one entry per source symbol.
    Explicit(&'a [u8]),
    /// A combination of source symbols `0..covered` only (1 ≤ covered ≤
    /// g): the first `covered` coefficients [`coefficients::expand`] gives
    /// over `covered` entries, zero beyond. A sender can code the prefix of
    /// a generation it has sent so far, and the receiver solves a lost
    /// source of that prefix as soon as the repair and the rest of the
    /// prefix are in, without waiting for the generation's later symbols.
    Prefix { seed: u32, covered: u32 },
}

impl SymbolKind<'_> {
    /// The symbol encoding symbol id `esi` of block `block_id` names: ids
    /// below g are systematic, the rest coded with seed
    /// [`block_seed`]`(block_id, esi)`.
    pub fn from_esi(block_id: u32, esi: u32, g: usize) -> SymbolKind<'static> {
        if (esi as usize) < g {
            SymbolKind::Systematic(esi)
        } else {
            SymbolKind::Seeded(block_seed(block_id, esi))
        }
    }
}

/// The coefficient seed of repair id `esi` in block `block_id`. Offsetting
/// the seed space per block keeps one block's unlucky (dependent) set of
/// repair ids from recurring in every block, so overhead stays independent
/// from block to block. A bijection in `esi` for each block, and free: the
/// block id is in the header anyway.
pub fn block_seed(block_id: u32, esi: u32) -> u32 {
    esi.wrapping_add(block_id.wrapping_mul(0x9E37_79B9))
}

/// Writes the coefficient vector of a seeded or prefix symbol into `out`
/// (g entries); systematic and explicit symbols are not expanded here.
pub(crate) fn expand_kind(kind: SymbolKind<'_>, out: &mut [u8]) {
    match kind {
        SymbolKind::Seeded(seed) => coefficients::expand(seed, out),
        SymbolKind::Prefix { seed, covered } => {
            let covered = covered as usize;
            coefficients::expand(seed, &mut out[..covered]);
            out[covered..].fill(0);
        }
        SymbolKind::Systematic(_) | SymbolKind::Explicit(_) => {
            unreachable!("only seeded symbols expand")
        }
    }
}

/// Shape of a generation: g symbols of s bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Generation {
    size: usize,
    symbol_size: usize,
}

impl Generation {
    pub fn new(size: usize, symbol_size: usize) -> Result<Self, CodecError> {
        if size == 0 || size > MAX_GENERATION {
            return Err(CodecError::InvalidParams(format!(
                "generation size {size}, expected 1..={MAX_GENERATION}"
            )));
        }
        if symbol_size == 0 {
            return Err(CodecError::InvalidParams("symbol size is 0".into()));
        }
        Ok(Generation { size, symbol_size })
    }

    /// The generation that carries `data_len` bytes in `symbol_size`-byte symbols.
    pub fn for_data(data_len: usize, symbol_size: usize) -> Result<Self, CodecError> {
        if symbol_size == 0 {
            return Err(CodecError::InvalidParams("symbol size is 0".into()));
        }
        Generation::new(data_len.div_ceil(symbol_size), symbol_size)
    }

    /// g, the number of source symbols.
    pub fn size(&self) -> usize {
        self.size
    }

    /// s, bytes per symbol.
    pub fn symbol_size(&self) -> usize {
        self.symbol_size
    }

    fn check_payload(&self, payload: &[u8]) -> Result<(), CodecError> {
        if payload.len() != self.symbol_size {
            return Err(CodecError::WrongSymbolLength {
                expected: self.symbol_size,
                got: payload.len(),
            });
        }
        Ok(())
    }

    fn check_symbol(&self, symbol: &SymbolKind<'_>) -> Result<(), CodecError> {
        match *symbol {
            SymbolKind::Systematic(i) if i as usize >= self.size => {
                Err(CodecError::IndexOutOfRange {
                    index: i,
                    limit: self.size as u32,
                })
            }
            SymbolKind::Explicit(c) if c.len() != self.size => {
                Err(CodecError::WrongCoefficientCount {
                    expected: self.size,
                    got: c.len(),
                })
            }
            SymbolKind::Prefix { covered, .. } if covered == 0 || covered as usize > self.size => {
                Err(CodecError::IndexOutOfRange {
                    index: covered,
                    limit: self.size as u32 + 1,
                })
            }
            _ => Ok(()),
        }
    }
}

/// `dst ^= Σ coeffs[k] · srcs[k]` in batches the multi-source kernel takes,
/// so `dst` is loaded and stored once per batch instead of once per source.
fn combine_into(dst: &mut [u8], srcs: impl Iterator<Item = (u8, usize)>, rows: &[u8]) {
    const BATCH: usize = 32;
    let s = dst.len();
    let mut batch_srcs: [&[u8]; BATCH] = [&[]; BATCH];
    let mut batch_coeffs = [0u8; BATCH];
    let mut n = 0;
    for (coeff, row) in srcs {
        if coeff == 0 {
            continue;
        }
        batch_srcs[n] = &rows[row * s..(row + 1) * s];
        batch_coeffs[n] = coeff;
        n += 1;
        if n == BATCH {
            crate::gf::mul_add_multi(dst, &batch_srcs, &batch_coeffs);
            n = 0;
        }
    }
    if n > 0 {
        crate::gf::mul_add_multi(dst, &batch_srcs[..n], &batch_coeffs[..n]);
    }
}

//! One trait for every block code, so the transport picks RLNC or RaptorQ by
//! configuration and the rest of the stack never names a concrete code.
//!
//! A block is `data_len` bytes cut into `K = ceil(data_len / symbol_size)`
//! source symbols, the last one zero-padded. Every encoding symbol is named by
//! a 32-bit encoding symbol id (ESI): ids below K are the source symbols
//! themselves (both codes are systematic), ids from K up are repair symbols.
//! For RLNC a repair symbol's id and the block id give the seed its
//! coefficient vector expands from ([`crate::rlnc::block_seed`]); for RaptorQ
//! it is the RFC 6330 ESI.

use crate::error::CodecError;
use crate::{raptor, rlnc};

/// Which erasure code a block uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CodeKind {
    /// Random linear network coding over GF(2^8): at most 255 source symbols,
    /// decodes with exactly K innovative symbols, and relays can recode.
    Rlnc,
    /// RaptorQ (RFC 6330): up to 56,403 source symbols, linear-time coding,
    /// decodes from K + h symbols with probability about 1 - 1/256^(h+1).
    RaptorQ,
}

impl CodeKind {
    /// Largest number of source symbols one block of this code can hold.
    pub fn max_source_symbols(self) -> u32 {
        match self {
            CodeKind::Rlnc => rlnc::MAX_GENERATION as u32,
            CodeKind::RaptorQ => raptor::MAX_SOURCE_SYMBOLS,
        }
    }

    /// Largest encoding symbol id the code can name.
    pub fn max_esi(self) -> u32 {
        match self {
            CodeKind::Rlnc => u32::MAX,
            CodeKind::RaptorQ => raptor::MAX_ESI,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CodeKind::Rlnc => "rlnc",
            CodeKind::RaptorQ => "raptorq",
        }
    }
}

impl std::str::FromStr for CodeKind {
    type Err = CodecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "rlnc" => Ok(CodeKind::Rlnc),
            "raptorq" | "rq" => Ok(CodeKind::RaptorQ),
            other => Err(CodecError::InvalidParams(format!(
                "unknown code {other:?}, expected rlnc or raptorq"
            ))),
        }
    }
}

/// Everything a decoder must know about a block; these are the fields a data
/// packet header carries (block id, block size, symbol size, code).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockInfo {
    pub code: CodeKind,
    pub block_id: u32,
    pub data_len: u32,
    pub symbol_size: u16,
}

impl BlockInfo {
    /// Checks that the parameters describe a block this code can carry.
    pub fn new(
        code: CodeKind,
        block_id: u32,
        data_len: u32,
        symbol_size: u16,
    ) -> Result<Self, CodecError> {
        let info = BlockInfo {
            code,
            block_id,
            data_len,
            symbol_size,
        };
        info.validate()?;
        Ok(info)
    }

    /// Number of source symbols K.
    pub fn source_symbols(&self) -> u32 {
        if self.symbol_size == 0 {
            return 0;
        }
        self.data_len.div_ceil(u32::from(self.symbol_size))
    }

    pub fn validate(&self) -> Result<(), CodecError> {
        if self.symbol_size == 0 {
            return Err(CodecError::InvalidParams("symbol size is 0".into()));
        }
        if self.data_len == 0 {
            return Err(CodecError::InvalidParams("block holds no data".into()));
        }
        let k = self.source_symbols();
        let max = self.code.max_source_symbols();
        if k > max {
            return Err(CodecError::InvalidParams(format!(
                "{} bytes in {}-byte symbols is {k} source symbols; {} allows at most {max}",
                self.data_len,
                self.symbol_size,
                self.code.name()
            )));
        }
        Ok(())
    }

    /// Validates the parameters for an encoder or decoder of `code`.
    pub(crate) fn validate_for(&self, code: CodeKind) -> Result<(), CodecError> {
        self.validate()?;
        if self.code != code {
            return Err(CodecError::InvalidParams(format!(
                "{} block given to the {} code",
                self.code.name(),
                code.name()
            )));
        }
        Ok(())
    }

    /// Checks that `data` is the block these parameters describe.
    pub(crate) fn check_data(&self, data: &[u8]) -> Result<(), CodecError> {
        if data.len() != self.data_len as usize {
            return Err(CodecError::InvalidParams(format!(
                "block info says {} bytes, data has {}",
                self.data_len,
                data.len()
            )));
        }
        Ok(())
    }

    pub(crate) fn check_symbol_len(&self, len: usize) -> Result<(), CodecError> {
        let expected = usize::from(self.symbol_size);
        if len != expected {
            return Err(CodecError::WrongSymbolLength { expected, got: len });
        }
        Ok(())
    }

    pub(crate) fn check_block(&self, block_id: u32) -> Result<(), CodecError> {
        if block_id != self.block_id {
            return Err(CodecError::BlockMismatch {
                expected: self.block_id,
                got: block_id,
            });
        }
        Ok(())
    }
}

/// What a decoder did with one symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// The symbol was kept. For RLNC it raised the rank; RaptorQ cannot tell
    /// a dependent symbol without solving, so there it means a new id kept
    /// while the block was not yet known to be decodable.
    Useful,
    /// The symbol carried nothing new (a duplicate, a linear combination of
    /// what arrived, or the block was already decodable) and was dropped.
    Redundant,
}

/// Produces encoding symbols of one block.
pub trait BlockEncoder: Send {
    fn info(&self) -> &BlockInfo;
    /// A copy of this encoder in its present state (a boxed trait object
    /// cannot derive `Clone`); fuzzing snapshots an established connection.
    fn boxed_clone(&self) -> Box<dyn BlockEncoder>;
    /// Writes encoding symbol `esi` into `out`, which must be `symbol_size`
    /// bytes. Any id may be asked for in any order: repair symbol n does not
    /// need repair symbols 0..n first.
    fn write_symbol(&self, esi: u32, out: &mut [u8]) -> Result<(), CodecError>;
    /// Writes repair symbol `esi` (≥ K) as a combination of source symbols
    /// `0..covered` only, so it can go out before the rest of the block and
    /// fill a gap in what was sent so far. Codes without prefix repairs
    /// refuse.
    fn write_prefix_symbol(
        &self,
        esi: u32,
        covered: u32,
        out: &mut [u8],
    ) -> Result<(), CodecError> {
        let _ = (esi, covered, out);
        Err(no_prefix(self.info().code))
    }
}

fn no_prefix(code: CodeKind) -> CodecError {
    CodecError::InvalidParams(format!("{} has no prefix repairs", code.name()))
}

/// Collects encoding symbols of one block until it can be decoded.
pub trait BlockDecoder: Send {
    fn info(&self) -> &BlockInfo;
    /// A copy of this decoder in its present state (see
    /// [`BlockEncoder::boxed_clone`]).
    fn boxed_clone(&self) -> Box<dyn BlockDecoder>;
    /// Takes one received symbol. Errors leave the decoder unchanged.
    fn push(&mut self, block_id: u32, esi: u32, payload: &[u8]) -> Result<Pushed, CodecError>;
    /// Symbols kept so far (RLNC: the rank; RaptorQ: distinct ids kept).
    fn useful_symbols(&self) -> usize;
    /// Whether the symbols received so far determine the block, answered
    /// without producing the data: this is what the receiver reports early so
    /// the sender moves on while decoding finishes (RCDP's early feedback).
    fn is_decodable(&mut self) -> bool;
    /// The block's `data_len` bytes; decodes first if needed.
    fn data(&mut self) -> Result<&[u8], CodecError>;
    /// Takes a repair written by [`BlockEncoder::write_prefix_symbol`].
    /// Errors leave the decoder unchanged; codes without prefix repairs
    /// refuse.
    fn push_prefix(
        &mut self,
        block_id: u32,
        esi: u32,
        covered: u32,
        payload: &[u8],
    ) -> Result<Pushed, CodecError> {
        let _ = (block_id, esi, covered, payload);
        Err(no_prefix(self.info().code))
    }
    /// Source symbol `i` (a whole symbol, the last one padded), as soon as
    /// what arrived determines it on its own, before the block decodes:
    /// a lost source solved from a prefix repair is readable at once.
    /// Codes that cannot tell before decoding answer `None`.
    fn source_symbol(&self, i: u32) -> Option<&[u8]> {
        let _ = i;
        None
    }
}

/// An encoder for `data` (one block) with the given code and symbol size.
pub fn new_encoder(
    code: CodeKind,
    block_id: u32,
    data: &[u8],
    symbol_size: u16,
) -> Result<Box<dyn BlockEncoder>, CodecError> {
    new_encoder_owned(code, block_id, data.to_vec(), symbol_size)
}

/// [`new_encoder`] on data it keeps: the bytes become the encoder's source
/// symbols where they lie (a sender's block is not copied again).
pub fn new_encoder_owned(
    code: CodeKind,
    block_id: u32,
    data: Vec<u8>,
    symbol_size: u16,
) -> Result<Box<dyn BlockEncoder>, CodecError> {
    let data_len = u32::try_from(data.len())
        .map_err(|_| CodecError::InvalidParams(format!("block of {} bytes", data.len())))?;
    let info = BlockInfo::new(code, block_id, data_len, symbol_size)?;
    Ok(match code {
        CodeKind::Rlnc => Box::new(rlnc::RlncBlockEncoder::new(info, data)?),
        CodeKind::RaptorQ => Box::new(raptor::RaptorQEncoder::new(info, data)?),
    })
}

/// A decoder for the block that `info` describes.
pub fn new_decoder(info: BlockInfo) -> Result<Box<dyn BlockDecoder>, CodecError> {
    info.validate()?;
    Ok(match info.code {
        CodeKind::Rlnc => Box::new(rlnc::RlncBlockDecoder::new(info)?),
        CodeKind::RaptorQ => Box::new(raptor::RaptorQDecoder::new(info)?),
    })
}

impl Clone for Box<dyn BlockEncoder> {
    fn clone(&self) -> Self {
        self.boxed_clone()
    }
}

impl Clone for Box<dyn BlockDecoder> {
    fn clone(&self) -> Self {
        self.boxed_clone()
    }
}

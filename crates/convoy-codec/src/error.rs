//! The one error type of the codec: every bad input maps to a variant that
//! says what was wrong, so callers (the protocol, fuzzers) never see a panic.

use thiserror::Error;

/// Why a codec call refused its input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    /// A symbol (or an output buffer for one) has the wrong length.
    #[error("symbol is {got} bytes but the block uses {expected}-byte symbols")]
    WrongSymbolLength { expected: usize, got: usize },
    /// A symbol index is outside what the block or code allows.
    #[error("symbol index {index} is out of range (limit {limit})")]
    IndexOutOfRange { index: u32, limit: u32 },
    /// A symbol of another block reached this block's decoder.
    #[error("symbol belongs to block {got}, this decoder holds block {expected}")]
    BlockMismatch { expected: u32, got: u32 },
    /// An explicit coefficient vector does not have one entry per source symbol.
    #[error("coefficient vector has {got} entries but the generation has {expected} symbols")]
    WrongCoefficientCount { expected: usize, got: usize },
    /// Block parameters that no encoder or decoder can work with.
    #[error("invalid block parameters: {0}")]
    InvalidParams(String),
    /// The data was asked for before enough symbols arrived.
    #[error("block not decodable yet: {have} useful symbols of {needed} needed")]
    NotDecodable { have: usize, needed: usize },
    /// A recoder was asked for a symbol before it received any.
    #[error("the recoder holds no symbols yet")]
    NothingToRecode,
}

//! convoy-codec: the erasure codes convoy sends with, and nothing else: no
//! I/O, no clock, no allocation on the per-symbol hot paths of RLNC.
//!
//! - [`gf`]: GF(2^8) arithmetic (polynomial 0x11D) and region kernels chosen
//!   at run time (GFNI, AVX2, SSSE3, scalar).
//! - [`rlnc`]: random linear network coding: encoder, progressive decoder,
//!   recoder.
//! - [`raptor`]: RaptorQ (RFC 6330) through the `raptorq` crate.
//! - [`block`]: the trait that lets the transport pick either by configuration.

pub mod block;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod gf;
pub mod raptor;
pub mod rlnc;
pub mod workload;

pub use block::{
    new_decoder, new_encoder, new_encoder_owned, BlockDecoder, BlockEncoder, BlockInfo, CodeKind,
    Pushed,
};
pub use error::CodecError;

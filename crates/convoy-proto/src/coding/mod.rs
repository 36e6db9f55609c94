//! Stream data as coded blocks: the sender's scheduler and the receiver's
//! per-block decoders. Either code (RLNC, RaptorQ) through convoy-codec's
//! block trait.

pub mod receiver;
pub mod sender;

pub use receiver::{CodedReceiver, ReceiveLimits, Received, ReceiverStats};
pub use sender::{symbols_for, CodedSender, CodingConfig, NextSymbol, SenderStats};

//! The bytes on the wire: checked views that parse and emit packets and
//! frames over byte slices (the smoltcp style). No input ever panics: every
//! malformed datagram is a [`WireError`]. docs/PROTOCOL.md is the reference.

pub mod cursor;
pub mod frame;
pub mod packet;

pub use frame::{Ack, BlockProgress, BlockStatus, Frame, Frames, Symbol, TrainTag};
pub use packet::{
    ConnectionId, Packet, Protected, CID_LEN, MIN_INITIAL_SIZE, SHORT_CID_LEN, SHORT_HEADER_LEN,
    TAG_LEN, VERSION,
};

/// Why bytes could not be parsed or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("truncated")]
    Truncated,
    #[error("output buffer too small")]
    BufferTooSmall,
    #[error("unknown packet type {0:#04x}")]
    UnknownPacketType(u8),
    #[error("unsupported version {0:#010x}")]
    UnsupportedVersion(u32),
    #[error("unknown frame type {0:#04x}")]
    UnknownFrameType(u8),
    #[error("invalid field: {0}")]
    Invalid(&'static str),
}

//! CAN as a source of telemetry.
//!
//! * [`candump`]: the `candump -L` log line format, parsed without
//!   allocating.
//! * [`dbc`]: a DBC file (parsed by the `can-dbc` crate) made into a
//!   decoder: per message id, each signal's bits, byte order, sign,
//!   factor and offset, and simple multiplexing ([`signal`]).
//! * [`socketcan`]: live frames from a Linux CAN interface.
//! * [`source`]: the agent source that ties these to VSS names.

pub mod candump;
pub mod dbc;
pub mod signal;
pub mod socketcan;
pub mod source;

pub use candump::{parse_line, Frame};
pub use dbc::{Decoder, Outcome};
pub use source::{CanInput, CanSource, SignalMap, Unmapped};

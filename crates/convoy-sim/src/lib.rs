//! convoy-sim: convoy-proto driven in virtual time over convoy-link.
//!
//! The same protocol code that runs on real sockets runs here against the
//! same link model the emulator applies to real programs; nothing reads a
//! clock, so a run replays exactly from its seeds. Today it runs one
//! client–server transfer ([`transfer`]); fleets come later.

mod app;
pub mod payload;
pub mod reference;
pub mod transfer;

pub use transfer::{run, DirectionReport, SimError, TransferReport, TransferSpec};

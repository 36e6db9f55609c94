//! convoy-sim: convoy-proto driven in virtual time over convoy-link.
//!
//! The same protocol code that runs on real sockets runs here against the
//! same link model the emulator applies to real programs; nothing reads a
//! clock, so a run replays exactly from its seeds. It runs one
//! client–server transfer over one link ([`transfer`]) or over several at
//! once, a car's Wi-Fi and LTE ([`multipath`]).

mod app;
pub mod multipath;
pub mod payload;
pub mod reference;
pub mod transfer;

pub use multipath::{run_multipath, MultipathReport, MultipathSpec, PathLink};
pub use transfer::{run, DirectionReport, SimError, TransferReport, TransferSpec};

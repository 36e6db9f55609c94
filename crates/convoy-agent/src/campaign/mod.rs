//! Campaigns on the vehicle (docs/SERVICE.md, "Campaigns").
//!
//! * [`engine`]: the sans-IO trigger engine and ring buffers.

pub mod engine;

//! convoy-ave: AVE, the adaptive anycast of baguena-2017 ch. 7 (SPEC S7),
//! as a sans-IO state machine. A vehicle hands sensing *bundles* to the
//! router, which delivers each to **any** road-side unit (RSU) by, in
//! order: local delivery (an RSU one or two hops away), reactive route
//! discovery (DYMO, only if an RSU was heard in the last 6 min, 10 s
//! timeout), greedy geographic forwarding toward the nearest RSU, and
//! store-carry-forward to the neighbour predicted to get closest to an RSU.
//!
//! The same router runs the baselines the thesis compares with: plain
//! DYMO, greedy geographic forwarding, and binary spray-and-wait (our DTN
//! baseline in place of MSDP, whose map-based predictor is not published in
//! enough detail to rebuild).
//!
//! Like convoy-proto, it reads no clock and touches no radio: the driver
//! hands in frames, link-layer results, its position and the time, and
//! takes out frames, events and the next deadline. Beacons are NHDP HELLO
//! messages in RFC 5444 packets ([`wire::hello`]); data and route-discovery
//! frames are small fixed headers ([`wire::frame`]).

pub mod config;
pub mod dymo;
pub mod neighbors;
pub mod router;
pub mod rsus;
pub mod wire;

pub use config::{Config, Protocol};
pub use router::{Destination, DropCause, Frame, Role, Router, RouterEvent, Strategy};
pub use rsus::RsuTable;

/// A node's address: the low 32 bits of its IPv4 address in the thesis's
/// set-up; any unique number here.
pub type NodeId = u32;

/// A position or a velocity in metres (or m/s) in the map's plane.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Vec2 {
    pub x: f64,
    pub y: f64,
}

impl Vec2 {
    pub const fn new(x: f64, y: f64) -> Vec2 {
        Vec2 { x, y }
    }
    pub fn dist(self, o: Vec2) -> f64 {
        (self.x - o.x).hypot(self.y - o.y)
    }
    pub fn add_scaled(self, v: Vec2, k: f64) -> Vec2 {
        Vec2::new(self.x + v.x * k, self.y + v.y * k)
    }
}

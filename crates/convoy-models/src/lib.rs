//! Vehicular channel and city models, with no I/O and no clock, shared by
//! the `convoy trace` commands, the emulator's trace generation and the
//! simulator (baguena-2017 ch. 5 and 9; SPEC S5; docs/MODELS.md).
//!
//! * [`dsrc`]: 802.11p modified free-space path loss with exponent α plus
//!   Nakagami-m fading → packet-delivery probability against distance.
//! * [`shadowing`]: Sommer et al.'s building shadowing (dB per wall and per
//!   metre inside) over SUMO polygons.
//! * [`lte`]: the empirical LTE model: per-second downlink capacity and RTT
//!   from the signal quality CSQ, and a distance → CSQ mapping.
//! * [`lte_uplink`]: an LTE uplink capacity model (UE power limit, path
//!   loss → SINR → rate, TTI grants and HARQ), fitted to drive traces by
//!   [`lte_fit`] on the statistics of [`trace_stats`]; [`lte_loss`]: bursty
//!   residual loss after HARQ/RLC; [`handover`]: interruptions at a change
//!   of serving cell.
//! * [`obstacle`]: the city obstacle coefficient of a network and its buildings.
//! * [`sumo`]: readers for SUMO networks, polygons and FCD output.
//!
//! ```
//! use convoy_models::dsrc::{Dsrc, DsrcPreset};
//! let ch = Dsrc::preset(DsrcPreset::VehiclesAsObstacles); // m = 0.7, α = 2.3
//! assert!(ch.pdr(100.0) > 0.9);
//! ```

pub mod dsrc;
pub mod error;
pub mod geom;
pub mod handover;
pub mod lte;
pub mod lte_fit;
pub mod lte_loss;
pub mod lte_uplink;
pub mod math;
pub mod obstacle;
pub mod rng;
pub mod shadowing;
pub mod sumo;
pub mod trace_stats;

pub use error::{ModelError, SumoError, SumoErrorKind};
pub use geom::Point;
pub use rng::Rng;

//! What vehicles run: AVE sensing bundles (S7), convoy-proto uploads over
//! LTE, edge requests (S8) and clustered awareness messages (S9). Each app
//! keeps its own state and adds its event handlers to `World`.

pub mod clusters;
pub mod edge;
pub mod sensing;
pub mod upload;

use convoy_models::Rng;

/// A uniform draw in [lo, hi].
pub(crate) fn between(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.uniform()
}

/// An exponential draw with the given mean.
pub(crate) fn exponential(rng: &mut Rng, mean: f64) -> f64 {
    -mean * (1.0 - rng.uniform()).ln()
}

//! Residual LTE loss: what reaches IP after HARQ (4 attempts at a 10 %
//! BLER target leaves ~10⁻⁴ of blocks) and RLC (acknowledged mode resends
//! those; unacknowledged mode, used for VoIP, does not). It is small on
//! average and comes in bursts: deep fades outlast HARQ's 8 ms retries, a
//! handover's forwarding over X2 drops what was in flight, and RLC gives up
//! after its maximum retransmissions near the cell edge.
//!
//! A Gilbert–Elliott chain over the trace's rows (e.g. one per second):
//! rows in the good state have no loss; a bad spell lasts a geometric
//! number of rows with mean `burst_rows` and loses `bad_loss` of the
//! packets. The chance of entering a bad spell is set so that the long-run
//! loss is `rate`: the bad share is π = rate / bad_loss, left with
//! probability 1 / burst_rows, so entered with π / (1 − π) of that. A
//! handover starts a bad spell (forced, on top of the chain's own), so
//! with handovers the long-run loss is above `rate` by what they add.

use crate::error::ModelError;
use crate::rng::Rng;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossParams {
    /// Long-run share of packets lost without handovers.
    pub rate: f64,
    /// Mean length of a bad spell, rows.
    pub burst_rows: f64,
    /// Share lost during a bad spell.
    pub bad_loss: f64,
}

impl LossParams {
    /// The `--loss` default when asked for without values: 0.1 % residual
    /// loss in 2-row spells losing 5 % (RLC UM over a 10 % BLER link with
    /// fades of seconds; no measured fit exists for these traces).
    pub const TYPICAL: LossParams = LossParams {
        rate: 0.001,
        burst_rows: 2.0,
        bad_loss: 0.05,
    };

    pub fn validated(self) -> Result<LossParams, ModelError> {
        if !(self.bad_loss > 0.0 && self.bad_loss <= 1.0) {
            return Err(ModelError::NotPositive {
                what: "loss in a bad spell (at most 1)",
                value: self.bad_loss,
            });
        }
        if !(self.rate >= 0.0 && self.rate < self.bad_loss) {
            return Err(ModelError::NotFinite {
                what: "residual loss rate (from 0 to under the bad spell's loss)",
                value: self.rate,
            });
        }
        if !(self.burst_rows >= 1.0 && self.burst_rows.is_finite()) {
            return Err(ModelError::NotPositive {
                what: "bad spell length (at least 1 row)",
                value: self.burst_rows,
            });
        }
        Ok(self)
    }

    /// Stationary share of rows in a bad spell.
    pub fn bad_share(&self) -> f64 {
        self.rate / self.bad_loss
    }
}

/// The chain, one `next_row` per trace row.
#[derive(Clone, Debug)]
pub struct LossGen {
    p: LossParams,
    enter: f64,
    leave: f64,
    bad: bool,
}

impl LossGen {
    pub fn new(p: LossParams, rng: &mut Rng) -> Result<LossGen, ModelError> {
        let p = p.validated()?;
        let leave = 1.0 / p.burst_rows;
        let pi = p.bad_share();
        Ok(LossGen {
            p,
            enter: pi / (1.0 - pi) * leave,
            leave,
            // Start in the stationary distribution.
            bad: rng.uniform() < pi,
        })
    }

    /// A handover: a bad spell starts at the next row.
    pub fn handover(&mut self) {
        self.bad = true;
    }

    /// The loss probability of the next row.
    pub fn next_row(&mut self, rng: &mut Rng) -> f64 {
        let loss = if self.bad { self.p.bad_loss } else { 0.0 };
        let u = rng.uniform();
        self.bad = if self.bad {
            u >= self.leave
        } else {
            u < self.enter
        };
        loss
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_parameters_are_refused() {
        let mut r = Rng::new(1);
        let t = LossParams::TYPICAL;
        assert!(LossGen::new(LossParams { rate: 0.06, ..t }, &mut r).is_err());
        assert!(LossGen::new(
            LossParams {
                burst_rows: 0.5,
                ..t
            },
            &mut r
        )
        .is_err());
        assert!(LossGen::new(LossParams { bad_loss: 0.0, ..t }, &mut r).is_err());
        assert!(LossGen::new(LossParams { rate: -0.1, ..t }, &mut r).is_err());
    }
}

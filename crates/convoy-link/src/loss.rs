//! Loss processes.
//!
//! A [`LossProcess`] is asked once per packet, in the order packets reach the
//! point of loss (see the crate docs for where that is). Random models use
//! their own generator stream, and every decision consumes a fixed number of
//! draws, so the pattern depends only on the seed and the packet count.

use crate::error::ConfigError;
use crate::rng::{Prob, Rng, STREAM_LOSS};

/// A loss model as configured.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum LossModel {
    /// Nothing is lost.
    #[default]
    None,
    /// Each packet is lost independently with probability `p`.
    Bernoulli { p: f64 },
    /// Gilbert–Elliott, in the usual four-parameter form: a Good and a Bad
    /// state; per packet the chain first moves (Good→Bad with `p_gb`,
    /// Bad→Good with `p_bg`), then the packet is lost with the new state's
    /// loss probability: `loss_good` = 1−k, `loss_bad` = 1−h. It starts Good.
    GilbertElliott {
        p_gb: f64,
        p_bg: f64,
        loss_good: f64,
        loss_bad: f64,
    },
    /// Packets number n, 2n, 3n, … (counting from 1) are lost.
    EveryNth { n: u64 },
    /// The packets at these 0-based positions (in the order they reach the
    /// loss process) are lost. Order and duplicates do not matter.
    Positions(Vec<u64>),
}

impl LossModel {
    /// The simple Gilbert model: lossless Good state, all-loss Bad state.
    pub fn gilbert(p_gb: f64, p_bg: f64) -> LossModel {
        LossModel::GilbertElliott {
            p_gb,
            p_bg,
            loss_good: 0.0,
            loss_bad: 1.0,
        }
    }

    /// Long-run loss rate in theory, for the random models.
    pub fn theoretical_loss_rate(&self) -> Option<f64> {
        match *self {
            LossModel::None => Some(0.0),
            LossModel::Bernoulli { p } => Some(p),
            LossModel::GilbertElliott {
                p_gb,
                p_bg,
                loss_good,
                loss_bad,
            } => {
                let (pi_g, pi_b) = ge_stationary(p_gb, p_bg)?;
                Some(pi_g * loss_good + pi_b * loss_bad)
            }
            _ => None,
        }
    }

    /// Mean length of a run of consecutive losses in theory: the loss rate
    /// divided by the probability that a loss follows a delivered packet.
    /// For the simple Gilbert model this is 1/`p_bg`.
    pub fn theoretical_mean_burst(&self) -> Option<f64> {
        match *self {
            LossModel::Bernoulli { p } if p < 1.0 => Some(1.0 / (1.0 - p)),
            LossModel::GilbertElliott {
                p_gb,
                p_bg,
                loss_good,
                loss_bad,
            } => {
                let (pi_g, pi_b) = ge_stationary(p_gb, p_bg)?;
                let loss = self.theoretical_loss_rate()?;
                // The packet before is in state a and delivered; the chain
                // then moves to b and the packet is lost.
                let starts =
                    pi_g * (1.0 - loss_good) * ((1.0 - p_gb) * loss_good + p_gb * loss_bad)
                        + pi_b * (1.0 - loss_bad) * (p_bg * loss_good + (1.0 - p_bg) * loss_bad);
                (starts > 0.0).then(|| loss / starts)
            }
            _ => None,
        }
    }
}

fn ge_stationary(p_gb: f64, p_bg: f64) -> Option<(f64, f64)> {
    let sum = p_gb + p_bg;
    (sum > 0.0).then(|| (p_bg / sum, p_gb / sum))
}

/// Where a link's loss parameters come from.
#[derive(Clone, Debug, PartialEq)]
pub enum LossSource {
    Model(LossModel),
    /// The loss columns of the link's time-series trace, per interval; the
    /// Gilbert–Elliott state carries across intervals.
    Series,
}

impl Default for LossSource {
    fn default() -> LossSource {
        LossSource::Model(LossModel::None)
    }
}

/// Where along the link packets are lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LossPosition {
    /// On the air, after the bottleneck: a lost packet has used capacity and
    /// waited in the queue, as with radio losses. Parameters in force at the
    /// departure instant apply.
    #[default]
    AfterQueue,
    /// Before the queue: a lost packet never reaches the bottleneck, as with
    /// `mm-loss` placed outside `mm-link`. Parameters at arrival apply.
    BeforeQueue,
}

/// Validated Gilbert–Elliott parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GeParams {
    pub p_gb: Prob,
    pub p_bg: Prob,
    pub loss_good: Prob,
    pub loss_bad: Prob,
}

/// Validated per-interval loss parameters (what a time-series row carries).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LossParams {
    #[default]
    None,
    Bernoulli(Prob),
    GilbertElliott(GeParams),
}

#[derive(Clone, Debug)]
enum Compiled {
    Params(LossParams),
    EveryNth(u64),
    Positions(Box<[u64]>),
    /// Parameters are supplied per packet by the caller (time-series trace).
    External,
}

/// The running state of a loss model.
#[derive(Clone, Debug)]
pub struct LossProcess {
    model: Compiled,
    rng: Rng,
    bad: bool,
    seen: u64,
    next_position: usize,
}

impl LossProcess {
    /// Validates `model` and seeds its generator from `seed`.
    pub fn new(model: &LossModel, seed: u64) -> Result<LossProcess, ConfigError> {
        let model = match model {
            LossModel::None => Compiled::Params(LossParams::None),
            LossModel::Bernoulli { p } => {
                Compiled::Params(LossParams::Bernoulli(Prob::new(*p, "Bernoulli loss p")?))
            }
            LossModel::GilbertElliott {
                p_gb,
                p_bg,
                loss_good,
                loss_bad,
            } => Compiled::Params(LossParams::GilbertElliott(GeParams {
                p_gb: Prob::new(*p_gb, "Gilbert-Elliott p_gb")?,
                p_bg: Prob::new(*p_bg, "Gilbert-Elliott p_bg")?,
                loss_good: Prob::new(*loss_good, "Gilbert-Elliott loss_good")?,
                loss_bad: Prob::new(*loss_bad, "Gilbert-Elliott loss_bad")?,
            })),
            LossModel::EveryNth { n: 0 } => return Err(ConfigError::ZeroPeriod),
            LossModel::EveryNth { n } => Compiled::EveryNth(*n),
            LossModel::Positions(list) => {
                let mut list = list.clone();
                list.sort_unstable();
                list.dedup();
                Compiled::Positions(list.into_boxed_slice())
            }
        };
        Ok(LossProcess::with(model, seed))
    }

    /// A process whose parameters come with each packet ([`Self::lose_with`]).
    pub(crate) fn external(seed: u64) -> LossProcess {
        LossProcess::with(Compiled::External, seed)
    }

    fn with(model: Compiled, seed: u64) -> LossProcess {
        LossProcess {
            model,
            rng: Rng::new(seed, STREAM_LOSS),
            bad: false,
            seen: 0,
            next_position: 0,
        }
    }

    /// Decides the fate of the next packet: `true` means lost.
    #[inline]
    pub fn lose(&mut self) -> bool {
        let index = self.seen;
        self.seen += 1;
        match &self.model {
            Compiled::Params(LossParams::None) => false,
            Compiled::Params(params) => {
                let params = *params;
                self.draw(&params)
            }
            Compiled::EveryNth(n) => index % n == n - 1,
            Compiled::Positions(list) => {
                // Positions are sorted, so one cursor suffices.
                if list.get(self.next_position) == Some(&index) {
                    self.next_position += 1;
                    true
                } else {
                    false
                }
            }
            Compiled::External => false,
        }
    }

    /// Decides the next packet with `params` in force (time-series trace).
    /// The Gilbert–Elliott state carries over when parameters change.
    #[inline]
    pub(crate) fn lose_with(&mut self, params: &LossParams) -> bool {
        self.seen += 1;
        self.draw(params)
    }

    #[inline]
    fn draw(&mut self, params: &LossParams) -> bool {
        match params {
            LossParams::None => false,
            LossParams::Bernoulli(p) => self.rng.chance(*p),
            LossParams::GilbertElliott(g) => {
                let leave = if self.bad { g.p_bg } else { g.p_gb };
                if self.rng.chance(leave) {
                    self.bad = !self.bad;
                }
                let loss = if self.bad { g.loss_bad } else { g.loss_good };
                self.rng.chance(loss)
            }
        }
    }

    /// Packets decided so far.
    pub fn packets_seen(&self) -> u64 {
        self.seen
    }

    /// Whether a Gilbert–Elliott chain is in its Bad state.
    pub fn in_bad_state(&self) -> bool {
        self.bad
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(model: &LossModel, n: usize) -> Vec<bool> {
        let mut p = LossProcess::new(model, 1).unwrap();
        (0..n).map(|_| p.lose()).collect()
    }

    #[test]
    fn deterministic_patterns() {
        let every3 = pattern(&LossModel::EveryNth { n: 3 }, 7);
        assert_eq!(every3, [false, false, true, false, false, true, false]);
        let list = pattern(&LossModel::Positions(vec![4, 0, 4, 2]), 6);
        assert_eq!(list, [true, false, true, false, true, false]);
        assert!(pattern(&LossModel::EveryNth { n: 1 }, 5).iter().all(|&l| l));
        assert!(!pattern(&LossModel::None, 100).iter().any(|&l| l));
    }

    #[test]
    fn invalid_parameters_are_errors() {
        assert_eq!(
            LossProcess::new(&LossModel::Bernoulli { p: 1.01 }, 0).unwrap_err(),
            ConfigError::Probability {
                what: "Bernoulli loss p",
                value: 1.01
            }
        );
        assert!(LossProcess::new(&LossModel::gilbert(-0.1, 0.5), 0).is_err());
        assert!(LossProcess::new(&LossModel::gilbert(0.1, f64::NAN), 0).is_err());
        assert_eq!(
            LossProcess::new(&LossModel::EveryNth { n: 0 }, 0).unwrap_err(),
            ConfigError::ZeroPeriod
        );
    }

    #[test]
    fn bernoulli_rate() {
        let n = 1_000_000;
        let lost = pattern(&LossModel::Bernoulli { p: 0.1 }, n)
            .iter()
            .filter(|&&l| l)
            .count();
        let rate = lost as f64 / n as f64;
        assert!((rate - 0.1).abs() < 0.002, "{rate}");
    }

    #[test]
    fn burst_theory_special_cases() {
        let g = LossModel::gilbert(0.01, 0.25);
        assert!((g.theoretical_mean_burst().unwrap() - 4.0).abs() < 1e-12);
        assert!((g.theoretical_loss_rate().unwrap() - 0.01 / 0.26).abs() < 1e-12);
        let b = LossModel::Bernoulli { p: 0.5 };
        assert!((b.theoretical_mean_burst().unwrap() - 2.0).abs() < 1e-12);
    }
}

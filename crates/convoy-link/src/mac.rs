//! 802.11 DCF at the transmitter: per-frame retries with binary exponential
//! backoff, and the airtime they consume.
//!
//! With a MAC configured, the link's rate is the PHY data rate and its loss
//! model is the loss of one *attempt* (a frame on the air). Each attempt
//! holds the medium for
//!
//! ```text
//! DIFS + backoff·slot + preamble + (len + header)·8 / rate + SIFS + ACK
//! ```
//!
//! where DIFS = SIFS + AIFSN·slot and backoff is uniform in `0..=CW`, CW
//! starting at CWmin and doubling (`2·CW + 1`) up to CWmax after each failed
//! attempt. A failed attempt still waits out SIFS + ACK (the ACK timeout).
//! After `retry_limit` retries the frame is dropped, so with independent
//! attempt losses of probability p a frame is lost with p^(retry_limit+1).
//! The frame reaches the far end when its last bit leaves; the transmitter
//! is free for the next frame only after the ACK.
//!
//! Not modelled: other stations (contention is the backoff alone, never a
//! collision), rate adaptation, RTS/CTS, aggregation, the PHY's symbol
//! rounding (the frame body is timed at the link's rate, bit by bit).

use crate::error::ConfigError;
use crate::time::Dur;

/// The timing and retry parameters of one 802.11 transmitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacConfig {
    /// Retransmissions after the first attempt (dot11ShortRetryLimit).
    /// Default: 7.
    pub retry_limit: u8,
    /// Contention window of a frame's first attempt, in slots. Default: 15.
    pub cw_min: u16,
    /// Largest contention window, in slots. Default: 1023.
    pub cw_max: u16,
    pub slot: Dur,
    pub sifs: Dur,
    /// Slots after SIFS before the backoff starts (2 gives DCF's DIFS).
    pub aifsn: u8,
    /// PLCP preamble and SIGNAL field of every frame.
    pub preamble: Dur,
    /// Airtime of the ACK frame (and the timeout a lost frame waits).
    pub ack: Dur,
    /// MAC header, LLC/SNAP and FCS carried with each packet.
    pub header_bytes: u32,
}

/// The mean effect of the MAC on frames of one size, for writers of
/// traces that carry it in their rate and loss columns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MacExpectation {
    /// Mean medium time per frame (all attempts, delivered or not), s.
    pub service_s: f64,
    /// Mean attempts per frame.
    pub attempts: f64,
    /// Probability that every attempt is lost.
    pub residual_loss: f64,
}

impl MacConfig {
    /// 802.11a/g/n OFDM in a 20 MHz channel: slot 9 µs, SIFS 16 µs, DIFS
    /// 34 µs, 20 µs preamble, the ACK (14 bytes) at 6 Mbit/s in 44 µs.
    pub fn ofdm_20mhz() -> MacConfig {
        MacConfig {
            retry_limit: 7,
            cw_min: 15,
            cw_max: 1023,
            slot: Dur::from_micros(9),
            sifs: Dur::from_micros(16),
            aifsn: 2,
            preamble: Dur::from_micros(20),
            ack: Dur::from_micros(44),
            header_bytes: 36,
        }
    }

    /// 802.11p (ITS-G5) in a 10 MHz channel, best-effort access category:
    /// slot 13 µs, SIFS 32 µs, AIFSN 6 (as the fleet simulator's medium),
    /// 40 µs preamble, the ACK at 6 Mbit/s in 64 µs (three 8 µs symbols).
    pub fn its_10mhz() -> MacConfig {
        MacConfig {
            slot: Dur::from_micros(13),
            sifs: Dur::from_micros(32),
            aifsn: 6,
            preamble: Dur::from_micros(40),
            ack: Dur::from_micros(64),
            ..MacConfig::ofdm_20mhz()
        }
    }

    pub fn with_retry_limit(mut self, retries: u8) -> MacConfig {
        self.retry_limit = retries;
        self
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.cw_min > self.cw_max {
            return Err(ConfigError::MacWindow {
                cw_min: self.cw_min,
                cw_max: self.cw_max,
            });
        }
        Ok(())
    }

    /// SIFS + AIFSN slots: the idle time before any backoff.
    pub fn difs(&self) -> Dur {
        Dur::from_nanos(self.sifs.as_nanos() + u64::from(self.aifsn) * self.slot.as_nanos())
    }

    /// The contention window (slots) of attempt `attempt` (0 = first).
    pub fn cw(&self, attempt: u32) -> u16 {
        let mut cw = u32::from(self.cw_min);
        for _ in 0..attempt {
            cw = 2 * cw + 1;
            if cw >= u32::from(self.cw_max) {
                return self.cw_max;
            }
        }
        cw as u16
    }

    /// Medium time of one attempt besides the frame body and the backoff.
    pub fn fixed_per_attempt(&self) -> Dur {
        self.difs() + self.preamble + self.sifs + self.ack
    }

    /// The mean service of frames whose body (header included) takes `body`
    /// on the air, when each attempt is lost independently with `p`.
    /// Attempt k (0-based) happens with probability p^k.
    pub fn expected(&self, p: f64, body: Dur) -> MacExpectation {
        let fixed = (self.fixed_per_attempt() + body).as_secs_f64();
        let slot = self.slot.as_secs_f64();
        let (mut service, mut attempts, mut reach) = (0.0, 0.0, 1.0);
        for k in 0..=u32::from(self.retry_limit) {
            service += reach * (fixed + f64::from(self.cw(k)) / 2.0 * slot);
            attempts += reach;
            reach *= p;
        }
        MacExpectation {
            service_s: service,
            attempts,
            residual_loss: reach,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contention_window_doubles_to_its_cap() {
        let m = MacConfig::ofdm_20mhz();
        let cws: Vec<u16> = (0..8).map(|k| m.cw(k)).collect();
        assert_eq!(cws, [15, 31, 63, 127, 255, 511, 1023, 1023]);
        assert_eq!(m.difs(), Dur::from_micros(34));
        assert_eq!(MacConfig::its_10mhz().difs(), Dur::from_micros(110));
    }

    #[test]
    fn expectation_without_loss_is_one_attempt() {
        let m = MacConfig::ofdm_20mhz();
        let body = Dur::from_micros(600);
        let e = m.expected(0.0, body);
        assert_eq!(e.attempts, 1.0);
        assert_eq!(e.residual_loss, 0.0);
        // 34 + 7.5·9 + 20 + 600 + 16 + 44 µs.
        assert!((e.service_s - 781.5e-6).abs() < 1e-12, "{}", e.service_s);
        let lossy = m.with_retry_limit(3).expected(0.5, body);
        assert!((lossy.residual_loss - 0.0625).abs() < 1e-15);
        assert!((lossy.attempts - 1.875).abs() < 1e-15);
    }

    #[test]
    fn inverted_window_is_an_error() {
        let m = MacConfig {
            cw_min: 31,
            cw_max: 15,
            ..MacConfig::ofdm_20mhz()
        };
        assert!(m.validate().is_err());
    }
}

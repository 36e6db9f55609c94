//! `--mac` of `convoy trace from-mobility`: 802.11 retries folded into an
//! 802.11p trace's rate and loss columns (docs/MODELS.md, "802.11 MAC
//! retries"); and `convoy trace mac`, which prints what the MAC leaves of a
//! PHY rate (what the experiments compare a `mac=` link's goodput with).
//!
//! A row's PDR is the chance that one frame gets through. With retries a
//! frame is lost only when every attempt is (p^(retries+1), attempts
//! independent at the row's PDR), and each frame holds the channel for the
//! mean time its attempts, backoffs and ACKs take, so the rate the trace
//! gives is the PHY rate scaled by a full-size frame's share of that time.
//! The emulator's own `mac=` key draws the same model frame by frame; use
//! it on traces written with `--mac none`, not on these (it would retry
//! twice).

use anyhow::{bail, Result};
use clap::Args;
use convoy_link::{Dur, MacConfig};
use serde::Serialize;

/// The frame the rate column is computed for: a full-size IP packet.
const FRAME_BYTES: f64 = 1500.0;

/// `80211p[:retries=N]`, `80211[:retries=N]` or `none`.
pub fn parse_mac(text: &str) -> Result<Option<MacConfig>> {
    let (name, opt) = text.split_once(':').unwrap_or((text, ""));
    let mac = match name {
        "none" if opt.is_empty() => return Ok(None),
        "80211p" => MacConfig::its_10mhz(),
        "80211" => MacConfig::ofdm_20mhz(),
        _ => bail!("--mac: expected 80211p[:retries=N], 80211[:retries=N] or none, found {text:?}"),
    };
    if opt.is_empty() {
        return Ok(Some(mac));
    }
    match opt.split_once('=') {
        Some(("retries", n)) => match n.parse::<u8>() {
            Ok(n) => Ok(Some(mac.with_retry_limit(n))),
            Err(_) => bail!("--mac: retries: expected a retry count from 0 to 255, found {n:?}"),
        },
        _ => bail!("--mac: expected retries=N after {name}:, found {opt:?}"),
    }
}

#[derive(Args)]
pub struct MacArgs {
    /// PHY rate, Mbit/s.
    #[arg(long, value_name = "MBIT/S")]
    rate_mbps: f64,
    /// Loss of each attempt, a probability in [0, 1].
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    loss: f64,
    /// `80211[:retries=N]` or `80211p[:retries=N]` (as --link's mac=).
    #[arg(long, value_name = "MAC", default_value = "80211:retries=7")]
    mac: String,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct MacReport {
    mac: String,
    rate_mbps: f64,
    attempt_loss: f64,
    /// Share of the PHY rate that 1500-byte packets get.
    share: f64,
    capacity_mbps: f64,
    residual_loss: f64,
    mean_attempts: f64,
    mean_service_us: f64,
}

pub fn run(a: &MacArgs) -> Result<()> {
    let Some(mac) = parse_mac(&a.mac)? else {
        bail!("--mac none has no MAC to describe");
    };
    if !(a.rate_mbps > 0.0 && a.rate_mbps.is_finite()) {
        bail!("--rate-mbps must be positive, got {}", a.rate_mbps);
    }
    if !(0.0..=1.0).contains(&a.loss) {
        bail!("--loss must be a probability in [0, 1], got {}", a.loss);
    }
    let phy = a.rate_mbps * 1e6;
    let (rate, residual) = row(Some(&mac), phy, 1.0 - a.loss);
    let body_s = (FRAME_BYTES + f64::from(mac.header_bytes)) * 8.0 / phy;
    let e = mac.expected(a.loss, Dur::from_nanos((body_s * 1e9).round() as u64));
    let r = MacReport {
        mac: a.mac.clone(),
        rate_mbps: a.rate_mbps,
        attempt_loss: a.loss,
        share: rate / phy,
        capacity_mbps: rate / 1e6,
        residual_loss: residual,
        mean_attempts: e.attempts,
        mean_service_us: e.service_s * 1e6,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "{} at {} Mbit/s, {} of attempts lost: 1500-byte packets get {:.3} Mbit/s ({:.1} % of the PHY rate), \
             {:.2} attempts and {:.1} µs of medium each; {:.3e} lost after the retries",
            r.mac,
            r.rate_mbps,
            r.attempt_loss,
            r.capacity_mbps,
            100.0 * r.share,
            r.mean_attempts,
            r.mean_service_us,
            r.residual_loss
        );
    }
    Ok(())
}

/// (rate in bit/s, loss probability) of a row whose frames get through
/// with `pdr` at PHY rate `phy_bps`, with `mac` or without one.
pub fn row(mac: Option<&MacConfig>, phy_bps: f64, pdr: f64) -> (f64, f64) {
    let Some(mac) = mac else {
        return (phy_bps, 1.0 - pdr);
    };
    let body_s = (FRAME_BYTES + f64::from(mac.header_bytes)) * 8.0 / phy_bps;
    let e = mac.expected(1.0 - pdr, Dur::from_nanos((body_s * 1e9).round() as u64));
    (FRAME_BYTES * 8.0 / e.service_s, e.residual_loss)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_cut_loss_and_cost_rate() {
        let mac = parse_mac("80211p:retries=7").unwrap().unwrap();
        // A clean channel: 6 Mbit/s PHY carries about 5 Mbit/s of packets
        // (246 µs of DIFS, preamble, SIFS, ACK and 97.5 µs of mean backoff
        // beside 2048 µs of frame).
        let (rate, loss) = row(Some(&mac), 6e6, 1.0);
        assert_eq!(loss, 0.0);
        assert!((rate - 5.018e6).abs() < 1e3, "{rate}");
        // PDR 0.66: one frame in three lost on the air, 1.4e-4 after 7 retries.
        let (rate, loss) = row(Some(&mac), 6e6, 0.66);
        assert!((loss - 0.34f64.powi(8)).abs() < 1e-12);
        assert!(rate < 3.5e6 && rate > 2.5e6, "{rate}");
        assert_eq!(row(None, 6e6, 0.66), (6e6, 1.0 - 0.66));
        assert!(parse_mac("none").unwrap().is_none());
        assert!(parse_mac("80211p:retries=x").is_err());
        assert!(parse_mac("80211q").is_err());
    }
}

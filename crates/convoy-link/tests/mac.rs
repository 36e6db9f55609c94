//! 802.11 retries at the transmitter: timing of one frame, residual loss
//! against p^(retries+1), and the airtime the MAC reports against the time
//! the medium was held.

use convoy_link::{
    ConfigError, DropReason, Dur, LinkConfig, LinkDirection, LossModel, LossPosition, MacConfig,
    MahimahiTrace, RecordKind, Time,
};
use proptest::prelude::*;
use std::sync::Arc;

/// 8 Mbit/s: one byte is exactly one microsecond on the air.
const RATE: u64 = 8_000_000;

fn no_backoff() -> MacConfig {
    MacConfig {
        cw_min: 0,
        cw_max: 0,
        ..MacConfig::ofdm_20mhz()
    }
}

#[test]
fn one_frame_waits_difs_and_preamble_and_holds_the_medium_for_its_ack() {
    let config = LinkConfig::constant(RATE)
        .with_delay(Dur::from_millis(2))
        .with_mac(no_backoff());
    let mut link: LinkDirection = LinkDirection::new(config).unwrap();
    link.enqueue(Time::ZERO, 1000, 1);
    link.enqueue(Time::ZERO, 1000, 2);
    let d: Vec<_> = std::iter::from_fn(|| link.poll_delivery(Time::from_secs(1))).collect();
    // DIFS 34 + preamble 20 + (1000 + 36 header) bytes = 1090 µs.
    assert_eq!(d[0].departed_at, Time::from_micros(1090));
    assert_eq!(d[0].at, Time::from_micros(3090));
    // The second frame's DIFS starts after SIFS 16 + ACK 44.
    assert_eq!(d[1].departed_at, Time::from_micros(1090 + 60 + 1090));
    let s = link.stats();
    assert_eq!(s.mac_attempts, 2);
    assert_eq!(s.mac_airtime, Dur::from_micros(2 * 1150));
}

#[test]
fn every_attempt_lost_drops_after_the_retry_limit() {
    let config = LinkConfig::constant(RATE)
        .with_loss(LossModel::Bernoulli { p: 1.0 })
        .with_mac(no_backoff().with_retry_limit(3))
        .with_records(true);
    let mut link: LinkDirection = LinkDirection::new(config).unwrap();
    link.enqueue(Time::ZERO, 100, 7);
    assert!(link.poll_delivery(Time::from_secs(1)).is_none());
    let s = link.stats();
    assert_eq!(s.mac_attempts, 4);
    assert_eq!(s.dropped(DropReason::Loss), 1);
    // Four attempts of 34 + 20 + 136 + 16 + 44 µs; dropped when the last
    // attempt's frame ended, before its ACK timeout.
    assert_eq!(s.mac_airtime, Dur::from_micros(4 * 250));
    let drop = link
        .take_records()
        .into_iter()
        .find(|r| r.kind == RecordKind::Drop(DropReason::Loss))
        .unwrap();
    assert_eq!(drop.t, Time::from_micros(3 * 250 + 190));
}

#[test]
fn misconfigurations_are_errors() {
    let trace = Arc::new(MahimahiTrace::parse("1\n2\n", "t").unwrap());
    let mahimahi = LinkConfig::mahimahi(trace).with_mac(MacConfig::ofdm_20mhz());
    assert_eq!(
        LinkDirection::<convoy_link::NoAqm>::new(mahimahi).err(),
        Some(ConfigError::MacNeedsRate)
    );
    let before = LinkConfig::constant(RATE)
        .with_loss_position(LossPosition::BeforeQueue)
        .with_mac(MacConfig::ofdm_20mhz());
    assert_eq!(
        LinkDirection::<convoy_link::NoAqm>::new(before).err(),
        Some(ConfigError::MacLossBeforeQueue)
    );
}

/// Saturates a link with `n` frames of `len` bytes and returns it drained,
/// with the time the last frame ended (delivered or dropped).
fn saturate(mac: MacConfig, p: f64, len: u32, n: u64, seed: u64) -> (LinkDirection, Time) {
    let config = LinkConfig::constant(RATE)
        .with_loss(LossModel::Bernoulli { p })
        .with_mac(mac)
        .with_seed(seed)
        .with_records(true);
    let mut link: LinkDirection = LinkDirection::new(config).unwrap();
    for id in 0..n {
        link.enqueue(Time::ZERO, len, id);
    }
    while link.poll_delivery(Time::MAX).is_some() {}
    let last = link
        .take_records()
        .iter()
        .filter_map(|r| match r.kind {
            RecordKind::Deliver { .. } => Some(r.t),
            RecordKind::Drop(_) => Some(r.t),
            _ => None,
        })
        .max()
        .unwrap();
    (link, last)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Independent attempt losses p with r retries lose p^(r+1) of frames,
    /// and take as many attempts as the geometric series says.
    #[test]
    fn residual_loss_is_p_to_the_attempts(p in 0.2f64..0.8, retries in 0u8..=7, seed in any::<u64>()) {
        let n = 20_000u64;
        let mac = MacConfig::ofdm_20mhz().with_retry_limit(retries);
        let (link, _) = saturate(mac, p, 200, n, seed);
        let s = link.stats();
        let want = p.powi(i32::from(retries) + 1);
        let got = s.dropped(DropReason::Loss) as f64 / n as f64;
        // Five binomial standard deviations, plus one frame.
        let tol = 5.0 * (want * (1.0 - want) / n as f64).sqrt() + 1.0 / n as f64;
        prop_assert!((got - want).abs() <= tol, "p {p} r {retries}: lost {got}, want {want} ± {tol}");
        prop_assert_eq!(s.delivered + s.dropped(DropReason::Loss), n);
        let attempts = mac.expected(p, Dur::ZERO).attempts * n as f64;
        let sd = (n as f64).sqrt() * (retries as f64 + 1.0);
        prop_assert!((s.mac_attempts as f64 - attempts).abs() <= 5.0 * sd,
            "attempts {} want {attempts}", s.mac_attempts);
    }

    /// The airtime reported is the time the saturated medium was held: each
    /// attempt's fixed part and frame, plus whole backoff slots within the
    /// windows, and it ends with the last frame's ACK.
    #[test]
    fn airtime_accounts_for_every_attempt(p in 0.0f64..0.9, retries in 0u8..=7, len in 1u32..1500, seed in any::<u64>()) {
        let mac = MacConfig::ofdm_20mhz().with_retry_limit(retries);
        let (link, last_end) = saturate(mac, p, len, 300, seed);
        let s = link.stats();
        let body = Dur::from_micros(u64::from(len + mac.header_bytes));
        let per_attempt = (mac.fixed_per_attempt() + body).as_nanos();
        let fixed = s.mac_attempts * per_attempt;
        let airtime = s.mac_airtime.as_nanos();
        prop_assert!(airtime >= fixed);
        let backoff = airtime - fixed;
        let slot = mac.slot.as_nanos();
        prop_assert_eq!(backoff % slot, 0);
        prop_assert!(backoff / slot <= s.mac_attempts * u64::from(mac.cw_max));
        // Back to back from time 0: the medium was never idle.
        let tail = (mac.sifs + mac.ack).as_nanos();
        prop_assert_eq!(airtime, last_end.as_nanos() + tail);
    }
}

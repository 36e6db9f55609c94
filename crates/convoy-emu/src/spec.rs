//! The `--link` syntax: `NAME[:KEY=VALUE[,KEY=VALUE]...]`.
//!
//! One `--link` is what a stack of Mahimahi shells is (`mm-delay 20 mm-loss
//! uplink 0.01 mm-link up.trace down.trace`), written as one word so that
//! several links can sit side by side in one command. Every key applies to
//! both directions unless prefixed with `up-` or `down-`; docs/EMU.md is the
//! reference and `convoy emu --help` repeats it.

use std::path::Path;
use std::sync::Arc;

use convoy_link::{
    splitmix64, Dur, FaultConfig, FqCodelConfig, LinkConfig, LossModel, LossPosition, MacConfig,
    MahimahiTrace, OutagePolicy, PerUeConfig, QueueDiscipline, QueueLimit, SeriesTrace, Time,
};

use crate::ap::ApPolicy;
use crate::error::SpecError;

/// A constant rate standing in for "no bottleneck": 1 Pbit/s serialises a
/// 1500-byte packet in 12 ns, far below what the OS clock can resolve, while
/// keeping the model's exact integer arithmetic (a rate of 0 is invalid).
pub const UNLIMITED_BPS: u64 = 1_000_000_000_000_000;

/// The largest MTU a link accepts (the IPv4 packet size limit).
pub const MAX_MTU: u32 = 65_535;

const KEYS: &str = "rate, up, down, uplink, downlink, offset, delay, jitter, loss, loss-at, \
                    queue, outage, outage-policy, seed, duplicate, corrupt, reorder, reorder-delay, \
                    mac, retries, cw-min, cw-max (these also as up-KEY / down-KEY), mtu, ap, alpha, beta (after ap=voap), \
                    port-delay";

/// Where a direction's capacity comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum RateSpec {
    Unlimited,
    Constant(u64),
    Mahimahi(Arc<MahimahiTrace>),
    Series(Arc<SeriesTrace>),
}

/// What was said about one direction; `None` keeps the model's default (or,
/// for a time-series trace, the trace's own column).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DirectionSpec {
    pub rate: Option<RateSpec>,
    /// Replay the trace from this far into it (`offset=`).
    pub offset: Option<Dur>,
    pub delay: Option<Dur>,
    pub jitter: Option<Dur>,
    pub loss: Option<LossModel>,
    pub loss_at: Option<LossPosition>,
    pub queue: Option<QueueLimit>,
    /// `queue=fq_codel`: per-flow queues instead of the FIFO.
    pub fq_codel: bool,
    /// `queue=per-ue[:LIMIT]`: a buffer per client address (a cell's UE),
    /// each under the queue limit, served round robin.
    pub per_ue: bool,
    pub outages: Option<Vec<(Time, Time)>>,
    pub outage_policy: Option<OutagePolicy>,
    pub seed: Option<u64>,
    /// Faults after the link (convoy_link::FaultStage), as probabilities.
    pub duplicate: Option<f64>,
    pub corrupt: Option<f64>,
    pub reorder: Option<f64>,
    pub reorder_delay: Option<Dur>,
    /// `mac=80211|80211p`: 802.11 retries and backoff at the transmitter.
    pub mac: Option<MacConfig>,
}

/// One emulated link: its name (also its interfaces' name on both sides),
/// its MTU, and its two directions. `up` carries client → server packets.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    pub name: String,
    pub mtu: u32,
    pub up: DirectionSpec,
    pub down: DirectionSpec,
    /// `ap=...`: a smart access point on this link (both directions).
    pub ap: Option<ApPolicy>,
    /// `port-delay=PORT:DELAY/...`: extra one-way delay, each way, for the
    /// packets of flows using that TCP or UDP port (flows behind the AP at
    /// different distances, for RTT fairness).
    pub port_delay: Vec<(u16, Dur)>,
    /// `outage-policy=down`: the client side's interface goes down
    /// (administratively) while either direction is in an outage, and
    /// comes back up, with its address, rule and routes, when both are out
    /// of it. The model drops packets meanwhile, as with `drop`.
    pub iface_down: bool,
}

impl LinkSpec {
    /// A link with nothing configured: unlimited rate, no delay, no loss.
    pub fn new(name: &str) -> Result<LinkSpec, SpecError> {
        let ok = !name.is_empty()
            && name.len() <= 15
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            return Err(SpecError::BadName(name.to_owned()));
        }
        Ok(LinkSpec {
            name: name.to_owned(),
            mtu: 1500,
            up: DirectionSpec::default(),
            down: DirectionSpec::default(),
            ap: None,
            port_delay: Vec::new(),
            iface_down: false,
        })
    }

    /// Parses `NAME[:KEY=VALUE,...]`. Trace files are read here, so a
    /// malformed trace is reported before anything is created.
    pub fn parse(text: &str) -> Result<LinkSpec, SpecError> {
        if !text.contains(':') && text.contains('=') {
            // Options without the name before them (`rate=5mbit`).
            return Err(SpecError::NoName(text.to_owned()));
        }
        let (name, options) = text.split_once(':').unwrap_or((text, ""));
        let mut spec = LinkSpec::new(name)?;
        let mut seen: Vec<String> = Vec::new();
        for item in options.split(',').filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| SpecError::MissingValue(item.to_owned()))?;
            spec.set(key, value, &mut seen)?;
        }
        spec.check_ap()?;
        spec.check_iface_down()?;
        Ok(spec)
    }

    /// An interface that goes down during outages needs outages: without
    /// any, `down` would quietly do nothing, and that is surely a mistake.
    fn check_iface_down(&self) -> Result<(), SpecError> {
        let has_outages = |d: &DirectionSpec| {
            d.outages.as_ref().is_some_and(|o| !o.is_empty())
                || matches!(d.rate, Some(RateSpec::Series(_)))
        };
        if self.iface_down && !has_outages(&self.up) && !has_outages(&self.down) {
            return Err(SpecError::DownPolicyWithoutOutages);
        }
        Ok(())
    }

    /// SAP-LAW needs the capacity it divides: a constant rate each way.
    fn check_ap(&self) -> Result<(), SpecError> {
        let Some(policy) = self.ap else {
            return Ok(());
        };
        if let ApPolicy::Voap { alpha, beta } = policy {
            if alpha >= beta {
                return Err(bad(
                    "alpha",
                    "alpha below beta",
                    &format!("{alpha} ≥ {beta}"),
                ));
            }
        }
        if policy.needs_capacity() && self.capacities().iter().any(Option::is_none) {
            return Err(bad(
                "ap",
                "a link with a constant rate each way for sap-law and sap-law-rtt \
                 (they divide the capacity; voap needs none)",
                policy.name(),
            ));
        }
        Ok(())
    }

    /// Each direction's constant rate (bit/s), `None` for traces and
    /// unlimited links. With `mac=`, what the MAC leaves of the PHY rate
    /// for full-size packets at the direction's attempt loss: the capacity
    /// SAP-LAW divides.
    pub fn capacities(&self) -> [Option<u64>; 2] {
        [&self.up, &self.down].map(|d| match d.rate {
            Some(RateSpec::Constant(bps)) => {
                let p = d
                    .loss
                    .as_ref()
                    .and_then(|l| l.theoretical_loss_rate())
                    .unwrap_or(0.0);
                let mut c = LinkConfig::constant(bps);
                c.mac = d.mac;
                let share = c.mac_share_and_loss(bps as f64, p).0;
                Some((bps as f64 * share).round() as u64)
            }
            _ => None,
        })
    }

    /// Extra one-way delay of a packet from or to `port`, if any.
    pub fn port_delay_of(&self, sport: u16, dport: u16) -> Option<Dur> {
        self.port_delay
            .iter()
            .find(|(p, _)| *p == sport || *p == dport)
            .map(|(_, d)| *d)
    }

    fn set(&mut self, key: &str, value: &str, seen: &mut Vec<String>) -> Result<(), SpecError> {
        match key {
            "ap" => {
                mark(seen, "ap")?;
                let (name, opt) = value.split_once(':').unwrap_or((value, ""));
                self.ap = Some(match name {
                    "sap-law" => ApPolicy::SapLaw,
                    "sap-law-rtt" => ApPolicy::SapLawRtt,
                    "voap" => ApPolicy::voap_default(),
                    _ => return Err(bad(key, ApPolicy::NAMES, value)),
                });
                if !opt.is_empty() {
                    let (k, v) = opt
                        .split_once('=')
                        .ok_or_else(|| SpecError::MissingValue(opt.to_owned()))?;
                    return self.set(k, v, seen);
                }
                return Ok(());
            }
            "alpha" | "beta" => {
                mark(seen, key)?;
                let d = parse_duration(key, value)?;
                let Some(ApPolicy::Voap { alpha, beta }) = &mut self.ap else {
                    return Err(bad(
                        key,
                        "to follow ap=voap (it is a VoAP threshold)",
                        value,
                    ));
                };
                if key == "alpha" {
                    *alpha = d;
                } else {
                    *beta = d;
                }
                return Ok(());
            }
            "port-delay" => {
                mark(seen, key)?;
                self.port_delay = parse_port_delays(key, value)?;
                return Ok(());
            }
            _ => {}
        }
        if key == "mtu" {
            mark(seen, "mtu")?;
            self.mtu = parse_int(key, value)
                .ok()
                .filter(|m| (68..=u64::from(MAX_MTU)).contains(m))
                .ok_or_else(|| bad(key, "an MTU in bytes from 68 to 65535", value))?
                as u32;
            return Ok(());
        }
        let (dirs, base) = match key {
            "up" | "uplink" => (Dirs::Up, "rate"),
            "down" | "downlink" => (Dirs::Down, "rate"),
            _ => match (key.strip_prefix("up-"), key.strip_prefix("down-")) {
                (Some(k), _) => (Dirs::Up, k),
                (_, Some(k)) => (Dirs::Down, k),
                _ => (Dirs::Both, key),
            },
        };
        // One value is parsed once (a trace is read once) and shared.
        let apply = |spec: &mut LinkSpec, f: &dyn Fn(&mut DirectionSpec)| match dirs {
            Dirs::Up => f(&mut spec.up),
            Dirs::Down => f(&mut spec.down),
            Dirs::Both => {
                f(&mut spec.up);
                f(&mut spec.down)
            }
        };
        for d in dirs.names() {
            mark(seen, &format!("{d}-{base}"))?;
        }
        match base {
            "rate" => {
                let r = parse_rate_or_trace(key, value)?;
                apply(self, &|d| d.rate = Some(r.clone()));
            }
            "offset" => {
                let v = parse_duration(key, value)?;
                apply(self, &|d| d.offset = Some(v));
            }
            "delay" => {
                let v = parse_duration(key, value)?;
                apply(self, &|d| d.delay = Some(v));
            }
            "jitter" => {
                let v = parse_duration(key, value)?;
                apply(self, &|d| d.jitter = Some(v));
            }
            "loss" => {
                let v = parse_loss(key, value)?;
                apply(self, &|d| d.loss = Some(v.clone()));
            }
            "loss-at" => {
                let v = match value {
                    "after" => LossPosition::AfterQueue,
                    "before" => LossPosition::BeforeQueue,
                    _ => return Err(bad(key, "before or after (the queue)", value)),
                };
                apply(self, &|d| d.loss_at = Some(v));
            }
            "queue" if value == "fq_codel" || value == "fq-codel" => {
                apply(self, &|d| d.fq_codel = true);
            }
            "queue" if value.starts_with("per-ue") || value.starts_with("per_ue") => {
                let limit = match &value[6..] {
                    "" => None,
                    rest => match rest.strip_prefix(':') {
                        Some(l) => Some(parse_queue(key, l)?),
                        None => return Err(bad(key, "per-ue or per-ue:LIMIT", value)),
                    },
                };
                apply(self, &|d| {
                    d.per_ue = true;
                    if limit.is_some() {
                        d.queue = limit;
                    }
                });
            }
            "queue" => {
                let v = parse_queue(key, value)?;
                apply(self, &|d| d.queue = Some(v));
            }
            "outage" => {
                let v = parse_outages(key, value)?;
                apply(self, &|d| d.outages = Some(v.clone()));
            }
            "outage-policy" => {
                let v = match value {
                    "hold" => OutagePolicy::Hold,
                    "drop" => OutagePolicy::Drop,
                    // The interface goes down, which is both directions;
                    // the model drops what would cross it meanwhile.
                    "down" if matches!(dirs, Dirs::Both) => {
                        self.iface_down = true;
                        OutagePolicy::Drop
                    }
                    "down" => return Err(SpecError::DownPolicyOneDirection(key.to_owned())),
                    _ => return Err(bad(key, "hold, drop or down", value)),
                };
                apply(self, &|d| d.outage_policy = Some(v));
            }
            "seed" => {
                let v = parse_int(key, value)?;
                apply(self, &|d| d.seed = Some(v));
            }
            "duplicate" => {
                let v = parse_probability(key, value)?;
                apply(self, &|d| d.duplicate = Some(v));
            }
            "corrupt" => {
                let v = parse_probability(key, value)?;
                apply(self, &|d| d.corrupt = Some(v));
            }
            "reorder" => {
                let v = parse_probability(key, value)?;
                apply(self, &|d| d.reorder = Some(v));
            }
            "reorder-delay" => {
                let v = parse_duration(key, value)?;
                apply(self, &|d| d.reorder_delay = Some(v));
            }
            "mac" => {
                let (name, opt) = value.split_once(':').unwrap_or((value, ""));
                let mac = match name {
                    "80211" => Some(MacConfig::ofdm_20mhz()),
                    "80211p" => Some(MacConfig::its_10mhz()),
                    "none" => None,
                    _ => return Err(bad(key, "80211, 80211p or none", value)),
                };
                apply(self, &|d| d.mac = mac);
                if !opt.is_empty() {
                    // `mac=80211:retries=3`: the option belongs to the same
                    // directions as the mac key.
                    let (k, v) = opt
                        .split_once('=')
                        .ok_or_else(|| SpecError::MissingValue(opt.to_owned()))?;
                    let prefixed = match dirs {
                        Dirs::Up => format!("up-{k}"),
                        Dirs::Down => format!("down-{k}"),
                        Dirs::Both => k.to_owned(),
                    };
                    return self.set(&prefixed, v, seen);
                }
            }
            "retries" | "cw-min" | "cw-max" => {
                let limit = if base == "retries" { 255 } else { 65_535 };
                let n = parse_int(key, value)
                    .ok()
                    .filter(|n| *n <= limit)
                    .ok_or_else(|| {
                        bad(
                            key,
                            if base == "retries" {
                                "a retry count from 0 to 255"
                            } else {
                                "a contention window in slots from 0 to 65535"
                            },
                            value,
                        )
                    })?;
                let has_mac = match dirs {
                    Dirs::Up => self.up.mac.is_some(),
                    Dirs::Down => self.down.mac.is_some(),
                    Dirs::Both => self.up.mac.is_some() && self.down.mac.is_some(),
                };
                if !has_mac {
                    return Err(bad(
                        key,
                        "to follow mac=80211 or mac=80211p (it is an 802.11 MAC setting)",
                        value,
                    ));
                }
                let set = |d: &mut DirectionSpec| {
                    if let Some(m) = &mut d.mac {
                        match base {
                            "retries" => m.retry_limit = n as u8,
                            "cw-min" => m.cw_min = n as u16,
                            _ => m.cw_max = n as u16,
                        }
                    }
                };
                apply(self, &set);
            }
            _ => {
                return Err(SpecError::UnknownKey {
                    key: key.to_owned(),
                    expected: KEYS,
                })
            }
        }
        Ok(())
    }

    /// The faults after the link of each direction (uplink, downlink),
    /// seeded from the directions' own seeds.
    pub fn fault_stages(
        &self,
        up: &LinkConfig,
        down: &LinkConfig,
    ) -> Result<(convoy_link::FaultStage, convoy_link::FaultStage), SpecError> {
        Ok((
            convoy_link::FaultStage::new(&self.up.faults(), up.seed)?,
            convoy_link::FaultStage::new(&self.down.faults(), down.seed)?,
        ))
    }

    /// The model configuration of each direction (uplink, downlink). Seeds
    /// default to values derived from the link's position and direction, so
    /// no two directions share a loss pattern unless told to.
    pub fn configs(&self, index: usize) -> Result<(LinkConfig, LinkConfig), SpecError> {
        let mut state = index as u64;
        let up = self.up.config(splitmix64(&mut state))?;
        let down = self.down.config(splitmix64(&mut state))?;
        // Building the model once here reports invalid values (a loss
        // probability above 1, an empty outage) before anything is created.
        convoy_link::LinkDirection::<convoy_link::NoAqm>::new(up.clone())?;
        convoy_link::LinkDirection::<convoy_link::NoAqm>::new(down.clone())?;
        Ok((up, down))
    }
}

impl DirectionSpec {
    /// The faults after the link.
    pub fn faults(&self) -> FaultConfig {
        FaultConfig {
            duplicate: self.duplicate.unwrap_or(0.0),
            corrupt: self.corrupt.unwrap_or(0.0),
            reorder: self.reorder.unwrap_or(0.0),
            reorder_delay: self
                .reorder_delay
                .unwrap_or(FaultConfig::DEFAULT_REORDER_DELAY),
        }
    }

    fn config(&self, default_seed: u64) -> Result<LinkConfig, SpecError> {
        let rate = self.rate.clone().unwrap_or(RateSpec::Unlimited);
        let mut c = match (rate, self.offset) {
            (RateSpec::Unlimited | RateSpec::Constant(_), Some(_)) => {
                return Err(SpecError::OffsetWithoutTrace)
            }
            (RateSpec::Unlimited, None) => LinkConfig::constant(UNLIMITED_BPS),
            (RateSpec::Constant(bps), None) => LinkConfig::constant(bps),
            (RateSpec::Mahimahi(t), None) => LinkConfig::mahimahi(t),
            (RateSpec::Mahimahi(t), Some(o)) => LinkConfig::mahimahi(Arc::new(t.starting_at(o))),
            (RateSpec::Series(t), None) => LinkConfig::series(t),
            (RateSpec::Series(t), Some(o)) => LinkConfig::series(Arc::new(t.starting_at(o))),
        };
        if let Some(d) = self.delay {
            c = c.with_delay(d);
        }
        if let Some(j) = self.jitter {
            c = c.with_jitter(j, false);
        }
        if let Some(l) = &self.loss {
            c = c.with_loss(l.clone());
        }
        if let Some(p) = self.loss_at {
            c = c.with_loss_position(p);
        }
        if let Some(m) = self.mac {
            c = c.with_mac(m);
        }
        if let Some(q) = self.queue {
            c = c.with_queue(q);
        }
        if self.fq_codel {
            c = c.with_discipline(QueueDiscipline::FqCodel(FqCodelConfig::default()));
        }
        if self.per_ue {
            c = c.with_discipline(QueueDiscipline::PerUe(PerUeConfig::default()));
        }
        if let Some(o) = &self.outages {
            c = c.with_outages(o.clone(), self.outage_policy.unwrap_or_default());
        } else if let Some(p) = self.outage_policy {
            c = c.with_outage_policy(p);
        }
        // Records are always on: they are how the driver learns which
        // payloads the model dropped after queueing them.
        Ok(c.with_seed(self.seed.unwrap_or(default_seed))
            .with_records(true))
    }
}

#[derive(Clone, Copy)]
enum Dirs {
    Up,
    Down,
    Both,
}

impl Dirs {
    fn names(self) -> &'static [&'static str] {
        match self {
            Dirs::Up => &["up"],
            Dirs::Down => &["down"],
            Dirs::Both => &["up", "down"],
        }
    }
}

fn mark(seen: &mut Vec<String>, what: &str) -> Result<(), SpecError> {
    if seen.iter().any(|s| s == what) {
        return Err(SpecError::Duplicate(what.to_owned()));
    }
    seen.push(what.to_owned());
    Ok(())
}

fn bad(key: &str, expected: &'static str, found: &str) -> SpecError {
    SpecError::BadValue {
        key: key.to_owned(),
        expected,
        found: found.to_owned(),
    }
}

fn parse_int(key: &str, value: &str) -> Result<u64, SpecError> {
    value
        .parse()
        .map_err(|_| bad(key, "a non-negative integer", value))
}

/// Splits `12.5ms` into (12.5, "ms"); the number must be finite and >= 0.
fn number_and_unit(value: &str) -> Option<(f64, &str)> {
    let end = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let n: f64 = value[..end].parse().ok()?;
    (n.is_finite() && n >= 0.0).then_some((n, &value[end..]))
}

/// `1%` or `0.01`.
fn parse_probability(key: &str, value: &str) -> Result<f64, SpecError> {
    let p = match value.strip_suffix('%') {
        Some(pct) => pct.parse::<f64>().map(|v| v / 100.0),
        None => value.parse::<f64>(),
    };
    p.ok()
        .filter(|p| (0.0..=1.0).contains(p))
        .ok_or_else(|| bad(key, "a probability (1% or 0.01)", value))
}

/// `20ms`, `500us`, `1.5s`, `0`.
pub fn parse_duration(key: &str, value: &str) -> Result<Dur, SpecError> {
    const EXPECTED: &str = "a duration such as 20ms, 500us or 1.5s";
    let (n, unit) = number_and_unit(value).ok_or_else(|| bad(key, EXPECTED, value))?;
    let scale = match unit {
        "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "" if n == 0.0 => 1.0,
        _ => return Err(bad(key, EXPECTED, value)),
    };
    Ok(Dur::from_nanos((n * scale).round() as u64))
}

/// `50mbit`, `1.5gbit`, `64kbps` (`convoy_units`' grammar) or `unlimited`:
/// bits per second.
pub fn parse_rate(value: &str) -> Option<RateSpec> {
    if value == "unlimited" {
        return Some(RateSpec::Unlimited);
    }
    convoy_units::parse_rate_bps(value)
        .ok()
        .filter(|&bps| bps <= UNLIMITED_BPS)
        .map(RateSpec::Constant)
}

fn parse_rate_or_trace(key: &str, value: &str) -> Result<RateSpec, SpecError> {
    if let Some(r) = parse_rate(value) {
        return Ok(r);
    }
    let path = Path::new(value);
    if !path.is_file() {
        return Err(SpecError::NotRateOrTrace {
            key: key.to_owned(),
            found: value.to_owned(),
        });
    }
    // A time-series trace is CSV with a header; a Mahimahi trace is one
    // integer per line, so the extension is enough to tell them apart.
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
    {
        Ok(RateSpec::Series(Arc::new(SeriesTrace::from_file(path)?)))
    } else {
        Ok(RateSpec::Mahimahi(Arc::new(MahimahiTrace::from_file(
            path,
        )?)))
    }
}

/// `1%`, `0.01`, `ge:P_GB/P_BG[/LOSS_GOOD/LOSS_BAD]`, `every:N`.
fn parse_loss(key: &str, value: &str) -> Result<LossModel, SpecError> {
    const EXPECTED: &str =
        "a probability (1% or 0.01), ge:P_GB/P_BG[/LOSS_GOOD/LOSS_BAD] or every:N";
    let prob = |s: &str| -> Result<f64, SpecError> {
        let p = match s.strip_suffix('%') {
            Some(pct) => pct.parse::<f64>().map(|v| v / 100.0),
            None => s.parse::<f64>(),
        };
        p.ok()
            .filter(|p| (0.0..=1.0).contains(p))
            .ok_or_else(|| bad(key, EXPECTED, value))
    };
    if let Some(rest) = value.strip_prefix("ge:") {
        let ps = rest.split('/').map(prob).collect::<Result<Vec<_>, _>>()?;
        return match ps[..] {
            [p_gb, p_bg] => Ok(LossModel::gilbert(p_gb, p_bg)),
            [p_gb, p_bg, loss_good, loss_bad] => Ok(LossModel::GilbertElliott {
                p_gb,
                p_bg,
                loss_good,
                loss_bad,
            }),
            _ => Err(bad(key, EXPECTED, value)),
        };
    }
    if let Some(n) = value.strip_prefix("every:") {
        let n = n
            .parse::<u64>()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| bad(key, EXPECTED, value))?;
        return Ok(LossModel::EveryNth { n });
    }
    let p = prob(value)?;
    Ok(if p == 0.0 {
        LossModel::None
    } else {
        LossModel::Bernoulli { p }
    })
}

/// `unlimited`, `100` or `100pkt` (packets), `150kB`, `64KiB`, `1MB` (bytes).
fn parse_queue(key: &str, value: &str) -> Result<QueueLimit, SpecError> {
    const EXPECTED: &str = "unlimited, a packet count (100 or 100pkt) or a size (150kB, 64KiB)";
    if value == "unlimited" {
        return Ok(QueueLimit::Unlimited);
    }
    let (n, unit) = number_and_unit(value).ok_or_else(|| bad(key, EXPECTED, value))?;
    let (bytes, scale) = match unit {
        "" | "pkt" | "pkts" | "p" => (false, 1.0),
        "B" => (true, 1.0),
        "kB" | "KB" => (true, 1e3),
        "KiB" => (true, 1024.0),
        "MB" => (true, 1e6),
        "MiB" => (true, 1_048_576.0),
        _ => return Err(bad(key, EXPECTED, value)),
    };
    let v = (n * scale).round() as u64;
    if v == 0 || (!bytes && n.fract() != 0.0) {
        return Err(bad(key, EXPECTED, value));
    }
    Ok(if bytes {
        QueueLimit::Bytes(v)
    } else {
        QueueLimit::Packets(v)
    })
}

/// `5202:20ms` or several joined by `/`: `5202:20ms/5203:70ms`.
fn parse_port_delays(key: &str, value: &str) -> Result<Vec<(u16, Dur)>, SpecError> {
    const EXPECTED: &str = "PORT:DELAY pairs such as 5202:20ms/5203:70ms";
    value
        .split('/')
        .map(|item| {
            let (port, delay) = item
                .split_once(':')
                .ok_or_else(|| bad(key, EXPECTED, value))?;
            let port: u16 = port
                .parse()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad(key, EXPECTED, value))?;
            Ok((port, parse_duration(key, delay)?))
        })
        .collect()
}

/// `10s-12s` or several joined by `/`: `10s-12s/30s-31.5s`.
fn parse_outages(key: &str, value: &str) -> Result<Vec<(Time, Time)>, SpecError> {
    value
        .split('/')
        .map(|iv| {
            let (a, b) = iv
                .split_once('-')
                .ok_or_else(|| bad(key, "START-END intervals such as 10s-12s/30s-31s", value))?;
            let (a, b) = (parse_duration(key, a)?, parse_duration(key, b)?);
            Ok((
                Time::from_nanos(a.as_nanos()),
                Time::from_nanos(b.as_nanos()),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_keys() {
        let s = LinkSpec::parse("wifi:rate=54mbit,mac=80211:retries=3,cw-max=255").unwrap();
        let mac = s.up.mac.unwrap();
        assert_eq!((mac.retry_limit, mac.cw_min, mac.cw_max), (3, 15, 255));
        assert_eq!(s.down.mac, s.up.mac);
        // SAP-LAW divides what 54 Mbit/s leaves for 1500-byte packets.
        let c = s.capacities()[0].unwrap();
        assert!((29_000_000..30_000_000).contains(&c), "{c}");
        let (up, _) = s.configs(0).unwrap();
        assert_eq!(up.mac, Some(mac));
        let s = LinkSpec::parse("v:rate=6mbit,up-mac=80211p:retries=1").unwrap();
        assert_eq!(s.up.mac.unwrap().retry_limit, 1);
        assert_eq!(s.up.mac.unwrap().aifsn, 6);
        assert_eq!(s.down.mac, None);
        let err = |t: &str| {
            LinkSpec::parse(t)
                .and_then(|s| s.configs(0))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("w:mac=80211:retries=x"),
            "retries: expected a retry count from 0 to 255, found \"x\""
        );
        assert_eq!(
            err("w:mac=80211b"),
            "mac: expected 80211, 80211p or none, found \"80211b\""
        );
        assert!(err("w:retries=3").contains("to follow mac=80211"));
        assert!(err("w:mac=80211,retries=1,retries=2").contains("given twice"));
        assert!(err("w:rate=1mbit,mac=80211,cw-min=31,cw-max=15").contains("CWmin (31)"));
        assert!(!err("w:rate=1mbit,mac=80211,cw-min=31,cw-max=15").contains('\n'));
    }

    #[test]
    fn fault_keys() {
        let s = LinkSpec::parse("wifi:duplicate=1%,up-corrupt=0.002,reorder=5%,reorder-delay=3ms")
            .unwrap();
        let up = s.up.faults();
        assert_eq!((up.duplicate, up.corrupt, up.reorder), (0.01, 0.002, 0.05));
        assert_eq!(up.reorder_delay, Dur::from_millis(3));
        assert_eq!(s.down.faults().corrupt, 0.0);
        assert!(LinkSpec::parse("w:duplicate=150%").is_err());
        assert!(LinkSpec::parse("w:reorder=x").is_err());
        assert!(LinkSpec::parse("w:corrupt=1%,corrupt=2%").is_err());
    }

    #[test]
    fn full_spec() {
        let s = LinkSpec::parse(
            "lte:rate=50mbit,up-delay=30ms,down-delay=10ms,loss=1%,queue=100,seed=7,mtu=1400",
        )
        .unwrap();
        assert_eq!(s.name, "lte");
        assert_eq!(s.mtu, 1400);
        assert_eq!(s.up.rate, Some(RateSpec::Constant(50_000_000)));
        assert_eq!(s.down.rate, Some(RateSpec::Constant(50_000_000)));
        assert_eq!(s.up.delay, Some(Dur::from_millis(30)));
        assert_eq!(s.down.delay, Some(Dur::from_millis(10)));
        assert_eq!(s.up.loss, Some(LossModel::Bernoulli { p: 0.01 }));
        assert_eq!(s.down.queue, Some(QueueLimit::Packets(100)));
        let (up, down) = s.configs(0).unwrap();
        assert_eq!((up.seed, down.seed), (7, 7));
    }

    #[test]
    fn values() {
        assert_eq!(parse_duration("d", "1.5s").unwrap(), Dur::from_millis(1500));
        assert_eq!(parse_duration("d", "0").unwrap(), Dur::ZERO);
        assert!(parse_duration("d", "20").is_err());
        assert_eq!(
            parse_rate("1.5Gbit"),
            Some(RateSpec::Constant(1_500_000_000))
        );
        assert_eq!(parse_rate("64kbps"), Some(RateSpec::Constant(64_000)));
        assert_eq!(parse_rate("fast"), None);
        assert_eq!(parse_queue("q", "64KiB").unwrap(), QueueLimit::Bytes(65536));
        assert!(parse_queue("q", "1.5").is_err());
        assert_eq!(
            parse_loss("l", "ge:0.01/0.3").unwrap(),
            LossModel::gilbert(0.01, 0.3)
        );
        assert_eq!(parse_loss("l", "0").unwrap(), LossModel::None);
        assert!(parse_loss("l", "150%").is_err());
        assert_eq!(
            parse_outages("o", "1s-2s/3s-3.5s").unwrap(),
            vec![
                (Time::from_secs(1), Time::from_secs(2)),
                (Time::from_secs(3), Time::from_millis(3500))
            ]
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let e = LinkSpec::parse("lte:bogus=1").unwrap_err().to_string();
        assert!(e.starts_with("unknown option \"bogus\""), "{e}");
        let e = LinkSpec::parse("lte:delay=20ms,delay=1ms")
            .unwrap_err()
            .to_string();
        assert!(e.contains("twice"), "{e}");
        let e = LinkSpec::parse("a-very-long-interface-name").unwrap_err();
        assert!(matches!(e, SpecError::BadName(_)));
        let e = LinkSpec::parse("lte:up=/nonexistent/trace").unwrap_err();
        assert!(matches!(e, SpecError::NotRateOrTrace { .. }));
        let e = LinkSpec::parse("lte:delay").unwrap_err();
        assert!(matches!(e, SpecError::MissingValue(_)));
        let e = LinkSpec::parse("rate=5mbit,delay=20ms").unwrap_err();
        assert!(matches!(e, SpecError::NoName(_)), "{e}");
        assert!(e.to_string().contains("link:rate=5mbit"), "{e}");
    }

    #[test]
    fn offset_replays_a_trace_from_a_point_into_it_and_needs_a_trace() {
        let trace = format!(
            "{}/../../../shared/traces/TMobile-LTE-short.up",
            env!("CARGO_MANIFEST_DIR")
        );
        if std::path::Path::new(&trace).is_file() {
            let s = LinkSpec::parse(&format!("lte:up={trace},down=10mbit,up-offset=30s")).unwrap();
            assert_eq!(s.up.offset, Some(Dur::from_secs(30)));
            let (up, _) = s.configs(0).unwrap();
            match up.capacity {
                convoy_link::Capacity::Mahimahi(t) => {
                    assert!(t.source().ends_with("from 30000 ms"))
                }
                other => panic!("{other:?}"),
            }
        }
        let e = LinkSpec::parse("lte:rate=10mbit,offset=5s")
            .unwrap()
            .configs(0)
            .unwrap_err();
        assert!(matches!(e, SpecError::OffsetWithoutTrace), "{e}");
    }

    #[test]
    fn per_ue_queues() {
        let s = LinkSpec::parse("cell:rate=10mbit,queue=per-ue:200").unwrap();
        assert!(s.up.per_ue && s.down.per_ue && !s.up.fq_codel);
        assert_eq!(s.up.queue, Some(QueueLimit::Packets(200)));
        let (up, down) = s.configs(0).unwrap();
        assert!(matches!(up.discipline, QueueDiscipline::PerUe(_)));
        assert!(matches!(down.discipline, QueueDiscipline::PerUe(_)));
        assert_eq!(up.queue, QueueLimit::Packets(200));
        // Without a limit, the direction's own; one direction only.
        let s = LinkSpec::parse("cell:rate=10mbit,up-queue=per_ue,down-queue=64KiB").unwrap();
        assert!(s.up.per_ue && !s.down.per_ue);
        assert_eq!(s.up.queue, None);
        assert_eq!(s.down.queue, Some(QueueLimit::Bytes(65536)));
        for bad in ["per-ue:", "per-ue:0", "per-uex", "per-ue:fq_codel"] {
            assert!(
                LinkSpec::parse(&format!("cell:rate=1mbit,queue={bad}")).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn access_point_and_fq_codel() {
        let s =
            LinkSpec::parse("wifi:rate=20mbit,queue=fq_codel,ap=voap:alpha=2ms,beta=8ms").unwrap();
        assert_eq!(
            s.ap,
            Some(ApPolicy::Voap {
                alpha: Dur::from_millis(2),
                beta: Dur::from_millis(8)
            })
        );
        assert!(s.up.fq_codel && s.down.fq_codel);
        let (up, _) = s.configs(0).unwrap();
        assert!(matches!(up.discipline, QueueDiscipline::FqCodel(_)));
        let s = LinkSpec::parse("wifi:rate=10mbit,ap=sap-law-rtt,port-delay=5202:10ms/5203:35ms")
            .unwrap();
        assert_eq!(s.ap, Some(ApPolicy::SapLawRtt));
        assert_eq!(s.port_delay_of(40000, 5203), Some(Dur::from_millis(35)));
        assert_eq!(s.port_delay_of(40000, 5201), None);
        assert_eq!(s.capacities(), [Some(10_000_000); 2]);
        assert_eq!(
            LinkSpec::parse("w:ap=voap").unwrap().ap,
            Some(ApPolicy::voap_default())
        );
    }

    #[test]
    fn access_point_errors() {
        let e = |t: &str| LinkSpec::parse(t).unwrap_err().to_string();
        assert!(
            e("w:ap=sap-law").contains("constant rate"),
            "{}",
            e("w:ap=sap-law")
        );
        assert!(e("w:rate=1mbit,ap=magic").contains("sap-law, sap-law-rtt or voap"));
        assert!(e("w:rate=1mbit,beta=5ms").contains("ap=voap"));
        assert!(e("w:ap=voap,alpha=10ms,beta=5ms").contains("alpha below beta"));
        assert!(e("w:ap=voap:alpha=10ms").contains("alpha below beta"));
        assert!(e("w:port-delay=80").contains("PORT:DELAY"));
        assert!(e("w:port-delay=0:5ms").contains("PORT:DELAY"));
        assert!(e("w:ap=voap,ap=voap").contains("twice"));
    }

    #[test]
    fn outage_policy_down_is_drop_for_the_model_and_takes_the_interface_down() {
        let s = LinkSpec::parse("wifi:rate=20mbit,outage=1s-2s,outage-policy=down").unwrap();
        assert!(s.iface_down);
        assert_eq!(s.up.outage_policy, Some(OutagePolicy::Drop));
        assert_eq!(s.down.outage_policy, Some(OutagePolicy::Drop));
        let (up, down) = s.configs(0).unwrap();
        assert_eq!(
            (up.outage, down.outage),
            (OutagePolicy::Drop, OutagePolicy::Drop)
        );
        // One direction's outages are enough: the interface serves both.
        let s = LinkSpec::parse("wifi:up-outage=1s-2s,outage-policy=down").unwrap();
        assert!(s.iface_down && s.down.outages.is_none());
        assert!(
            !LinkSpec::parse("wifi:outage=1s-2s,outage-policy=drop")
                .unwrap()
                .iface_down
        );
    }

    #[test]
    fn outage_policy_down_errors() {
        let e = |t: &str| LinkSpec::parse(t).unwrap_err().to_string();
        assert!(e("w:outage=1s-2s,up-outage-policy=down").starts_with("up-outage-policy=down:"));
        assert!(e("w:outage=1s-2s,down-outage-policy=down").contains("no up-/down- prefix"));
        assert!(e("w:rate=1mbit,outage-policy=down").contains("this link has none"));
        assert!(e("w:outage=1s-2s,outage-policy=off").contains("hold, drop or down"));
        assert!(e("w:outage=1s-2s,outage-policy=down,up-outage-policy=hold").contains("twice"));
        for text in [
            "w:outage=1s-2s,up-outage-policy=down",
            "w:outage-policy=down",
        ] {
            assert_eq!(e(text).lines().count(), 1, "{text}");
        }
    }

    #[test]
    fn malformed_trace_gives_file_and_line() {
        let dir = std::env::temp_dir().join(format!("convoy-emu-spec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.up");
        std::fs::write(&path, "0\n1\nthree\n").unwrap();
        let e = LinkSpec::parse(&format!("lte:up={}", path.display()))
            .unwrap_err()
            .to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            e.ends_with(
                "bad.up:3: expected a non-negative integer number of milliseconds, found \"three\""
            ),
            "{e}"
        );
    }
}

//! `--priority background` in virtual time: convoy's scavenger beside a
//! VoIP-like flow and against the simulator's Cubic reference, over one
//! shared 10 Mbit/s uplink with a 250-packet drop-tail queue and 60 ms of
//! round trip (SPEC S4, issue 18's targets). These tune the controller;
//! the kernel-flow measurements are the `background` experiment's.
//!
//! A small multi-flow harness: several client/server endpoint pairs and a
//! constant-bit-rate "VoIP" source share one `Link`; every datagram's
//! queueing delay comes from the link itself.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use convoy_link::{Dur, Enqueued, Link, LinkConfig, LossModel, MahimahiTrace, QueueLimit, Time};
use convoy_proto::cc::{BackgroundConfig, Priority};
use convoy_proto::{Config, ConnectionHandle, Endpoint, Keypair, Mode, RateControl, StreamId};
use convoy_sim::reference;

// Only the shared drive is needed here, not the cellular link.
#[allow(dead_code)]
mod support;

const C_BPS: u64 = 10_000_000;
const ONE_WAY: Dur = Dur::from_millis(30);
const VOIP_ID: u64 = 1 << 62;
const HEADERS: u32 = 28;

fn link(loss: f64, seed: u64) -> LinkConfig {
    let model = if loss > 0.0 {
        LossModel::Bernoulli { p: loss }
    } else {
        LossModel::None
    };
    LinkConfig::constant(C_BPS)
        .with_delay(ONE_WAY)
        .with_queue(QueueLimit::Packets(250))
        .with_loss(model)
        .with_seed(seed)
}

/// Which controller a bulk flow runs.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Background,
    Cubic,
}

struct Flow {
    client: Endpoint,
    server: Endpoint,
    ch: ConnectionHandle,
    sh: Option<ConnectionHandle>,
    stream: Option<StreamId>,
    start: Duration,
    /// Bytes the server read, per 100 ms bin.
    read: Vec<u64>,
    /// IP bytes of this flow the uplink delivered, per 100 ms bin.
    link: Vec<u64>,
}

impl Flow {
    fn new(kind: Kind, start: Duration, seed: u64) -> Flow {
        let mut c = Config::for_mode(Keypair::generate(), Mode::RlncBbr);
        match kind {
            Kind::Background => {
                Priority::Background.apply(&mut c);
                // CONVOY_BG_TARGET_MS tries another target (tuning runs).
                if let Some(ms) = std::env::var("CONVOY_BG_TARGET_MS")
                    .ok()
                    .and_then(|v| v.parse::<f64>().ok())
                {
                    c.rate_control = RateControl::Background(BackgroundConfig {
                        target: Duration::from_micros((ms * 1000.0) as u64),
                        ..BackgroundConfig::default()
                    });
                }
            }
            Kind::Cubic => c.rate_control = reference::cubic(),
        }
        c.seed = Some(seed);
        let mut s = Config::for_mode(Keypair::generate(), Mode::RlncBbr);
        s.seed = Some(seed + 1);
        let key = s.keypair.public;
        let client = Endpoint::new(c, false).unwrap();
        let server = Endpoint::new(s, true).unwrap();
        let mut f = Flow {
            client,
            server,
            ch: ConnectionHandle(0),
            sh: None,
            stream: None,
            start,
            read: Vec::new(),
            link: Vec::new(),
        };
        f.ch = f.client.connect(start, server_addr(), Some(&key)).unwrap();
        f
    }

    fn goodput_bps(&self, from: Duration, to: Duration) -> f64 {
        let (a, b) = (bin(from), bin(to).min(self.read.len()));
        let bytes: u64 = self.read.get(a..b).map_or(0, |s| s.iter().sum());
        bytes as f64 * 8.0 / (to - from).as_secs_f64()
    }
}

fn client_addr() -> SocketAddr {
    "10.0.0.1:40000".parse().unwrap()
}

fn server_addr() -> SocketAddr {
    "10.0.0.2:4433".parse().unwrap()
}

fn bin(t: Duration) -> usize {
    (t.as_millis() / 100) as usize
}

fn to_time(d: Duration) -> Time {
    Time::from_nanos(d.as_nanos() as u64)
}

/// What a run measured.
struct Outcome {
    flows: Vec<Flow>,
    /// (send time, queueing delay in ms) of every VoIP packet delivered.
    voip: Vec<(Duration, f64)>,
    voip_sent: u64,
    /// IP bytes the uplink delivered per 100 ms bin (all flows).
    uplink: Vec<u64>,
}

/// Runs the flows (each from its start) and a VoIP source (172-byte
/// payloads every 20 ms, from `voip_from`) over one uplink for `until`.
fn run(
    kinds: &[(Kind, Duration)],
    voip_from: Option<Duration>,
    loss: f64,
    until: Duration,
) -> Outcome {
    run_over(kinds, voip_from, link(loss, 7), link(0.0, 8), until)
}

/// [`run`] over any pair of link directions.
fn run_over(
    kinds: &[(Kind, Duration)],
    voip_from: Option<Duration>,
    up: LinkConfig,
    down: LinkConfig,
    until: Duration,
) -> Outcome {
    let mut net: Link = Link::new(up, down).unwrap();
    let mut flows: Vec<Flow> = kinds
        .iter()
        .enumerate()
        .map(|(i, &(k, s))| Flow::new(k, s, 100 + 10 * i as u64))
        .collect();
    let mut held: HashMap<u64, (usize, Vec<u8>)> = HashMap::new();
    let mut next_id = 0u64;
    let mut buf = vec![0u8; 65_536];
    let filler = vec![0x5au8; 256 * 1024];
    let mut voip = Vec::new();
    let mut voip_sent = 0u64;
    let mut next_voip = voip_from;
    let mut now = Duration::ZERO;
    let mut uplink = Vec::new();
    while now < until {
        for (i, f) in flows.iter_mut().enumerate() {
            if now < f.start {
                continue;
            }
            if f.sh.is_none() {
                f.sh = f.server.accept();
            }
            if let Some(c) = f.client.connection(f.ch).filter(|c| c.is_established()) {
                if f.stream.is_none() {
                    f.stream = c.open_stream().ok();
                }
                if let Some(id) = f.stream {
                    while c.write_room(id) > 0 {
                        let n = c.write_room(id).min(filler.len());
                        if c.write(id, &filler[..n]).unwrap_or(0) == 0 {
                            break;
                        }
                    }
                }
            }
            if let Some(c) = f.sh.and_then(|h| f.server.connection(h)) {
                while c.accept_stream().is_some() {}
                loop {
                    match c.read(StreamId(0), &mut buf) {
                        Ok(n) if n > 0 => {
                            let b = bin(now);
                            if f.read.len() <= b {
                                f.read.resize(b + 1, 0);
                            }
                            f.read[b] += n as u64;
                        }
                        _ => break,
                    }
                }
            }
            for (side, ep) in [(0usize, &mut f.client), (1, &mut f.server)] {
                while let Some(t) = ep.poll_transmit(now, &mut buf) {
                    let id = next_id;
                    next_id += 1;
                    let dir = if side == 0 {
                        &mut net.uplink
                    } else {
                        &mut net.downlink
                    };
                    let len = t.len as u32 + HEADERS;
                    if dir.enqueue(to_time(now), len, id) == Enqueued::Accepted {
                        held.insert(id, (i * 2 + side, buf[..t.len].to_vec()));
                    }
                }
            }
        }
        if let Some(t) = next_voip.filter(|&t| t <= now) {
            net.uplink.enqueue(to_time(now), 200, VOIP_ID + voip_sent);
            voip_sent += 1;
            next_voip = Some(t + Duration::from_millis(20));
        }
        // Next event.
        let mut next = until;
        for f in &flows {
            next = next.min(f.start.max(now));
            for t in [f.client.poll_timeout(), f.server.poll_timeout()]
                .into_iter()
                .flatten()
            {
                next = next.min(t);
            }
        }
        if let Some(t) = net.next_event_time() {
            next = next.min(Duration::from_nanos(t.as_nanos()));
        }
        if let Some(t) = next_voip {
            next = next.min(t);
        }
        now = next.max(now + Duration::from_micros(1));
        for (d, dir) in [(0, &mut net.uplink), (1, &mut net.downlink)] {
            while let Some(dl) = dir.poll_delivery(to_time(now)) {
                let at = Duration::from_nanos(dl.at.as_nanos());
                if d == 0 {
                    let b = bin(at);
                    if uplink.len() <= b {
                        uplink.resize(b + 1, 0);
                    }
                    uplink[b] += u64::from(dl.len);
                }
                if dl.id >= VOIP_ID {
                    let sent = Duration::from_nanos(dl.enqueued_at.as_nanos());
                    voip.push((sent, dl.queue_delay.as_nanos() as f64 / 1e6));
                    continue;
                }
                let Some((who, bytes)) = held.remove(&dl.id) else {
                    continue;
                };
                let f = &mut flows[who / 2];
                if d == 0 {
                    let b = bin(at);
                    if f.link.len() <= b {
                        f.link.resize(b + 1, 0);
                    }
                    f.link[b] += u64::from(dl.len);
                    f.server.handle(at, client_addr(), &bytes);
                } else {
                    f.client.handle(at, server_addr(), &bytes);
                }
            }
        }
        for f in &mut flows {
            if now >= f.start {
                f.client.handle_timeout(now);
                f.server.handle_timeout(now);
            }
        }
    }
    Outcome {
        flows,
        voip,
        voip_sent,
        uplink,
    }
}

fn percentile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

const C: f64 = C_BPS as f64;

/// Alone, the background flow fills the link.
#[test]
fn alone_it_fills_the_link() {
    let out = run(
        &[(Kind::Background, Duration::ZERO)],
        None,
        0.0,
        Duration::from_secs(20),
    );
    let g = out.flows[0].goodput_bps(Duration::from_secs(5), Duration::from_secs(20));
    let util = out.uplink[50..200].iter().sum::<u64>() as f64 * 8.0 / 15.0 / C;
    eprintln!(
        "background alone: goodput {:.2} Mbit/s = {:.1} % of C; link busy {:.1} %",
        g / 1e6,
        g / C * 100.0,
        util * 100.0
    );
    // Headers (IP/UDP 28 B, convoy ~45 B per 1472-byte datagram) cap
    // goodput at 95.1 % of C; the target (≥ 95 % of C) is the link's.
    assert!(g > 0.90 * C, "{g}");
}

/// Beside a VoIP flow: the VoIP packets' added queueing delay stays within
/// the targets while the bulk flow takes the rest of the link.
#[test]
fn beside_voip_the_queue_stays_short() {
    let out = run(
        &[(Kind::Background, Duration::from_secs(5))],
        Some(Duration::ZERO),
        0.0,
        Duration::from_secs(20),
    );
    let during: Vec<f64> = out
        .voip
        .iter()
        .filter(|(t, _)| *t > Duration::from_secs(8))
        .map(|&(_, d)| d)
        .collect();
    let alone: Vec<f64> = out
        .voip
        .iter()
        .filter(|(t, _)| *t < Duration::from_secs(5))
        .map(|&(_, d)| d)
        .collect();
    let base = percentile(alone, 0.5);
    let (p50, p95, p99) = (
        percentile(during.clone(), 0.5) - base,
        percentile(during.clone(), 0.95) - base,
        percentile(during, 0.99) - base,
    );
    let g = out.flows[0].goodput_bps(Duration::from_secs(8), Duration::from_secs(20));
    let rt = 200.0 * 8.0 / 0.020;
    eprintln!(
        "background beside VoIP: added queueing delay p50 {p50:.2} p95 {p95:.2} p99 {p99:.2} ms; \
         goodput {:.2} Mbit/s = {:.1} % of C − VoIP",
        g / 1e6,
        g / (C - rt) * 100.0
    );
    assert!(p50 <= 5.0 && p95 <= 15.0 && p99 <= 25.0);
    assert!(g > 0.88 * (C - rt), "{g}");
    assert_eq!(out.voip.len() as u64, out.voip_sent - 1);
}

/// Against the Cubic reference, which fills the 250-packet queue, the
/// background flow keeps to a small share, and gives way quickly when
/// Cubic arrives.
#[test]
fn it_yields_to_cubic() {
    let start = Duration::from_secs(5);
    let end = Duration::from_secs(20);
    let out = run(
        &[(Kind::Background, Duration::ZERO), (Kind::Cubic, start)],
        None,
        0.0,
        end,
    );
    let (bg, cubic) = (&out.flows[0], &out.flows[1]);
    let from = Duration::from_secs(9);
    let (g_bg, g_cubic) = (bg.goodput_bps(from, end), cubic.goodput_bps(from, end));
    let share = g_bg / (g_bg + g_cubic);
    // Yield time: from the first 100 ms in which Cubic's packets cross the
    // link to the first in which the background flow's fall under half of
    // what they were before.
    let before = bg.link[bin(start) - 20..bin(start)].iter().sum::<u64>() as f64 / 20.0;
    let arrived = cubic.link.iter().position(|&b| b > 0).unwrap();
    let gave_way = (arrived..bg.link.len()).find(|&b| (bg.link[b] as f64) < 0.5 * before);
    let yield_s = gave_way.map(|b| (b - arrived) as f64 * 0.1);
    eprintln!(
        "background vs cubic: share {:.1} % ({:.2} vs {:.2} Mbit/s), gave way {:?} s after cubic's first packets",
        share * 100.0,
        g_bg / 1e6,
        g_cubic / 1e6,
        yield_s
    );
    assert!(share <= 0.2, "share {share}");
    assert!(yield_s.is_some_and(|s| s <= 1.0), "{yield_s:?}");
}

/// 2 % random loss is repaired by coding, not taken as congestion.
#[test]
fn random_loss_does_not_slow_it_down() {
    let out = run(
        &[(Kind::Background, Duration::ZERO)],
        None,
        0.02,
        Duration::from_secs(20),
    );
    let g = out.flows[0].goodput_bps(Duration::from_secs(5), Duration::from_secs(20));
    eprintln!(
        "background at 2 % loss: {:.2} Mbit/s = {:.1} % of C·(1 − p)",
        g / 1e6,
        g / (C * 0.98) * 100.0
    );
    assert!(g > 0.85 * C * 0.98, "{g}");
}

/// Over an LTE drive (30 ms each way, 250 packets), beside VoIP, the
/// background flow is not starved and adds at most 30 ms (the LTE target)
/// to VoIP's p95 queueing delay over the same drive with VoIP alone (the
/// drive's own waits are most of that delay). On the T-Mobile drive (the
/// `background` experiment's) and the Verizon one; not on the AT&T drive
/// (docs/PROTOCOL.md, "On an LTE drive"). Issue 38's target is half of what
/// VoIP leaves, which this build misses here on the T-Mobile drive (not
/// over `convoy emu`); the bound is 45 %, a guard against starvation, not
/// the target (docs/PROTOCOL.md, "The game's tail over the AP", has the
/// figures).
///
/// `BG_OFFSET=SECONDS` starts both drives that far in and only prints:
/// docs/PROTOCOL.md has the distribution over offsets 0–80 s, which no
/// build holds at every point (the Verizon drive's stretch at 20–60 s).
#[test]
fn over_an_lte_drive_it_is_not_starved() {
    for name in ["TMobile-LTE-short", "Verizon-LTE-short"] {
        over_a_drive(name);
    }
}

fn over_a_drive(name: &str) {
    let Some((up, down)) = support::shared_drive(name) else {
        return;
    };
    let offset = std::env::var("BG_OFFSET")
        .ok()
        .map(|v| v.parse::<u64>().expect("BG_OFFSET: whole seconds"));
    let at = Dur::from_secs(offset.unwrap_or(0));
    let (up, down) = (up.starting_at(at), down.starting_at(at));
    let dir = |t: MahimahiTrace| {
        LinkConfig::mahimahi(std::sync::Arc::new(t))
            .with_delay(ONE_WAY)
            .with_queue(QueueLimit::Packets(250))
    };
    let (up_cfg, down_cfg) = (dir(up), dir(down));
    let voip_p = |out: &Outcome, q: f64| {
        let d: Vec<f64> = out
            .voip
            .iter()
            .filter(|(sent, _)| *sent >= Duration::from_secs(10))
            .map(|&(_, d)| d)
            .collect();
        percentile(d, q)
    };
    let alone = run_over(
        &[],
        Some(Duration::ZERO),
        up_cfg.clone(),
        down_cfg.clone(),
        Duration::from_secs(60),
    );
    let (from, to) = (Duration::from_secs(10), Duration::from_secs(60));
    let capacity = up_cfg.capacity_bits(to_time(from), to_time(to)) / (to - from).as_secs_f64();
    let out = run_over(
        &[(Kind::Background, Duration::ZERO)],
        Some(Duration::ZERO),
        up_cfg,
        down_cfg,
        to,
    );
    let g = out.flows[0].goodput_bps(from, to);
    let voip_bps = 200.0 * 8.0 / 0.020;
    let left = capacity - voip_bps;
    let (p50_alone, p95_alone, p95) = (
        voip_p(&alone, 0.5),
        voip_p(&alone, 0.95),
        voip_p(&out, 0.95),
    );
    eprintln!(
        "background over {name}.up from {}s beside VoIP: goodput {:.2} Mbit/s of {:.2} left = {:.1} %; \
         VoIP queueing delay p95 {p95:.1} ms (alone: p50 {p50_alone:.1}, p95 {p95_alone:.1})",
        offset.unwrap_or(0),
        g / 1e6,
        left / 1e6,
        100.0 * g / left
    );
    if offset.is_some() {
        return;
    }
    assert!(g >= 0.45 * left, "{name}: {g} of {left}");
    assert!(
        p95 - p95_alone <= 30.0,
        "{name}: VoIP queueing p95 {p95} ms, alone {p95_alone}"
    );
}

/// On links where a full packet takes longer to send than the 3 ms target
/// (below about 4 Mbit/s), beside VoIP: the background flow is not held
/// at its floor, and VoIP waits about the packet or two a busy link holds,
/// not the seconds of a full queue. A guard, not a target: the window here
/// is a few packets and moves a packet at a time (docs/PROTOCOL.md, "Slow
/// links", has the figures and what this build does wrong there).
/// `BG_SLOW_RATES=KBIT,…` only prints, at those rates.
#[test]
fn on_a_slow_link_it_keeps_the_link_busy_beside_voip() {
    let custom = std::env::var("BG_SLOW_RATES").ok();
    let rates: Vec<u64> = custom.as_deref().map_or(vec![300, 1_000, 2_000], |v| {
        v.split(',')
            .map(|r| r.parse().expect("BG_SLOW_RATES: kbit/s"))
            .collect()
    });
    for kbit in rates {
        let bps = kbit * 1_000;
        let dir = || {
            LinkConfig::constant(bps)
                .with_delay(ONE_WAY)
                .with_queue(QueueLimit::Packets(250))
        };
        let (from, to) = (Duration::from_secs(10), Duration::from_secs(40));
        let voip_from = Some(Duration::ZERO);
        let alone = run_over(&[], voip_from, dir(), dir(), to);
        let out = run_over(
            &[(Kind::Background, Duration::ZERO)],
            voip_from,
            dir(),
            dir(),
            to,
        );
        let late = |o: &Outcome| -> Vec<f64> {
            o.voip
                .iter()
                .filter(|(sent, _)| *sent >= from)
                .map(|&(_, d)| d)
                .collect()
        };
        let base = percentile(late(&alone), 0.5);
        let (p50, p95) = (
            percentile(late(&out), 0.5) - base,
            percentile(late(&out), 0.95) - base,
        );
        let g = out.flows[0].goodput_bps(from, to);
        let left = bps as f64 - 200.0 * 8.0 / 0.020;
        let packet_ms = 1500.0 * 8.0 / bps as f64 * 1e3;
        eprintln!(
            "background at {kbit} kbit/s beside VoIP: goodput {:.1} % of what VoIP leaves; \
             VoIP added queueing p50 {p50:.1} p95 {p95:.1} ms (a packet takes {packet_ms:.1} ms)",
            100.0 * g / left
        );
        if custom.is_some() {
            continue;
        }
        // 83-96 % of what VoIP leaves in this build.
        assert!(g >= 0.75 * left, "{kbit} kbit/s: {g} of {left}");
        assert!(p95 <= 4.0 * packet_ms, "{kbit} kbit/s: VoIP p95 +{p95} ms");
    }
}

//! Multipath in virtual time: a client with one interface per link, each a
//! convoy-link [`Link`] to the server's one address, driven the way
//! `convoy perf --path A --path B` runs over `convoy emu --link A:…
//! --link B:…`:
//!
//! * path 0 (the handshake's) goes over the first link; once connected, a
//!   path opens on every other link whose interface is up (convoy-net's
//!   path manager opens one per usable interface);
//! * a link whose interface goes down with its outages
//!   (`outage-policy=down`) has the connection told at each edge, as
//!   netlink tells convoy-net: `path_down` while either direction is out,
//!   `path_up` after (a path whose interface was down when the connection
//!   came up opens when it comes back);
//! * the client uploads for a fixed time and never runs dry; every server
//!   read is timed, so the report has each stall of the reader and how
//!   much of it some link could have carried data.
//!
//! No kernel and no clock: a 300 s drive runs in seconds and replays
//! exactly from its seeds, so a multipath rule can be judged over many
//! seeds and drives before the emulator confirms it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use convoy_link::{AvailabilityTimeline, Enqueued, Link, LinkConfig, Time};
use convoy_proto::{Config, ConnectionHandle, Event};
use serde::Serialize;

use crate::app::App;
use crate::transfer::{
    add_to_bin, connect, to_duration, to_time, ProgressFn, SimError, StatsView, IPV4_UDP_OVERHEAD,
};

/// Reads closer together than this are not a stall (the emulator's
/// server counts gaps from 20 ms).
pub const MIN_STALL: Duration = Duration::from_millis(20);

/// One interface of the client and the link behind it.
#[derive(Clone, Debug)]
pub struct PathLink {
    pub name: String,
    /// Client → server.
    pub uplink: LinkConfig,
    /// Server → client.
    pub downlink: LinkConfig,
    /// The interface goes down while either direction is in an outage
    /// (`outage-policy=down`), and the connection is told.
    pub iface_down: bool,
    /// Opened as a backup (standby) path.
    pub backup: bool,
}

/// What to simulate: a timed upload over every link at once.
pub struct MultipathSpec {
    /// The first carries the handshake.
    pub links: Vec<PathLink>,
    pub client: Config,
    pub server: Config,
    /// How long the upload runs after the connection is established.
    pub duration: Duration,
    /// A stall counts against the target when some link could carry data
    /// for longer than this of it (the drives' target: 1 s).
    pub stall_limit: Duration,
    /// Bytes of lower-layer headers charged per datagram.
    pub header_overhead: u32,
    /// Width of the report's timeline bins.
    pub timeline_bin: Duration,
    /// Called every second of virtual time with (virtual time, bytes read
    /// so far, `u64::MAX`), for progress output.
    pub progress: Option<ProgressFn>,
}

impl MultipathSpec {
    pub fn new(links: Vec<PathLink>, client: Config, server: Config, duration: Duration) -> Self {
        MultipathSpec {
            links,
            client,
            server,
            duration,
            stall_limit: Duration::from_secs(1),
            header_overhead: IPV4_UDP_OVERHEAD,
            timeline_bin: Duration::from_millis(100),
            progress: None,
        }
    }
}

/// A gap between two reads of the server's application (or from the last
/// read to the end of the run).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Stall {
    /// When the gap began, seconds of virtual time.
    pub at_s: f64,
    pub seconds: f64,
    /// How much of it some link could have carried data (by timeline bin).
    pub with_capacity_s: f64,
}

/// What one link carried and could have carried.
#[derive(Clone, Debug, Serialize)]
pub struct PathFigures {
    pub name: String,
    /// The client's path over this link, once opened.
    pub path_id: Option<u8>,
    /// Bytes the uplink carried, headers included, over the measured span,
    /// bit/s.
    pub carried_bps: f64,
    /// What the uplink could have carried over the span, bit/s.
    pub capacity_bps: f64,
    /// Bytes the uplink carried per timeline bin (by when they left its
    /// bottleneck), headers included.
    pub carried: Vec<u64>,
    /// Bytes the uplink could have carried per timeline bin.
    pub capacity: Vec<u64>,
    /// The path's state changes at the client: (seconds, state).
    pub states: Vec<(f64, &'static str)>,
    /// Times the interface went down.
    pub interface_downs: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct MultipathReport {
    pub handshake: Option<Duration>,
    /// The measured span: from the connection's establishment for the
    /// spec's duration (shorter if the client closed).
    pub from_s: f64,
    pub to_s: f64,
    /// Bytes the server's application read in the span, all verified.
    pub delivered: u64,
    pub goodput_bps: f64,
    /// What the links' uplinks could carry together over the span.
    pub capacity_bps: f64,
    /// Bytes read per timeline bin of virtual time.
    pub read_timeline: Vec<u64>,
    /// Every gap of at least [`MIN_STALL`] between reads, in the span.
    pub stalls: Vec<Stall>,
    /// The stalls with more than the limit beside capacity.
    pub stalls_over_limit: Vec<Stall>,
    pub stall_limit_s: f64,
    pub paths: Vec<PathFigures>,
    pub client: StatsView,
    pub server: StatsView,
    pub client_closed: Option<String>,
    pub timeline_bin: Duration,
}

/// One link as the run drives it.
struct Lane {
    link: Link,
    client_addr: SocketAddr,
    /// The availability of each direction, for interface edges.
    edges: Option<[AvailabilityTimeline; 2]>,
    up: bool,
    path: Option<u8>,
    carried: Vec<u64>,
    downs: u32,
}

impl Lane {
    /// Whether the interface is up at `t`, and when that next changes.
    fn interface_at(&mut self, t: Time) -> (bool, Option<Time>) {
        let Some(edges) = &mut self.edges else {
            return (true, None);
        };
        let (a, next_a) = edges[0].next_change(t);
        let (b, next_b) = edges[1].next_change(t);
        let next = match (next_a, next_b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        (a && b, next)
    }
}

/// Runs the upload for the spec's duration (or until the client closes).
pub fn run_multipath(mut spec: MultipathSpec) -> Result<MultipathReport, SimError> {
    if spec.links.is_empty() {
        return Err(SimError::Link(
            "a multipath run needs at least one link".into(),
        ));
    }
    let server_addr: SocketAddr = "10.7.0.2:4433".parse().expect("valid");
    let configs: Vec<PathLink> = spec.links.clone();
    let mut lanes = Vec::with_capacity(configs.len());
    for (i, l) in configs.iter().enumerate() {
        let edges = if l.iface_down {
            Some([
                AvailabilityTimeline::new(&l.uplink).map_err(|e| SimError::Link(e.to_string()))?,
                AvailabilityTimeline::new(&l.downlink)
                    .map_err(|e| SimError::Link(e.to_string()))?,
            ])
        } else {
            None
        };
        lanes.push(Lane {
            link: Link::new(l.uplink.clone(), l.downlink.clone())
                .map_err(|e| SimError::Link(format!("{}: {e}", l.name)))?,
            client_addr: SocketAddr::from(([10, 7, i as u8 + 1, 1], 5000)),
            edges,
            up: true,
            path: (i == 0).then_some(0),
            carried: Vec::new(),
            downs: 0,
        });
    }
    let (mut client, mut server, ch) = connect(spec.client, spec.server, server_addr)?;
    let mut now = Duration::ZERO;
    let mut sh: Option<ConnectionHandle> = None;
    let mut capp = App::new(0, u64::MAX, 0, u64::MAX);
    let mut sapp = App::new(1, 0, u64::MAX, u64::MAX);
    // Datagrams on the links, by id: (lane, bytes).
    let mut in_flight: HashMap<u64, (usize, Vec<u8>)> = HashMap::new();
    let mut next_id = 0u64;
    let mut buf = vec![0u8; 65_536];
    let mut app_buf = vec![0u8; 256 * 1024];
    let bin = spec.timeline_bin.max(Duration::from_micros(100));
    let mut established_at: Option<Duration> = None;
    let mut reads: Vec<(Duration, u64)> = Vec::new();
    let mut path_of: HashMap<u8, usize> = HashMap::from([(0, 0)]);
    let mut progress = spec.progress.take();
    let mut next_progress = Duration::from_secs(1);
    // CONVOY_SIM_TRACE=MS prints the client's paths every MS of virtual
    // time, to stderr (as the one-link transfer does its counters).
    let trace_every = std::env::var("CONVOY_SIM_TRACE")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis);
    let mut next_trace = Duration::ZERO;

    loop {
        while let Some(ev) = client.connection(ch).and_then(|c| c.poll_event()) {
            if ev == Event::Connected && established_at.is_none() {
                established_at = Some(now);
            }
        }
        // Interfaces: edges, and paths to open.
        let mut next_edge: Option<Duration> = None;
        for (i, lane) in lanes.iter_mut().enumerate() {
            let (up, next) = lane.interface_at(to_time(now));
            if let Some(t) = next {
                let t = to_duration(t);
                next_edge = Some(next_edge.map_or(t, |n: Duration| n.min(t)));
            }
            let Some(c) = client.connection(ch) else {
                continue;
            };
            if up != lane.up {
                lane.up = up;
                lane.downs += u32::from(!up);
                if let Some(id) = lane.path {
                    let _ = if up {
                        c.path_up(now, id)
                    } else {
                        c.path_down(now, id)
                    };
                }
            }
            if lane.path.is_none() && lane.up && established_at.is_some() {
                if let Ok(id) = c.open_path(now, server_addr, configs[i].backup) {
                    lane.path = Some(id);
                    path_of.insert(id, i);
                }
            }
        }
        // Applications.
        if sh.is_none() {
            sh = server.accept();
        }
        if let Some(h) = sh {
            while server.connection(h).and_then(|c| c.poll_event()).is_some() {}
        }
        let start = established_at.unwrap_or(now);
        capp.step(&mut client, ch, now, start, bin, &mut app_buf, &sapp.writes)?;
        if let Some(h) = sh {
            let before = sapp.read;
            sapp.step(&mut server, h, now, start, bin, &mut app_buf, &capp.writes)?;
            if sapp.read > before {
                reads.push((now, sapp.read - before));
            }
        }
        // Datagrams out: the client's on its path's link, the server's on
        // the link of the address it answers.
        while let Some(t) = client.poll_transmit(now, &mut buf) {
            let i = path_of.get(&t.path_id).copied().unwrap_or(0);
            let len = t.len as u32 + spec.header_overhead;
            let id = next_id;
            next_id += 1;
            if lanes[i].link.uplink.enqueue(to_time(now), len, id) == Enqueued::Accepted {
                in_flight.insert(id, (i, buf[..t.len].to_vec()));
            }
        }
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            let Some(i) = lanes.iter().position(|l| l.client_addr == t.remote) else {
                continue;
            };
            let len = t.len as u32 + spec.header_overhead;
            let id = next_id;
            next_id += 1;
            if lanes[i].link.downlink.enqueue(to_time(now), len, id) == Enqueued::Accepted {
                in_flight.insert(id, (i, buf[..t.len].to_vec()));
            }
        }
        if let Some(report) = progress.as_mut().filter(|_| now >= next_progress) {
            next_progress += Duration::from_secs(1);
            report(now, sapp.read, u64::MAX);
        }
        if let Some(every) = trace_every.filter(|_| now >= next_trace) {
            next_trace = now + every;
            if let Some(c) = client.connection_ref(ch) {
                trace_paths(now, c, sapp.read);
            }
        }
        let client_closed = client.connection_ref(ch).is_none_or(|c| c.is_closed());
        let stop_at = established_at.map(|t| t + spec.duration);
        // Without a connection after ten times the duration, give up.
        let give_up = spec.duration * 10;
        if client_closed || stop_at.is_some_and(|t| now >= t) || now >= give_up {
            break;
        }
        // The next event.
        let mut next = stop_at.unwrap_or(give_up);
        for t in [client.poll_timeout(), server.poll_timeout(), next_edge]
            .into_iter()
            .flatten()
        {
            next = next.min(t);
        }
        for lane in &lanes {
            if let Some(t) = lane.link.next_event_time() {
                next = next.min(to_duration(t));
            }
        }
        now = next.max(now + Duration::from_micros(1));
        // Deliveries.
        for lane in lanes.iter_mut() {
            while let Some(d) = lane.link.uplink.poll_delivery(to_time(now)) {
                add_to_bin(&mut lane.carried, to_duration(d.departed_at), bin, d.len);
                if let Some((_, bytes)) = in_flight.remove(&d.id) {
                    server.handle(to_duration(d.at), lane.client_addr, &bytes);
                }
            }
            while let Some(d) = lane.link.downlink.poll_delivery(to_time(now)) {
                if let Some((_, bytes)) = in_flight.remove(&d.id) {
                    client.handle(to_duration(d.at), server_addr, &bytes);
                }
            }
        }
        client.handle_timeout(now);
        server.handle_timeout(now);
    }

    let from = established_at.unwrap_or(now);
    let to = now.max(from);
    let span = (to - from).as_secs_f64();
    let per_s = |bytes: f64| if span > 0.0 { bytes * 8.0 / span } else { 0.0 };
    let bins = (to.as_nanos() / bin.as_nanos()) as usize + 1;
    let bin_of = |t: Duration| (t.as_nanos() / bin.as_nanos()) as usize;
    // Each link's capacity per bin, and over the span.
    let capacity: Vec<Vec<u64>> = configs
        .iter()
        .map(|l| {
            (0..bins)
                .map(|k| {
                    let a = bin * k as u32;
                    (l.uplink.capacity_bits(to_time(a), to_time(a + bin)) / 8.0) as u64
                })
                .collect()
        })
        .collect();
    let capacity_bits: Vec<f64> = configs
        .iter()
        .map(|l| l.uplink.capacity_bits(to_time(from), to_time(to)))
        .collect();
    let any_capacity = |k: usize| capacity.iter().any(|c| c.get(k).is_some_and(|&b| b > 0));
    // Seconds of [a, b) in bins where some link had capacity.
    let with_capacity = |a: Duration, b: Duration| -> f64 {
        let mut total = 0.0;
        for k in bin_of(a)..=bin_of(b.saturating_sub(Duration::from_nanos(1))) {
            let (s, e) = (bin * k as u32, bin * (k as u32 + 1));
            let overlap = e.min(b).saturating_sub(s.max(a));
            if any_capacity(k) {
                total += overlap.as_secs_f64();
            }
        }
        total
    };
    // From the connection's start: a reader that waited for its first
    // byte waited too.
    let mut stalls = Vec::new();
    let mut last = from;
    let mut delivered = 0u64;
    let mut read_timeline = vec![0u64; bins];
    for &(t, n) in reads.iter().filter(|(t, _)| *t >= from && *t <= to) {
        delivered += n;
        read_timeline[bin_of(t).min(bins - 1)] += n;
        push_stall(&mut stalls, last, t, &with_capacity);
        last = t;
    }
    push_stall(&mut stalls, last, to, &with_capacity);
    let limit = spec.stall_limit.as_secs_f64();
    let stalls_over_limit = stalls
        .iter()
        .filter(|s| s.with_capacity_s > limit)
        .copied()
        .collect();
    let cconn = client.connection_ref(ch);
    let events = cconn.map(|c| c.path_events().to_vec()).unwrap_or_default();
    let paths = lanes
        .iter()
        .zip(&configs)
        .enumerate()
        .map(|(i, (lane, cfg))| {
            let carried: u64 = lane
                .carried
                .iter()
                .enumerate()
                .filter(|&(k, _)| k >= bin_of(from) && k <= bin_of(to))
                .map(|(_, &b)| b)
                .sum();
            PathFigures {
                name: cfg.name.clone(),
                path_id: lane.path,
                carried_bps: per_s(carried as f64),
                capacity_bps: if span > 0.0 {
                    capacity_bits[i] / span
                } else {
                    0.0
                },
                carried: lane.carried.clone(),
                capacity: capacity[i].clone(),
                states: events
                    .iter()
                    .filter(|e| lane.path == Some(e.path))
                    .map(|e| (e.at.as_secs_f64(), e.state.as_str()))
                    .collect(),
                interface_downs: lane.downs,
            }
        })
        .collect();
    Ok(MultipathReport {
        handshake: established_at,
        from_s: from.as_secs_f64(),
        to_s: to.as_secs_f64(),
        delivered,
        goodput_bps: per_s(delivered as f64),
        capacity_bps: if span > 0.0 {
            capacity_bits.iter().sum::<f64>() / span
        } else {
            0.0
        },
        read_timeline,
        stalls,
        stalls_over_limit,
        stall_limit_s: limit,
        paths,
        client: cconn.map(|c| c.stats().into()).unwrap_or_default(),
        server: sh
            .and_then(|h| server.connection_ref(h))
            .map(|c| c.stats().into())
            .unwrap_or_default(),
        client_closed: cconn.and_then(|c| c.close_reason()).map(|r| r.to_string()),
        timeline_bin: bin,
    })
}

fn push_stall(
    stalls: &mut Vec<Stall>,
    from: Duration,
    to: Duration,
    with_capacity: &impl Fn(Duration, Duration) -> f64,
) {
    if to.saturating_sub(from) >= MIN_STALL {
        stalls.push(Stall {
            at_s: from.as_secs_f64(),
            seconds: (to - from).as_secs_f64(),
            with_capacity_s: with_capacity(from, to),
        });
    }
}

/// One line per path of the client, for `CONVOY_SIM_TRACE`.
fn trace_paths(now: Duration, c: &convoy_proto::Connection, read: u64) {
    let s = c.stats();
    eprintln!(
        "{:>8.3}s read {:.2} MB, lost {}, src {} rep {} blocks {}/{}, {}",
        now.as_secs_f64(),
        read as f64 / 1e6,
        s.packets_lost,
        s.sender.source_symbols,
        s.sender.repair_symbols,
        s.sender.blocks_done,
        s.sender.blocks,
        s.limited_by
    );
    for p in c.paths() {
        eprintln!(
            "          path {} {:<10} srtt {:>4} ms min {:>4} ms rate {:>6.2} Mbit/s sent {} lost {}",
            p.id,
            p.state.as_str(),
            p.srtt.as_millis(),
            p.min_rtt.as_millis(),
            p.rate as f64 * 8e-6,
            p.packets_sent,
            p.packets_lost
        );
    }
    if std::env::var("CONVOY_SIM_TRACE_BLOCKS").is_ok() {
        eprintln!("          {}", c.describe_blocks());
    }
}

//! One transfer in virtual time: a client and a server endpoint joined by a
//! convoy-link [`Link`], each direction carrying a stream of a given size,
//! verified byte for byte at the reader.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use convoy_link::{Link, LinkConfig, Time};
use convoy_proto::{Config, ConnectionHandle, ConnectionStats, Endpoint, Event, StreamId};

use crate::app::App;

/// IPv4 + UDP headers, charged to the link for every datagram.
pub const IPV4_UDP_OVERHEAD: u32 = 28;
/// Default width of the timeline bins.
pub const TIMELINE_BIN: Duration = Duration::from_millis(100);

/// Progress callback: (virtual time, bytes read so far, bytes to transfer).
pub type ProgressFn = Box<dyn FnMut(Duration, u64, u64)>;

/// What to simulate.
pub struct TransferSpec {
    /// Client → server.
    pub uplink: LinkConfig,
    /// Server → client.
    pub downlink: LinkConfig,
    pub client: Config,
    pub server: Config,
    /// Bytes the client sends to the server.
    pub upload: u64,
    /// Bytes the server sends to the client.
    pub download: u64,
    /// Virtual time after which the run stops, finished or not.
    pub time_limit: Duration,
    /// A timed run: stop this long after the connection is established,
    /// and measure goodput over exactly that span (give `upload` or
    /// `download` as `u64::MAX` for a sender that never runs dry).
    pub duration: Option<Duration>,
    /// Bytes of lower-layer headers charged per datagram.
    pub header_overhead: u32,
    /// The server's application stops reading after this many bytes.
    pub server_reads_at_most: Option<u64>,
    /// The server disappears (stops sending and receiving) at this time.
    pub server_vanishes_at: Option<Duration>,
    /// Called every second of virtual time with (virtual time, bytes read
    /// so far in both directions, bytes to transfer), for progress output.
    pub progress: Option<ProgressFn>,
    /// Width of the report's timeline bins.
    pub timeline_bin: Duration,
}

impl TransferSpec {
    pub fn new(
        uplink: LinkConfig,
        downlink: LinkConfig,
        client: Config,
        server: Config,
    ) -> TransferSpec {
        TransferSpec {
            uplink,
            downlink,
            client,
            server,
            upload: 0,
            download: 0,
            time_limit: Duration::from_secs(600),
            duration: None,
            header_overhead: IPV4_UDP_OVERHEAD,
            server_reads_at_most: None,
            server_vanishes_at: None,
            progress: None,
            timeline_bin: TIMELINE_BIN,
        }
    }
}

/// One direction's outcome.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct DirectionReport {
    pub bytes: u64,
    /// Bytes read by the receiving application, all verified.
    pub delivered: u64,
    /// Bytes the sender was told the receiver holds (its progress figure).
    pub acknowledged: u64,
    /// From the connection being established to the last byte read.
    pub completion: Option<Duration>,
    /// delivered × 8 / completion (or / elapsed if unfinished), bit/s.
    pub goodput_bps: f64,
    /// One-way delay of the datagrams on the link (queueing + propagation).
    pub delay_p50: Duration,
    pub delay_p95: Duration,
    /// Time the datagrams spent in the bottleneck (waiting and being
    /// transmitted): the link's own queueing delay.
    pub queue_delay_p50: Duration,
    pub queue_delay_p95: Duration,
    pub queue_delay_p99: Duration,
    /// From the sending application's write to the receiving
    /// application's read, sampled every 1400 bytes.
    pub latency_p50: Duration,
    pub latency_p95: Duration,
    pub latency_p99: Duration,
    /// What the bottleneck could carry over the span goodput is measured
    /// on, bit/s.
    pub capacity_bps: f64,
    pub datagrams_offered: u64,
    pub datagrams_delivered: u64,
    pub datagrams_dropped: u64,
    /// Bytes read per timeline bin.
    pub timeline: Vec<u64>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct TransferReport {
    pub handshake: Option<Duration>,
    pub upload: DirectionReport,
    pub download: DirectionReport,
    pub client: StatsView,
    pub server: StatsView,
    pub elapsed: Duration,
    /// Largest bytes either connection held in buffers at any time.
    pub peak_buffered: usize,
    pub client_closed: Option<String>,
    pub server_closed: Option<String>,
    /// Width of the timeline bins below and in each direction's report.
    pub timeline_bin: Duration,
    /// The client's sending rate (its rate controller's), bit/s, sampled
    /// every timeline bin.
    pub client_rate: Vec<u64>,
    /// (delivery time, one-way delay) of every uplink datagram.
    #[serde(skip)]
    pub uplink_delays: Vec<(Duration, Duration)>,
    /// Bytes the client offered the uplink per timeline bin, headers
    /// included (what it sent, whether the queue took it or not).
    pub uplink_sent: Vec<u64>,
    /// Bytes the server offered the downlink in all, headers included: with
    /// `uplink_sent`, what a transfer puts on the air (its feedback too).
    pub downlink_sent_bytes: u64,
    /// Bytes the uplink carried per timeline bin, by when they left the
    /// bottleneck (all datagrams, headers included): what the link
    /// carried, whatever was useful.
    pub uplink_delivered: Vec<u64>,
    /// Uplink datagrams the bottleneck refused per timeline bin (a full
    /// queue, an outage that drops): where a controller overshoots.
    pub uplink_dropped: Vec<u64>,
    /// The longest time an uplink datagram delivered in each timeline bin
    /// spent in the bottleneck, ms.
    pub uplink_queue_max_ms: Vec<f64>,
    /// What limited the client's sending at the start of each timeline
    /// bin (its rate controller's state, or "window").
    pub client_limited_by: Vec<&'static str>,
    /// Uplink capacity left unused, bytes, by what limited the client in
    /// the bin: where a controller loses throughput.
    pub uplink_idle_by_state: std::collections::BTreeMap<&'static str, u64>,
}

/// The serialisable part of a connection's statistics.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct StatsView {
    pub packets_sent: u64,
    pub data_packets_sent: u64,
    pub feedback_packets_sent: u64,
    pub packets_lost: u64,
    pub source_symbols: u64,
    pub repair_symbols: u64,
    pub redundant_received: u64,
    pub blocks: u64,
    pub blocks_done: u64,
    /// Blocks that needed symbols beyond their up-front plan.
    pub second_round_blocks: u64,
    pub smoothed_rtt: Duration,
    pub rate_bps: u64,
    pub loss_rate: f64,
    pub auth_failures: u64,
    pub replays: u64,
    pub key_updates: u64,
    /// The packet AEAD the handshake chose.
    pub aead: &'static str,
}

impl From<ConnectionStats> for StatsView {
    fn from(s: ConnectionStats) -> Self {
        StatsView {
            packets_sent: s.packets_sent,
            data_packets_sent: s.data_packets_sent,
            feedback_packets_sent: s.feedback_packets_sent,
            packets_lost: s.packets_lost,
            source_symbols: s.sender.source_symbols,
            repair_symbols: s.sender.repair_symbols,
            redundant_received: s.receiver.redundant,
            blocks: s.sender.blocks,
            blocks_done: s.sender.blocks_done,
            second_round_blocks: s.sender.second_round_blocks,
            smoothed_rtt: s.smoothed_rtt,
            rate_bps: s.rate * 8,
            loss_rate: s.loss_rate,
            auth_failures: s.auth_failures,
            key_updates: s.key_updates,
            replays: s.replays,
            aead: s.aead,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("link configuration: {0}")]
    Link(String),
    #[error("endpoint: {0}")]
    Endpoint(String),
    #[error("data corrupted: {0}")]
    Corrupted(String),
}

pub(crate) fn to_time(d: Duration) -> Time {
    Time::from_nanos(d.as_nanos() as u64)
}

pub(crate) fn to_duration(t: Time) -> Duration {
    Duration::from_nanos(t.as_nanos())
}

fn percentile(v: &mut [Duration], q: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Both endpoints, and the client's connection to the server at
/// `server_addr` begun at time zero.
pub(crate) fn connect(
    client: Config,
    server: Config,
    server_addr: SocketAddr,
) -> Result<(Endpoint, Endpoint, ConnectionHandle), SimError> {
    let server_key = server.keypair.public;
    let mut client = Endpoint::new(client, false).map_err(|e| SimError::Endpoint(e.to_string()))?;
    let server = Endpoint::new(server, true).map_err(|e| SimError::Endpoint(e.to_string()))?;
    let ch = client
        .connect(Duration::ZERO, server_addr, Some(&server_key))
        .map_err(|e| SimError::Endpoint(e.to_string()))?;
    Ok((client, server, ch))
}

/// Runs the transfer to completion (or the time limit).
pub fn run(mut spec: TransferSpec) -> Result<TransferReport, SimError> {
    let client_addr: SocketAddr = "10.0.0.1:40000".parse().expect("valid");
    let server_addr: SocketAddr = "10.0.0.2:4433".parse().expect("valid");
    let link_configs = [spec.uplink.clone(), spec.downlink.clone()];
    let mut link: Link =
        Link::new(spec.uplink, spec.downlink).map_err(|e| SimError::Link(e.to_string()))?;
    let (mut client, mut server, ch) = connect(spec.client, spec.server, server_addr)?;
    let mut now = Duration::ZERO;
    let mut sh = None;
    let mut capp = App::new(0, spec.upload, spec.download, u64::MAX);
    let mut sapp = App::new(
        1,
        spec.download,
        spec.upload,
        spec.server_reads_at_most.unwrap_or(u64::MAX),
    );
    let mut in_flight: [HashMap<u64, Vec<u8>>; 2] = [HashMap::new(), HashMap::new()];
    let mut delays: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut queue_delays: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut next_id = 0u64;
    let mut buf = vec![0u8; 65_536];
    let mut app_buf = vec![0u8; 256 * 1024];
    let mut established_at = None;
    let mut peak_buffered = 0usize;
    let vanish = spec.server_vanishes_at.unwrap_or(Duration::MAX);
    // CONVOY_SIM_TRACE=MS prints both connections' counters every MS of
    // virtual time, to stderr.
    let trace_every = std::env::var("CONVOY_SIM_TRACE")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis);
    let mut next_trace = Duration::ZERO;
    let mut next_progress = Duration::from_secs(1);
    let mut progress = spec.progress.take();
    let mut client_rate = Vec::new();
    let mut uplink_delivered: Vec<u64> = Vec::new();
    let mut uplink_delays = Vec::new();
    let mut uplink_sent: Vec<u64> = Vec::new();
    let mut uplink_dropped: Vec<u64> = Vec::new();
    let mut downlink_sent_bytes = 0u64;
    let mut uplink_queue_max_ms: Vec<f64> = Vec::new();
    let mut client_limited_by: Vec<&'static str> = Vec::new();
    let bin = spec.timeline_bin.max(Duration::from_micros(100));

    loop {
        let server_alive = now < vanish;
        // Applications.
        while let Some(ev) = client.connection(ch).and_then(|c| c.poll_event()) {
            if ev == Event::Connected && established_at.is_none() {
                established_at = Some(now);
            }
        }
        if sh.is_none() {
            sh = server.accept();
        }
        if let Some(h) = sh {
            while server.connection(h).and_then(|c| c.poll_event()).is_some() {}
        }
        let start = established_at.unwrap_or(now);
        capp.step(&mut client, ch, now, start, bin, &mut app_buf, &sapp.writes)?;
        if let Some(h) = sh.filter(|_| server_alive) {
            sapp.step(&mut server, h, now, start, bin, &mut app_buf, &capp.writes)?;
        }
        peak_buffered = peak_buffered
            .max(client.connection_ref(ch).map_or(0, |c| c.buffered_bytes()))
            .max(
                sh.and_then(|h| server.connection_ref(h))
                    .map_or(0, |c| c.buffered_bytes()),
            );
        // Datagrams out.
        for (dir, ep) in [(0usize, &mut client), (1, &mut server)] {
            if dir == 1 && !server_alive {
                continue;
            }
            while let Some(t) = ep.poll_transmit(now, &mut buf) {
                let id = next_id;
                next_id += 1;
                let link_dir = if dir == 0 {
                    &mut link.uplink
                } else {
                    &mut link.downlink
                };
                let len = t.len as u32 + spec.header_overhead;
                if dir == 0 {
                    add_to_bin(&mut uplink_sent, now, bin, len);
                } else {
                    downlink_sent_bytes += u64::from(len);
                }
                if link_dir.enqueue(to_time(now), len, id) == convoy_link::Enqueued::Accepted {
                    in_flight[dir].insert(id, buf[..t.len].to_vec());
                } else if dir == 0 {
                    add_to_bin(&mut uplink_dropped, now, bin, 1);
                }
            }
        }
        if let Some(report) = progress.as_mut().filter(|_| now >= next_progress) {
            next_progress += Duration::from_secs(1);
            report(now, capp.read + sapp.read, spec.upload + spec.download);
        }
        if trace_every.is_some() && now >= next_trace {
            next_trace = now + trace_every.unwrap_or_default();
            for (name, c) in [
                ("client", client.connection_ref(ch)),
                ("server", sh.and_then(|h| server.connection_ref(h))),
            ] {
                if let Some(c) = c {
                    let s = c.stats();
                    eprintln!(
                        "{:>8.3}s {name}: sent {} data {} lost {} (spurious {}) rate {:.2} Mbit/s p̂ {:.3} srtt {:?} src {} rep {} blocks {}/{}",
                        now.as_secs_f64(), s.packets_sent, s.data_packets_sent, s.packets_lost, s.spurious_losses,
                        s.rate as f64 * 8e-6, s.loss_rate, s.smoothed_rtt, s.sender.source_symbols,
                        s.sender.repair_symbols, s.sender.blocks_done, s.sender.blocks
                    );
                    if std::env::var("CONVOY_SIM_TRACE_BLOCKS").is_ok() {
                        eprintln!("          {}", c.describe_blocks());
                    }
                }
            }
        }
        while (client_rate.len() as u128) * bin.as_nanos() <= now.as_nanos() {
            let stats = client.connection_ref(ch).map(|c| c.stats());
            client_rate.push(stats.map_or(0, |s| s.rate * 8));
            client_limited_by.push(stats.map_or("", |s| s.limited_by));
        }
        let client_closed = client.connection_ref(ch).is_none_or(|c| c.is_closed());
        let stop_at = match (spec.duration, established_at) {
            (Some(d), Some(at)) => spec.time_limit.min(at + d),
            _ => spec.time_limit,
        };
        if (capp.done() && sapp.done()) || now >= stop_at || client_closed {
            break;
        }
        // The next event.
        let mut next = stop_at;
        for t in [
            client.poll_timeout(),
            server_alive.then(|| server.poll_timeout()).flatten(),
            link.next_event_time().map(to_duration),
        ]
        .into_iter()
        .flatten()
        {
            next = next.min(t);
        }
        if server_alive {
            next = next.min(vanish);
        }
        // Never stand still: a deadline already passed is served next
        // microsecond.
        now = next.max(now + Duration::from_micros(1));
        // Deliveries.
        for dir in 0..2 {
            let link_dir = if dir == 0 {
                &mut link.uplink
            } else {
                &mut link.downlink
            };
            while let Some(d) = link_dir.poll_delivery(to_time(now)) {
                let Some(bytes) = in_flight[dir].remove(&d.id) else {
                    continue;
                };
                let delay = to_duration(d.at).saturating_sub(to_duration(d.enqueued_at));
                delays[dir].push(delay);
                queue_delays[dir].push(Duration::from_nanos(d.queue_delay.as_nanos()));
                if dir == 0 {
                    uplink_delays.push((to_duration(d.at), delay));
                    add_to_bin(
                        &mut uplink_delivered,
                        to_duration(d.departed_at),
                        bin,
                        d.len,
                    );
                    let i = (d.at.as_nanos() as u128 / bin.as_nanos()) as usize;
                    if uplink_queue_max_ms.len() <= i {
                        uplink_queue_max_ms.resize(i + 1, 0.0);
                    }
                    let q = d.queue_delay.as_nanos() as f64 / 1e6;
                    uplink_queue_max_ms[i] = uplink_queue_max_ms[i].max(q);
                }
                if dir == 0 {
                    if now < vanish {
                        server.handle(to_duration(d.at), client_addr, &bytes);
                    }
                } else {
                    client.handle(to_duration(d.at), server_addr, &bytes);
                }
            }
        }
        client.handle_timeout(now);
        if now < vanish {
            server.handle_timeout(now);
        }
    }

    let start = established_at.unwrap_or(Duration::ZERO);
    let elapsed = now.saturating_sub(start);
    let acked_by = |ep: &Endpoint, h: Option<ConnectionHandle>, stream: u64| {
        h.and_then(|h| ep.connection_ref(h))
            .map_or(0, |c| c.stream_acked(StreamId(stream)))
    };
    // Each side's own stream has its role's parity (client 0, server 1).
    let acked = [acked_by(&client, Some(ch), 0), acked_by(&server, sh, 1)];
    let direction = |app: &mut App,
                     bytes: u64,
                     dir: usize,
                     delays: &mut Vec<Duration>,
                     queued: &mut Vec<Duration>| {
        let stats = if dir == 0 {
            link.uplink.stats()
        } else {
            link.downlink.stats()
        };
        let span = match spec.duration {
            Some(d) => d.min(elapsed),
            None => app.completed_at.unwrap_or(elapsed),
        };
        let capacity_bits = link_configs[dir].capacity_bits(to_time(start), to_time(start + span));
        DirectionReport {
            bytes,
            delivered: app.read,
            acknowledged: acked[dir],
            completion: app.completed_at,
            goodput_bps: if span.is_zero() {
                0.0
            } else {
                app.read as f64 * 8.0 / span.as_secs_f64()
            },
            delay_p50: percentile(delays, 0.5),
            delay_p95: percentile(delays, 0.95),
            queue_delay_p50: percentile(queued, 0.5),
            queue_delay_p95: percentile(queued, 0.95),
            queue_delay_p99: percentile(queued, 0.99),
            latency_p50: percentile(&mut app.latencies, 0.5),
            latency_p95: percentile(&mut app.latencies, 0.95),
            latency_p99: percentile(&mut app.latencies, 0.99),
            capacity_bps: if span.is_zero() {
                0.0
            } else {
                capacity_bits / span.as_secs_f64()
            },
            datagrams_offered: stats.offered,
            datagrams_delivered: stats.delivered,
            datagrams_dropped: stats.dropped_total(),
            timeline: app.timeline.clone(),
        }
    };
    let [up_delays, down_delays] = &mut delays;
    let [up_queued, down_queued] = &mut queue_delays;
    let upload = direction(&mut sapp, spec.upload, 0, up_delays, up_queued);
    let download = direction(&mut capp, spec.download, 1, down_delays, down_queued);
    let cconn = client.connection_ref(ch);
    let sconn = sh.and_then(|h| server.connection_ref(h));
    let uplink_idle_by_state =
        idle_by_state(&link_configs[0], bin, &uplink_delivered, &client_limited_by);
    Ok(TransferReport {
        uplink_idle_by_state,
        handshake: established_at,
        upload,
        download,
        client: cconn.map(|c| c.stats().into()).unwrap_or_default(),
        server: sconn.map(|c| c.stats().into()).unwrap_or_default(),
        elapsed,
        peak_buffered,
        client_closed: cconn.and_then(|c| c.close_reason()).map(|r| r.to_string()),
        server_closed: sconn.and_then(|c| c.close_reason()).map(|r| r.to_string()),
        timeline_bin: bin,
        client_rate,
        uplink_delays,
        uplink_sent,
        downlink_sent_bytes,
        uplink_delivered,
        uplink_dropped,
        uplink_queue_max_ms,
        client_limited_by,
    })
}

/// Capacity each bin left unused, summed by what limited the sender then.
fn idle_by_state(
    link: &LinkConfig,
    bin: Duration,
    delivered: &[u64],
    limited_by: &[&'static str],
) -> std::collections::BTreeMap<&'static str, u64> {
    let mut idle = std::collections::BTreeMap::new();
    for (i, &state) in limited_by.iter().enumerate() {
        let from = to_time(bin * i as u32);
        let capacity = (link.capacity_bits(from, to_time(bin * (i as u32 + 1))) / 8.0) as u64;
        let used = delivered.get(i).copied().unwrap_or(0);
        *idle.entry(state).or_default() += capacity.saturating_sub(used);
    }
    idle
}

/// Adds `bytes` to the timeline bin holding `at`.
pub(crate) fn add_to_bin(timeline: &mut Vec<u64>, at: Duration, bin: Duration, bytes: u32) {
    let i = (at.as_nanos() / bin.as_nanos()) as usize;
    if timeline.len() <= i {
        timeline.resize(i + 1, 0);
    }
    timeline[i] += u64::from(bytes);
}

//! Memory-to-memory throughput test, like iperf3: the client sends filler
//! on one stream, the server counts it and reports what it received every
//! 100 ms and at the end, with its CPU time.

use std::net::SocketAddr;
use std::time::Duration;

use convoy_proto::{ConnectionHandle, ConnectionStats, Endpoint, StreamId};

use crate::client::{live, read_replies, Client};
use crate::driver::{Application, Step};
use crate::error::NetError;
use crate::multipath::{
    interval_bytes, path_reports, PathBytes, PathEventReport, PathNames, PathReport,
};
use crate::perf_stamps::{stamp, wall_ns, write_len, LatencySummary};
use crate::request::{Reply, Request};
use crate::session::{cpu_time, Outbox};
use crate::stats::DriverReport;

const INTERVAL: Duration = Duration::from_secs(1);
const RTT_SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// How much to send.
#[derive(Clone, Copy, Debug)]
pub enum PerfAmount {
    Bytes(u64),
    Time(Duration),
}

/// One per-second line.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PerfInterval {
    pub start_s: f64,
    pub end_s: f64,
    /// Bytes the server's application received in the interval.
    pub bytes: u64,
    pub goodput_mbps: f64,
    pub rtt_ms: f64,
    pub packets_sent: u64,
    pub packets_lost: u64,
    /// The rate controller's sending rate at the end of the interval.
    pub rate_mbps: f64,
    /// What each path sent and received in the interval.
    pub paths: Vec<PathBytes>,
}

#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct RttSummary {
    pub mean: f64,
    pub min: f64,
}

/// Write-to-read latency in milliseconds (the server's reading of the
/// client's stamps).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct LatencyMs {
    pub samples: u64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

impl From<LatencySummary> for LatencyMs {
    fn from(l: LatencySummary) -> LatencyMs {
        let ms = |us: u64| us as f64 / 1000.0;
        LatencyMs {
            samples: l.samples,
            p50: ms(l.p50_us),
            p95: ms(l.p95_us),
            p99: ms(l.p99_us),
        }
    }
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PerfReport {
    pub mode: String,
    /// The packet AEAD the handshake chose.
    pub aead: String,
    /// Bytes the server's application read: all of them, or, timed, those
    /// that arrived within `seconds` of the request.
    pub bytes: u64,
    pub seconds: f64,
    pub goodput_mbps: f64,
    /// From the client's write to the server's read.
    pub latency_ms: LatencyMs,
    pub rtt_ms: RttSummary,
    pub packets_sent: u64,
    pub packets_lost: u64,
    /// Packets declared lost that were acknowledged afterwards.
    pub spurious_losses: u64,
    pub repair_symbols: u64,
    pub source_symbols: u64,
    pub cpu_seconds: f64,
    pub server_cpu_seconds: Option<f64>,
    pub intervals: Vec<PerfInterval>,
    pub driver: DriverReport,
    pub kernel_timestamps: bool,
    /// Every path at the end: interface, state, bytes, rate, RTT, losses.
    pub paths: Vec<PathReport>,
    /// Every path state change, `t_ms` since the connection began.
    pub path_events: Vec<PathEventReport>,
}

struct PerfApp<'a> {
    h: ConnectionHandle,
    server: SocketAddr,
    amount: PerfAmount,
    stream: Option<StreamId>,
    out: Outbox,
    inbox: Vec<u8>,
    filler: Vec<u8>,
    scratch: Vec<u8>,
    written: u64,
    finished: bool,
    started: Duration,
    received: u64,
    done: Option<(u64, u64, LatencySummary)>,
    next_interval: Duration,
    next_rtt: Duration,
    at_last_interval: (u64, ConnectionStats),
    rtt_sum: f64,
    rtt_n: u64,
    intervals: Vec<PerfInterval>,
    on_interval: &'a mut dyn FnMut(&PerfInterval),
    /// Path id to interface name, for the per-path interval figures.
    names: PathNames,
    /// The paths at the start of the interval.
    paths_before: Vec<PathReport>,
}

impl PerfApp<'_> {
    fn close_interval(&mut self, now: Duration, stats: ConnectionStats, paths: Vec<PathReport>) {
        let (bytes0, s0) = self.at_last_interval;
        let start = self.next_interval.saturating_sub(INTERVAL);
        let span = now.saturating_sub(start).max(Duration::from_micros(1));
        let bytes = self.received - bytes0;
        let iv = PerfInterval {
            start_s: start.saturating_sub(self.started).as_secs_f64(),
            end_s: now.saturating_sub(self.started).as_secs_f64(),
            bytes,
            goodput_mbps: bytes as f64 * 8.0 / span.as_secs_f64() / 1e6,
            rtt_ms: stats.smoothed_rtt.as_secs_f64() * 1e3,
            packets_sent: stats.packets_sent - s0.packets_sent,
            packets_lost: stats.packets_lost - s0.packets_lost,
            rate_mbps: stats.rate as f64 * 8.0 / 1e6,
            paths: interval_bytes(&self.paths_before, &paths),
        };
        self.paths_before = paths;
        (self.on_interval)(&iv);
        self.intervals.push(iv);
        self.at_last_interval = (self.received, stats);
        self.next_interval = now + INTERVAL;
    }
}

impl Application for PerfApp<'_> {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        let c = live(ep, self.h, self.server)?;
        let id = match self.stream {
            Some(id) => id,
            None => {
                let id = c.open_stream()?;
                let (bytes, millis) = match self.amount {
                    PerfAmount::Bytes(n) => (n, 0),
                    PerfAmount::Time(t) => (0, (t.as_millis() as u64).max(1)),
                };
                self.out.push(&Request::Perf { bytes, millis }.encode());
                self.stream = Some(id);
                self.started = now;
                self.next_interval = now + INTERVAL;
                self.at_last_interval = (0, c.stats());
                id
            }
        };
        self.out.flush(c, id)?;
        if !self.finished && self.out.is_empty() {
            let limit = match self.amount {
                PerfAmount::Bytes(n) => n,
                PerfAmount::Time(t) if now < self.started + t => u64::MAX,
                PerfAmount::Time(_) => self.written,
            };
            while self.written < limit {
                let room = c.write_room(id).min(self.filler.len());
                let room = room.min((limit - self.written).min(usize::MAX as u64) as usize);
                // Not ending inside a latency stamp, unless it is the end.
                let n = match write_len(self.written, room) {
                    0 if room as u64 == limit - self.written => room,
                    n => n,
                };
                if n == 0 {
                    break;
                }
                let chunk = &mut self.filler[..n];
                stamp(chunk, self.written, wall_ns());
                let w = c.write(id, chunk)?;
                self.written += w as u64;
            }
            if self.written >= limit {
                c.finish(id)?;
                self.finished = true;
            }
        }
        let (replies, _fin) = read_replies(c, id, &mut self.inbox, &mut self.scratch)?;
        for r in replies {
            match r {
                Reply::Progress { received } => self.received = received,
                Reply::PerfDone {
                    received,
                    cpu_ns,
                    latency,
                } => {
                    self.received = received;
                    self.done = Some((received, cpu_ns, latency));
                    if !self.finished {
                        // A timed run's window closed: what is still
                        // queued would only be dropped by the server.
                        let _ = c.reset(id, 0);
                        self.finished = true;
                    }
                }
                Reply::Error { message } => return Err(NetError::Remote(message)),
                other => return Err(NetError::Protocol(format!("unexpected reply {other:?}"))),
            }
        }
        let stats = c.stats();
        let names = self.names.borrow();
        let paths =
            |c: &convoy_proto::Connection| path_reports(c, |id| (names.get(&id).cloned(), None));
        if now >= self.next_rtt {
            self.next_rtt = now + RTT_SAMPLE_EVERY;
            if !stats.smoothed_rtt.is_zero() {
                self.rtt_sum += stats.smoothed_rtt.as_secs_f64();
                self.rtt_n += 1;
            }
        }
        if self.done.is_some() || now >= self.next_interval {
            let paths = paths(c);
            drop(names);
            self.close_interval(now, stats, paths);
        }
        if self.done.is_some() {
            return Ok(Step::Done);
        }
        Ok(Step::Continue)
    }

    fn wake_at(&self) -> Option<Duration> {
        Some(self.next_interval.min(self.next_rtt))
    }
}

impl Client {
    /// Sends filler to a perf server and returns what it confirmed.
    pub fn perf(
        &mut self,
        amount: PerfAmount,
        mode: &str,
        on_interval: &mut dyn FnMut(&PerfInterval),
    ) -> Result<PerfReport, NetError> {
        let cpu0 = cpu_time();
        let filler: Vec<u8> = (0..256 * 1024u32).map(|i| ((i * 131) >> 3) as u8).collect();
        let mut app = PerfApp {
            h: self.handle,
            server: self.server,
            amount,
            stream: None,
            out: Outbox::default(),
            inbox: Vec::new(),
            filler,
            scratch: vec![0; 64 * 1024],
            written: 0,
            finished: false,
            started: Duration::ZERO,
            received: 0,
            done: None,
            next_interval: Duration::ZERO,
            next_rtt: Duration::ZERO,
            at_last_interval: (0, ConnectionStats::default()),
            rtt_sum: 0.0,
            rtt_n: 0,
            intervals: Vec::new(),
            on_interval,
            names: self.path_names(),
            paths_before: Vec::new(),
        };
        self.run_transfer(&mut app)?;
        let end = self.driver.now();
        let (received, server_cpu_ns, latency) = app.done.expect("done");
        // Timed: the server counted over exactly that window.
        let seconds = match amount {
            PerfAmount::Time(t) => t.as_secs_f64(),
            PerfAmount::Bytes(_) => end.saturating_sub(app.started).as_secs_f64(),
        };
        let stats = self.stats();
        Ok(PerfReport {
            mode: mode.to_owned(),
            aead: stats.aead.to_owned(),
            bytes: received,
            seconds,
            goodput_mbps: received as f64 * 8.0 / seconds.max(1e-9) / 1e6,
            latency_ms: latency.into(),
            rtt_ms: RttSummary {
                mean: if app.rtt_n > 0 {
                    app.rtt_sum / app.rtt_n as f64 * 1e3
                } else {
                    0.0
                },
                min: stats.min_rtt.as_secs_f64() * 1e3,
            },
            packets_sent: stats.packets_sent,
            packets_lost: stats.packets_lost,
            spurious_losses: stats.spurious_losses,
            repair_symbols: stats.sender.repair_symbols,
            source_symbols: stats.sender.source_symbols,
            cpu_seconds: cpu_time().saturating_sub(cpu0).as_secs_f64(),
            server_cpu_seconds: Some(server_cpu_ns as f64 / 1e9),
            intervals: app.intervals,
            driver: self.driver.stats().report(),
            kernel_timestamps: self.driver.kernel_timestamps(),
            paths: self.path_report(),
            path_events: self.path_events(),
        })
    }
}

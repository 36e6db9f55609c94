//! The agent's two lanes in virtual time: two connections from one vehicle
//! over one cellular link, a bulk one (a 200 kB upload every 2 s) and a
//! live one (a ~300-byte upload every second, idle in between), each
//! upload the exchange `convoy_net::upload` makes: a request, the
//! server's resume offset, the data and FIN, the server's confirmation
//! (a file of at most `FROM_START_MAX` goes right behind the request).
//! And a cell of such vehicles sharing one link, a buffer per vehicle.
//! The live connection's few packets a second, after silences, are what a
//! forward-stall state, a probe backoff or a coasting budget could starve:
//! none may hold its uploads back beyond the link's own silences, or let
//! it time out. (With both endpoints driven all along, as here, it never
//! did: the live lane's deaths over `convoy emu` were its blocking client
//! left undriven while idle, `convoy-agent/tests/idle_lane.rs`.)

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use convoy_link::{Dur, Link, LinkConfig, MahimahiTrace, PerUeConfig, QueueDiscipline, Time};
use convoy_proto::cc::Priority;
use convoy_proto::{Config, ConnectionHandle, Endpoint, Event, Keypair, Mode, StreamId};

const SEC: Duration = Duration::from_secs(1);
const REQUEST: usize = 60;
const REPLY: usize = 40;
/// `convoy_net::upload::FROM_START_MAX`: files up to this size go right
/// behind their request, without waiting for the resume offset.
const FROM_START_MAX: usize = 64 * 1024;

/// One upload's client side.
struct Upload {
    stream: StreamId,
    started: Duration,
    size: usize,
    /// Request bytes written.
    request: usize,
    replies: usize,
    written: usize,
    finished: bool,
}

/// A client connection that starts an upload of `size` bytes every
/// `every`, and records how long each took.
struct Lane {
    ep: Endpoint,
    h: ConnectionHandle,
    addr: SocketAddr,
    size: usize,
    every: Duration,
    next: Duration,
    uploads: Vec<Upload>,
    /// (start, duration) of every confirmed upload.
    done: Vec<(Duration, Duration)>,
    closed: Option<(Duration, String)>,
}

impl Lane {
    /// A lane dialling `server` from `addr` with `cfg` (its seed sets
    /// its connection IDs: distinct for every lane the server sees).
    fn new(
        addr: SocketAddr,
        cfg: Config,
        server: SocketAddr,
        key: &[u8; 32],
        size: usize,
        every: Duration,
    ) -> Lane {
        let mut ep = Endpoint::new(cfg, false).unwrap();
        let h = ep.connect(Duration::ZERO, server, Some(key)).unwrap();
        Lane {
            ep,
            h,
            addr,
            size,
            every,
            next: SEC,
            uploads: Vec::new(),
            done: Vec::new(),
            closed: None,
        }
    }

    fn step(&mut self, now: Duration, buf: &mut [u8]) {
        let Some(c) = self.ep.connection(self.h) else {
            return;
        };
        while let Some(ev) = c.poll_event() {
            if let Event::Closed(why) = ev {
                self.closed.get_or_insert((now, why.to_string()));
            }
        }
        if !c.is_established() || c.is_closed() {
            return;
        }
        if now >= self.next {
            self.next += self.every;
            let stream = c.open_stream().unwrap();
            self.uploads.push(Upload {
                stream,
                started: now,
                size: self.size,
                request: 0,
                replies: 0,
                written: 0,
                finished: false,
            });
        }
        let mut confirmed = Vec::new();
        for (i, u) in self.uploads.iter_mut().enumerate() {
            // The request, as the send budget takes it (a bulk upload
            // before it may still fill the budget).
            if u.request < REQUEST {
                if let Ok(n) = c.write(u.stream, &[1; REQUEST][u.request..]) {
                    u.request += n;
                }
            }
            loop {
                match c.read(u.stream, buf) {
                    Ok(0) => {
                        confirmed.push(i);
                        break;
                    }
                    Ok(n) => u.replies += n,
                    Err(_) => break,
                }
            }
            // The data goes once the resume offset came back, or right
            // behind the request for a small file (`FROM_START_MAX`).
            if (u.replies >= REPLY || (u.request >= REQUEST && u.size <= FROM_START_MAX))
                && !u.finished
            {
                while u.written < u.size {
                    let want = (u.size - u.written).min(buf.len());
                    buf[..want].fill(2);
                    match c.write(u.stream, &buf[..want]) {
                        Ok(n) if n > 0 => u.written += n,
                        _ => break,
                    }
                }
                if u.written == u.size {
                    c.finish(u.stream).unwrap();
                    u.finished = true;
                }
            }
        }
        for i in confirmed.into_iter().rev() {
            let u = self.uploads.remove(i);
            self.done.push((u.started, now - u.started));
        }
    }

    /// The longest an upload started in [from, to) took, or has been
    /// waiting at `to`.
    fn worst(&self, from: Duration, to: Duration) -> Duration {
        let done = self
            .done
            .iter()
            .filter(|(s, _)| *s >= from && *s < to)
            .map(|(_, d)| *d);
        let open = self.uploads.iter().map(|u| to.saturating_sub(u.started));
        done.chain(open).max().unwrap_or_default()
    }
}

/// The server's side of every upload: the resume offset once the request
/// is in, the confirmation and FIN once the data's FIN is.
#[derive(Default)]
struct ServerStream {
    read: usize,
    replied: bool,
    confirmed: bool,
}

fn serve(
    ep: &mut Endpoint,
    conns: &mut Vec<(ConnectionHandle, Vec<(StreamId, ServerStream)>)>,
    buf: &mut [u8],
) {
    while let Some(h) = ep.accept() {
        conns.push((h, Vec::new()));
    }
    for (h, streams) in conns.iter_mut() {
        let Some(c) = ep.connection(*h) else { continue };
        while c.poll_event().is_some() {}
        while let Some(id) = c.accept_stream() {
            streams.push((id, ServerStream::default()));
        }
        for (id, s) in streams.iter_mut().filter(|(_, s)| !s.confirmed) {
            let mut fin = false;
            loop {
                match c.read(*id, buf) {
                    Ok(0) => {
                        fin = true;
                        break;
                    }
                    Ok(n) => s.read += n,
                    Err(_) => break,
                }
            }
            if s.read >= REQUEST && !s.replied {
                c.write(*id, &[3; REPLY]).unwrap();
                s.replied = true;
            }
            if fin && s.replied {
                c.write(*id, &[4; REPLY]).unwrap();
                c.finish(*id).unwrap();
                s.confirmed = true;
            }
        }
    }
}

/// Runs the two lanes over `up`/`down` for `duration`: (live, bulk).
fn run(up: LinkConfig, down: LinkConfig, duration: Duration) -> (Lane, Lane) {
    let load = Load {
        vehicles: 1,
        bulk: 200_000,
        every: 2 * SEC,
        idle_timeout: 5 * SEC,
        bulk_priority: Priority::Normal,
    };
    let mut cell = run_cell(up, down, duration, &load);
    cell.pop().unwrap()
}

/// What the vehicles sharing a link send: each a live lane (300 bytes
/// every second) and a bulk lane (`bulk` bytes every `every`).
struct Load {
    vehicles: usize,
    bulk: usize,
    every: Duration,
    idle_timeout: Duration,
    /// The bulk lanes' (the agent's `backlog_priority`).
    bulk_priority: Priority,
}

/// Runs `load` over `up`/`down` for `duration`: every vehicle's (live,
/// bulk). Each vehicle is its own UE for a per-UE queue, and its lanes
/// start `v / vehicles` of their period after the first second, so the
/// bulk uploads come spread as a fleet's do.
fn run_cell(
    up: LinkConfig,
    down: LinkConfig,
    duration: Duration,
    load: &Load,
) -> Vec<(Lane, Lane)> {
    let Load {
        vehicles,
        bulk,
        every,
        idle_timeout,
        bulk_priority,
    } = *load;
    let server_kp = Keypair::generate();
    let key = server_kp.public;
    let mut scfg = Config::for_mode(server_kp, Mode::Tide);
    scfg.seed = Some(1);
    let mut server = Endpoint::new(scfg, true).unwrap();
    let server_addr = SocketAddr::from(([10, 0, 0, 2], 4433));
    let mut lanes = Vec::new();
    for v in 0..vehicles {
        let ip = std::net::Ipv4Addr::new(10, 1, (v / 250) as u8, (v % 250 + 1) as u8);
        let seed = |port: u16| u64::from(port) + 100_000 * v as u64;
        let lane = |port: u16, size: usize, every: Duration, priority: Priority| {
            let mut cfg = Config::for_mode(Keypair::generate(), Mode::Tide);
            cfg.seed = Some(seed(port));
            cfg.idle_timeout = idle_timeout;
            priority.apply(&mut cfg);
            let addr = SocketAddr::from((ip, port));
            Lane::new(addr, cfg, server_addr, &key, size, every)
        };
        let mut live = lane(40001, 300, SEC, Priority::Normal);
        let mut bulk_lane = lane(40002, bulk, every, bulk_priority);
        live.next = SEC + SEC.mul_f64(v as f64 / vehicles as f64);
        bulk_lane.next = SEC + every.mul_f64(v as f64 / vehicles as f64);
        if bulk == 0 {
            // No bulk lane traffic at all: the live lane alone.
            bulk_lane.next = Duration::MAX;
        }
        lanes.push(live);
        lanes.push(bulk_lane);
    }
    let mut link: Link = Link::new(up, down).unwrap();
    // Datagrams on the link by id: (to the server, client lane, bytes).
    let mut in_flight = std::collections::HashMap::new();
    let mut next_id = 0u64;
    let mut conns = Vec::new();
    let mut buf = vec![0u8; 65_536];
    let mut app_buf = vec![0u8; 64 * 1024];
    let mut now = Duration::ZERO;
    while now < duration {
        for l in lanes.iter_mut() {
            l.step(now, &mut app_buf);
        }
        serve(&mut server, &mut conns, &mut app_buf);
        let t = Time::from_nanos(now.as_nanos() as u64);
        for (i, l) in lanes.iter_mut().enumerate() {
            while let Some(tx) = l.ep.poll_transmit(now, &mut buf) {
                next_id += 1;
                let len = tx.len as u32 + 28;
                let ue = (i / 2) as u64 + 1;
                if link.uplink.enqueue_flow(t, len, next_id, ue) == convoy_link::Enqueued::Accepted
                {
                    in_flight.insert(next_id, (true, i, buf[..tx.len].to_vec()));
                }
            }
        }
        while let Some(tx) = server.poll_transmit(now, &mut buf) {
            let Some(i) = lanes.iter().position(|l| l.addr == tx.remote) else {
                continue;
            };
            next_id += 1;
            let len = tx.len as u32 + 28;
            let ue = (i / 2) as u64 + 1;
            if link.downlink.enqueue_flow(t, len, next_id, ue) == convoy_link::Enqueued::Accepted {
                in_flight.insert(next_id, (false, i, buf[..tx.len].to_vec()));
            }
        }
        let next = lanes
            .iter()
            .flat_map(|l| [l.ep.poll_timeout(), (l.next > now).then_some(l.next)])
            .chain([
                server.poll_timeout(),
                link.next_event_time()
                    .map(|t| Duration::from_nanos(t.as_nanos())),
            ])
            .flatten()
            .min()
            .unwrap_or(duration)
            .min(duration);
        now = next.max(now + Duration::from_micros(1));
        let t = Time::from_nanos(now.as_nanos() as u64);
        for dir in [&mut link.uplink, &mut link.downlink] {
            while let Some(d) = dir.poll_delivery(t) {
                let Some((to_server, i, bytes)) = in_flight.remove(&d.id) else {
                    continue;
                };
                let at = Duration::from_nanos(d.at.as_nanos());
                if to_server {
                    server.handle(at, lanes[i].addr, &bytes);
                } else {
                    lanes[i].ep.handle(at, server_addr, &bytes);
                }
            }
        }
        for l in lanes.iter_mut() {
            l.ep.handle_timeout(now);
        }
        server.handle_timeout(now);
    }
    let mut out = Vec::new();
    let mut it = lanes.into_iter();
    while let (Some(live), Some(bulk)) = (it.next(), it.next()) {
        out.push((live, bulk));
    }
    out
}

/// Neither connection closed, every live upload was confirmed within
/// `bound`, none was left behind.
fn check(live: &Lane, bulk: &Lane, duration: Duration, bound: Duration) {
    assert_eq!(live.closed, None, "the live connection closed");
    assert_eq!(bulk.closed, None, "the bulk connection closed");
    let worst = live.worst(SEC, duration - 5 * SEC);
    eprintln!(
        "live: {} uploads, worst {worst:?}; bulk: {} uploads, worst {:?}",
        live.done.len(),
        bulk.done.len(),
        bulk.worst(SEC, duration - 10 * SEC)
    );
    assert!(worst < bound, "a live upload took {worst:?}");
    let expected = (duration - 5 * SEC).as_secs() as usize;
    assert!(
        live.done.len() + 1 >= expected,
        "{} live uploads",
        live.done.len()
    );
}

/// A link whose capacity swings every 250 ms between 0.3 and 25 Mbit/s,
/// with a silence of 1.5 s every 10 s or so, each direction on its own
/// schedule: (up, down) Mahimahi traces of `secs` seconds.
fn swinging(secs: u64) -> (MahimahiTrace, MahimahiTrace) {
    let trace = |seed: u64| {
        let mut x = seed;
        let mut next = move || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            x >> 33
        };
        let mut ms = Vec::new();
        let mut t = 0;
        while t < secs * 1000 {
            let r = next();
            let (len, mbit) = if r % 40 == 0 {
                (1500, 0.0)
            } else {
                (250, [0.3, 2.0, 8.0, 25.0][(r % 4) as usize])
            };
            // A 1500-byte opportunity every 12 / mbit ms.
            if mbit > 0.0 {
                let gap = 12.0 / mbit;
                let mut at = t as f64;
                while at < (t + len) as f64 {
                    ms.push(at as u64 + 1);
                    at += gap;
                }
            }
            t += len;
        }
        ms.push(secs * 1000);
        MahimahiTrace::from_millis(&ms, "swinging").unwrap()
    };
    (trace(1), trace(2))
}

use support::cellular_link as link;

#[test]
fn a_live_lane_beside_a_bulk_one_over_a_swinging_link() {
    let duration = 120 * SEC;
    let (up, down) = swinging(120);
    let (live, bulk) = run(link(&up), link(&down), duration);
    // Its silences last up to 3 s (two in a row), and the bulk upload
    // fills the queue after them: 4.6 s at worst when this was written.
    check(&live, &bulk, duration, 6 * SEC);
}

/// The emulator runs' link: the TMobile LTE trace (not in the
/// repository: `CONVOY_SHARED` or /work/shared), 20 ms each way, 200
/// packets of queue.
#[test]
fn a_live_lane_beside_a_bulk_one_over_the_tmobile_trace() {
    let Some((up, down)) = support::shared_drive("TMobile-LTE-short") else {
        return;
    };
    let duration = 180 * SEC;
    for offset in [0, 37, 91] {
        let at = |t: &MahimahiTrace| link(&t.starting_at(Dur::from_secs(offset)));
        let (live, bulk) = run(at(&up), at(&down), duration);
        // Under 1 s at worst when this was written (the trace's gaps).
        check(&live, &bulk, duration, 3 * SEC);
    }
}

/// A cell of vehicles as `convoy_lab.fleet scale` runs one: 25 vehicles
/// on a shared drive trace, a buffer per UE, a 64 KiB log every 10 s
/// each. No connection closes, every live upload finishes, and the live
/// uploads' median over the offsets stays under 0.27 s: 0.18 s when this
/// was written, 0.35 s while every upload waited a round trip for its
/// resume offset (`FROM_START_MAX`). It prints the live uploads' times per
/// trace offset; as a measurement:
///
/// ```text
/// CELL_OFFSETS=0,15,30,45,60,75,90 cargo test --release -p convoy-sim \
///     --test two_lanes a_cell_of_vehicles -- --nocapture
/// ```
///
/// `CELL_TRACE` (ATT-LTE-driving-2016), `CELL_VEHICLES` (25),
/// `CELL_SECONDS` (90) and `CELL_OFFSETS` (0,30,60) change it;
/// `CELL_LOGS=0` sends no logs, which shows what the trace's own outages
/// cost the live lane; `CELL_BULK=background` sends them under the
/// scavenger, as the agent's `backlog_priority = "background"` does.
/// `CELL_RUNS=fleet` runs the four cells of `fleet scale` instead
/// (T-Mobile from 0 s, Verizon from 17 s, AT&T from 34 s, T-Mobile from
/// 51 s), pooled as its figures are; `CELL_RUNS` also takes a list of
/// `TRACE@OFFSET`.
#[test]
fn a_cell_of_vehicles() {
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let name = var("CELL_TRACE", "ATT-LTE-driving-2016");
    let vehicles: usize = var("CELL_VEHICLES", "25").parse().expect("CELL_VEHICLES");
    let seconds: u32 = var("CELL_SECONDS", "90").parse().expect("CELL_SECONDS");
    let runs: Vec<(String, u64)> = match var("CELL_RUNS", "").as_str() {
        "" => var("CELL_OFFSETS", "0,30,60")
            .split(',')
            .map(|o| (name.clone(), o.parse().expect("CELL_OFFSETS")))
            .collect(),
        "fleet" => FLEET_CELLS
            .iter()
            .map(|&(t, o)| (t.to_string(), o))
            .collect(),
        list => list
            .split(',')
            .map(|r| {
                let (t, o) = r.split_once('@').expect("CELL_RUNS: TRACE@OFFSET,…");
                (t.to_string(), o.parse().expect("CELL_RUNS: TRACE@OFFSET,…"))
            })
            .collect(),
    };
    let duration = SEC * seconds;
    let logs: bool = var("CELL_LOGS", "1") != "0";
    let load = Load {
        vehicles,
        bulk: if logs { 65_536 } else { 0 },
        every: 10 * SEC,
        idle_timeout: 30 * SEC,
        bulk_priority: var("CELL_BULK", "normal")
            .parse()
            .unwrap_or_else(|e| panic!("CELL_BULK: {e}")),
    };
    let quantile = |v: &[f64], p: f64| v[((v.len() - 1) as f64 * p) as usize];
    eprintln!("{vehicles} vehicles a cell, {seconds} s: live upload times (s)");
    eprintln!("trace                   offset  uploads  p50   p90   p99   max    logs");
    let mut pooled = Vec::new();
    for (trace, offset) in runs {
        let Some((up, down)) = support::shared_drive(&trace) else {
            return;
        };
        let at = |t: &MahimahiTrace| {
            link(&t.starting_at(Dur::from_secs(offset)))
                .with_discipline(QueueDiscipline::PerUe(PerUeConfig::default()))
        };
        let cell = run_cell(at(&up), at(&down), duration, &load);
        let mut times = Vec::new();
        let mut logs = 0;
        for (v, (live, bulk)) in cell.iter().enumerate() {
            assert_eq!(live.closed, None, "vehicle {v}'s live lane closed");
            assert_eq!(bulk.closed, None, "vehicle {v}'s bulk lane closed");
            let late = duration - 10 * SEC;
            let open = live.uploads.iter().filter(|u| u.started < late).count();
            assert_eq!(open, 0, "vehicle {v}: live uploads unfinished");
            times.extend(
                live.done
                    .iter()
                    .filter(|(s, _)| *s >= 5 * SEC && *s < late)
                    .map(|(_, d)| d.as_secs_f64()),
            );
            logs += bulk.done.len();
        }
        times.sort_by(f64::total_cmp);
        eprintln!(
            "{trace:<22}  {offset:>6}  {:>7}  {:.2}  {:.2}  {:.2}  {:.2}  {logs:>5}",
            times.len(),
            quantile(&times, 0.5),
            quantile(&times, 0.9),
            quantile(&times, 0.99),
            times[times.len() - 1],
        );
        pooled.extend(times);
    }
    pooled.sort_by(f64::total_cmp);
    let median = quantile(&pooled, 0.5);
    let over = pooled.iter().filter(|&&t| t > 2.0).count() as f64 / pooled.len() as f64;
    eprintln!(
        "all: p50 {median:.2}, p90 {:.2}, p99 {:.2}; {:.1} % over 2 s",
        quantile(&pooled, 0.9),
        quantile(&pooled, 0.99),
        100.0 * over
    );
    assert!(median < 0.27, "the live uploads' median took {median:.2} s");
    // A log lane back from its 10 s idle measures its share afresh
    // instead of filling its buffer at the rate it had
    // (`Tide::restart_after_idle`): over offsets 0, 30 and 60, 4.4 % of
    // live uploads over 2 s with it, 5.9 % without.
    let as_configured = ["CELL_TRACE", "CELL_VEHICLES", "CELL_SECONDS", "CELL_RUNS"]
        .into_iter()
        .chain(["CELL_OFFSETS", "CELL_LOGS", "CELL_BULK"])
        .all(|v| std::env::var(v).is_err());
    if as_configured {
        assert!(
            over < 0.05,
            "{:.1} % of live uploads over 2 s",
            100.0 * over
        );
    }
}

/// The cells of `convoy_lab.fleet scale` (`demo_lte.link_specs`): the
/// shared drives in turn, cell c from (17 c mod 100) s into its trace.
const FLEET_CELLS: [(&str, u64); 4] = [
    ("TMobile-LTE-short", 0),
    ("Verizon-LTE-short", 17),
    ("ATT-LTE-driving-2016", 34),
    ("TMobile-LTE-short", 51),
];

//! `convoy keygen`, `convoy serve`, `convoy send`, `convoy get`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use convoy_net::{
    load_keypair, parse_server_key, write_keypair, Client, Progress, Server, ServerOptions,
    UploadQueue, UploadReport,
};
use convoy_proto::crypto::hex;
use convoy_proto::Keypair;

use crate::net_common::{resolve, stop_on_signals, Bar, PathOpts, TransferOpts};

#[derive(Args)]
pub struct KeygenArgs {
    /// Private key file to create (mode 0600); the public key goes to
    /// FILE.pub. An existing file is never overwritten.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Print {"public": HEX, "private_file": ..., "public_file": ...}.
    #[arg(long)]
    pub json: bool,
}

pub fn keygen(args: KeygenArgs) -> Result<()> {
    let kp = Keypair::generate();
    write_keypair(&args.out, &kp)?;
    let public = hex(&kp.public);
    if args.json {
        let pubfile = convoy_net::keys::public_path(&args.out);
        println!(
            "{}",
            serde_json::json!({"public": public, "private_file": args.out, "public_file": pubfile})
        );
    } else {
        println!("{public}");
    }
    Ok(())
}

#[derive(Args)]
pub struct ServeArgs {
    /// Read settings from this TOML file: one key per long option
    /// (`listen`, `dir`, `http_tls = ["CERT", "KEY"]`, `fleet = true`…);
    /// flags given on the command line override it; an unknown key is an
    /// error. Example: /etc/convoy/serve.toml in the package.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address and UDP port to listen on.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:4433")]
    pub listen: String,
    /// Directory uploads are stored in (it must exist). Partial uploads
    /// wait in DIR/.convoy-partial/ until complete.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// The server's private key file (from `convoy keygen`).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Exit after the first client's connection ends.
    #[arg(long)]
    pub once: bool,
    /// One JSON object per event on stdout.
    #[arg(long)]
    pub json: bool,
    /// Open mode: ANYONE who can reach the port may read and write every
    /// file in DIR (no registry; not even the server key is needed).
    /// Without it, serve needs a fleet registry (--fleet, --catalog).
    #[arg(long)]
    pub open: bool,
    #[command(flatten)]
    pub cluster: FleetOpts,
    #[command(flatten)]
    pub storage: StorageOpts,
    #[command(flatten)]
    pub transfer: TransferOpts,
    #[command(flatten)]
    pub fleet: crate::service_cmd::FleetServeOpts,
    #[command(flatten)]
    pub log: crate::logging::LogOpts,
}

/// What uploads may take on the server's disk (docs/NET.md, "Limits").
#[derive(Args, Clone, Debug)]
pub struct StorageOpts {
    /// Refuse an upload announcing more than this, before any file is made.
    #[arg(long, value_name = "SIZE", default_value = "64GiB", value_parser = crate::net_common::parse_size)]
    pub max_upload: u64,
    /// Unfinished uploads one vehicle (or operator) may hold at once.
    #[arg(long, value_name = "N", default_value_t = convoy_net::partials::DEFAULT_MAX_PARTIAL_FILES)]
    pub max_partial_files: usize,
    /// Bytes one vehicle's unfinished uploads may grow to, counted at the
    /// sizes their requests announce.
    #[arg(long, value_name = "SIZE", default_value = "64GiB", value_parser = crate::net_common::parse_size)]
    pub max_partial_bytes: u64,
    /// Remove unfinished uploads not written to for this many hours (at
    /// start-up and every minute after).
    #[arg(long, value_name = "HOURS", default_value_t = 168.0)]
    pub partial_max_age: f64,
}

impl StorageOpts {
    pub fn apply(&self, opts: &mut ServerOptions) -> Result<()> {
        if !(self.partial_max_age.is_finite() && self.partial_max_age > 0.0) {
            bail!("--partial-max-age: expected a positive number of hours");
        }
        opts.max_upload = self.max_upload;
        opts.partial_quota = convoy_net::partials::Quota {
            files: self.max_partial_files.max(1),
            bytes: self.max_partial_bytes,
        };
        opts.partial_max_age = std::time::Duration::from_secs_f64(self.partial_max_age * 3600.0);
        Ok(())
    }
}

/// How a server spreads over cores and sits in a fleet (docs/NET.md,
/// "Deployment").
#[derive(Args, Clone, Debug)]
pub struct FleetOpts {
    /// Worker threads, each with its own SO_REUSEPORT socket on the port;
    /// the kernel steers each datagram to the worker its connection id
    /// names. 0: one per CPU.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=64))]
    pub workers: u16,
    /// This server's id in the fleet (0-65535), carried in every
    /// connection id so a QUIC-LB-style load balancer routes by it.
    #[arg(long, value_name = "ID", default_value_t = 0)]
    pub server_id: u16,
}

impl FleetOpts {
    pub fn apply(&self, opts: &mut ServerOptions) {
        opts.workers = match self.workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => usize::from(n),
        };
        opts.server_id = self.server_id;
    }
}

pub fn serve(args: ServeArgs) -> Result<()> {
    // With --json the events already go to stdout: stderr keeps only
    // warnings and errors unless --log-level or RUST_LOG asks for more.
    args.log.init(if args.json { "warn" } else { "info" })?;
    let keypair = load_keypair(&args.key)?;
    let mut opts = ServerOptions::new(resolve(&args.listen)?, keypair);
    opts.dir = Some(args.dir.clone());
    opts.mode = args.transfer.mode;
    opts.once = args.once;
    opts.idle_timeout = args.transfer.idle()?;
    opts.driver = args.transfer.driver();
    opts.aead = args.transfer.aead;
    args.cluster.apply(&mut opts);
    args.storage.apply(&mut opts)?;
    let service = if args.fleet.enabled(&args.dir) {
        if !args.dir.is_dir() {
            bail!("{}: not a directory", args.dir.display());
        }
        // The same events as the log, as JSON on stdout (--json).
        let json = args.json;
        let stdout: crate::service_cmd::JsonOut = std::sync::Arc::new(move |v| {
            if json {
                println!("{v}");
            }
        });
        Some(crate::service_cmd::start(
            &args.fleet,
            &args.dir,
            &mut opts,
            stdout,
        )?)
    } else if args.open {
        opts.open = true;
        None
    } else {
        bail!(
            "{}: no fleet registry (--fleet, --catalog or {}): pass --open to let anyone \
             read and write its files",
            args.dir.display(),
            crate::fleet_cmd::CATALOG_FILE
        );
    };
    // Said once the server is up, so a server that cannot start prints its
    // reason alone; in JSON too, as the first line's `open` field.
    let open_mode = service.is_none().then_some(
        "open mode (--open): anyone may read and write every file in the directory \
         (register vehicles with `convoy fleet add` and drop --open to close it)",
    );
    let observer = service.as_ref().map(|s| s.counters.clone());
    run_server(opts, args.json, open_mode, observer)
}

/// Runs a server, logging its events, until a signal (or `--once`);
/// `notice` is logged as a warning once it is listening.
/// `observer` counts the events for the fleet service's `/metrics`.
pub fn run_server(
    opts: ServerOptions,
    json: bool,
    notice: Option<&str>,
    observer: Option<std::sync::Arc<crate::service_metrics::ServiceCounters>>,
) -> Result<()> {
    let open = opts.open && opts.dir.is_some();
    let mut server = Server::bind(opts)?;
    if let Some(o) = &observer {
        o.set_figures(server.figures());
    }
    let addr = server.local_addr().context("socket address")?;
    if let Some(n) = notice {
        tracing::warn!(target: "convoy::server", "{n}");
    }
    stop_on_signals(&server.stop_flag())?;
    if json {
        println!(
            "{}",
            serde_json::json!({"event": "listening", "addr": addr, "open": open})
        );
    }
    tracing::info!(target: "convoy::server", addr = %addr, open, "listening");
    server.on_event(move |e| {
        if let Some(o) = &observer {
            o.observe(e);
        }
        if json {
            println!("{}", serde_json::to_string(e).unwrap_or_default());
        }
        crate::service_log::server_event(e);
    });
    server.run()?;
    // What the socket loops saw (drops, syscalls, pacing) and what the
    // endpoints refused, summed over the workers, once at exit.
    let stats = server.stats();
    let d = stats.driver.report();
    let e = stats.endpoint;
    let endpoint = serde_json::json!({
        "malformed": e.malformed, "unknown_connection": e.unknown_connection,
        "handshake_failures": e.handshake_failures, "retries_sent": e.retries_sent,
        "retries_dropped": e.retries_dropped, "tokens_accepted": e.tokens_accepted,
        "unproven_expired": e.unproven_expired, "accepted": e.accepted,
        "replays": e.replays, "auth_failures": e.auth_failures,
        "offender_drops": e.offender_drops,
    });
    if json {
        println!(
            "{}",
            serde_json::json!({"event": "driver", "driver": d, "endpoint": endpoint, "workers": stats.workers})
        );
    }
    tracing::info!(
        target: "convoy::server",
        workers = stats.workers, datagrams_received = d.datagrams_received,
        recv_syscalls = d.recv_syscalls, datagrams_sent = d.datagrams_sent,
        send_syscalls = d.send_syscalls, receive_drops = d.receive_drops,
        "driver totals at exit"
    );
    tracing::info!(
        target: "convoy::server",
        malformed = e.malformed, unknown_connection = e.unknown_connection,
        handshake_failures = e.handshake_failures, replays = e.replays,
        auth_failures = e.auth_failures, offender_drops = e.offender_drops,
        retries_sent = e.retries_sent,
        "refused at the endpoint, totals at exit"
    );
    Ok(())
}

#[derive(Args)]
pub struct SendArgs {
    /// Files to upload, then the server address (HOST[:PORT], port 4433
    /// by default). Each file is stored under its own file name. Several
    /// files share one connection with up to 16 in flight, so many small
    /// files do not cost two round trips each.
    #[arg(value_name = "FILE... ADDR", num_args = 2.., required = true)]
    pub args: Vec<String>,
    /// The server's public key: 64 hex digits or a file (FILE.pub).
    #[arg(long, value_name = "KEY")]
    pub server_key: String,
    /// One JSON document on stdout: {"files": [...]}.
    #[arg(long)]
    pub json: bool,
    /// Store each file as PREFIX/FILENAME (nested names such as
    /// 2026-11-24/cam0; inside the vehicle's namespace on a fleet server).
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<String>,
    #[command(flatten)]
    pub paths: PathOpts,
    #[command(flatten)]
    pub transfer: TransferOpts,
}

pub fn send(args: SendArgs) -> Result<()> {
    let (addr, files) = args.args.split_last().expect("clap: at least 2");
    // Check every file before connecting, so a typo costs no transfer.
    let mut names = Vec::with_capacity(files.len());
    for f in files {
        std::fs::File::open(f).with_context(|| format!("cannot read {f}"))?;
        if std::fs::metadata(f)?.is_dir() {
            bail!("{f} is a directory; name the files to send");
        }
        let base = std::path::Path::new(f)
            .file_name()
            .and_then(|n| n.to_str())
            .with_context(|| format!("{f}: no file name in UTF-8 to store it under"))?;
        names.push(match &args.prefix {
            Some(p) => format!("{}/{base}", p.trim_end_matches('/')),
            None => base.to_owned(),
        });
    }
    let key = parse_server_key(&args.server_key)?;
    let server = resolve(addr)?;
    let mut client = Client::connect(args.transfer.client(server, key, &args.paths)?)?;
    let progress;
    let reports = if files.len() == 1 {
        let f = &files[0];
        let mut bar = Bar::new(f, args.json);
        let mut draw = |p| bar.draw(p);
        let r = client.upload(std::path::Path::new(f), Some(&names[0]), Some(&mut draw));
        bar.clear();
        let r = r?;
        if !args.json {
            print_stored(f, &r, true);
        }
        progress = bar.reports();
        vec![r]
    } else {
        let mut queue = SendQueue::new(files, names, args.json);
        let r = client.upload_queue(&mut queue, SEND_WINDOW);
        queue.bar.clear();
        r?;
        progress = queue.bar.reports();
        if !args.json {
            let bytes: u64 = queue
                .reports
                .iter()
                .map(|(_, r)| r.bytes - r.resumed_from)
                .sum();
            let secs = queue.started.elapsed().as_secs_f64();
            println!(
                "{} files stored, {bytes} bytes sent in {secs:.2} s ({:.0} Mbit/s)",
                queue.reports.len(),
                bytes as f64 * 8.0 / secs.max(1e-9) / 1e6
            );
        }
        // Confirmed as each arrived; reported in the order given.
        queue.reports.sort_by_key(|(i, _)| *i);
        queue.reports.into_iter().map(|(_, r)| r).collect()
    };
    let (paths, events) = (client.path_report(), client.path_events());
    client.close();
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "files": reports,
                "paths": paths,
                "path_events": events,
                "progress": progress
            })
        );
    }
    Ok(())
}

/// Uploads in flight at once when `convoy send` has several files: their
/// requests and confirmations overlap, so a directory of small files is
/// not two round trips each (`Client::upload_queue`).
const SEND_WINDOW: usize = 16;

fn print_stored(f: &str, r: &UploadReport, with_rate: bool) {
    let rate = if with_rate {
        format!(
            " in {:.2} s, {:.0} Mbit/s",
            r.seconds,
            (r.bytes - r.resumed_from) as f64 * 8.0 / r.seconds.max(1e-9) / 1e6
        )
    } else {
        String::new()
    };
    let resumed = if r.resumed_from > 0 {
        format!(", resumed from {}", r.resumed_from)
    } else {
        String::new()
    };
    println!(
        "{f}: stored as {} ({} bytes{rate}{resumed}), BLAKE3 {}",
        r.name, r.bytes, r.blake3
    );
}

/// `convoy send` with several files: one upload after another on one
/// connection, with their round trips overlapped. Each file's line is
/// printed as the server confirms it durable; the bar counts confirmed
/// bytes (uploads overlap, so per-file rates would mislead).
struct SendQueue<'a> {
    files: &'a [String],
    names: Vec<String>,
    next: usize,
    json: bool,
    total: u64,
    done: u64,
    bar: Bar,
    started: Instant,
    /// Each file's index among those given, and its report.
    reports: Vec<(usize, UploadReport)>,
    /// Each path's figures at the latest progress tick.
    paths: Vec<convoy_net::multipath::PathProgress>,
}

impl<'a> SendQueue<'a> {
    fn new(files: &'a [String], names: Vec<String>, json: bool) -> SendQueue<'a> {
        let total = files
            .iter()
            .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
            .sum();
        SendQueue {
            files,
            names,
            next: 0,
            json,
            total,
            done: 0,
            bar: Bar::new(&format!("{} files", files.len()), json),
            started: Instant::now(),
            reports: Vec::new(),
            paths: Vec::new(),
        }
    }
}

impl SendQueue<'_> {
    /// The bar: confirmed bytes, and each path's latest figures.
    fn draw(&mut self) {
        self.bar.draw(Progress {
            done: self.done,
            total: self.total,
            elapsed: self.started.elapsed(),
            paths: self.paths.clone(),
        });
    }
}

impl UploadQueue for SendQueue<'_> {
    fn next(&mut self) -> Option<(PathBuf, String)> {
        let f = self.files.get(self.next)?;
        let name = self.names[self.next].clone();
        self.next += 1;
        Some((PathBuf::from(f), name))
    }

    fn stored(&mut self, index: usize, report: UploadReport) {
        self.done += report.bytes;
        if !self.json {
            self.bar.clear();
            print_stored(&self.files[index], &report, false);
            self.draw();
        }
        self.reports.push((index, report));
    }

    fn failed(&mut self, index: usize, error: &convoy_net::NetError) {
        if !self.json {
            self.bar.clear();
            eprintln!("{}: not stored: {error}", self.files[index]);
            self.draw();
        }
    }

    fn paths(&mut self, paths: Vec<convoy_net::multipath::PathProgress>) {
        self.paths = paths;
        self.draw();
    }
}

#[derive(Args)]
pub struct GetArgs {
    /// The stored file's name on the server.
    pub name: String,
    /// The server address (HOST[:PORT], port 4433 by default).
    pub addr: String,
    /// The server's public key: 64 hex digits or a file (FILE.pub).
    #[arg(long, value_name = "KEY")]
    pub server_key: String,
    /// Where to write it (default: NAME in the current directory). An
    /// interrupted download resumes from OUT.convoy-part.
    #[arg(long, short, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// One JSON document on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub paths: PathOpts,
    #[command(flatten)]
    pub transfer: TransferOpts,
}

pub fn get(args: GetArgs) -> Result<()> {
    let key = parse_server_key(&args.server_key)?;
    let server = resolve(&args.addr)?;
    // A nested name lands under its last component.
    let dest = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(args.name.rsplit('/').next().unwrap_or(&args.name)));
    let mut client = Client::connect(args.transfer.client(server, key, &args.paths)?)?;
    let mut bar = Bar::new(&args.name, args.json);
    let mut draw = |p| bar.draw(p);
    let r = client.download(&args.name, &dest, Some(&mut draw));
    bar.clear();
    let r = r?;
    let (paths, events) = (client.path_report(), client.path_events());
    client.close();
    if args.json {
        let mut doc = serde_json::to_value(&r)?;
        doc["paths"] = serde_json::to_value(paths)?;
        doc["path_events"] = serde_json::to_value(events)?;
        doc["progress"] = serde_json::Value::Array(bar.reports());
        println!("{doc}");
    } else {
        println!(
            "{} -> {} ({} bytes in {:.2} s), BLAKE3 {}",
            r.name,
            r.path.display(),
            r.bytes,
            r.seconds,
            r.blake3
        );
    }
    Ok(())
}

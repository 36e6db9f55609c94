//! `convoy emu`: run a command over emulated links (crates/convoy-emu), and
//! `convoy emu selftest`: measure how faithfully it does so.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use convoy_emu::selftest;
use convoy_emu::{DirectionReport, EmuConfig, EmuError, Emulator, LinkSpec, Side};

const LINK_HELP: &str = "\
LINKS
  --link NAME[:KEY=VALUE[,KEY=VALUE]...]   (repeat for several links)

  NAME names the link's interface on both sides (1-15 of [A-Za-z0-9_-]).
  Link number i (in order) is 10.7.i.0/24: the client side is 10.7.i.1,
  the server side 10.7.i.2. There is no default route: use addresses.
  Every KEY applies to both directions; prefix it with up- (client to
  server) or down- (server to client) for one direction only.

  rate=R          capacity: unlimited (default), 50mbit, 1.5gbit, 64kbps, or
                  a trace file: Mahimahi packet-delivery trace, or convoy
                  time-series CSV (*.csv; also gives delay, loss, outages)
  up=R, down=R    the same for one direction (uplink=, downlink= also work)
  delay=D         one-way propagation delay: 20ms, 500us, 1.5s (default 0)
  jitter=D        extra uniform delay in [0, D], order kept
  loss=L          1% or 0.01 (Bernoulli), ge:P_GB/P_BG[/LOSS_GOOD/LOSS_BAD]
                  (Gilbert-Elliott), every:N
  loss-at=W       after (default: lost on the air, after the queue) | before
  queue=Q         drop-tail: unlimited (default), 100 or 100pkt, 150kB, 64KiB;
                  or fq_codel (per-flow queues with CoDel, RFC 8290)
  outage=I        down intervals from the start: 10s-12s/30s-31.5s
  outage-policy=P hold (default: packets wait) | drop | down (drop, and the
                  client's interface goes down for each outage and comes back
                  with its address and routes; whole link only, no up-/down-)
  seed=N          seed of the loss and jitter processes
  mac=M[:retries=N]  802.11 retries at the transmitter: 80211 (OFDM, 20 MHz)
                  | 80211p (10 MHz) | none; rate= is then the PHY rate and
                  loss= the loss of each attempt; also retries=N (default 7),
                  cw-min=N (15), cw-max=N (1023) after it. Not with Mahimahi
                  traces or loss-at=before
  mtu=N           interface MTU, both sides (default 1500)
  ap=P            smart access point rewriting TCP receive windows in the ACKs
                  it forwards (both directions): sap-law, sap-law-rtt (need a
                  constant rate) or voap[:alpha=5ms,beta=10ms]
  port-delay=P:D  extra one-way delay each way for a port: 5202:10ms/5203:35ms

EXAMPLES
  convoy emu --link lte:rate=50mbit,delay=20ms -- ping -c 5 10.7.0.2
  convoy emu --link lte:up=ATT-LTE-driving-2016.up,down=ATT-LTE-driving-2016.down,delay=20ms,loss=1% \\
             --server 'iperf3 -s' -- iperf3 -c 10.7.0.2 -C bbr
  convoy emu --link lte:rate=20mbit,delay=30ms --link wifi:rate=50mbit,delay=5ms \\
             --server 'python3 -m http.server 8000' -- curl -o /dev/null http://10.7.0.2:8000/
  convoy emu --link wifi:rate=10mbit,delay=30ms,queue=250,ap=sap-law \\
             --server 'iperf3 -s' -- iperf3 -c 10.7.0.2 -R -C cubic

Commands see CONVOY_EMU_SERVER, CONVOY_EMU_CLIENT (first link),
CONVOY_EMU_<NAME>_SERVER / _CLIENT and CONVOY_EMU_EPOCH_NS (link time 0). docs/EMU.md has the MPTCP recipe.
Needs root and /dev/net/tun; everything it creates is gone when it exits.";

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, after_long_help = LINK_HELP)]
pub struct EmuArgs {
    #[command(subcommand)]
    sub: Option<EmuSub>,
    /// An emulated link between the client and the server side (see LINKS
    /// under --help). Repeat for several links.
    #[arg(long = "link", value_name = "NAME[:KEY=VALUE,...]")]
    links: Vec<String>,
    /// A shell command started on the server side before the client
    /// command, and ended after it.
    #[arg(long, value_name = "CMD")]
    server: Option<String>,
    /// How long to wait for the server command to listen (a TCP socket in
    /// LISTEN or an unconnected bound UDP socket) before starting the
    /// client anyway.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    server_wait: f64,
    /// Write per-packet records, DIR/NAME.up.csv and DIR/NAME.down.csv
    /// (docs/TRACES.md: t_ns,event,id,len,queue_delay_ns,reason).
    #[arg(long, value_name = "DIR")]
    records: Option<PathBuf>,
    /// Capture every delivered packet into a pcapng file, one interface per
    /// link direction (NAME:up, NAME:down), stamped with delivery times.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// At exit, print per-direction packet and byte counts to stderr.
    #[arg(long)]
    summary: bool,
    /// Link threads spin (instead of sleeping) for the last this many
    /// microseconds before each delivery; 0 saves CPU, costs accuracy.
    #[arg(long, value_name = "US", default_value_t = 50)]
    spin_us: u64,
    /// Run the link threads as ordinary threads instead of SCHED_FIFO, and
    /// let idle CPUs sleep: saves CPU, costs accuracy (by default link
    /// threads are real-time and idle CPUs poll, so that deliveries stay on
    /// time on a busy machine and wake-ups are fast).
    #[arg(long)]
    no_realtime: bool,
    /// The client command and its arguments (default: $SHELL).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

#[derive(Subcommand)]
enum EmuSub {
    /// Measure the emulator against its accuracy targets (needs root,
    /// iperf3 and ping) and print each figure.
    Selftest(SelftestArgs),
}

#[derive(Args)]
struct SelftestArgs {
    /// Shorter runs: checks that everything works, numbers are noisier.
    #[arg(long)]
    quick: bool,
    /// The Mahimahi trace for the replay test.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "../shared/traces/TMobile-LTE-short.down"
    )]
    trace: PathBuf,
    /// Run only these tests (by name; repeatable).
    #[arg(long = "only", value_name = "NAME")]
    only: Vec<String>,
    /// As for `convoy emu --spin-us`.
    #[arg(long, value_name = "US", default_value_t = 50)]
    spin_us: u64,
}

pub fn run(args: EmuArgs) -> anyhow::Result<()> {
    if let Some(EmuSub::Selftest(a)) = args.sub {
        return run_selftest(a);
    }
    let mut specs = Vec::new();
    for text in &args.links {
        specs.push(LinkSpec::parse(text).map_err(|e| EmuError::spec(text, e))?);
    }
    if specs.is_empty() {
        bail!("give at least one --link, e.g. --link lte:rate=50mbit,delay=20ms");
    }
    if !(args.server_wait >= 0.0 && args.server_wait <= 3600.0) {
        bail!("--server-wait must be between 0 and 3600 seconds");
    }
    let mut config = EmuConfig::new(specs);
    config.spin = Duration::from_micros(args.spin_us);
    config.realtime = !args.no_realtime;
    config.pcap = args.pcap.clone();
    if let Some(dir) = &args.records {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating records directory {}", dir.display()))?;
        config.records_dir = Some(dir.clone());
    }

    // From here on SIGINT, SIGTERM and SIGHUP only set this, so clean-up
    // always runs; it holds the signal number.
    let signal = Arc::new(AtomicUsize::new(0));
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register_usize(sig, signal.clone(), sig as usize)
            .context("installing signal handlers")?;
    }
    let interrupted = || signal.load(Ordering::SeqCst) != 0;

    let mut emu = Emulator::start(config)?;
    if let Some(script) = &args.server {
        emu.spawn_server(script, false)?;
        let ready =
            emu.wait_server_ready(Duration::from_secs_f64(args.server_wait), &interrupted)?;
        if !ready && !interrupted() && args.server_wait > 0.0 {
            eprintln!(
                "convoy emu: the server command is not listening after {} s; starting the client anyway",
                args.server_wait
            );
        }
    }
    let code = if interrupted() {
        128 + signal.load(Ordering::SeqCst) as i32
    } else {
        run_client(&emu, &args.command, &signal)?
    };
    let iface_events = emu.iface_events();
    let reports = emu.shutdown()?;
    if args.summary {
        for r in &reports {
            eprintln!("convoy emu: {}", summary_line(r));
        }
        for e in &iface_events {
            eprintln!("convoy emu: {}", iface_line(e));
        }
    }
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}

/// Runs the client command to its end (or until a signal), handing it the
/// terminal when there is one, and returns its exit code as a shell would.
fn run_client(emu: &Emulator, command: &[OsString], signal: &AtomicUsize) -> anyhow::Result<i32> {
    let (program, rest) = match command.split_first() {
        Some((p, rest)) => (p.clone(), rest),
        None => (
            std::env::var_os("SHELL").unwrap_or_else(|| "/bin/sh".into()),
            &[][..],
        ),
    };
    let mut cmd = emu.command(Side::Client, &program, true);
    cmd.args(rest);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", program.to_string_lossy()))?;
    let terminal = Terminal::hand_to(child.id() as i32);
    let code = loop {
        if let Some(status) = child.try_wait()? {
            break exit_code(status);
        }
        let sig = signal.load(Ordering::SeqCst);
        if sig != 0 || emu.link_failed() {
            // SAFETY: plain syscall on the child's own process group.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
            // A link that failed reports its error from shutdown().
            break if sig != 0 { 128 + sig as i32 } else { 1 };
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    terminal.restore();
    Ok(code)
}

fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// The controlling terminal's foreground process group, given to the
/// client (which leads its own group, so that it can be signalled as a
/// whole) for as long as it runs, so interactive programs work.
struct Terminal {
    ours: Option<libc::pid_t>,
}

impl Terminal {
    fn hand_to(pgid: libc::pid_t) -> Terminal {
        // SAFETY: plain syscalls on stdin.
        unsafe {
            let ours = libc::getpgrp();
            if libc::isatty(0) == 1 && libc::tcgetpgrp(0) == ours {
                // Taking the terminal back from the background would
                // otherwise stop us with SIGTTOU.
                libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                if libc::tcsetpgrp(0, pgid) == 0 {
                    // Had it touched the terminal before it was handed
                    // over, it was stopped (SIGTTIN/SIGTTOU): resume it.
                    libc::kill(-pgid, libc::SIGCONT);
                    return Terminal { ours: Some(ours) };
                }
            }
        }
        Terminal { ours: None }
    }

    fn restore(self) {
        if let Some(pgid) = self.ours {
            // SAFETY: plain syscall on stdin.
            unsafe { libc::tcsetpgrp(0, pgid) };
        }
    }
}

/// An `outage-policy=down` interface change and how late it was.
fn iface_line(e: &convoy_emu::IfaceEvent) -> String {
    format!(
        "{}: interface {} at {:.3} s, {:.3} ms after the outage edge{}",
        e.link,
        if e.up { "up" } else { "down" },
        e.edge.as_secs_f64(),
        e.latency().as_secs_f64() * 1e3,
        if e.restored.is_empty() {
            String::new()
        } else {
            format!(" (restored {})", e.restored.join(", "))
        }
    )
}

fn summary_line(r: &DirectionReport) -> String {
    let s = &r.stats;
    let drops: Vec<String> = convoy_link::DropReason::ALL
        .iter()
        .filter(|&&d| s.dropped(d) > 0)
        .map(|&d| format!("{} {}", d, s.dropped(d)))
        .collect();
    format!(
        "{}: offered {} packets / {} bytes, delivered {} packets / {} bytes, dropped {}{}; late p50 {} us, p99 {} us, max {} us",
        r.label,
        s.offered,
        s.offered_bytes,
        s.delivered,
        s.delivered_bytes,
        s.dropped_total(),
        if drops.is_empty() {
            String::new()
        } else {
            format!(" ({})", drops.join(", "))
        },
        r.late_p50_us,
        r.late_p99_us,
        r.late_max_us
    )
}

fn run_selftest(a: SelftestArgs) -> anyhow::Result<()> {
    let opts = selftest::Options {
        quick: a.quick,
        trace: a.trace,
        only: a.only,
        spin: Duration::from_micros(a.spin_us),
    };
    let results = selftest::run(&opts, &mut |line| eprintln!("{line}"))?;
    println!("{}", selftest::table(&results));
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| !r.met)
        .map(|r| r.name.as_str())
        .collect();
    if !failed.is_empty() {
        bail!("targets not met: {}", failed.join(", "));
    }
    Ok(())
}

//! The emulator: two namespaces, one TUN pair and two pumps per link.
//!
//! ```text
//!  client namespace                 this process                server namespace
//!  lte  10.7.0.1/24 ── TUN ──► [lte:up   LinkDirection] ──► TUN ── lte  10.7.0.2/24
//!                     TUN ◄── [lte:down LinkDirection] ◄── TUN
//!  wifi 10.7.1.1/24 ── TUN ──► [wifi:up  LinkDirection] ──► TUN ── wifi 10.7.1.2/24
//!                     TUN ◄── [wifi:down LinkDirection] ◄── TUN
//! ```
//!
//! Link number `i` (in the order given) uses 10.7.`i`.0/24: `.1` on the
//! client side, `.2` on the server side. There is no default route: a
//! program looking for anything else (a DNS server, say) fails at once
//! instead of waiting for a timeout. On the client each address has its own
//! routing table (`ip rule from ADDR`), so a socket bound to a link's
//! address, such as an MPTCP subflow, leaves through that link whatever its
//! destination; the server reaches each client address over that address's
//! own link.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use convoy_link::{AvailabilityTimeline, LinkDirection, RecordWriter};

use crate::ap::SmartAp;
use crate::error::EmuError;
use crate::ifdown::{IfaceEvent, IfaceSwitch, ManagedIface};
use crate::keep_awake::{idle_is_controllable, KeepAwake};
use crate::netns::{reap_children, Netns};
use crate::pcap::PcapWriter;
use crate::pump::{
    DirectionReport, FlowKey, Inspect, LiveCounters, Pump, PumpOutputs, Stopper, Timing,
};
use crate::spec::LinkSpec;
use crate::tun::Tun;

/// Links are numbered into 10.7.0.0/24 … 10.7.199.0/24.
pub const MAX_LINKS: usize = 200;

/// Everything `Emulator::start` needs.
#[derive(Clone, Debug)]
pub struct EmuConfig {
    pub links: Vec<LinkSpec>,
    /// Write `<dir>/<link>.up.csv` and `<dir>/<link>.down.csv`.
    pub records_dir: Option<PathBuf>,
    /// Write every delivered packet to this pcapng file.
    pub pcap: Option<PathBuf>,
    /// How long before an event a pump stops sleeping and spins.
    pub spin: Duration,
    /// Run the link threads under SCHED_FIFO, and keep the CPUs out of
    /// sleep states while running (see [`cpu_latency_hint`] and
    /// [`crate::keep_awake`]).
    pub realtime: bool,
    /// The TUN clone device, normally /dev/net/tun.
    pub tun_path: PathBuf,
}

impl EmuConfig {
    pub fn new(links: Vec<LinkSpec>) -> EmuConfig {
        EmuConfig {
            links,
            records_dir: None,
            pcap: None,
            spin: Duration::from_micros(50),
            realtime: true,
            tun_path: PathBuf::from("/dev/net/tun"),
        }
    }
}

/// Which namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// A link's name and addresses.
#[derive(Clone, Debug)]
pub struct LinkInfo {
    pub name: String,
    pub client_addr: String,
    pub server_addr: String,
}

/// A running emulator. Dropping it (or [`Emulator::shutdown`]) ends every
/// process in its namespaces and removes the namespaces and interfaces.
pub struct Emulator {
    client: Netns,
    server: Netns,
    links: Vec<LinkInfo>,
    live: Vec<(String, Arc<LiveCounters>)>,
    pumps: Vec<JoinHandle<Result<DirectionReport, EmuError>>>,
    stopper: Arc<Stopper>,
    pcap: Option<Arc<Mutex<PcapWriter>>>,
    epoch: Instant,
    /// The epoch as Unix nanoseconds, for commands that line their own
    /// clocks up with link time (`CONVOY_EMU_EPOCH_NS`).
    unix_epoch_ns: u64,
    servers: Vec<Child>,
    /// The thread taking `outage-policy=down` interfaces down and up.
    ifdown: Option<JoinHandle<Result<(), EmuError>>>,
    iface_events: Arc<Mutex<Vec<IfaceEvent>>>,
    _cpu_hint: Option<File>,
    /// Where the hint cannot keep idle CPUs polling (no cpuidle driver).
    _keep_awake: Option<KeepAwake>,
    // Kept until the pumps stop: closing a TUN removes its interface.
    _tuns: Vec<Arc<Tun>>,
}

/// Fails unless this process can create namespaces and TUN devices.
pub fn check_environment(tun_path: &Path) -> Result<(), EmuError> {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        return Err(EmuError::NotRoot);
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(tun_path)
        .map_err(|cause| EmuError::NoTun {
            path: tun_path.display().to_string(),
            cause,
        })?;
    Ok(())
}

impl Emulator {
    pub fn start(config: EmuConfig) -> Result<Emulator, EmuError> {
        if config.links.len() > MAX_LINKS {
            return Err(EmuError::TooManyLinks {
                max: MAX_LINKS,
                got: config.links.len(),
            });
        }
        for (i, l) in config.links.iter().enumerate() {
            if config.links[..i].iter().any(|o| o.name == l.name) {
                return Err(EmuError::DuplicateLink(l.name.clone()));
            }
        }
        let mut models = Vec::new();
        let mut timelines = Vec::new();
        for (i, l) in config.links.iter().enumerate() {
            let spec_err = |e| EmuError::spec(&l.name, e);
            let (up, down) = l.configs(i).map_err(spec_err)?;
            if l.iface_down {
                let tl = |c| AvailabilityTimeline::new(c).map_err(|e| spec_err(e.into()));
                timelines.push((i, vec![tl(&up)?, tl(&down)?]));
            }
            let (up_faults, down_faults) = l.fault_stages(&up, &down).map_err(spec_err)?;
            let up = LinkDirection::new(up).map_err(|e| spec_err(e.into()))?;
            let down = LinkDirection::new(down).map_err(|e| spec_err(e.into()))?;
            models.push(((up, up_faults), (down, down_faults)));
        }
        check_environment(&config.tun_path)?;
        // SAFETY: plain syscall. Orphans of the commands (a daemonising
        // server) are re-parented here, where they can be reaped.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };

        let client = Netns::create()?;
        let server = Netns::create()?;
        for ns in [&client, &server] {
            // Router solicitations and MLD reports would otherwise cross the
            // links and show up in records and captures.
            ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1")?;
            ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
            // A packet may come back over another link than the one its
            // reply would take (multipath); strict reverse-path filtering
            // would drop it.
            ns.sysctl("net.ipv4.conf.all.rp_filter", "0")?;
            ns.sysctl("net.ipv4.conf.default.rp_filter", "0")?;
        }
        let mut links = Vec::new();
        let mut tun_pairs = Vec::new();
        for (i, l) in config.links.iter().enumerate() {
            let c = client.run(|| Tun::create(&config.tun_path, &l.name))??;
            let s = server.run(|| Tun::create(&config.tun_path, &l.name))??;
            tun_pairs.push((Arc::new(c), Arc::new(s)));
            links.push(LinkInfo {
                name: l.name.clone(),
                client_addr: format!("10.7.{i}.1"),
                server_addr: format!("10.7.{i}.2"),
            });
        }
        for (ns, side) in [(&client, Side::Client), (&server, Side::Server)] {
            ns.ip_batch(&ip_commands(&config.links, &links, side))?;
        }

        let epoch = Instant::now();
        let unix_epoch_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let pcap = match &config.pcap {
            Some(path) => {
                let names: Vec<String> = links
                    .iter()
                    .flat_map(|l| [format!("{}:up", l.name), format!("{}:down", l.name)])
                    .collect();
                let w = PcapWriter::create(path, &names)
                    .map_err(|e| EmuError::io(format!("creating {}", path.display()), e))?;
                Some(Arc::new(Mutex::new(w)))
            }
            None => None,
        };
        let stopper = Arc::new(Stopper::new()?);
        let mut emu = Emulator {
            client,
            server,
            links,
            live: Vec::new(),
            pumps: Vec::new(),
            stopper: stopper.clone(),
            pcap: pcap.clone(),
            epoch,
            unix_epoch_ns,
            servers: Vec::new(),
            ifdown: None,
            iface_events: Arc::new(Mutex::new(Vec::new())),
            _cpu_hint: if config.realtime {
                cpu_latency_hint()
            } else {
                None
            },
            _keep_awake: if config.realtime && !idle_is_controllable() {
                KeepAwake::start()
            } else {
                None
            },
            _tuns: tun_pairs
                .iter()
                .flat_map(|(c, s)| [c.clone(), s.clone()])
                .collect(),
        };
        for (i, ((up, down), (c, s))) in models.into_iter().zip(tun_pairs).enumerate() {
            let spec = &config.links[i];
            let name = &spec.name;
            let ap = spec
                .ap
                .map(|policy| Arc::new(Mutex::new(SmartAp::new(policy, spec.capacities()))));
            for (dir, model, ingress, egress) in [
                ("up", up, c.clone(), s.clone()),
                ("down", down, s.clone(), c.clone()),
            ] {
                let label = format!("{name}:{dir}");
                let records = match &config.records_dir {
                    Some(d) => {
                        let path = d.join(format!("{name}.{dir}.csv"));
                        let f = File::create(&path)
                            .map_err(|e| EmuError::io(format!("creating {}", path.display()), e))?;
                        Some(
                            RecordWriter::new(BufWriter::with_capacity(1 << 20, f))
                                .map_err(|e| EmuError::io(format!("{}", path.display()), e))?,
                        )
                    }
                    None => None,
                };
                let iface = (2 * i + usize::from(dir == "down")) as u32;
                let out = PumpOutputs {
                    records,
                    pcap: pcap.as_ref().map(|p| (p.clone(), iface, unix_epoch_ns)),
                };
                let live = Arc::new(LiveCounters::default());
                emu.live.push((label.clone(), live.clone()));
                let (model, faults) = model;
                let pump = Pump::new(
                    label,
                    model,
                    ingress,
                    egress,
                    epoch,
                    Timing {
                        spin: config.spin,
                        realtime: config.realtime,
                    },
                    stopper.clone(),
                    live,
                    out,
                )
                .with_faults(faults)
                .with_inspect(Inspect {
                    ap: ap.clone().map(|a| (a, usize::from(dir == "down"))),
                    flows: {
                        let d = if dir == "up" { &spec.up } else { &spec.down };
                        if d.per_ue {
                            FlowKey::ClientAddress { up: dir == "up" }
                        } else if d.fq_codel {
                            FlowKey::FiveTuple
                        } else {
                            FlowKey::None
                        }
                    },
                    port_delay: spec.port_delay.clone(),
                });
                emu.pumps.push(pump.spawn()?);
            }
        }
        if !timelines.is_empty() {
            let mut ifaces = Vec::new();
            for (i, timelines) in timelines {
                let link = &emu.links[i];
                let name = std::ffi::CString::new(link.name.as_str()).expect("checked name");
                // SAFETY: a valid C string; the lookup runs in the client
                // namespace, where the interface is.
                let ifindex = emu
                    .client
                    .run(|| unsafe { libc::if_nametoindex(name.as_ptr()) })?;
                if ifindex == 0 {
                    return Err(EmuError::last_os(format!(
                        "finding interface {}",
                        link.name
                    )));
                }
                ifaces.push(ManagedIface {
                    link: link.name.clone(),
                    ifindex,
                    addr: link.client_addr.parse().expect("10.7.i.1"),
                    prefix: 24,
                    table: client_table(i),
                    timelines,
                });
            }
            let switch = IfaceSwitch::new(&emu.client, ifaces, epoch, emu.iface_events.clone())?;
            emu.ifdown = Some(switch.spawn(stopper, config.realtime)?);
        }
        Ok(emu)
    }

    /// Every interface change `outage-policy=down` made so far, in order.
    pub fn iface_events(&self) -> Vec<IfaceEvent> {
        self.iface_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn netns(&self, side: Side) -> &Netns {
        match side {
            Side::Client => &self.client,
            Side::Server => &self.server,
        }
    }

    pub fn links(&self) -> &[LinkInfo] {
        &self.links
    }

    /// The instant every link's time 0 (and trace start) refers to.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Bytes delivered so far by direction `label` (`lte:up`).
    pub fn delivered_bytes(&self, label: &str) -> Option<u64> {
        self.live
            .iter()
            .find(|(l, _)| l == label)
            .map(|(_, c)| c.delivered_bytes.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// A command that will run in one of the namespaces, with the
    /// `CONVOY_EMU_*` variables set (docs/EMU.md). `own_group` puts it in a
    /// process group of its own.
    pub fn command<S: AsRef<std::ffi::OsStr>>(
        &self,
        side: Side,
        program: S,
        own_group: bool,
    ) -> Command {
        let mut cmd = Command::new(program);
        for (k, v) in self.env(side) {
            cmd.env(k, v);
        }
        self.netns(side).prepare(&mut cmd, own_group);
        cmd
    }

    /// The variables commands see: where the other side is, and when
    /// link time 0 was.
    pub fn env(&self, side: Side) -> Vec<(String, String)> {
        let mut env = vec![
            (
                "CONVOY_EMU_SIDE".to_owned(),
                match side {
                    Side::Client => "client",
                    Side::Server => "server",
                }
                .to_owned(),
            ),
            (
                "CONVOY_EMU_EPOCH_NS".to_owned(),
                self.unix_epoch_ns.to_string(),
            ),
        ];
        if let Some(first) = self.links.first() {
            env.push(("CONVOY_EMU_SERVER".into(), first.server_addr.clone()));
            env.push(("CONVOY_EMU_CLIENT".into(), first.client_addr.clone()));
        }
        for l in &self.links {
            let key = l.name.to_ascii_uppercase().replace('-', "_");
            env.push((format!("CONVOY_EMU_{key}_SERVER"), l.server_addr.clone()));
            env.push((format!("CONVOY_EMU_{key}_CLIENT"), l.client_addr.clone()));
        }
        env
    }

    /// Starts `sh -c SCRIPT` on the server side, in its own process group;
    /// `quiet` sends its output to /dev/null instead of ours.
    pub fn spawn_server(&mut self, script: &str, quiet: bool) -> Result<u32, EmuError> {
        let mut cmd = self.command(Side::Server, "sh", true);
        cmd.arg("-c").arg(script).stdin(Stdio::null());
        if quiet {
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
        }
        let child = cmd
            .spawn()
            .map_err(|e| EmuError::io(format!("starting server command `{script}`"), e))?;
        let pid = child.id();
        self.servers.push(child);
        Ok(pid)
    }

    /// Waits until something listens in the server namespace (a TCP socket
    /// in LISTEN, or any bound UDP socket), or `timeout` passes (false).
    /// Fails if a server command has exited meanwhile.
    pub fn wait_server_ready(
        &mut self,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<bool, EmuError> {
        let start = Instant::now();
        while start.elapsed() < timeout && !interrupted() {
            for child in &mut self.servers {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(EmuError::ServerExited {
                        status: status.to_string(),
                    });
                }
            }
            if self.server.processes().iter().any(|&pid| listening(pid)) {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(false)
    }

    /// Whether a link thread has stopped on an error (it never stops on
    /// its own otherwise); [`Emulator::shutdown`] returns the error.
    pub fn link_failed(&self) -> bool {
        self.pumps.iter().any(|h| h.is_finished())
            || self.ifdown.as_ref().is_some_and(|h| h.is_finished())
    }

    /// Ends every process in both namespaces, stops the links, flushes the
    /// capture, and reports what each direction did.
    pub fn shutdown(mut self) -> Result<Vec<DirectionReport>, EmuError> {
        self.stop()
    }

    fn stop(&mut self) -> Result<Vec<DirectionReport>, EmuError> {
        let grace = Duration::from_millis(500);
        self.client.kill_all(grace);
        self.server.kill_all(grace);
        for mut child in self.servers.drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
        reap_children();
        self.stopper.stop();
        let mut reports = Vec::new();
        let mut first_err = None;
        if let Some(h) = self.ifdown.take() {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => first_err = Some(e),
                Err(_) => {
                    first_err = Some(EmuError::io(
                        "interface thread",
                        std::io::Error::other("panicked"),
                    ))
                }
            }
        }
        for h in self.pumps.drain(..) {
            match h.join() {
                Ok(Ok(r)) => reports.push(r),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(EmuError::io(
                        "link thread",
                        std::io::Error::other("panicked"),
                    ));
                }
            }
        }
        if let Some(p) = self.pcap.take() {
            let mut w = p.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = w.flush() {
                first_err.get_or_insert(EmuError::io("writing the capture", e));
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(reports),
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if !self.pumps.is_empty() {
            let _ = self.stop();
        }
    }
}

/// Asks the kernel to keep every CPU out of sleep states for as long as
/// the returned file is open (PM QoS, /dev/cpu_dma_latency = 0 µs).
///
/// A link thread blocked on its TUN device is woken by the packet's sender;
/// if its CPU had gone to sleep (HLT, on a VM an exit to the hypervisor),
/// that wake-up alone costs 20 to 50 µs, the largest part of the latency the
/// emulator adds. Idle CPUs poll instead while the emulator runs, and the
/// kernel drops the request when the file closes, whatever the exit.
pub fn cpu_latency_hint() -> Option<File> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")
        .ok()?;
    f.write_all(&0i32.to_ne_bytes()).ok()?;
    Some(f)
}

/// Does process `pid` see a listening TCP socket, or an unconnected bound
/// UDP socket, in its network namespace? (/proc/PID/net shows that
/// namespace's tables.) Connected UDP sockets do not count: a resolver's
/// DNS query is not a server.
fn listening(pid: i32) -> bool {
    let has = |file: &str, tcp: bool| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{file}")).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let (remote, state) = (f.get(2).copied(), f.get(3).copied());
                if tcp {
                    state == Some("0A")
                } else {
                    remote.is_some_and(|r| r.trim_start_matches(['0', ':']).is_empty())
                }
            })
        })
    };
    has("tcp", true) || has("tcp6", true) || has("udp", false) || has("udp6", false)
}

/// The routing table of link `i`'s client address (`ip rule from ADDR`).
fn client_table(i: usize) -> u32 {
    100 + i as u32
}

/// The `ip -batch` script that configures one side. (ifdown.rs puts back
/// the client's part when an interface comes back up.)
fn ip_commands(specs: &[LinkSpec], links: &[LinkInfo], side: Side) -> String {
    let mut s = String::from("link set lo up\n");
    for (i, (spec, l)) in specs.iter().zip(links).enumerate() {
        let (addr, name) = match side {
            Side::Client => (&l.client_addr, &l.name),
            Side::Server => (&l.server_addr, &l.name),
        };
        let table = client_table(i);
        s += &format!("link set dev {name} mtu {} up\n", spec.mtu);
        s += &format!("addr add {addr}/24 dev {name}\n");
        // Only the client routes by source address: the server answers
        // each client address over that address's own link (the connected
        // route), whichever of its addresses the packet came to.
        if side == Side::Client {
            s += &format!("rule add from {addr} table {table}\n");
            s += &format!("route add default dev {name} table {table}\n");
        }
    }
    s
}

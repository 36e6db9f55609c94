//! The client's path manager: one path per usable local address of the
//! server's family (IPv4 or IPv6; one per interface for IPv6, see
//! [`crate::netlink::interfaces`]), kept in step with the host's
//! interfaces through netlink. Families are not mixed: an interface with
//! only IPv4 addresses has no path to an IPv6 server.
//!
//! At connect it reads the interfaces and picks path 0's address (the
//! one the kernel's route to the server uses, among those chosen). Once
//! the handshake is done it opens a path on every other chosen address:
//! a socket bound to the address and its interface, and
//! `Connection::open_path`. Then each netlink message about a link,
//! address or route is applied at once (the netlink socket is in the
//! driver's ppoll set): an address or link that goes away abandons its
//! path (`path_down`), one that comes back revives it (`path_up`), and a
//! new one opens a path, all within the turn that read the message. The
//! protocol validates a new path in one round trip, which is what bounds
//! how soon a new interface carries data.

pub mod report;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::Duration;

use convoy_proto::{Connection, ConnectionHandle, Endpoint};

use crate::driver::Driver;
use crate::error::NetError;
use crate::netlink::{Interfaces, Local, Message, RouteSocket, Selection};
use crate::socket::NetSocket;
pub use report::{
    interval_bytes, path_progress, PathBytes, PathEventReport, PathProgress, PathReport,
};

/// One path this manager opened (or path 0, which the handshake opened).
#[derive(Clone, Debug)]
struct Path {
    id: u8,
    local: Local,
    /// The driver's socket it leaves by.
    socket: usize,
    backup: bool,
    /// Abandoned because its interface or address went away.
    down: bool,
}

pub struct Multipath {
    server: SocketAddr,
    server_ip: IpAddr,
    selection: Selection,
    ifs: Interfaces,
    events: RouteSocket,
    requests: RouteSocket,
    handle: Option<ConnectionHandle>,
    paths: Vec<Path>,
    /// The handshake is done: extra paths may open.
    ready: bool,
    /// When the connection began (path event times count from it), on
    /// the driver's clock and as Unix time in milliseconds.
    started: Duration,
    started_unix_ms: f64,
    /// Path id to interface name, shared with progress reports (which run
    /// inside the driver and cannot ask it).
    names: PathNames,
    /// The netlink socket failed with something other than lost events.
    deaf: bool,
}

/// Path id to interface name, as the path manager opens paths.
pub type PathNames = Rc<RefCell<BTreeMap<u8, String>>>;

/// Whether the kernel's route from `l` to `server` leaves by `l`'s own
/// interface (so a socket bound to `l` really uses that interface).
fn reaches(requests: &mut RouteSocket, server: IpAddr, l: &Local) -> bool {
    matches!(requests.route_to(server, Some(l.addr)), Ok((Some(oif), _)) if oif == l.index)
}

impl Multipath {
    /// Reads the host's interfaces and checks `selection` against them.
    /// Returns the manager and the address path 0 should be bound to.
    /// Errors name an unknown `--path`/`--backup`, or say that no chosen
    /// interface is up and reaches the server.
    pub fn start(server: SocketAddr, selection: Selection) -> Result<(Multipath, Local), NetError> {
        let server_ip = server.ip();
        let netlink = |e: std::io::Error| NetError::Config(format!("netlink: {e}"));
        // Subscribe before reading the state, so no change falls between.
        let events = RouteSocket::listen(server_ip).map_err(netlink)?;
        let mut requests = RouteSocket::requests().map_err(netlink)?;
        let mut ifs = Interfaces::default();
        for m in requests.dump(server_ip).map_err(netlink)? {
            ifs.apply(&m);
        }
        if let Some(c) = selection.unknown(&ifs) {
            let family = if server_ip.is_ipv6() { "IPv6" } else { "IPv4" };
            return Err(NetError::Config(format!(
                "no interface or local {family} address {c} on this host (the server is {family})"
            )));
        }
        let wanted = selection.wanted(&ifs, |l| reaches(&mut requests, server_ip, l));
        // Path 0: the address of the kernel's own route to the server if
        // it is chosen and not a backup, else the first chosen non-backup.
        let via = requests.route_to(server_ip, None).ok();
        let primary = wanted
            .iter()
            .filter(|(_, backup)| !backup)
            .find(|(l, _)| {
                via.is_some_and(|(oif, src)| {
                    oif == Some(l.index) && src.is_none_or(|s| s == l.addr)
                })
            })
            .or_else(|| wanted.iter().find(|(_, backup)| !backup))
            .or_else(|| wanted.first())
            .map(|(l, _)| l.clone())
            .ok_or_else(|| {
                NetError::Config(if selection.paths.is_empty() {
                    format!("no interface that is up reaches {server}")
                } else {
                    "none of the --path/--backup interfaces is up".into()
                })
            })?;
        Ok((
            Multipath {
                server,
                server_ip,
                selection,
                ifs,
                events,
                requests,
                handle: None,
                paths: Vec::new(),
                ready: false,
                started: Duration::ZERO,
                started_unix_ms: 0.0,
                names: PathNames::default(),
                deaf: false,
            },
            primary,
        ))
    }

    /// The connection is starting on socket 0, bound to `primary`.
    pub fn attach(&mut self, handle: ConnectionHandle, primary: Local, now: Duration) {
        self.handle = Some(handle);
        self.started = now;
        self.started_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3);
        let backup = self.selection.backups.iter().any(|c| c.matches(&primary));
        self.names.borrow_mut().insert(0, primary.interface.clone());
        self.paths = vec![Path {
            id: 0,
            local: primary,
            socket: 0,
            backup,
            down: false,
        }];
    }

    /// Path id to interface name, kept up to date.
    pub fn names(&self) -> PathNames {
        self.names.clone()
    }

    /// The netlink socket to wait on; `None` once it failed for good
    /// (the paths then stay as they are).
    pub fn raw_fd(&self) -> Option<RawFd> {
        (!self.deaf).then(|| self.events.raw_fd())
    }

    /// One driver turn: apply what netlink said (with `netlink`), and
    /// once the handshake is done, bring the paths in line with the
    /// interfaces.
    pub(crate) fn turn(&mut self, now: Duration, driver: &mut Driver, netlink: bool) {
        let mut changed = netlink && self.read_events();
        let Some(h) = self.handle else { return };
        if !self.ready {
            let Some(c) = driver.endpoint.connection(h) else {
                return;
            };
            if !c.is_established() {
                return;
            }
            self.ready = true;
            changed = true;
            if self.paths[0].backup {
                let _ = c.set_path_backup(now, 0, true);
            }
        }
        if changed {
            self.reconcile(now, driver, h);
        }
    }

    /// Reads every waiting netlink message; returns whether any mattered.
    fn read_events(&mut self) -> bool {
        let mut changed = false;
        loop {
            match self.events.read() {
                Ok(Some(msgs)) => {
                    for (_, m) in msgs {
                        changed |= match m {
                            Message::Route { .. } => true,
                            m => self.ifs.apply(&m),
                        };
                    }
                }
                Ok(None) => return changed,
                Err(e) if e.raw_os_error() != Some(libc::ENOBUFS) => {
                    // Not expected from a netlink socket: stop listening
                    // rather than wake the driver for it on every turn.
                    self.deaf = true;
                    return false;
                }
                Err(_) => {
                    // ENOBUFS: the kernel dropped events (a burst of
                    // changes); read the whole state again.
                    if let Ok(all) = self.requests.dump(self.server_ip) {
                        self.ifs = Interfaces::default();
                        for m in &all {
                            self.ifs.apply(m);
                        }
                    }
                    return true;
                }
            }
        }
    }

    fn reconcile(&mut self, now: Duration, driver: &mut Driver, h: ConnectionHandle) {
        // Existing paths follow their address being there, reachable or
        // not (a route that comes back later needs no new path); only new
        // paths are checked for reachability.
        let present = self.selection.wanted(&self.ifs, |_| true);
        let same = |a: &Local, b: &Local| a.index == b.index && a.addr == b.addr;
        {
            let Some(c) = driver.endpoint.connection(h) else {
                return;
            };
            for p in &mut self.paths {
                match present.iter().find(|(l, _)| same(l, &p.local)) {
                    None if !p.down => {
                        let _ = c.path_down(now, p.id);
                        p.down = true;
                    }
                    None => {}
                    Some((_, backup)) => {
                        if p.down {
                            let _ = c.path_up(now, p.id);
                            p.down = false;
                        }
                        if *backup != p.backup {
                            let _ = c.set_path_backup(now, p.id, *backup);
                            p.backup = *backup;
                        }
                    }
                }
            }
        }
        let (requests, server_ip) = (&mut self.requests, self.server_ip);
        let explicit = !self.selection.paths.is_empty();
        let new: Vec<(Local, bool)> = present
            .into_iter()
            .filter(|(l, _)| !self.paths.iter().any(|p| same(&p.local, l)))
            .filter(|(l, backup)| {
                *backup || explicit || (!l.loopback && reaches(requests, server_ip, l))
            })
            .collect();
        for (l, backup) in new {
            let Ok(socket) = NetSocket::bind_path(l.addr, Some(&l.interface), None) else {
                continue;
            };
            let Some(c) = driver.endpoint.connection(h) else {
                return;
            };
            let Ok(id) = c.open_path(now, self.server, backup) else {
                continue;
            };
            let index = driver.add_socket(socket);
            driver.route_path(id, index);
            self.names.borrow_mut().insert(id, l.interface.clone());
            self.paths.push(Path {
                id,
                local: l,
                socket: index,
                backup,
                down: false,
            });
        }
    }

    fn path(&self, id: u8) -> Option<&Path> {
        self.paths.iter().rev().find(|p| p.id == id)
    }

    /// Every path's figures, with its interface and local address.
    pub fn report(&self, ep: &Endpoint, driver: &Driver) -> Vec<PathReport> {
        let Some(c) = self.handle.and_then(|h| ep.connection_ref(h)) else {
            return Vec::new();
        };
        path_reports(c, |id| {
            self.path(id).map_or((None, None), |p| {
                (
                    Some(p.local.interface.clone()),
                    driver.socket_addr(p.socket).ok(),
                )
            })
        })
    }

    /// Every state change of every path, in order.
    pub fn events(&self, ep: &Endpoint) -> Vec<PathEventReport> {
        let Some(c) = self.handle.and_then(|h| ep.connection_ref(h)) else {
            return Vec::new();
        };
        c.path_events()
            .iter()
            .map(|e| {
                let t_ms = e.at.saturating_sub(self.started).as_secs_f64() * 1e3;
                PathEventReport {
                    t_ms,
                    unix_ms: self.started_unix_ms + t_ms,
                    path: e.path,
                    interface: self.path(e.path).map(|p| p.local.interface.clone()),
                    state: e.state.as_str().into(),
                }
            })
            .collect()
    }
}

/// The connection's paths as reports; `local` names each path's interface
/// and local address where known.
pub fn path_reports(
    c: &Connection,
    local: impl Fn(u8) -> (Option<String>, Option<SocketAddr>),
) -> Vec<PathReport> {
    c.paths()
        .into_iter()
        .map(|i| {
            let (interface, addr) = local(i.id);
            PathReport {
                id: i.id,
                interface,
                local: addr,
                remote: i.remote,
                state: i.state.as_str().into(),
                backup: i.backup,
                bytes_sent: i.bytes_sent,
                bytes_received: i.bytes_received,
                rate_bps: i.rate.saturating_mul(8),
                srtt_ms: i.srtt.as_secs_f64() * 1e3,
                packets_sent: i.packets_sent,
                packets_lost: i.packets_lost,
            }
        })
        .collect()
}

//! `outage-policy=down`: the client side's interface goes down for the
//! length of each outage, as a car's OS reports a lost Wi-Fi association,
//! and comes back up as the emulator set it up.
//!
//! One thread serves every such link. It sleeps until the next edge of any
//! link's outage schedule (its `outage=` intervals or its trace's `up`
//! column, both directions: the interface is down while either is), then
//! sets the interface down or up over rtnetlink. Programs in the client
//! namespace see exactly what a real interface gives them: an RTM_NEWLINK
//! without IFF_UP and IFF_RUNNING, its routes withdrawn, sends failing with
//! ENETUNREACH; then the reverse. Bringing the interface up restores the
//! kernel's own routes for its address, but not those the emulator added
//! (the per-address table, `ip rule from 10.7.i.1 lookup 100+i`), and the
//! address or rule may have gone meanwhile too: each is checked and
//! re-created, the same as `ip_commands` in the emulator made them.

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use convoy_link::{AvailabilityTimeline, Time};

use crate::error::EmuError;
use crate::netlink::Rtnl;
use crate::netns::Netns;
use crate::pump::{set_realtime, Stopper};

/// One interface change, with when it was due and when the kernel had made
/// it (both since the emulator's epoch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfaceEvent {
    pub link: String,
    pub up: bool,
    /// The outage edge.
    pub edge: Duration,
    /// When the kernel acknowledged the interface's new state (it has told
    /// netlink listeners by then).
    pub changed: Duration,
    /// When what had gone was back too (the same as `changed` going down).
    pub done: Duration,
    /// What had gone and was put back on the way up (`route default table
    /// 101`, say); the kernel's own routes come back by themselves.
    pub restored: Vec<String>,
}

impl IfaceEvent {
    /// How late the interface changed after its edge.
    pub fn latency(&self) -> Duration {
        self.changed.saturating_sub(self.edge)
    }
}

/// What the emulator set up for one client interface, to put back.
#[derive(Debug)]
pub struct ManagedIface {
    pub link: String,
    pub ifindex: u32,
    pub addr: Ipv4Addr,
    pub prefix: u8,
    pub table: u32,
    /// One timeline per direction.
    pub timelines: Vec<AvailabilityTimeline>,
}

struct State {
    iface: ManagedIface,
    up: bool,
    /// The next time its schedule may change (`None`: never again).
    next: Option<Time>,
}

/// Switches interfaces at their outage edges.
pub struct IfaceSwitch {
    rtnl: Rtnl,
    links: Vec<State>,
    epoch: Instant,
    events: Arc<Mutex<Vec<IfaceEvent>>>,
}

impl IfaceSwitch {
    /// Opens the netlink socket in `client` and sets every interface as its
    /// schedule says at the epoch's time now, before any command runs.
    pub fn new(
        client: &Netns,
        ifaces: Vec<ManagedIface>,
        epoch: Instant,
        events: Arc<Mutex<Vec<IfaceEvent>>>,
    ) -> Result<IfaceSwitch, EmuError> {
        let rtnl = client
            .run(Rtnl::open)?
            .map_err(|e| EmuError::io("opening a netlink socket in the client namespace", e))?;
        let mut switch = IfaceSwitch {
            rtnl,
            links: ifaces
                .into_iter()
                .map(|iface| State {
                    iface,
                    up: true,
                    next: Some(Time::ZERO),
                })
                .collect(),
            epoch,
            events,
        };
        switch.apply_due()?;
        Ok(switch)
    }

    fn now(&self) -> Time {
        Time::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// Applies every edge that has come, and returns when the next one is.
    fn apply_due(&mut self) -> Result<Option<Time>, EmuError> {
        let now = self.now();
        for i in 0..self.links.len() {
            let Some(edge) = self.links[i].next.filter(|&t| t <= now) else {
                continue;
            };
            let s = &mut self.links[i];
            let mut want_up = true;
            let mut next: Option<Time> = None;
            for tl in &mut s.iface.timelines {
                let (up, change) = tl.next_change(now);
                want_up &= up;
                next = match (next, change) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            s.next = next;
            if want_up != s.up {
                let (changed, restored) = self.switch(i, want_up)?;
                self.links[i].up = want_up;
                let event = IfaceEvent {
                    link: self.links[i].iface.link.clone(),
                    up: want_up,
                    edge: Duration::from_nanos(edge.as_nanos()),
                    changed,
                    done: self.epoch.elapsed(),
                    restored,
                };
                self.events
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(event);
            }
        }
        Ok(self.links.iter().filter_map(|s| s.next).min())
    }

    /// Takes interface `i` down, or brings it up and puts back what is
    /// missing; returns when the state changed, and what was put back.
    fn switch(&mut self, i: usize, up: bool) -> Result<(Duration, Vec<String>), EmuError> {
        let iface = &self.links[i].iface;
        let fail = |what: String| move |e| EmuError::io(what, e);
        let name = &iface.link;
        self.rtnl
            .set_link_up(iface.ifindex, up)
            .map_err(fail(format!(
                "setting {name} {}",
                if up { "up" } else { "down" }
            )))?;
        let changed = self.epoch.elapsed();
        let mut restored = Vec::new();
        if !up {
            return Ok((changed, restored));
        }
        let (addr, table) = (iface.addr, iface.table);
        if self
            .rtnl
            .add_address(iface.ifindex, addr, iface.prefix)
            .map_err(fail(format!("restoring {addr} on {name}")))?
        {
            restored.push(format!("addr {addr}/{}", iface.prefix));
        }
        if !self
            .rtnl
            .has_source_rule(addr, table)
            .map_err(fail("listing rules".into()))?
        {
            self.rtnl
                .add_source_rule(addr, table)
                .map_err(fail(format!("restoring rule from {addr} table {table}")))?;
            restored.push(format!("rule from {addr} table {table}"));
        }
        if self
            .rtnl
            .add_default_route(iface.ifindex, table)
            .map_err(fail(format!("restoring {name}'s route in table {table}")))?
        {
            restored.push(format!("route default dev {name} table {table}"));
        }
        Ok((changed, restored))
    }

    /// The thread: sleep until the next edge, apply it, until stopped.
    pub fn spawn(
        mut self,
        stopper: Arc<Stopper>,
        realtime: bool,
    ) -> Result<JoinHandle<Result<(), EmuError>>, EmuError> {
        std::thread::Builder::new()
            .name("convoy-emu-ifdown".into())
            .spawn(move || {
                // SAFETY: plain syscall on the calling thread. Wake-ups to
                // the nanosecond, not the default 50 µs slack.
                unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64) };
                if realtime {
                    set_realtime();
                }
                loop {
                    let next = self.apply_due()?;
                    let timeout = next
                        .map(|t| Duration::from_nanos(t.saturating_since(self.now()).as_nanos()));
                    if stopper.sleep(timeout) {
                        return Ok(());
                    }
                }
            })
            .map_err(|e| EmuError::io("starting the interface thread", e))
    }
}

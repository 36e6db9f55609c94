//! The host's interfaces and addresses as netlink reports them, and
//! which of them a client sends from (`--path`, `--backup`, or every
//! usable one). Pure state, fed with parsed messages, so the choices are
//! unit-tested without touching the host. The path manager feeds it the
//! server's family only: a path needs a local address of that family.
//!
//! An IPv4 interface has one path per address, as it usually has one
//! address. An IPv6 interface usually has several (a stable one, a
//! temporary one or two, a link-local one), all over the same radio, so
//! it has one path: on its first address that is not link-local nor
//! deprecated (the first deprecated one if all are). Its other addresses
//! are spares, used only when named by `--path ADDR` or `--backup ADDR`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::parse::Message;

const IFF_UP: u32 = libc::IFF_UP as u32;
const IFF_RUNNING: u32 = libc::IFF_RUNNING as u32;
const IFF_LOOPBACK: u32 = libc::IFF_LOOPBACK as u32;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interface {
    pub index: u32,
    pub name: String,
    pub flags: u32,
    pub addrs: Vec<Address>,
}

/// One address of an interface, bindable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Address {
    pub ip: IpAddr,
    /// An IPv6 address past its preferred lifetime.
    pub deprecated: bool,
}

impl Interface {
    /// Up and with carrier: IFF_UP alone is an interface the administrator
    /// enabled whose radio may have no link.
    pub fn is_up(&self) -> bool {
        self.flags & (IFF_UP | IFF_RUNNING) == IFF_UP | IFF_RUNNING
    }

    pub fn is_loopback(&self) -> bool {
        self.flags & IFF_LOOPBACK != 0
    }
}

/// One address of an interface that is up.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Local {
    pub index: u32,
    pub interface: String,
    pub addr: IpAddr,
    pub loopback: bool,
    /// An IPv6 address whose interface's path is on another of its
    /// addresses (see the module's doc).
    pub spare: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Interfaces {
    by_index: BTreeMap<u32, Interface>,
}

impl Interfaces {
    /// Applies one message; returns whether anything changed.
    pub fn apply(&mut self, m: &Message) -> bool {
        match m {
            Message::Link { index, name, flags } => {
                let e = self.by_index.entry(*index).or_insert_with(|| Interface {
                    index: *index,
                    ..Interface::default()
                });
                let before = e.clone();
                e.flags = *flags;
                if let Some(n) = name {
                    e.name.clone_from(n);
                }
                *e != before
            }
            Message::LinkGone { index } => self.by_index.remove(index).is_some(),
            Message::Addr {
                index,
                addr,
                deprecated,
            } => {
                let e = self.by_index.entry(*index).or_insert_with(|| Interface {
                    index: *index,
                    ..Interface::default()
                });
                let new = Address {
                    ip: *addr,
                    deprecated: *deprecated,
                };
                match e.addrs.iter_mut().find(|a| a.ip == *addr) {
                    Some(a) if *a == new => false,
                    Some(a) => {
                        *a = new;
                        true
                    }
                    None => {
                        e.addrs.push(new);
                        true
                    }
                }
            }
            Message::AddrGone { index, addr } => match self.by_index.get_mut(index) {
                Some(e) => {
                    let n = e.addrs.len();
                    e.addrs.retain(|a| a.ip != *addr);
                    e.addrs.len() != n
                }
                None => false,
            },
            _ => false,
        }
    }

    pub fn get(&self, index: u32) -> Option<&Interface> {
        self.by_index.get(&index)
    }

    /// Whether a `--path`/`--backup` choice names something on this host
    /// (up or not).
    pub fn knows(&self, c: &Choice) -> bool {
        self.by_index.values().any(|i| match c {
            Choice::Interface(n) => &i.name == n,
            Choice::Addr(a) => i.addrs.iter().any(|x| x.ip == *a),
        })
    }

    /// Every address of every interface that is up, but IPv6 link-local
    /// ones (they reach the link only, and need a scope to be bound).
    pub fn locals(&self) -> Vec<Local> {
        let mut out = Vec::new();
        for i in self
            .by_index
            .values()
            .filter(|i| i.is_up() && !i.name.is_empty())
        {
            let link_local =
                |a: &Address| matches!(a.ip, IpAddr::V6(v6) if v6.is_unicast_link_local());
            let v6 = |a: &&Address| a.ip.is_ipv6() && !link_local(a);
            let main = i
                .addrs
                .iter()
                .filter(v6)
                .find(|a| !a.deprecated)
                .or_else(|| i.addrs.iter().find(v6))
                .map(|a| a.ip);
            for a in i.addrs.iter().filter(|a| !link_local(a)) {
                out.push(Local {
                    index: i.index,
                    interface: i.name.clone(),
                    addr: a.ip,
                    loopback: i.is_loopback() || a.ip.is_loopback(),
                    spare: a.ip.is_ipv6() && Some(a.ip) != main,
                });
            }
        }
        out
    }
}

/// An interface name or a local IP address, as given to `--path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    Interface(String),
    Addr(IpAddr),
}

impl Choice {
    /// `wlan0`, `192.168.1.20` or `2001:db8::20`; anything else is refused
    /// with the reason.
    pub fn parse(s: &str) -> Result<Choice, String> {
        if let Ok(a) = s.parse::<IpAddr>() {
            return Ok(Choice::Addr(a));
        }
        // The kernel's rules for a name: 1 to 15 bytes, no '/', ':' or
        // white space (IFNAMSIZ is 16 with the NUL).
        let valid = !s.is_empty()
            && s.len() <= 15
            && s != "."
            && s != ".."
            && !s.chars().any(|c| c == '/' || c == ':' || c.is_whitespace());
        if valid {
            Ok(Choice::Interface(s.to_owned()))
        } else {
            Err(format!(
                "{s:?} is neither an interface name nor an IP address"
            ))
        }
    }

    /// Whether this choice names `l`: its address, or its interface
    /// (whose spare addresses it does not name).
    pub fn matches(&self, l: &Local) -> bool {
        match self {
            Choice::Interface(n) => &l.interface == n && !l.spare,
            Choice::Addr(a) => &l.addr == a,
        }
    }
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Choice::Interface(n) => f.write_str(n),
            Choice::Addr(a) => write!(f, "{a}"),
        }
    }
}

/// Which local addresses to send from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// `--path`: only these (with the backups). Empty: every usable one.
    pub paths: Vec<Choice>,
    /// `--backup`: standby paths, used only when no other path works.
    pub backups: Vec<Choice>,
}

impl Selection {
    /// The first choice that names nothing on this host.
    pub fn unknown<'a>(&'a self, ifs: &Interfaces) -> Option<&'a Choice> {
        self.paths
            .iter()
            .chain(&self.backups)
            .find(|c| !ifs.knows(c))
    }

    /// The addresses to have a path on now, each with its backup role.
    /// A named choice is taken as given; by default every non-loopback,
    /// non-spare address for which `usable` holds (the server is
    /// reachable through the address's own interface).
    pub fn wanted(
        &self,
        ifs: &Interfaces,
        mut usable: impl FnMut(&Local) -> bool,
    ) -> Vec<(Local, bool)> {
        let mut out = Vec::new();
        for l in ifs.locals() {
            let backup = self.backups.iter().any(|c| c.matches(&l));
            let take = if backup || self.paths.iter().any(|c| c.matches(&l)) {
                true
            } else {
                self.paths.is_empty() && !l.loopback && !l.spare && usable(&l)
            };
            if take {
                out.push((l, backup));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const UP: u32 = IFF_UP | IFF_RUNNING;

    fn add(index: u32, addr: impl Into<IpAddr>) -> Message {
        Message::Addr {
            index,
            addr: addr.into(),
            deprecated: false,
        }
    }

    fn host() -> Interfaces {
        let mut ifs = Interfaces::default();
        let msgs = [
            Message::Link {
                index: 1,
                name: Some("lo".into()),
                flags: UP | IFF_LOOPBACK,
            },
            add(1, Ipv4Addr::LOCALHOST),
            Message::Link {
                index: 2,
                name: Some("lte".into()),
                flags: UP,
            },
            add(2, Ipv4Addr::new(10, 7, 0, 1)),
            Message::Link {
                index: 3,
                name: Some("wifi".into()),
                flags: UP,
            },
            add(3, Ipv4Addr::new(10, 7, 1, 1)),
        ];
        for m in &msgs {
            assert!(ifs.apply(m));
        }
        ifs
    }

    fn names(w: &[(Local, bool)]) -> Vec<(&str, bool)> {
        w.iter().map(|(l, b)| (l.interface.as_str(), *b)).collect()
    }

    #[test]
    fn default_takes_every_usable_non_loopback_address() {
        let ifs = host();
        let s = Selection::default();
        assert_eq!(
            names(&s.wanted(&ifs, |_| true)),
            [("lte", false), ("wifi", false)]
        );
        // Unreachable through its own interface: left out.
        assert_eq!(
            names(&s.wanted(&ifs, |l| l.interface != "wifi")),
            [("lte", false)]
        );
    }

    #[test]
    fn paths_and_backups_pick_by_name_or_address() {
        let ifs = host();
        let s = Selection {
            paths: vec![Choice::parse("10.7.1.1").unwrap()],
            backups: vec![Choice::parse("lte").unwrap()],
        };
        assert_eq!(
            names(&s.wanted(&ifs, |_| false)),
            [("lte", true), ("wifi", false)]
        );
        // Backups alone: every usable address, the named one on standby.
        let s = Selection {
            paths: vec![],
            backups: vec![Choice::parse("lte").unwrap()],
        };
        assert_eq!(
            names(&s.wanted(&ifs, |_| true)),
            [("lte", true), ("wifi", false)]
        );
        assert_eq!(s.unknown(&ifs), None);
        let s = Selection {
            paths: vec![Choice::parse("wlan9").unwrap()],
            backups: vec![],
        };
        assert_eq!(s.unknown(&ifs), Some(&Choice::Interface("wlan9".into())));
    }

    #[test]
    fn down_links_and_removed_addresses_drop_out_and_come_back() {
        let mut ifs = host();
        let s = Selection::default();
        // Carrier lost: IFF_UP without IFF_RUNNING.
        assert!(ifs.apply(&Message::Link {
            index: 3,
            name: None,
            flags: IFF_UP
        }));
        assert_eq!(names(&s.wanted(&ifs, |_| true)), [("lte", false)]);
        assert!(ifs.apply(&Message::Link {
            index: 3,
            name: None,
            flags: UP
        }));
        assert_eq!(s.wanted(&ifs, |_| true).len(), 2);
        // The same message again changes nothing.
        assert!(!ifs.apply(&Message::Link {
            index: 3,
            name: None,
            flags: UP
        }));
        let a = IpAddr::V4(Ipv4Addr::new(10, 7, 1, 1));
        assert!(ifs.apply(&Message::AddrGone { index: 3, addr: a }));
        assert!(!ifs.apply(&Message::AddrGone { index: 3, addr: a }));
        assert_eq!(s.wanted(&ifs, |_| true).len(), 1);
        assert!(ifs.apply(&add(3, a)));
        assert!(ifs.apply(&Message::LinkGone { index: 3 }));
        assert_eq!(names(&s.wanted(&ifs, |_| true)), [("lte", false)]);
    }

    /// An IPv6 host: loopback, and two radios with a link-local, a
    /// stable and a temporary address each.
    fn host_v6() -> Interfaces {
        let mut ifs = Interfaces::default();
        let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        for m in [
            Message::Link {
                index: 1,
                name: Some("lo".into()),
                flags: UP | IFF_LOOPBACK,
            },
            add(1, Ipv6Addr::LOCALHOST),
            Message::Link {
                index: 2,
                name: Some("lte".into()),
                flags: UP,
            },
            add(2, v6("fe80::1")),
            add(2, v6("2001:db8:1::10")),
            add(2, v6("2001:db8:1::99")),
            Message::Link {
                index: 3,
                name: Some("wifi".into()),
                flags: UP,
            },
            add(3, v6("fe80::2")),
            add(3, v6("fd00:78::1")),
            add(3, v6("fd00:78::2")),
        ] {
            assert!(ifs.apply(&m));
        }
        ifs
    }

    fn addrs(w: &[(Local, bool)]) -> Vec<String> {
        w.iter().map(|(l, _)| l.addr.to_string()).collect()
    }

    #[test]
    fn an_ipv6_interface_has_one_path_on_its_first_preferred_address() {
        let mut ifs = host_v6();
        let s = Selection::default();
        // Neither loopback nor link-local; one address per interface.
        assert_eq!(
            addrs(&s.wanted(&ifs, |_| true)),
            ["2001:db8:1::10", "fd00:78::1"]
        );
        // By interface name: the same one address.
        let by_name = Selection {
            paths: vec![Choice::parse("wifi").unwrap()],
            backups: vec![],
        };
        assert_eq!(addrs(&by_name.wanted(&ifs, |_| false)), ["fd00:78::1"]);
        // A spare named by its address is taken as given.
        let by_addr = Selection {
            paths: vec![Choice::parse("fd00:78::2").unwrap()],
            backups: vec![],
        };
        assert_eq!(addrs(&by_addr.wanted(&ifs, |_| false)), ["fd00:78::2"]);
        // fe80:: is known (so `--path fe80::2` is not "unknown") but never a path.
        assert!(ifs.knows(&Choice::parse("fe80::2").unwrap()));
        // The first address deprecated: the next one takes the path.
        let first: IpAddr = "2001:db8:1::10".parse().unwrap();
        let deprecated = Message::Addr {
            index: 2,
            addr: first,
            deprecated: true,
        };
        assert!(ifs.apply(&deprecated));
        assert!(!ifs.apply(&deprecated));
        assert_eq!(
            addrs(&s.wanted(&ifs, |_| true)),
            ["2001:db8:1::99", "fd00:78::1"]
        );
        // All of them deprecated: still one path, on the first.
        assert!(ifs.apply(&Message::AddrGone {
            index: 2,
            addr: "2001:db8:1::99".parse().unwrap()
        }));
        assert_eq!(
            addrs(&s.wanted(&ifs, |_| true)),
            ["2001:db8:1::10", "fd00:78::1"]
        );
    }

    #[test]
    fn choices_parse_or_say_why_not() {
        assert_eq!(
            Choice::parse("192.168.1.2"),
            Ok(Choice::Addr(Ipv4Addr::new(192, 168, 1, 2).into()))
        );
        assert_eq!(
            Choice::parse("fd00:77::11"),
            Ok(Choice::Addr(
                Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x11).into()
            ))
        );
        assert_eq!(
            Choice::parse("wlan0"),
            Ok(Choice::Interface("wlan0".into()))
        );
        for bad in ["", "a/b", "eth0:1", "has space", "sixteen-chars-xx", ".."] {
            assert!(Choice::parse(bad).is_err(), "{bad:?}");
        }
    }
}

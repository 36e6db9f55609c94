//! The host's interfaces and IPv4 addresses as netlink reports them, and
//! which of them a client sends from (`--path`, `--backup`, or every
//! usable one). Pure state, fed with parsed messages, so the choices are
//! unit-tested without touching the host.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use super::parse::Message;

const IFF_UP: u32 = libc::IFF_UP as u32;
const IFF_RUNNING: u32 = libc::IFF_RUNNING as u32;
const IFF_LOOPBACK: u32 = libc::IFF_LOOPBACK as u32;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interface {
    pub index: u32,
    pub name: String,
    pub flags: u32,
    pub addrs: Vec<Ipv4Addr>,
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

/// One IPv4 address of an interface that is up.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Local {
    pub index: u32,
    pub interface: String,
    pub addr: Ipv4Addr,
    pub loopback: bool,
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
            Message::Addr { index, addr } => {
                let e = self.by_index.entry(*index).or_insert_with(|| Interface {
                    index: *index,
                    ..Interface::default()
                });
                if e.addrs.contains(addr) {
                    return false;
                }
                e.addrs.push(*addr);
                true
            }
            Message::AddrGone { index, addr } => match self.by_index.get_mut(index) {
                Some(e) => {
                    let n = e.addrs.len();
                    e.addrs.retain(|a| a != addr);
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
            Choice::Addr(a) => i.addrs.contains(a),
        })
    }

    /// Every IPv4 address of every interface that is up.
    pub fn locals(&self) -> Vec<Local> {
        let mut out = Vec::new();
        for i in self
            .by_index
            .values()
            .filter(|i| i.is_up() && !i.name.is_empty())
        {
            for a in &i.addrs {
                out.push(Local {
                    index: i.index,
                    interface: i.name.clone(),
                    addr: *a,
                    loopback: i.is_loopback() || a.is_loopback(),
                });
            }
        }
        out
    }
}

/// An interface name or a local IPv4 address, as given to `--path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    Interface(String),
    Addr(Ipv4Addr),
}

impl Choice {
    /// `wlan0` or `192.168.1.20`; anything else is refused with the reason.
    pub fn parse(s: &str) -> Result<Choice, String> {
        if let Ok(a) = s.parse::<Ipv4Addr>() {
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
                "{s:?} is neither an interface name nor an IPv4 address"
            ))
        }
    }

    /// Whether this choice names `l` (its interface or its address).
    pub fn matches(&self, l: &Local) -> bool {
        match self {
            Choice::Interface(n) => &l.interface == n,
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
    /// A named choice is taken as given; by default every non-loopback
    /// address for which `usable` holds (the server is reachable through
    /// the address's own interface).
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
                self.paths.is_empty() && !l.loopback && usable(&l)
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

    const UP: u32 = IFF_UP | IFF_RUNNING;

    fn host() -> Interfaces {
        let mut ifs = Interfaces::default();
        let msgs = [
            Message::Link {
                index: 1,
                name: Some("lo".into()),
                flags: UP | IFF_LOOPBACK,
            },
            Message::Addr {
                index: 1,
                addr: Ipv4Addr::LOCALHOST,
            },
            Message::Link {
                index: 2,
                name: Some("lte".into()),
                flags: UP,
            },
            Message::Addr {
                index: 2,
                addr: Ipv4Addr::new(10, 7, 0, 1),
            },
            Message::Link {
                index: 3,
                name: Some("wifi".into()),
                flags: UP,
            },
            Message::Addr {
                index: 3,
                addr: Ipv4Addr::new(10, 7, 1, 1),
            },
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
        let a = Ipv4Addr::new(10, 7, 1, 1);
        assert!(ifs.apply(&Message::AddrGone { index: 3, addr: a }));
        assert!(!ifs.apply(&Message::AddrGone { index: 3, addr: a }));
        assert_eq!(s.wanted(&ifs, |_| true).len(), 1);
        assert!(ifs.apply(&Message::Addr { index: 3, addr: a }));
        assert!(ifs.apply(&Message::LinkGone { index: 3 }));
        assert_eq!(names(&s.wanted(&ifs, |_| true)), [("lte", false)]);
    }

    #[test]
    fn choices_parse_or_say_why_not() {
        assert_eq!(
            Choice::parse("192.168.1.2"),
            Ok(Choice::Addr(Ipv4Addr::new(192, 168, 1, 2)))
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

//! Reading NETLINK_ROUTE messages: links, IPv4 addresses and route
//! answers. Pure functions over bytes, so they are tested with truncated
//! and random input: the kernel is trusted to send well-formed messages,
//! but a parser that panics on a short read would take the transfer down
//! with it, so every length is checked and a bad one ends the parse.

use std::net::Ipv4Addr;

pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const RTM_NEWLINK: u16 = 16;
pub const RTM_DELLINK: u16 = 17;
pub const RTM_NEWADDR: u16 = 20;
pub const RTM_DELADDR: u16 = 21;
pub const RTM_NEWROUTE: u16 = 24;
pub const RTM_DELROUTE: u16 = 25;

const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const IFADDRMSG_LEN: usize = 8;
const RTMSG_LEN: usize = 12;

const IFLA_IFNAME: u16 = 3;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_LABEL: u16 = 3;
const RTA_OIF: u16 = 4;
const RTA_PREFSRC: u16 = 7;

const AF_INET: u8 = libc::AF_INET as u8;

/// One message the kernel sent, reduced to what path management needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// RTM_NEWLINK: an interface exists, with its IFF_* flags.
    Link {
        index: u32,
        name: Option<String>,
        flags: u32,
    },
    /// RTM_DELLINK: the interface is gone.
    LinkGone { index: u32 },
    /// RTM_NEWADDR for IPv4.
    Addr { index: u32, addr: Ipv4Addr },
    /// RTM_DELADDR for IPv4.
    AddrGone { index: u32, addr: Ipv4Addr },
    /// RTM_NEWROUTE (an answer to RTM_GETROUTE, or a route added) or
    /// RTM_DELROUTE: the interface the route leaves by, and its source
    /// address.
    Route {
        oif: Option<u32>,
        prefsrc: Option<Ipv4Addr>,
    },
    /// The end of a dump.
    Done,
    /// NLMSG_ERROR: 0 is an acknowledgment, otherwise a negative errno.
    Error { code: i32 },
    /// Anything else (IPv6 addresses, types we did not ask for).
    Other,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Netlink aligns headers and attributes to 4 bytes.
fn align(n: usize) -> usize {
    n.saturating_add(3) & !3
}

/// The attributes after a fixed header: (type, payload) pairs. Stops at
/// the first attribute whose length does not fit.
fn attributes(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16_at(b, 0)?);
        let kind = u16_at(b, 2)? & 0x3fff; // without NLA_F_NESTED / NET_BYTEORDER
        if len < 4 || len > b.len() {
            b = &[];
            return None;
        }
        let payload = &b[4..len];
        b = b.get(align(len)..).unwrap_or(&[]);
        Some((kind, payload))
    })
}

fn ipv4(p: &[u8]) -> Option<Ipv4Addr> {
    let o: [u8; 4] = p.get(..4)?.try_into().ok()?;
    Some(Ipv4Addr::from(o))
}

/// A NUL-terminated (or not) interface name.
fn name(p: &[u8]) -> Option<String> {
    let end = p.iter().position(|&c| c == 0).unwrap_or(p.len());
    let s = std::str::from_utf8(&p[..end]).ok()?;
    (!s.is_empty()).then(|| s.to_owned())
}

fn link(kind: u16, body: &[u8]) -> Option<Message> {
    let index = u32_at(body, 4)?;
    if kind == RTM_DELLINK {
        return Some(Message::LinkGone { index });
    }
    let flags = u32_at(body, 8)?;
    let name = attributes(body.get(IFINFOMSG_LEN..)?)
        .find(|&(t, _)| t == IFLA_IFNAME)
        .and_then(|(_, p)| name(p));
    Some(Message::Link { index, name, flags })
}

fn addr(kind: u16, body: &[u8]) -> Option<Message> {
    if *body.first()? != AF_INET {
        return Some(Message::Other);
    }
    let index = u32_at(body, 4)?;
    // IFA_LOCAL is this host's address; IFA_ADDRESS is the peer's on a
    // point-to-point link, and the same as IFA_LOCAL otherwise.
    let (mut local, mut address) = (None, None);
    for (t, p) in attributes(body.get(IFADDRMSG_LEN..)?) {
        match t {
            IFA_LOCAL => local = ipv4(p),
            IFA_ADDRESS => address = ipv4(p),
            IFA_LABEL => {}
            _ => {}
        }
    }
    let addr = local.or(address)?;
    Some(if kind == RTM_DELADDR {
        Message::AddrGone { index, addr }
    } else {
        Message::Addr { index, addr }
    })
}

fn route(body: &[u8]) -> Option<Message> {
    if *body.first()? != AF_INET {
        return Some(Message::Other);
    }
    let (mut oif, mut prefsrc) = (None, None);
    for (t, p) in attributes(body.get(RTMSG_LEN..)?) {
        match t {
            RTA_OIF => oif = u32_at(p, 0),
            RTA_PREFSRC => prefsrc = ipv4(p),
            _ => {}
        }
    }
    Some(Message::Route { oif, prefsrc })
}

fn one(kind: u16, body: &[u8]) -> Option<Message> {
    match kind {
        NLMSG_DONE => Some(Message::Done),
        NLMSG_ERROR => Some(Message::Error {
            code: u32_at(body, 0)? as i32,
        }),
        RTM_NEWLINK | RTM_DELLINK => link(kind, body),
        RTM_NEWADDR | RTM_DELADDR => addr(kind, body),
        RTM_NEWROUTE | RTM_DELROUTE => route(body),
        _ => Some(Message::Other),
    }
}

/// Every message in one datagram read from a netlink socket, with its
/// sequence number. A message whose header or body does not fit ends the
/// parse (what came before it is kept); a message too short for its fixed
/// header is skipped.
pub fn parse(buf: &[u8]) -> Vec<(u32, Message)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let (Some(len), Some(kind), Some(seq)) =
        (u32_at(buf, at), u16_at(buf, at + 4), u32_at(buf, at + 8))
    {
        let len = len as usize;
        if len < NLMSG_HDRLEN || len > buf.len() - at {
            break;
        }
        if let Some(m) = one(kind, &buf[at + NLMSG_HDRLEN..at + len]) {
            out.push((seq, m));
        }
        at = match at.checked_add(align(len)) {
            Some(next) => next,
            None => break,
        };
    }
    out
}

#[cfg(test)]
pub(crate) mod build {
    //! Builders of the messages the kernel sends, for tests.
    use super::*;

    pub fn attr(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(payload);
        a.resize(align(a.len()), 0);
        a
    }

    pub fn message(kind: u16, seq: u32, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(body);
        m.resize(align(m.len()), 0);
        m
    }

    pub fn link(kind: u16, index: u32, flags: u32, ifname: &str) -> Vec<u8> {
        let mut b = vec![0u8; 4];
        b.extend_from_slice(&index.to_ne_bytes());
        b.extend_from_slice(&flags.to_ne_bytes());
        b.extend_from_slice(&0xffff_ffffu32.to_ne_bytes());
        let mut n = ifname.as_bytes().to_vec();
        n.push(0);
        b.extend(attr(IFLA_IFNAME, &n));
        message(kind, 0, &b)
    }

    pub fn addr(kind: u16, index: u32, a: Ipv4Addr) -> Vec<u8> {
        let mut b = vec![AF_INET, 24, 0, 0];
        b.extend_from_slice(&index.to_ne_bytes());
        b.extend(attr(IFA_ADDRESS, &a.octets()));
        b.extend(attr(IFA_LOCAL, &a.octets()));
        b.extend(attr(IFA_LABEL, b"eth0\0"));
        message(kind, 0, &b)
    }

    pub fn route(seq: u32, oif: u32, src: Ipv4Addr) -> Vec<u8> {
        let mut b = vec![AF_INET, 32, 0, 0, 254, 0, 0, 1, 0, 0, 0, 0];
        b.extend(attr(RTA_OIF, &oif.to_ne_bytes()));
        b.extend(attr(RTA_PREFSRC, &src.octets()));
        message(RTM_NEWROUTE, seq, &b)
    }
}

#[cfg(test)]
mod tests {
    use super::build::{attr, message};
    use super::*;
    use proptest::prelude::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 7, 1, 1);

    #[test]
    fn reads_links_addresses_routes_and_the_end_of_a_dump() {
        let mut buf = build::link(RTM_NEWLINK, 3, 0x1043, "wifi");
        buf.extend(build::addr(RTM_NEWADDR, 3, A));
        buf.extend(build::addr(RTM_DELADDR, 3, A));
        buf.extend(build::link(RTM_DELLINK, 3, 0, "wifi"));
        buf.extend(build::route(9, 3, A));
        buf.extend(message(NLMSG_ERROR, 9, &(-101i32).to_ne_bytes()));
        buf.extend(message(NLMSG_DONE, 0, &[0; 4]));
        let got: Vec<Message> = parse(&buf).into_iter().map(|(_, m)| m).collect();
        assert_eq!(
            got,
            vec![
                Message::Link {
                    index: 3,
                    name: Some("wifi".into()),
                    flags: 0x1043
                },
                Message::Addr { index: 3, addr: A },
                Message::AddrGone { index: 3, addr: A },
                Message::LinkGone { index: 3 },
                Message::Route {
                    oif: Some(3),
                    prefsrc: Some(A)
                },
                Message::Error { code: -101 },
                Message::Done,
            ]
        );
        assert_eq!(parse(&build::route(9, 3, A))[0].0, 9);
    }

    #[test]
    fn ipv6_addresses_are_other() {
        let mut b = vec![libc::AF_INET6 as u8, 64, 0, 0];
        b.extend_from_slice(&2u32.to_ne_bytes());
        b.extend(attr(IFA_ADDRESS, &[0xfe; 16]));
        assert_eq!(
            parse(&message(RTM_NEWADDR, 0, &b)),
            vec![(0, Message::Other)]
        );
    }

    #[test]
    fn truncation_keeps_what_came_before_and_never_panics() {
        let mut buf = build::link(RTM_NEWLINK, 3, 0x1043, "wifi");
        let first = buf.len();
        buf.extend(build::addr(RTM_NEWADDR, 3, A));
        for cut in 0..buf.len() {
            let got = parse(&buf[..cut]);
            assert_eq!(got.len(), usize::from(cut >= first), "cut at {cut}");
        }
        // A header claiming more than there is, or less than a header.
        let mut bad = buf.clone();
        bad[0..4].copy_from_slice(&10_000u32.to_ne_bytes());
        assert!(parse(&bad).is_empty());
        bad[0..4].copy_from_slice(&3u32.to_ne_bytes());
        assert!(parse(&bad).is_empty());
        // An attribute longer than its message ends the attributes only.
        let mut b = vec![0u8; 4];
        b.extend_from_slice(&5u32.to_ne_bytes());
        b.extend_from_slice(&1u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&[200, 0, 3, 0, b'x', 0, 0, 0]);
        assert_eq!(
            parse(&message(RTM_NEWLINK, 0, &b)),
            vec![(
                0,
                Message::Link {
                    index: 5,
                    name: None,
                    flags: 1
                }
            )]
        );
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn corrupted_real_messages_never_panic(
            flip in proptest::collection::vec((0usize..200, any::<u8>()), 1..8),
            cut in 0usize..200,
        ) {
            let mut buf = build::link(RTM_NEWLINK, 3, 0x1043, "wifi");
            buf.extend(build::addr(RTM_NEWADDR, 3, A));
            buf.extend(build::route(1, 3, A));
            for (at, v) in flip {
                if let Some(b) = buf.get_mut(at) {
                    *b = v;
                }
            }
            buf.truncate(cut.min(buf.len()));
            let _ = parse(&buf);
        }
    }
}

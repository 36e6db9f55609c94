//! Reading NETLINK_ROUTE messages: links, IPv4 addresses and route
//! answers, decoded by netlink-packet-route and reduced to what path
//! management needs. Pure functions over bytes, tested with truncated and
//! random input.
//!
//! Each message's fixed header is decoded whole, but its attributes one at
//! a time, keeping those the crate decodes: a kernel newer than the crate
//! adds attributes (or grows one) that the crate may refuse, and refusing
//! the whole RTM_NEWLINK for it would hide the link going down, which is
//! what failover waits for. A message whose framing does not fit ends the
//! parse (what came before it is kept); one too short for its fixed header
//! is skipped.

use std::net::{IpAddr, Ipv4Addr};

use netlink_packet_core::{
    DecodeError, Emitable, ErrorBuffer, NetlinkBuffer, NlaBuffer, NlasIterator, Parseable,
    ParseableParametrized, NLMSG_ALIGNTO, NLMSG_DONE, NLMSG_ERROR,
};
use netlink_packet_route::address::{AddressAttribute, AddressHeader};
use netlink_packet_route::link::{LinkAttribute, LinkHeader};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteHeader, RouteLwEnCapType};
use netlink_packet_route::AddressFamily;

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

/// The attributes in `buf` that `decode` accepts, in order. One it
/// refuses is skipped; one whose length does not fit ends the list.
fn attributes<'a, A: 'a>(
    buf: &'a [u8],
    decode: impl Fn(&NlaBuffer<&'a [u8]>) -> Result<A, DecodeError> + 'a,
) -> impl Iterator<Item = A> + 'a {
    NlasIterator::new(buf)
        .map_while(Result::ok)
        .filter_map(move |nla| decode(&nla).ok())
}

fn link(gone: bool, body: &[u8]) -> Option<Message> {
    let header = LinkHeader::parse(body).ok()?;
    let index = header.index;
    if gone {
        return Some(Message::LinkGone { index });
    }
    let family = header.interface_family;
    let name = attributes(&body[header.buffer_len()..], move |nla| {
        LinkAttribute::parse_with_param(nla, family)
    })
    .find_map(|a| match a {
        LinkAttribute::IfName(n) if !n.is_empty() => Some(n),
        _ => None,
    });
    Some(Message::Link {
        index,
        name,
        flags: header.flags.bits(),
    })
}

fn addr(gone: bool, body: &[u8]) -> Option<Message> {
    let header = AddressHeader::parse(body).ok()?;
    if header.family != AddressFamily::Inet {
        return Some(Message::Other);
    }
    let index = header.index;
    // IFA_LOCAL is this host's address; IFA_ADDRESS is the peer's on a
    // point-to-point link, and the same as IFA_LOCAL otherwise.
    let (mut local, mut address) = (None, None);
    for a in attributes(&body[header.buffer_len()..], |nla| {
        AddressAttribute::parse(nla)
    }) {
        match a {
            AddressAttribute::Local(IpAddr::V4(a)) => local = Some(a),
            AddressAttribute::Address(IpAddr::V4(a)) => address = Some(a),
            _ => {}
        }
    }
    let addr = local.or(address)?;
    Some(if gone {
        Message::AddrGone { index, addr }
    } else {
        Message::Addr { index, addr }
    })
}

fn route(body: &[u8]) -> Option<Message> {
    let header = RouteHeader::parse(body).ok()?;
    if header.address_family != AddressFamily::Inet {
        return Some(Message::Other);
    }
    let param = (header.address_family, header.kind, RouteLwEnCapType::None);
    let (mut oif, mut prefsrc) = (None, None);
    for a in attributes(&body[header.buffer_len()..], move |nla| {
        RouteAttribute::parse_with_param(nla, param)
    }) {
        match a {
            RouteAttribute::Oif(i) => oif = Some(i),
            RouteAttribute::PrefSource(RouteAddress::Inet(a)) => prefsrc = Some(a),
            _ => {}
        }
    }
    Some(Message::Route { oif, prefsrc })
}

fn one(kind: u16, body: &[u8]) -> Option<Message> {
    match kind {
        NLMSG_DONE => Some(Message::Done),
        NLMSG_ERROR => Some(Message::Error {
            code: ErrorBuffer::new_checked(body)
                .ok()?
                .code()
                .map_or(0, |c| c.get()),
        }),
        libc::RTM_NEWLINK => link(false, body),
        libc::RTM_DELLINK => link(true, body),
        libc::RTM_NEWADDR => addr(false, body),
        libc::RTM_DELADDR => addr(true, body),
        libc::RTM_NEWROUTE | libc::RTM_DELROUTE => route(body),
        _ => Some(Message::Other),
    }
}

/// Every message in one datagram read from a netlink socket, with its
/// sequence number.
pub fn parse(buf: &[u8]) -> Vec<(u32, Message)> {
    let mut out = Vec::new();
    let mut rest = buf;
    while let Ok(m) = NetlinkBuffer::new_checked(rest) {
        if let Some(one) = one(m.message_type(), m.payload()) {
            out.push((m.sequence_number(), one));
        }
        // Messages start 4-byte aligned; the last one may end unpadded.
        let align = usize::from(NLMSG_ALIGNTO);
        let len = (m.length() as usize).next_multiple_of(align);
        rest = rest.get(len..).unwrap_or(&[]);
    }
    out
}

#[cfg(test)]
pub(crate) mod build {
    //! The messages the kernel sends, encoded by the crate, for tests.
    use super::*;
    use crate::netlink::request::encode;
    use netlink_packet_core::{DoneMessage, ErrorMessage, NetlinkPayload};
    use netlink_packet_route::address::AddressMessage;
    use netlink_packet_route::link::{LinkFlags, LinkMessage};
    use netlink_packet_route::route::{RouteMessage, RouteType};
    use netlink_packet_route::RouteNetlinkMessage;

    pub fn kernel(seq: u32, m: RouteNetlinkMessage) -> Vec<u8> {
        encode(0, seq, NetlinkPayload::InnerMessage(m))
    }

    pub fn link_message(index: u32, flags: u32, attributes: Vec<LinkAttribute>) -> LinkMessage {
        let mut m = LinkMessage::default();
        m.header.index = index;
        m.header.flags = LinkFlags::from_bits_retain(flags);
        m.header.change_mask = LinkFlags::from_bits_retain(u32::MAX);
        m.attributes = attributes;
        m
    }

    pub fn link(gone: bool, index: u32, flags: u32, ifname: &str) -> Vec<u8> {
        let m = link_message(index, flags, vec![LinkAttribute::IfName(ifname.into())]);
        kernel(
            0,
            if gone {
                RouteNetlinkMessage::DelLink(m)
            } else {
                RouteNetlinkMessage::NewLink(m)
            },
        )
    }

    pub fn addr(gone: bool, index: u32, a: IpAddr) -> Vec<u8> {
        let mut m = AddressMessage::default();
        m.header.family = match a {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        m.header.prefix_len = 24;
        m.header.index = index;
        m.attributes = vec![
            AddressAttribute::Address(a),
            AddressAttribute::Local(a),
            AddressAttribute::Label("eth0".into()),
        ];
        kernel(
            0,
            if gone {
                RouteNetlinkMessage::DelAddress(m)
            } else {
                RouteNetlinkMessage::NewAddress(m)
            },
        )
    }

    pub fn route(seq: u32, oif: u32, src: Ipv4Addr) -> Vec<u8> {
        let mut m = RouteMessage::default();
        m.header.address_family = AddressFamily::Inet;
        m.header.destination_prefix_length = 32;
        m.header.table = RouteHeader::RT_TABLE_MAIN;
        m.header.kind = RouteType::Unicast;
        m.attributes = vec![
            RouteAttribute::Oif(oif),
            RouteAttribute::PrefSource(RouteAddress::Inet(src)),
        ];
        kernel(seq, RouteNetlinkMessage::NewRoute(m))
    }

    pub fn error(seq: u32, code: i32) -> Vec<u8> {
        let mut e = ErrorMessage::default();
        e.code = std::num::NonZeroI32::new(code);
        encode(0, seq, NetlinkPayload::Error(e))
    }

    pub fn done() -> Vec<u8> {
        encode(0, 0, NetlinkPayload::Done(DoneMessage::default()))
    }
}

#[cfg(test)]
mod tests {
    use super::build::{addr, done, error, kernel, link, link_message, route};
    use super::{parse, LinkAttribute, Message};
    use netlink_packet_core::{DefaultNla, NetlinkMessage};
    use netlink_packet_route::RouteNetlinkMessage;
    use proptest::prelude::*;
    use std::net::{IpAddr, Ipv4Addr};

    const A: Ipv4Addr = Ipv4Addr::new(10, 7, 1, 1);

    #[test]
    fn reads_links_addresses_routes_and_the_end_of_a_dump() {
        let mut buf = link(false, 3, 0x1043, "wifi");
        buf.extend(addr(false, 3, A.into()));
        buf.extend(addr(true, 3, A.into()));
        buf.extend(link(true, 3, 0, "wifi"));
        buf.extend(route(9, 3, A));
        buf.extend(error(9, -101));
        buf.extend(error(10, 0));
        buf.extend(done());
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
                Message::Error { code: 0 },
                Message::Done,
            ]
        );
        assert_eq!(parse(&route(9, 3, A))[0].0, 9);
    }

    #[test]
    fn ipv6_addresses_are_other() {
        let a = IpAddr::V6(std::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1));
        assert_eq!(parse(&addr(false, 2, a)), vec![(0, Message::Other)]);
    }

    #[test]
    fn an_attribute_the_crate_refuses_does_not_hide_the_link() {
        // IFLA_MTU (4) is a u32; one byte of it is what a kernel that
        // changed the attribute might send.
        let m = link_message(
            5,
            0x1003,
            vec![
                LinkAttribute::Other(DefaultNla::new(4, vec![1])),
                LinkAttribute::IfName("lte".into()),
            ],
        );
        let bytes = kernel(0, RouteNetlinkMessage::NewLink(m));
        assert!(
            NetlinkMessage::<RouteNetlinkMessage>::deserialize(&bytes).is_err(),
            "the crate decodes the message whole after all"
        );
        assert_eq!(
            parse(&bytes),
            vec![(
                0,
                Message::Link {
                    index: 5,
                    name: Some("lte".into()),
                    flags: 0x1003
                }
            )]
        );
    }

    #[test]
    fn truncation_keeps_what_came_before_and_never_panics() {
        let mut buf = link(false, 3, 0x1043, "wifi");
        let first = buf.len();
        buf.extend(addr(false, 3, A.into()));
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
        // An attribute longer than its message ends the attributes only:
        // the name's length (after the 16-byte netlink header and the
        // 16-byte ifinfomsg) made 200.
        let mut long = link(false, 5, 1, "x");
        long[32..34].copy_from_slice(&200u16.to_ne_bytes());
        assert_eq!(
            parse(&long),
            vec![(
                0,
                Message::Link {
                    index: 5,
                    name: None,
                    flags: 1
                }
            )]
        );
        // A body too short for its fixed header is skipped, not the end.
        let mut short = link(false, 5, 1, "x");
        short.truncate(16 + 8);
        short[0..4].copy_from_slice(&24u32.to_ne_bytes());
        short.extend(done());
        assert_eq!(parse(&short), vec![(0, Message::Done)]);
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
            let mut buf = link(false, 3, 0x1043, "wifi");
            buf.extend(addr(false, 3, A.into()));
            buf.extend(route(1, 3, A));
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

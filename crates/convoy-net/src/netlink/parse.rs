//! Reading NETLINK_ROUTE messages: links, IPv4 and IPv6 addresses and
//! route answers, decoded by netlink-packet-route and reduced to what path
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

use std::net::IpAddr;

use netlink_packet_core::{
    DecodeError, Emitable, ErrorBuffer, NetlinkBuffer, NlaBuffer, NlasIterator, Parseable,
    ParseableParametrized, NLMSG_ALIGNTO, NLMSG_DONE, NLMSG_ERROR,
};
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressHeader};
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
    /// RTM_NEWADDR: an address that can be bound. `deprecated`: an IPv6
    /// address past its preferred lifetime (still usable, chosen last).
    Addr {
        index: u32,
        addr: IpAddr,
        deprecated: bool,
    },
    /// RTM_DELADDR, or RTM_NEWADDR for an IPv6 address that cannot be
    /// bound: still in duplicate address detection, or found a duplicate.
    AddrGone { index: u32, addr: IpAddr },
    /// RTM_NEWROUTE (an answer to RTM_GETROUTE, or a route added) or
    /// RTM_DELROUTE: the interface the route leaves by, and its source
    /// address.
    Route {
        oif: Option<u32>,
        prefsrc: Option<IpAddr>,
    },
    /// The end of a dump.
    Done,
    /// NLMSG_ERROR: 0 is an acknowledgment, otherwise a negative errno.
    Error { code: i32 },
    /// Anything else (other families, types we did not ask for).
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
    let v6 = match header.family {
        AddressFamily::Inet => false,
        AddressFamily::Inet6 => true,
        _ => return Some(Message::Other),
    };
    let index = header.index;
    // IFA_LOCAL is this host's address; IFA_ADDRESS is the peer's on a
    // point-to-point link, and the same as IFA_LOCAL otherwise (IPv6
    // sends IFA_ADDRESS alone). IFA_FLAGS, when there, holds all the
    // flags; the header's byte only the low eight.
    let (mut local, mut address) = (None, None);
    let mut flags = AddressFlags::from_bits_retain(u32::from(header.flags.bits()));
    for a in attributes(&body[header.buffer_len()..], |nla| {
        AddressAttribute::parse(nla)
    }) {
        match a {
            AddressAttribute::Local(a) if a.is_ipv6() == v6 => local = Some(a),
            AddressAttribute::Address(a) if a.is_ipv6() == v6 => address = Some(a),
            AddressAttribute::Flags(f) => flags = f,
            _ => {}
        }
    }
    let addr = local.or(address)?;
    // A tentative address cannot be bound until DAD is done (the kernel
    // then sends it again without the flag); a duplicate never can.
    let unbindable = flags.intersects(AddressFlags::Tentative | AddressFlags::Dadfailed);
    Some(if gone || unbindable {
        Message::AddrGone { index, addr }
    } else {
        Message::Addr {
            index,
            addr,
            deprecated: flags.contains(AddressFlags::Deprecated),
        }
    })
}

fn route(body: &[u8]) -> Option<Message> {
    let header = RouteHeader::parse(body).ok()?;
    if !matches!(
        header.address_family,
        AddressFamily::Inet | AddressFamily::Inet6
    ) {
        return Some(Message::Other);
    }
    let param = (header.address_family, header.kind, RouteLwEnCapType::None);
    let (mut oif, mut prefsrc) = (None, None);
    for a in attributes(&body[header.buffer_len()..], move |nla| {
        RouteAttribute::parse_with_param(nla, param)
    }) {
        match a {
            RouteAttribute::Oif(i) => oif = Some(i),
            RouteAttribute::PrefSource(RouteAddress::Inet(a)) => prefsrc = Some(a.into()),
            RouteAttribute::PrefSource(RouteAddress::Inet6(a)) => prefsrc = Some(a.into()),
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
    use netlink_packet_route::address::{AddressHeaderFlags, AddressMessage};
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
        addr_flags(gone, index, a, AddressFlags::Permanent)
    }

    /// An address with IFA_FLAGS `flags` (and their low byte in the header).
    pub fn addr_flags(gone: bool, index: u32, a: IpAddr, flags: AddressFlags) -> Vec<u8> {
        let mut m = AddressMessage::default();
        m.header.family = match a {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        m.header.prefix_len = if a.is_ipv6() { 64 } else { 24 };
        m.header.index = index;
        m.header.flags = AddressHeaderFlags::from_bits_retain(flags.bits() as u8);
        m.attributes = vec![AddressAttribute::Address(a)];
        // The kernel sends IFA_LOCAL and a label for IPv4 only.
        if a.is_ipv4() {
            m.attributes.push(AddressAttribute::Local(a));
            m.attributes.push(AddressAttribute::Label("eth0".into()));
        }
        m.attributes.push(AddressAttribute::Flags(flags));
        kernel(
            0,
            if gone {
                RouteNetlinkMessage::DelAddress(m)
            } else {
                RouteNetlinkMessage::NewAddress(m)
            },
        )
    }

    pub fn route(seq: u32, oif: u32, src: IpAddr) -> Vec<u8> {
        let mut m = RouteMessage::default();
        m.header.address_family = match src {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        m.header.destination_prefix_length = if src.is_ipv6() { 128 } else { 32 };
        m.header.table = RouteHeader::RT_TABLE_MAIN;
        m.header.kind = RouteType::Unicast;
        m.attributes = vec![
            RouteAttribute::Oif(oif),
            RouteAttribute::PrefSource(src.into()),
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
    use super::build::{addr, addr_flags, done, error, kernel, link, link_message, route};
    use super::{parse, AddressFlags, LinkAttribute, Message};
    use netlink_packet_core::{DefaultNla, NetlinkMessage};
    use netlink_packet_route::RouteNetlinkMessage;
    use proptest::prelude::*;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    const A: Ipv4Addr = Ipv4Addr::new(10, 7, 1, 1);
    const B: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x11);

    #[test]
    fn reads_links_addresses_routes_and_the_end_of_a_dump() {
        let mut buf = link(false, 3, 0x1043, "wifi");
        buf.extend(addr(false, 3, A.into()));
        buf.extend(addr(true, 3, A.into()));
        buf.extend(link(true, 3, 0, "wifi"));
        buf.extend(route(9, 3, A.into()));
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
                Message::Addr {
                    index: 3,
                    addr: A.into(),
                    deprecated: false
                },
                Message::AddrGone {
                    index: 3,
                    addr: A.into()
                },
                Message::LinkGone { index: 3 },
                Message::Route {
                    oif: Some(3),
                    prefsrc: Some(A.into())
                },
                Message::Error { code: -101 },
                Message::Error { code: 0 },
                Message::Done,
            ]
        );
        assert_eq!(parse(&route(9, 3, A.into()))[0].0, 9);
    }

    #[test]
    fn ipv6_addresses_count_once_bindable_and_routes_name_their_source() {
        let b = IpAddr::V6(B);
        let got = |flags| parse(&addr_flags(false, 2, b, flags));
        let gone = vec![(0, Message::AddrGone { index: 2, addr: b })];
        // In duplicate address detection, or a duplicate: not bindable.
        assert_eq!(got(AddressFlags::Tentative), gone);
        assert_eq!(got(AddressFlags::Dadfailed | AddressFlags::Tentative), gone);
        assert_eq!(
            got(AddressFlags::Permanent),
            vec![(
                0,
                Message::Addr {
                    index: 2,
                    addr: b,
                    deprecated: false
                }
            )]
        );
        // Flags above the header's byte come in IFA_FLAGS alone.
        assert_eq!(
            got(AddressFlags::Deprecated | AddressFlags::Managetempaddr),
            vec![(
                0,
                Message::Addr {
                    index: 2,
                    addr: b,
                    deprecated: true
                }
            )]
        );
        assert_eq!(parse(&addr(true, 2, b)), gone);
        assert_eq!(
            parse(&route(4, 2, b)),
            vec![(
                4,
                Message::Route {
                    oif: Some(2),
                    prefsrc: Some(b)
                }
            )]
        );
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
            buf.extend(route(1, 3, A.into()));
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

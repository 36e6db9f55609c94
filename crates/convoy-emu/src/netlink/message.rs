//! The rtnetlink messages the emulator sends (link flags, an IPv4 address,
//! a default route in a table, a source rule) and those it reads back
//! (acknowledgments, a rule dump, link notifications), encoded and decoded
//! by netlink-packet-route. Pure, so each is checked without a kernel.

use std::net::{IpAddr, Ipv4Addr};

use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLMSG_ALIGNTO, NLM_F_ACK,
    NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::route::{
    RouteAttribute, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

/// A request that creates something: acknowledged, and refused with
/// EEXIST if it is there already (as `ip ... add`).
const CREATE: u16 = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;

/// One message with its header filled in (length, type, `flags`, `seq`).
pub(crate) fn encode(
    flags: u16,
    seq: u32,
    payload: NetlinkPayload<RouteNetlinkMessage>,
) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.flags = flags;
    header.sequence_number = seq;
    let mut m = NetlinkMessage::new(header, payload);
    m.finalize();
    let mut buf = vec![0; m.buffer_len()];
    m.serialize(&mut buf);
    buf
}

fn request(flags: u16, seq: u32, message: RouteNetlinkMessage) -> Vec<u8> {
    encode(flags, seq, NetlinkPayload::InnerMessage(message))
}

/// The table number as a header's byte holds it: RT_TABLE_UNSPEC above
/// 255, where the 32-bit attribute alone says it (as `ip` does).
fn header_table(table: u32) -> u8 {
    u8::try_from(table).unwrap_or(0)
}

/// `ip link set dev X up|down`: only IFF_UP changes.
pub fn set_link_up(seq: u32, ifindex: u32, up: bool) -> Vec<u8> {
    let mut m = LinkMessage::default();
    m.header.index = ifindex;
    m.header.flags = if up {
        LinkFlags::Up
    } else {
        LinkFlags::empty()
    };
    m.header.change_mask = LinkFlags::Up;
    request(
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        RouteNetlinkMessage::NewLink(m),
    )
}

/// `ip addr add ADDR/PREFIX dev X`.
pub fn add_address(seq: u32, ifindex: u32, addr: Ipv4Addr, prefix: u8) -> Vec<u8> {
    let mut m = AddressMessage::default();
    m.header.family = AddressFamily::Inet;
    m.header.prefix_len = prefix;
    m.header.index = ifindex;
    m.attributes = vec![
        AddressAttribute::Local(addr.into()),
        AddressAttribute::Address(addr.into()),
    ];
    request(CREATE, seq, RouteNetlinkMessage::NewAddress(m))
}

/// `ip route add default dev X table TABLE` (proto boot, scope link).
pub fn add_default_route(seq: u32, ifindex: u32, table: u32) -> Vec<u8> {
    let mut m = RouteMessage::default();
    m.header.address_family = AddressFamily::Inet;
    m.header.table = header_table(table);
    m.header.protocol = RouteProtocol::Boot;
    m.header.scope = RouteScope::Link;
    m.header.kind = RouteType::Unicast;
    m.attributes = vec![RouteAttribute::Table(table), RouteAttribute::Oif(ifindex)];
    request(CREATE, seq, RouteNetlinkMessage::NewRoute(m))
}

/// Every IPv4 rule (`ip rule list`).
pub fn dump_rules(seq: u32) -> Vec<u8> {
    let mut m = RuleMessage::default();
    m.header.family = AddressFamily::Inet;
    request(
        NLM_F_REQUEST | NLM_F_DUMP,
        seq,
        RouteNetlinkMessage::GetRule(m),
    )
}

/// `ip rule add from ADDR table TABLE` (no priority: the kernel picks
/// one, as it does for `ip`).
pub fn add_source_rule(seq: u32, addr: Ipv4Addr, table: u32) -> Vec<u8> {
    let mut m = RuleMessage::default();
    m.header.family = AddressFamily::Inet;
    m.header.src_len = 32;
    m.header.table = header_table(table);
    m.header.action = RuleAction::ToTable;
    m.attributes = vec![
        RuleAttribute::Source(addr.into()),
        RuleAttribute::Table(table),
    ];
    request(CREATE, seq, RouteNetlinkMessage::NewRule(m))
}

/// The messages of one datagram that the crate decodes. One it refuses is
/// skipped; framing that does not fit ends the list.
pub fn read(datagram: &[u8]) -> Vec<NetlinkMessage<RouteNetlinkMessage>> {
    let mut out = Vec::new();
    let mut rest = datagram;
    while let Ok(framed) = NetlinkBuffer::new_checked(rest) {
        let len = framed.length() as usize;
        if let Ok(m) = NetlinkMessage::deserialize(&rest[..len]) {
            out.push(m);
        }
        // Messages start 4-byte aligned; the last one may end unpadded.
        let next = len.next_multiple_of(usize::from(NLMSG_ALIGNTO));
        rest = rest.get(next..).unwrap_or(&[]);
    }
    out
}

/// Whether `rule` is `from ADDR/32 lookup TABLE`.
pub fn is_source_rule(rule: &RuleMessage, addr: Ipv4Addr, table: u32) -> bool {
    let mut rule_table = u32::from(rule.header.table);
    let mut src = None;
    for a in &rule.attributes {
        match a {
            RuleAttribute::Table(t) => rule_table = *t,
            RuleAttribute::Source(IpAddr::V4(s)) => src = Some(*s),
            _ => {}
        }
    }
    rule.header.src_len == 32 && src == Some(addr) && rule_table == table
}

/// One RTM_NEWLINK notification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkNotice {
    pub ifindex: u32,
    pub name: String,
    /// IFF_UP: administratively up.
    pub up: bool,
    /// IFF_RUNNING: up with carrier, usable.
    pub running: bool,
}

impl LinkNotice {
    pub fn of(link: &LinkMessage) -> LinkNotice {
        let name = link.attributes.iter().find_map(|a| match a {
            LinkAttribute::IfName(n) => Some(n.clone()),
            _ => None,
        });
        LinkNotice {
            ifindex: link.header.index,
            name: name.unwrap_or_default(),
            up: link.header.flags.contains(LinkFlags::Up),
            running: link.header.flags.contains(LinkFlags::Running),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::{ErrorMessage, NLM_F_MULTIPART};
    use proptest::prelude::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 7, 1, 1);

    /// The one message in `buf`, which must be all of it.
    fn one(buf: &[u8]) -> (NetlinkHeader, RouteNetlinkMessage) {
        let mut all = read(buf);
        assert_eq!(all.len(), 1);
        let m = all.remove(0);
        assert_eq!(m.header.length as usize, buf.len());
        let NetlinkPayload::InnerMessage(inner) = m.payload else {
            panic!("{:?}", m.payload)
        };
        (m.header, inner)
    }

    #[test]
    fn a_link_change_touches_only_iff_up() {
        for up in [true, false] {
            let (h, m) = one(&set_link_up(4, 7, up));
            assert_eq!(
                (h.message_type, h.flags, h.sequence_number),
                (libc::RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, 4)
            );
            let RouteNetlinkMessage::NewLink(l) = m else {
                panic!("{m:?}")
            };
            assert_eq!(l.header.index, 7);
            assert_eq!(l.header.flags.contains(LinkFlags::Up), up);
            assert_eq!(l.header.flags - LinkFlags::Up, LinkFlags::empty());
            assert_eq!(l.header.change_mask, LinkFlags::Up);
            assert!(l.attributes.is_empty());
        }
    }

    #[test]
    fn address_route_and_rule_are_created_exclusively() {
        let (h, m) = one(&add_address(1, 3, A, 24));
        assert_eq!((h.message_type, h.flags), (libc::RTM_NEWADDR, CREATE));
        let RouteNetlinkMessage::NewAddress(a) = m else {
            panic!("{m:?}")
        };
        assert_eq!(
            (a.header.family, a.header.prefix_len, a.header.index),
            (AddressFamily::Inet, 24, 3)
        );
        assert_eq!(
            a.attributes,
            vec![
                AddressAttribute::Local(A.into()),
                AddressAttribute::Address(A.into())
            ]
        );

        let (h, m) = one(&add_default_route(2, 3, 101));
        assert_eq!((h.message_type, h.flags), (libc::RTM_NEWROUTE, CREATE));
        let RouteNetlinkMessage::NewRoute(r) = m else {
            panic!("{m:?}")
        };
        assert_eq!(r.header.address_family, AddressFamily::Inet);
        assert_eq!(r.header.destination_prefix_length, 0);
        assert_eq!(r.header.table, 101);
        assert_eq!(r.header.protocol, RouteProtocol::Boot);
        assert_eq!(r.header.scope, RouteScope::Link);
        assert_eq!(r.header.kind, RouteType::Unicast);
        assert_eq!(
            r.attributes,
            vec![RouteAttribute::Table(101), RouteAttribute::Oif(3)]
        );
        // A table beyond a byte: the header says "unspecified".
        let (_, m) = one(&add_default_route(2, 3, 1000));
        let RouteNetlinkMessage::NewRoute(r) = m else {
            panic!("{m:?}")
        };
        assert_eq!(r.header.table, 0);

        let (h, m) = one(&add_source_rule(3, A, 101));
        assert_eq!((h.message_type, h.flags), (libc::RTM_NEWRULE, CREATE));
        let RouteNetlinkMessage::NewRule(rule) = m else {
            panic!("{m:?}")
        };
        assert_eq!(rule.header.action, RuleAction::ToTable);
        assert!(is_source_rule(&rule, A, 101));

        let (h, m) = one(&dump_rules(4));
        assert_eq!(
            (h.message_type, h.flags),
            (libc::RTM_GETRULE, NLM_F_REQUEST | NLM_F_DUMP)
        );
        let RouteNetlinkMessage::GetRule(rule) = m else {
            panic!("{m:?}")
        };
        assert_eq!(rule.header.family, AddressFamily::Inet);
    }

    #[test]
    fn a_source_rule_matches_on_prefix_address_and_table() {
        let mut rule = RuleMessage::default();
        rule.header.src_len = 32;
        rule.header.table = 101;
        rule.attributes = vec![RuleAttribute::Source(A.into())];
        // The header's byte alone says the table.
        assert!(is_source_rule(&rule, A, 101));
        assert!(!is_source_rule(&rule, A, 102));
        assert!(!is_source_rule(&rule, Ipv4Addr::new(10, 7, 2, 1), 101));
        // The attribute says it above 255.
        rule.header.table = 0;
        rule.attributes.push(RuleAttribute::Table(1000));
        assert!(is_source_rule(&rule, A, 1000));
        // A subnet is not the address.
        rule.header.src_len = 24;
        assert!(!is_source_rule(&rule, A, 1000));
    }

    #[test]
    fn link_notices_say_up_and_running() {
        let mut l = LinkMessage::default();
        l.header.index = 5;
        l.header.flags = LinkFlags::Up | LinkFlags::Running;
        l.attributes = vec![
            LinkAttribute::Mtu(1500),
            LinkAttribute::IfName("wifi".into()),
        ];
        assert_eq!(
            LinkNotice::of(&l),
            LinkNotice {
                ifindex: 5,
                name: "wifi".into(),
                up: true,
                running: true
            }
        );
        l.header.flags = LinkFlags::Up;
        l.attributes.clear();
        let n = LinkNotice::of(&l);
        assert!(n.up && !n.running && n.name.is_empty());
    }

    #[test]
    fn answers_back_to_back_and_truncation_ends_the_walk() {
        let mut e = ErrorMessage::default();
        e.code = std::num::NonZeroI32::new(-libc::EEXIST);
        let mut buf = encode(0, 9, NetlinkPayload::Error(e));
        buf.extend(encode(
            0,
            10,
            NetlinkPayload::Error(ErrorMessage::default()),
        ));
        let mut rule = RuleMessage::default();
        rule.header.family = AddressFamily::Inet;
        buf.extend(request(
            NLM_F_MULTIPART,
            11,
            RouteNetlinkMessage::NewRule(rule),
        ));
        let got = read(&buf);
        let codes: Vec<_> = got
            .iter()
            .map(|m| match &m.payload {
                NetlinkPayload::Error(e) => Some(e.raw_code()),
                _ => None,
            })
            .collect();
        assert_eq!(codes, [Some(-libc::EEXIST), Some(0), None]);
        assert_eq!(got[2].header.flags, NLM_F_MULTIPART);
        let first = encode(0, 9, NetlinkPayload::Error(ErrorMessage::default())).len();
        for cut in 0..buf.len() {
            assert!(read(&buf[..cut]).len() <= cut / first, "cut at {cut}");
        }
        assert!(read(&buf[..first - 1]).is_empty());
        assert_eq!(read(&buf[..first]).len(), 1);
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = read(&bytes);
        }

        #[test]
        fn corrupted_requests_never_panic(
            flip in proptest::collection::vec((0usize..120, any::<u8>()), 1..8),
            cut in 0usize..160,
        ) {
            let mut buf = set_link_up(1, 3, true);
            buf.extend(add_source_rule(2, A, 101));
            buf.extend(add_default_route(3, 3, 101));
            for (at, v) in flip {
                if let Some(b) = buf.get_mut(at) {
                    *b = v;
                }
            }
            buf.truncate(cut.min(buf.len()));
            for m in read(&buf) {
                if let NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRule(r)) = &m.payload {
                    let _ = is_source_rule(r, A, 101);
                }
                if let NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(l)) = &m.payload {
                    let _ = LinkNotice::of(l);
                }
            }
        }
    }
}

//! The requests the path manager sends: dumps of the links and IPv4
//! addresses, and a route look-up (`ip route get`). Encoded by
//! netlink-packet-route; pure, so the bytes are checked without a kernel.

use std::net::Ipv4Addr;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::address::AddressMessage;
use netlink_packet_route::link::LinkMessage;
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

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
    encode(
        NLM_F_REQUEST | flags,
        seq,
        NetlinkPayload::InnerMessage(message),
    )
}

/// RTM_GETLINK, dump: every interface.
pub fn dump_links(seq: u32) -> Vec<u8> {
    request(
        NLM_F_DUMP,
        seq,
        RouteNetlinkMessage::GetLink(LinkMessage::default()),
    )
}

/// RTM_GETADDR, dump, IPv4 only.
pub fn dump_ipv4_addresses(seq: u32) -> Vec<u8> {
    let mut m = AddressMessage::default();
    m.header.family = AddressFamily::Inet;
    request(NLM_F_DUMP, seq, RouteNetlinkMessage::GetAddress(m))
}

/// RTM_GETROUTE for the host route to `dst`, from `src` when given (as
/// `ip route get DST from SRC`).
pub fn route_to(seq: u32, dst: Ipv4Addr, src: Option<Ipv4Addr>) -> Vec<u8> {
    let mut m = RouteMessage::default();
    m.header.address_family = AddressFamily::Inet;
    m.header.destination_prefix_length = 32;
    m.attributes
        .push(RouteAttribute::Destination(RouteAddress::Inet(dst)));
    if let Some(s) = src {
        m.header.source_prefix_length = 32;
        m.attributes
            .push(RouteAttribute::Source(RouteAddress::Inet(s)));
    }
    request(0, seq, RouteNetlinkMessage::GetRoute(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::NetlinkPayload::InnerMessage;

    fn decode(buf: &[u8]) -> (NetlinkHeader, RouteNetlinkMessage) {
        let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(buf).unwrap();
        assert_eq!(m.header.length as usize, buf.len());
        let InnerMessage(inner) = m.payload else {
            panic!("not a route message: {:?}", m.payload)
        };
        (m.header, inner)
    }

    #[test]
    fn dumps_ask_for_every_link_and_the_ipv4_addresses() {
        let (h, m) = decode(&dump_links(7));
        assert_eq!(
            (h.message_type, h.flags, h.sequence_number),
            (libc::RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, 7)
        );
        assert!(matches!(m, RouteNetlinkMessage::GetLink(_)));
        let (h, m) = decode(&dump_ipv4_addresses(8));
        assert_eq!(h.message_type, libc::RTM_GETADDR);
        assert_eq!(h.flags, NLM_F_REQUEST | NLM_F_DUMP);
        let RouteNetlinkMessage::GetAddress(a) = m else {
            panic!("{m:?}")
        };
        assert_eq!(a.header.family, AddressFamily::Inet);
    }

    #[test]
    fn a_route_look_up_names_the_destination_and_the_source_if_any() {
        let dst = Ipv4Addr::new(10, 7, 0, 2);
        let src = Ipv4Addr::new(10, 7, 1, 1);
        let (h, m) = decode(&route_to(9, dst, Some(src)));
        // Not a dump: the kernel answers with the one route it would use.
        assert_eq!(
            (h.message_type, h.flags),
            (libc::RTM_GETROUTE, NLM_F_REQUEST)
        );
        let RouteNetlinkMessage::GetRoute(r) = m else {
            panic!("{m:?}")
        };
        assert_eq!(r.header.address_family, AddressFamily::Inet);
        assert_eq!(
            (
                r.header.destination_prefix_length,
                r.header.source_prefix_length
            ),
            (32, 32)
        );
        assert_eq!(
            r.attributes,
            vec![
                RouteAttribute::Destination(RouteAddress::Inet(dst)),
                RouteAttribute::Source(RouteAddress::Inet(src)),
            ]
        );
        let (_, m) = decode(&route_to(10, dst, None));
        let RouteNetlinkMessage::GetRoute(r) = m else {
            panic!("{m:?}")
        };
        assert_eq!(r.header.source_prefix_length, 0);
        assert_eq!(r.attributes.len(), 1);
    }
}

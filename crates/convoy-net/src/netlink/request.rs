//! The requests the path manager sends: dumps of the links and of one
//! family's addresses, and a route look-up (`ip route get`). Encoded by
//! netlink-packet-route; pure, so the bytes are checked without a kernel.

use std::net::IpAddr;

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

/// The netlink family of `a`, and its length in bits.
fn family(a: IpAddr) -> (AddressFamily, u8) {
    match a {
        IpAddr::V4(_) => (AddressFamily::Inet, 32),
        IpAddr::V6(_) => (AddressFamily::Inet6, 128),
    }
}

/// RTM_GETADDR, dump, the addresses of `like`'s family only.
pub fn dump_addresses(seq: u32, like: IpAddr) -> Vec<u8> {
    let mut m = AddressMessage::default();
    m.header.family = family(like).0;
    request(NLM_F_DUMP, seq, RouteNetlinkMessage::GetAddress(m))
}

/// RTM_GETROUTE for the host route to `dst`, from `src` when given (as
/// `ip route get DST from SRC`); `src` is of `dst`'s family.
pub fn route_to(seq: u32, dst: IpAddr, src: Option<IpAddr>) -> Vec<u8> {
    let mut m = RouteMessage::default();
    let (f, bits) = family(dst);
    m.header.address_family = f;
    m.header.destination_prefix_length = bits;
    m.attributes
        .push(RouteAttribute::Destination(RouteAddress::from(dst)));
    if let Some(s) = src {
        m.header.source_prefix_length = bits;
        m.attributes
            .push(RouteAttribute::Source(RouteAddress::from(s)));
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
    fn dumps_ask_for_every_link_and_one_familys_addresses() {
        let (h, m) = decode(&dump_links(7));
        assert_eq!(
            (h.message_type, h.flags, h.sequence_number),
            (libc::RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, 7)
        );
        assert!(matches!(m, RouteNetlinkMessage::GetLink(_)));
        for (like, f) in [
            ("10.7.0.2", AddressFamily::Inet),
            ("fd00:77::2", AddressFamily::Inet6),
        ] {
            let (h, m) = decode(&dump_addresses(8, like.parse().unwrap()));
            assert_eq!(h.message_type, libc::RTM_GETADDR);
            assert_eq!(h.flags, NLM_F_REQUEST | NLM_F_DUMP);
            let RouteNetlinkMessage::GetAddress(a) = m else {
                panic!("{m:?}")
            };
            assert_eq!(a.header.family, f);
        }
    }

    #[test]
    fn a_route_look_up_names_the_destination_and_the_source_if_any() {
        // IPv4, then IPv6: the family and the full-length prefixes.
        for (dst, src, family, bits) in [
            ("10.7.0.2", "10.7.1.1", AddressFamily::Inet, 32),
            ("fd00:77::2", "fd00:78::1", AddressFamily::Inet6, 128),
        ] {
            let (dst, src): (IpAddr, IpAddr) = (dst.parse().unwrap(), src.parse().unwrap());
            let (h, m) = decode(&route_to(9, dst, Some(src)));
            // Not a dump: the kernel answers with the one route it would use.
            assert_eq!(
                (h.message_type, h.flags),
                (libc::RTM_GETROUTE, NLM_F_REQUEST)
            );
            let RouteNetlinkMessage::GetRoute(r) = m else {
                panic!("{m:?}")
            };
            assert_eq!(r.header.address_family, family);
            assert_eq!(
                (
                    r.header.destination_prefix_length,
                    r.header.source_prefix_length
                ),
                (bits, bits)
            );
            assert_eq!(
                r.attributes,
                vec![
                    RouteAttribute::Destination(dst.into()),
                    RouteAttribute::Source(src.into()),
                ]
            );
        }
        let dst: IpAddr = "fd00:77::2".parse().unwrap();
        let (_, m) = decode(&route_to(10, dst, None));
        let RouteNetlinkMessage::GetRoute(r) = m else {
            panic!("{m:?}")
        };
        assert_eq!(r.header.source_prefix_length, 0);
        assert_eq!(r.attributes.len(), 1);
    }
}

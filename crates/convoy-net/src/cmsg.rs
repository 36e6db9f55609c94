//! Control messages (ancillary data) of the datagrams [`crate::socket`]
//! receives and sends: kernel receive times, the socket's drop count, GRO
//! segment sizes and the destination address (IP_PKTINFO /
//! IPV6_PKTINFO) in; the GSO segment size and the source address out.
//!
//! The source address matters for a server bound to a wildcard address
//! (0.0.0.0 or ::) on a host with several: without it, the kernel picks
//! a reply's source from the route back, which need not be the address
//! the client dialled, and the client's connected socket (or its NAT or
//! firewall) drops replies from any other.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Room for the control messages of one received datagram:
/// SCM_TIMESTAMPNS (32 bytes), SO_RXQ_OVFL (24), UDP_GRO (24) and
/// IPV6_PKTINFO (40), with room to spare.
pub const RECV_SPACE: usize = 192;
/// Room for the control messages of one sent message: UDP_SEGMENT (24
/// bytes) and IPV6_PKTINFO (40).
pub const SEND_SPACE: usize = 64;

/// What the control messages of one received datagram said.
#[derive(Clone, Copy, Debug, Default)]
pub struct Control {
    pub time: Option<(i64, i64)>,
    pub dropped: Option<u32>,
    pub segment: Option<usize>,
    /// The datagram's destination address (ours, as the sender dialled it).
    pub local: Option<IpAddr>,
}

/// Finds SCM_TIMESTAMPNS, SO_RXQ_OVFL, UDP_GRO and IP(V6)_PKTINFO among
/// the control messages of one header.
pub fn read(hdr: &libc::msghdr) -> Control {
    let mut out = Control::default();
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled,
    // bounded by msg_controllen; the payloads are read unaligned, each as
    // the type its level and type say the kernel wrote.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                    let ts = std::ptr::read_unaligned(data as *const libc::timespec);
                    out.time = Some((ts.tv_sec as i64, ts.tv_nsec as i64));
                }
                (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                    out.dropped = Some(std::ptr::read_unaligned(data as *const u32));
                }
                (libc::SOL_UDP, libc::UDP_GRO) => {
                    let size = std::ptr::read_unaligned(data as *const libc::c_int);
                    out.segment = usize::try_from(size).ok();
                }
                (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                    let info = std::ptr::read_unaligned(data as *const libc::in_pktinfo);
                    // ipi_addr: the header's destination (ipi_spec_dst is
                    // the address routing would pick, not what was dialled).
                    let ip = Ipv4Addr::from(info.ipi_addr.s_addr.to_ne_bytes());
                    out.local = unicast(IpAddr::V4(ip));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                    let info = std::ptr::read_unaligned(data as *const libc::in6_pktinfo);
                    let ip = Ipv6Addr::from(info.ipi6_addr.s6_addr);
                    out.local = unicast(IpAddr::V6(ip));
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    out
}

/// Only a unicast destination can be a reply's source: a datagram sent to
/// a broadcast or multicast address is answered from the socket's own.
fn unicast(ip: IpAddr) -> Option<IpAddr> {
    let v4_special = |v4: Ipv4Addr| v4.is_broadcast() || v4.is_multicast() || v4.is_unspecified();
    let special = match ip {
        IpAddr::V4(v4) => v4_special(v4),
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(v6.is_multicast() || v6.is_unspecified(), v4_special),
    };
    (!special).then_some(ip)
}

/// Writes the control messages of one sent message into `buf` (zeroed,
/// [`SEND_SPACE`] bytes, pointed at by `hdr.msg_control`): UDP_SEGMENT
/// with `segment` (a GSO run), and the source address `local` as
/// IP_PKTINFO on an IPv4 socket or IPV6_PKTINFO on an IPv6 one (where an
/// IPv4 peer's reply names its address IPv4-mapped, as the kernel gave
/// it). Sets `hdr.msg_controllen` (0 when there is nothing to say).
pub fn write_send(
    hdr: &mut libc::msghdr,
    buf: &mut [u8],
    segment: Option<u16>,
    local: Option<IpAddr>,
    v6_socket: bool,
) {
    assert!(buf.len() >= SEND_SPACE, "room for both messages");
    buf.fill(0);
    hdr.msg_control = buf.as_mut_ptr() as *mut libc::c_void;
    hdr.msg_controllen = SEND_SPACE as _;
    let mut used = 0usize;
    // SAFETY: the buffer holds SEND_SPACE bytes, enough for CMSG_SPACE(2)
    // plus CMSG_SPACE(sizeof in6_pktinfo); CMSG_FIRSTHDR/NXTHDR stay
    // within msg_controllen, which covers the whole buffer while writing.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        let mut next = |c: *mut libc::cmsghdr, len: usize| {
            used += libc::CMSG_SPACE(len as u32) as usize;
            (*c).cmsg_len = libc::CMSG_LEN(len as u32) as _;
            libc::CMSG_NXTHDR(hdr, c)
        };
        if let Some(size) = segment {
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = libc::UDP_SEGMENT;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, size);
            c = next(c, 2);
        }
        match (local, v6_socket) {
            (Some(IpAddr::V4(ip)), false) => {
                (*c).cmsg_level = libc::IPPROTO_IP;
                (*c).cmsg_type = libc::IP_PKTINFO;
                let info = libc::in_pktinfo {
                    ipi_ifindex: 0,
                    ipi_spec_dst: libc::in_addr {
                        s_addr: u32::from_ne_bytes(ip.octets()),
                    },
                    ipi_addr: libc::in_addr { s_addr: 0 },
                };
                std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut libc::in_pktinfo, info);
                next(c, std::mem::size_of::<libc::in_pktinfo>());
            }
            (Some(ip), true) => {
                let v6 = match ip {
                    IpAddr::V6(v6) => v6,
                    IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                };
                (*c).cmsg_level = libc::IPPROTO_IPV6;
                (*c).cmsg_type = libc::IPV6_PKTINFO;
                let info = libc::in6_pktinfo {
                    ipi6_addr: libc::in6_addr {
                        s6_addr: v6.octets(),
                    },
                    ipi6_ifindex: 0,
                };
                std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut libc::in6_pktinfo, info);
                next(c, std::mem::size_of::<libc::in6_pktinfo>());
            }
            // An IPv6 source on an IPv4 socket cannot be: the socket's own.
            (Some(IpAddr::V6(_)), false) | (None, _) => {}
        }
    }
    hdr.msg_controllen = used as _;
    if used == 0 {
        hdr.msg_control = std::ptr::null_mut();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `write_send` wrote reads back as the kernel would see it.
    fn written(segment: Option<u16>, local: Option<IpAddr>, v6: bool) -> Vec<(i32, i32, Vec<u8>)> {
        // SAFETY: all-zero is a valid msghdr.
        let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
        let mut buf = vec![0u8; SEND_SPACE];
        write_send(&mut hdr, &mut buf, segment, local, v6);
        let mut out = Vec::new();
        if hdr.msg_controllen == 0 {
            return out;
        }
        // SAFETY: walks the control buffer just written, within its length.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&hdr);
            while !c.is_null() {
                let len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = std::slice::from_raw_parts(libc::CMSG_DATA(c), len).to_vec();
                out.push(((*c).cmsg_level, (*c).cmsg_type, data));
                c = libc::CMSG_NXTHDR(&hdr, c);
            }
        }
        out
    }

    #[test]
    fn send_control_carries_segment_and_source() {
        assert!(written(None, None, false).is_empty());
        let seg = written(Some(1200), None, false);
        assert_eq!(
            seg,
            vec![(
                libc::SOL_UDP,
                libc::UDP_SEGMENT,
                1200u16.to_ne_bytes().to_vec()
            )]
        );
        let both = written(Some(1200), Some("10.9.0.3".parse().unwrap()), false);
        assert_eq!(both.len(), 2);
        assert_eq!((both[1].0, both[1].1), (libc::IPPROTO_IP, libc::IP_PKTINFO));
        // ipi_ifindex (4 bytes), then ipi_spec_dst: the source.
        assert_eq!(&both[1].2[4..8], &[10, 9, 0, 3]);
        let v6 = written(None, Some("10.9.0.3".parse().unwrap()), true);
        assert_eq!((v6[0].0, v6[0].1), (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO));
        assert_eq!(
            &v6[0].2[..16],
            &"::ffff:10.9.0.3".parse::<Ipv6Addr>().unwrap().octets()
        );
        // An IPv6 source cannot be named on an IPv4 socket.
        assert!(written(None, Some("::1".parse().unwrap()), false).is_empty());
    }

    #[test]
    fn only_unicast_destinations_become_sources() {
        assert_eq!(
            unicast("10.0.0.1".parse().unwrap()),
            Some("10.0.0.1".parse().unwrap())
        );
        assert_eq!(unicast("255.255.255.255".parse().unwrap()), None);
        assert_eq!(unicast("224.0.0.1".parse().unwrap()), None);
        assert_eq!(unicast("::ffff:224.0.0.1".parse().unwrap()), None);
        assert_eq!(unicast("ff02::1".parse().unwrap()), None);
        assert_eq!(
            unicast("::1".parse().unwrap()),
            Some("::1".parse().unwrap())
        );
    }
}

//! Conversions between `SocketAddr` and the C socket address the batched
//! syscalls fill in and read.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Writes `addr` into `storage`; returns the length to pass to the kernel.
pub fn to_storage(addr: &SocketAddr, storage: &mut libc::sockaddr_storage) -> libc::socklen_t {
    // SAFETY: sockaddr_storage is large and aligned enough for both
    // sockaddr_in and sockaddr_in6, and all-zero is a valid value for each.
    unsafe {
        std::ptr::write_bytes(storage as *mut libc::sockaddr_storage, 0, 1);
        match addr {
            SocketAddr::V4(a) => {
                let sin = &mut *(storage as *mut _ as *mut libc::sockaddr_in);
                sin.sin_family = libc::AF_INET as libc::sa_family_t;
                sin.sin_port = a.port().to_be();
                sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
            }
            SocketAddr::V6(a) => {
                let sin6 = &mut *(storage as *mut _ as *mut libc::sockaddr_in6);
                sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                sin6.sin6_port = a.port().to_be();
                sin6.sin6_addr.s6_addr = a.ip().octets();
                sin6.sin6_flowinfo = a.flowinfo();
                sin6.sin6_scope_id = a.scope_id();
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
            }
        }
    }
}

/// The address the kernel wrote, if it is IPv4 or IPv6.
pub fn from_storage(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    // SAFETY: the family field says which of the two layouts the kernel wrote.
    unsafe {
        match i32::from(storage.ss_family) {
            libc::AF_INET => {
                let sin = &*(storage as *const _ as *const libc::sockaddr_in);
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                let sin6 = &*(storage as *const _ as *const libc::sockaddr_in6);
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_v4_and_v6() {
        for a in ["127.0.0.1:4433", "[::1]:9", "10.7.0.2:65535"] {
            let addr: SocketAddr = a.parse().unwrap();
            // SAFETY: all-zero is a valid sockaddr_storage.
            let mut s: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            to_storage(&addr, &mut s);
            assert_eq!(from_storage(&s), Some(addr));
        }
    }
}

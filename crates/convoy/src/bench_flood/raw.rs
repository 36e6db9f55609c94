//! Raw IPv4 sockets for the flood benchmark: sending UDP datagrams with
//! forged source addresses (only ever to a loopback destination), and
//! seeing copies of the UDP datagrams that cross loopback (to record a
//! live connection's packets for replay and to count what the server
//! sends back to the forged sources). Both need root (CAP_NET_RAW).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::{bail, Result};

fn raw_socket(protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket() takes no pointers; a non-negative result is ours.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, protocol) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One datagram to forge: from `src`, to `dst`, carrying `payload`.
pub struct Forged<'a> {
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub payload: &'a [u8],
}

/// Sends IPv4/UDP packets whose headers we write (IPPROTO_RAW implies
/// IP_HDRINCL). The kernel fills in the IP checksum and total length; the
/// UDP checksum is left 0 (optional over IPv4).
pub struct RawSender {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl RawSender {
    pub fn new() -> Result<RawSender> {
        match raw_socket(libc::IPPROTO_RAW) {
            Ok(fd) => Ok(RawSender {
                fd,
                buf: vec![0; 2048],
            }),
            Err(e) => bail!("a raw socket (for forged source addresses) needs root: {e}"),
        }
    }

    /// Sends one forged datagram; the destination must be on loopback.
    pub fn send(&mut self, p: &Forged<'_>) -> io::Result<()> {
        assert!(p.dst.ip().is_loopback(), "floods go to loopback only");
        if p.payload.len() > self.buf.len() - 28 {
            return Err(io::Error::other("datagram too long"));
        }
        let len = 28 + p.payload.len();
        let b = &mut self.buf[..len];
        b[0] = 0x45; // IPv4, 20-byte header
        b[1] = 0;
        b[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        b[4..8].fill(0); // id (kernel fills), no fragmentation
        b[8] = 64; // TTL
        b[9] = libc::IPPROTO_UDP as u8;
        b[10..12].fill(0);
        b[12..16].copy_from_slice(&p.src.ip().octets());
        b[16..20].copy_from_slice(&p.dst.ip().octets());
        b[20..22].copy_from_slice(&p.src.port().to_be_bytes());
        b[22..24].copy_from_slice(&p.dst.port().to_be_bytes());
        b[24..26].copy_from_slice(&((8 + p.payload.len()) as u16).to_be_bytes());
        b[26..28].fill(0);
        b[28..].copy_from_slice(p.payload);
        let to = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from(*p.dst.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: sends `len` bytes of our buffer to a live sockaddr_in.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                b.as_ptr() as *const libc::c_void,
                len,
                0,
                &to as *const libc::sockaddr_in as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// A copy of one UDP datagram seen on this host.
pub struct Seen<'a> {
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub payload: &'a [u8],
}

/// Receives a copy of every UDP datagram this host receives (loopback
/// included), as tcpdump would.
pub struct Sniffer {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl Sniffer {
    pub fn new() -> Result<Sniffer> {
        let fd = match raw_socket(libc::IPPROTO_UDP) {
            Ok(fd) => fd,
            Err(e) => bail!("a raw socket (to watch loopback) needs root: {e}"),
        };
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        // SAFETY: a live timeval and its size.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            );
            let big: libc::c_int = 32 << 20;
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &big as *const libc::c_int as *const libc::c_void,
                4,
            );
        }
        Ok(Sniffer {
            fd,
            buf: vec![0; 70_000],
        })
    }

    /// The next datagram, or `None` after 100 ms without one.
    pub fn next(&mut self) -> Option<Seen<'_>> {
        // SAFETY: reads into our buffer, bounded by its length.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                self.buf.as_mut_ptr() as *mut libc::c_void,
                self.buf.len(),
                0,
            )
        };
        if n < 28 {
            return None;
        }
        let b = &self.buf[..n as usize];
        let ihl = usize::from(b[0] & 0x0f) * 4;
        if b.len() < ihl + 8 {
            return None;
        }
        let ip = |o: usize| Ipv4Addr::new(b[o], b[o + 1], b[o + 2], b[o + 3]);
        let port = |o: usize| u16::from_be_bytes([b[o], b[o + 1]]);
        Some(Seen {
            src: SocketAddrV4::new(ip(12), port(ihl)),
            dst: SocketAddrV4::new(ip(16), port(ihl + 2)),
            payload: &b[ihl + 8..],
        })
    }
}

//! NETLINK_ROUTE sockets: one that listens for link and IPv4 address
//! changes (its descriptor sits in the driver's ppoll set), and blocking
//! requests for the current state (dumps) and for route look-ups.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::parse::{parse, Message};

const RTMGRP_LINK: u32 = 0x1;
const RTMGRP_IPV4_IFADDR: u32 = 0x10;
const RTMGRP_IPV4_ROUTE: u32 = 0x40;
const RTM_GETLINK: u16 = 18;
const RTM_GETADDR: u16 = 22;
const RTM_GETROUTE: u16 = 26;
const RTA_DST: u16 = 1;
const RTA_SRC: u16 = 2;
/// A request's answer must come within this (the kernel answers at once;
/// this only bounds a bug).
const ANSWER_WAIT: Duration = Duration::from_millis(500);
/// Room for one read: a dump comes in datagrams of up to a page or so.
const READ_BUFFER: usize = 64 * 1024;

/// A NETLINK_ROUTE socket.
pub struct RouteSocket {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl RouteSocket {
    fn open(groups: u32, nonblocking: bool) -> io::Result<RouteSocket> {
        let flags =
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
        // SAFETY: socket() takes no pointers; a non-negative result is a
        // descriptor we own from here on.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, flags, libc::NETLINK_ROUTE) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is valid and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: all-zero is a valid sockaddr_nl; we set family and groups.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        sa.nl_groups = groups;
        // SAFETY: sa is a live sockaddr_nl of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RouteSocket {
            fd,
            seq: 1,
            buf: vec![0; READ_BUFFER],
        })
    }

    /// Subscribed to link, IPv4 address and IPv4 route changes;
    /// non-blocking. Routes too, because an interface's address often
    /// comes before the route that makes the server reachable through it
    /// (DHCP), and the route is what makes it usable.
    pub fn listen() -> io::Result<RouteSocket> {
        RouteSocket::open(RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE, true)
    }

    /// For requests; receives nothing but their answers.
    pub fn requests() -> io::Result<RouteSocket> {
        let s = RouteSocket::open(0, false)?;
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: ANSWER_WAIT.as_micros() as libc::suseconds_t,
        };
        // SAFETY: passes a live timeval and its size.
        unsafe {
            libc::setsockopt(
                s.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        Ok(s)
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads what is waiting (without blocking on a listening socket):
    /// `None` when nothing is.
    pub fn read(&mut self) -> io::Result<Option<Vec<(u32, Message)>>> {
        // SAFETY: reads at most buf.len() bytes into our buffer.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                self.buf.as_mut_ptr() as *mut libc::c_void,
                self.buf.len(),
                0,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                // ENOBUFS: events were lost; the caller re-reads the state.
                _ => Err(e),
            };
        }
        Ok(Some(parse(&self.buf[..n as usize])))
    }

    fn send(&mut self, kind: u16, flags: u16, body: &[u8]) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        let mut m = Vec::with_capacity(16 + body.len());
        m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&(flags | libc::NLM_F_REQUEST as u16).to_ne_bytes());
        m.extend_from_slice(&self.seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(body);
        // SAFETY: sends our buffer (to the kernel: the socket is unconnected
        // and a zero destination port means the kernel).
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                m.as_ptr() as *const libc::c_void,
                m.len(),
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(self.seq)
    }

    /// Answers to request `seq` until the end of a dump or an error.
    fn answers(&mut self, seq: u32, dump: bool) -> io::Result<Vec<Message>> {
        let mut out = Vec::new();
        loop {
            let Some(batch) = self.read()? else {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "netlink: no answer",
                ));
            };
            for (s, m) in batch {
                if s != seq {
                    continue;
                }
                match m {
                    Message::Done => return Ok(out),
                    Message::Error { code } if code != 0 => {
                        return Err(io::Error::from_raw_os_error(-code))
                    }
                    Message::Error { .. } => return Ok(out),
                    m => {
                        out.push(m);
                        if !dump {
                            return Ok(out);
                        }
                    }
                }
            }
        }
    }

    /// Every interface and every IPv4 address, as Link and Addr messages.
    pub fn dump(&mut self) -> io::Result<Vec<Message>> {
        let dump = libc::NLM_F_DUMP as u16;
        let seq = self.send(RTM_GETLINK, dump, &[0u8; 16])?;
        let mut all = self.answers(seq, true)?;
        let mut ifaddr = [0u8; 8];
        ifaddr[0] = libc::AF_INET as u8;
        let seq = self.send(RTM_GETADDR, dump, &ifaddr)?;
        all.extend(self.answers(seq, true)?);
        Ok(all)
    }

    /// The kernel's route to `dst`, from `src` when given (as `ip route
    /// get DST from SRC`): the interface index it leaves by and the source
    /// address it would use. An error means no route.
    pub fn route_to(
        &mut self,
        dst: Ipv4Addr,
        src: Option<Ipv4Addr>,
    ) -> io::Result<(Option<u32>, Option<Ipv4Addr>)> {
        let mut body = vec![libc::AF_INET as u8, 32, if src.is_some() { 32 } else { 0 }];
        body.extend_from_slice(&[0; 9]);
        let attr = |kind: u16, a: Ipv4Addr| {
            let mut v = 8u16.to_ne_bytes().to_vec();
            v.extend_from_slice(&kind.to_ne_bytes());
            v.extend_from_slice(&a.octets());
            v
        };
        body.extend(attr(RTA_DST, dst));
        if let Some(s) = src {
            body.extend(attr(RTA_SRC, s));
        }
        let seq = self.send(RTM_GETROUTE, 0, &body)?;
        for m in self.answers(seq, false)? {
            if let Message::Route { oif, prefsrc } = m {
                return Ok((oif, prefsrc));
            }
        }
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            "netlink: no route in the answer",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::Interfaces;

    /// The real kernel: the dump has the loopback interface and its
    /// address, and the route to 127.0.0.1 leaves by it.
    #[test]
    fn dump_and_route_on_this_host() {
        let mut r = RouteSocket::requests().unwrap();
        let mut ifs = Interfaces::default();
        for m in r.dump().unwrap() {
            ifs.apply(&m);
        }
        let lo = ifs
            .locals()
            .into_iter()
            .find(|l| l.addr == Ipv4Addr::LOCALHOST)
            .expect("127.0.0.1 on an interface that is up");
        assert!(lo.loopback);
        let (oif, _) = r.route_to(Ipv4Addr::LOCALHOST, None).unwrap();
        assert_eq!(oif, Some(lo.index));
        let (oif, _) = r
            .route_to(Ipv4Addr::LOCALHOST, Some(Ipv4Addr::LOCALHOST))
            .unwrap();
        assert_eq!(oif, Some(lo.index));
        // A listening socket has nothing to say until something changes.
        let mut l = RouteSocket::listen().unwrap();
        assert!(l.read().unwrap().is_none());
    }
}

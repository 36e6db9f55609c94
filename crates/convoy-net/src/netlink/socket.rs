//! NETLINK_ROUTE sockets (netlink-sys): one that listens for link
//! changes and one family's address and route changes (its descriptor
//! sits in the driver's ppoll set), and blocking requests for the
//! current state (dumps) and for route look-ups. The messages are built
//! in [`super::request`] and read in [`super::parse`]; this is only the
//! sending, receiving and waiting.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use super::parse::{parse, Message};
use super::request;

/// The multicast groups for links and `like`'s family's addresses and
/// routes.
fn groups(like: IpAddr) -> u32 {
    let family = match like {
        IpAddr::V4(_) => libc::RTMGRP_IPV4_IFADDR | libc::RTMGRP_IPV4_ROUTE,
        IpAddr::V6(_) => libc::RTMGRP_IPV6_IFADDR | libc::RTMGRP_IPV6_ROUTE,
    };
    (libc::RTMGRP_LINK | family) as u32
}

/// A request's answer must come within this (the kernel answers at once;
/// this only bounds a bug).
const ANSWER_WAIT: Duration = Duration::from_millis(500);
/// Room for one read: a dump comes in datagrams of up to a page or so.
const READ_BUFFER: usize = 64 * 1024;

/// A NETLINK_ROUTE socket.
pub struct RouteSocket {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl RouteSocket {
    fn open(groups: u32) -> io::Result<RouteSocket> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        // Port 0: the kernel picks one.
        socket.bind(&SocketAddr::new(0, groups))?;
        Ok(RouteSocket {
            socket,
            seq: 1,
            buf: vec![0; READ_BUFFER],
        })
    }

    /// Subscribed to link changes and to address and route changes of
    /// `like`'s family (the server's); non-blocking. Routes too, because
    /// an interface's address often comes before the route that makes
    /// the server reachable through it (DHCP, a router advertisement),
    /// and the route is what makes it usable.
    pub fn listen(like: IpAddr) -> io::Result<RouteSocket> {
        let s = RouteSocket::open(groups(like))?;
        s.socket.set_non_blocking(true)?;
        Ok(s)
    }

    /// For requests; receives nothing but their answers.
    pub fn requests() -> io::Result<RouteSocket> {
        let s = RouteSocket::open(0)?;
        socket2::SockRef::from(&s.socket).set_read_timeout(Some(ANSWER_WAIT))?;
        Ok(s)
    }

    pub fn raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// Reads what is waiting (without blocking on a listening socket):
    /// `None` when nothing is.
    pub fn read(&mut self) -> io::Result<Option<Vec<(u32, Message)>>> {
        let n = match self.socket.recv(&mut &mut self.buf[..], 0) {
            Ok(n) => n,
            Err(e) => {
                return match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                    // ENOBUFS: events were lost; the caller re-reads the state.
                    _ => Err(e),
                };
            }
        };
        Ok(Some(parse(&self.buf[..n.min(self.buf.len())])))
    }

    /// Sends one request built by `build` with the next sequence number;
    /// returns that number.
    fn send(&mut self, build: impl FnOnce(u32) -> Vec<u8>) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        self.socket
            .send_to(&build(self.seq), &SocketAddr::new(0, 0), 0)?;
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

    /// Every interface and every address of `like`'s family, as Link and
    /// Addr (or AddrGone, for an IPv6 address not yet bindable) messages.
    pub fn dump(&mut self, like: IpAddr) -> io::Result<Vec<Message>> {
        let seq = self.send(request::dump_links)?;
        let mut all = self.answers(seq, true)?;
        let seq = self.send(|seq| request::dump_addresses(seq, like))?;
        all.extend(self.answers(seq, true)?);
        Ok(all)
    }

    /// The kernel's route to `dst`, from `src` when given (as `ip route
    /// get DST from SRC`): the interface index it leaves by and the source
    /// address it would use. An error means no route. `src` is of `dst`'s
    /// family.
    pub fn route_to(
        &mut self,
        dst: IpAddr,
        src: Option<IpAddr>,
    ) -> io::Result<(Option<u32>, Option<IpAddr>)> {
        let seq = self.send(|seq| request::route_to(seq, dst, src))?;
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
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// The real kernel: the dump has the loopback interface and its
    /// address, and the route to it leaves by it; for IPv6 too where the
    /// host has ::1.
    #[test]
    fn dump_and_route_on_this_host() {
        let mut r = RouteSocket::requests().unwrap();
        let v4 = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        for like in [v4, v6] {
            let mut ifs = Interfaces::default();
            for m in r.dump(like).unwrap() {
                ifs.apply(&m);
            }
            let Some(lo) = ifs.locals().into_iter().find(|l| l.addr == like) else {
                // IPv6 can be off (a container, ipv6.disable=1).
                assert!(like.is_ipv6(), "127.0.0.1 on an interface that is up");
                continue;
            };
            assert!(lo.loopback);
            // Only the family asked for.
            assert!(ifs
                .locals()
                .iter()
                .all(|l| l.addr.is_ipv6() == like.is_ipv6()));
            let (oif, _) = r.route_to(like, None).unwrap();
            assert_eq!(oif, Some(lo.index));
            let (oif, _) = r.route_to(like, Some(like)).unwrap();
            assert_eq!(oif, Some(lo.index));
        }
        // A listening socket has nothing to say until something changes.
        let mut l = RouteSocket::listen(v4).unwrap();
        assert!(l.read().unwrap().is_none());
    }
}

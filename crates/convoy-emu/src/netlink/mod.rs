//! Just enough rtnetlink to take an interface down and bring it back as it
//! was: link flags, an IPv4 address, a source rule and a default route.
//!
//! The emulator does this at outage edges that must be on time to the
//! millisecond, so it talks to the kernel itself instead of starting `ip`
//! (a fork and exec costs a few milliseconds on a busy machine). A socket
//! acts in the network namespace of the thread that opened it, whichever
//! thread uses it later. [`LinkMonitor`] is the other side: what a program
//! that watches its interfaces (a connection manager, the MPTCP path
//! manager, convoy) receives.
//!
//! The messages are netlink-packet-route's, built and read in [`message`];
//! the socket is netlink-sys's. This module only sends, receives and waits.

pub mod message;

use std::io;
use std::net::Ipv4Addr;
use std::time::Duration;

use netlink_packet_core::{NetlinkPayload, NLM_F_MULTIPART};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

pub use message::LinkNotice;

/// A route socket, bound to `groups` (0: requests only), in the calling
/// thread's network namespace.
fn open_socket(groups: u32) -> io::Result<Socket> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind(&SocketAddr::new(0, groups))?;
    Ok(socket)
}

fn set_receive_timeout(socket: &Socket, timeout: Duration) -> io::Result<()> {
    socket2::SockRef::from(socket).set_read_timeout(Some(timeout))
}

/// One datagram into `buf`; returns its length.
fn receive(socket: &Socket, buf: &mut [u8]) -> io::Result<usize> {
    let len = buf.len();
    socket.recv(&mut &mut buf[..], 0).map(|n| n.min(len))
}

/// A netlink route socket for requests, each acknowledged by the kernel.
#[derive(Debug)]
pub struct Rtnl {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Rtnl {
    /// A socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Rtnl> {
        let socket = open_socket(0)?;
        // A kernel that never answers must not hang the emulator.
        set_receive_timeout(&socket, Duration::from_secs(2))?;
        Ok(Rtnl {
            socket,
            seq: 0,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Sends the request `build` makes with the next sequence number;
    /// returns that number.
    fn send(&mut self, build: impl FnOnce(u32) -> Vec<u8>) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        self.socket
            .send_to(&build(self.seq), &SocketAddr::new(0, 0), 0)?;
        Ok(self.seq)
    }

    /// Sends a request and waits for its acknowledgment; `Ok(false)` when
    /// the kernel answers that the object exists already.
    fn request(&mut self, build: impl FnOnce(u32) -> Vec<u8>) -> io::Result<bool> {
        let seq = self.send(build)?;
        loop {
            let n = receive(&self.socket, &mut self.buf)?;
            for m in message::read(&self.buf[..n]) {
                let NetlinkPayload::Error(e) = m.payload else {
                    continue;
                };
                if m.header.sequence_number != seq {
                    continue;
                }
                return match -e.raw_code() {
                    0 => Ok(true),
                    libc::EEXIST => Ok(false),
                    errno => Err(io::Error::from_raw_os_error(errno)),
                };
            }
        }
    }

    /// Sets the interface administratively up or down (`ip link set dev X
    /// up|down`): programs get an RTM_NEWLINK with IFF_UP and IFF_RUNNING
    /// set or cleared, and the kernel flushes a down interface's routes.
    pub fn set_link_up(&mut self, ifindex: u32, up: bool) -> io::Result<()> {
        self.request(|seq| message::set_link_up(seq, ifindex, up))
            .map(|_| ())
    }

    /// `ip addr add ADDR/PREFIX dev X`; false if it was there already.
    pub fn add_address(&mut self, ifindex: u32, addr: Ipv4Addr, prefix: u8) -> io::Result<bool> {
        self.request(|seq| message::add_address(seq, ifindex, addr, prefix))
    }

    /// `ip route add default dev X table TABLE`; false if it was there.
    pub fn add_default_route(&mut self, ifindex: u32, table: u32) -> io::Result<bool> {
        self.request(|seq| message::add_default_route(seq, ifindex, table))
    }

    /// Whether an IPv4 rule `from ADDR lookup TABLE` exists.
    pub fn has_source_rule(&mut self, addr: Ipv4Addr, table: u32) -> io::Result<bool> {
        let seq = self.send(message::dump_rules)?;
        let mut found = false;
        loop {
            let n = receive(&self.socket, &mut self.buf)?;
            for m in message::read(&self.buf[..n]) {
                if m.header.sequence_number != seq {
                    continue;
                }
                match &m.payload {
                    NetlinkPayload::Done(_) => return Ok(found),
                    NetlinkPayload::Error(e) => {
                        return Err(io::Error::from_raw_os_error(-e.raw_code()));
                    }
                    NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRule(rule)) => {
                        found |= message::is_source_rule(rule, addr, table);
                    }
                    _ => {}
                }
                // A dump is multipart and ends with NLMSG_DONE; anything
                // else means the kernel sent a single answer.
                if m.header.flags & NLM_F_MULTIPART == 0 {
                    return Ok(found);
                }
            }
        }
    }

    /// `ip rule add from ADDR table TABLE` (the kernel picks the priority,
    /// as it does for `ip`).
    pub fn add_source_rule(&mut self, addr: Ipv4Addr, table: u32) -> io::Result<bool> {
        self.request(|seq| message::add_source_rule(seq, addr, table))
    }
}

/// Receives the link changes of the namespace it was opened in, as any
/// program subscribed to RTMGRP_LINK does.
#[derive(Debug)]
pub struct LinkMonitor {
    socket: Socket,
    buf: Vec<u8>,
}

impl LinkMonitor {
    /// Subscribes in the calling thread's network namespace.
    pub fn open() -> io::Result<LinkMonitor> {
        Ok(LinkMonitor {
            socket: open_socket(libc::RTMGRP_LINK as u32)?,
            buf: vec![0; 64 * 1024],
        })
    }

    /// The notifications that arrive within `timeout` of the call, those
    /// of one datagram at a time (empty when none came).
    pub fn next(&mut self, timeout: Duration) -> io::Result<Vec<LinkNotice>> {
        set_receive_timeout(&self.socket, timeout.max(Duration::from_micros(1)))?;
        let n = match receive(&self.socket, &mut self.buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(message::read(&self.buf[..n])
            .iter()
            .filter_map(|m| match &m.payload {
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(l)) => {
                    Some(LinkNotice::of(l))
                }
                _ => None,
            })
            .collect())
    }
}

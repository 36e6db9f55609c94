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

use std::io;
use std::mem::size_of;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

// Message types and attributes (linux/rtnetlink.h, linux/fib_rules.h).
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWLINK: u16 = 16;
const RTM_NEWADDR: u16 = 20;
const RTM_NEWROUTE: u16 = 24;
const RTM_NEWRULE: u16 = 32;
const RTM_GETRULE: u16 = 34;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFLA_IFNAME: u16 = 3;
const RTA_OIF: u16 = 4;
const RTA_TABLE: u16 = 15;
const FRA_SRC: u16 = 2;
const FRA_TABLE: u16 = 15;
const FR_ACT_TO_TBL: u8 = 1;
const RTPROT_BOOT: u8 = 3;
const RT_SCOPE_LINK: u8 = 253;
const RTN_UNICAST: u8 = 1;
const RTMGRP_LINK: u32 = 1;

const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_MULTI: u16 = 0x2;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;

const HEADER: usize = 16;
/// struct fib_rule_hdr.
const RULE_HEADER: usize = 12;

/// The table number as a header's byte holds it: RT_TABLE_UNSPEC above
/// 255, where the 32-bit attribute alone says it (as `ip` does).
fn header_table(table: u32) -> u8 {
    u8::try_from(table).unwrap_or(0)
}

/// A netlink route socket for requests, each acknowledged by the kernel.
#[derive(Debug)]
pub struct Rtnl {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

/// A route socket, bound to `groups` (0: requests only).
fn open_socket(groups: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just created and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_nl is plain old data; zero is a valid value.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = groups;
    // SAFETY: a valid sockaddr_nl of the size given.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

fn set_receive_timeout(fd: &OwnedFd, timeout: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: a valid timeval of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn receive(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// A message under construction: header, fixed part, attributes.
struct Message(Vec<u8>);

impl Message {
    fn new(kind: u16, flags: u16, fixed: &[u8]) -> Message {
        let mut m = Message(vec![0; HEADER]);
        m.0[4..6].copy_from_slice(&kind.to_ne_bytes());
        m.0[6..8].copy_from_slice(&flags.to_ne_bytes());
        m.0.extend_from_slice(fixed);
        m.pad();
        m
    }

    fn pad(&mut self) {
        while !self.0.len().is_multiple_of(4) {
            self.0.push(0);
        }
    }

    fn attr(mut self, kind: u16, payload: &[u8]) -> Message {
        let len = (4 + payload.len()) as u16;
        self.0.extend_from_slice(&len.to_ne_bytes());
        self.0.extend_from_slice(&kind.to_ne_bytes());
        self.0.extend_from_slice(payload);
        self.pad();
        self
    }

    fn finish(mut self, seq: u32) -> Vec<u8> {
        let len = self.0.len() as u32;
        self.0[0..4].copy_from_slice(&len.to_ne_bytes());
        self.0[8..12].copy_from_slice(&seq.to_ne_bytes());
        self.0
    }
}

/// The messages in one datagram: (type, flags, seq, body after the header).
fn messages(data: &[u8]) -> impl Iterator<Item = (u16, u16, u32, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let h = data.get(at..at + HEADER)?;
        let len = u32::from_ne_bytes(h[0..4].try_into().ok()?) as usize;
        if len < HEADER || at + len > data.len() {
            return None;
        }
        let kind = u16::from_ne_bytes([h[4], h[5]]);
        let flags = u16::from_ne_bytes([h[6], h[7]]);
        let seq = u32::from_ne_bytes(h[8..12].try_into().ok()?);
        let body = &data[at + HEADER..at + len];
        at += (len + 3) & !3;
        Some((kind, flags, seq, body))
    })
}

/// The attributes after a message's fixed part: (type, payload).
fn attributes(data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let h = data.get(at..at + 4)?;
        let len = u16::from_ne_bytes([h[0], h[1]]) as usize;
        if len < 4 || at + len > data.len() {
            return None;
        }
        let kind = u16::from_ne_bytes([h[2], h[3]]) & 0x3fff;
        let payload = &data[at + 4..at + len];
        at += (len + 3) & !3;
        Some((kind, payload))
    })
}

/// The errno an NLMSG_ERROR body carries (0: an acknowledgment).
fn error_code(body: &[u8]) -> i32 {
    body.get(0..4)
        .map_or(0, |b| i32::from_ne_bytes(b.try_into().expect("4 bytes")))
}

impl Rtnl {
    /// A socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Rtnl> {
        let fd = open_socket(0)?;
        // A kernel that never answers must not hang the emulator.
        set_receive_timeout(&fd, Duration::from_secs(2))?;
        Ok(Rtnl {
            fd,
            seq: 0,
            buf: vec![0; 64 * 1024],
        })
    }

    fn send(&mut self, message: Message) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        let data = message.finish(self.seq);
        // SAFETY: data is valid for data.len() bytes.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), data.as_ptr().cast(), data.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(self.seq)
    }

    /// Sends a request and waits for its acknowledgment; `Ok(false)` when
    /// the kernel answers that the object exists already.
    fn request(&mut self, message: Message) -> io::Result<bool> {
        let seq = self.send(message)?;
        loop {
            let n = receive(&self.fd, &mut self.buf)?;
            for (kind, _, s, body) in messages(&self.buf[..n]) {
                if kind != NLMSG_ERROR || s != seq {
                    continue;
                }
                return match -error_code(body) {
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
        let flags = if up { libc::IFF_UP as u32 } else { 0 };
        let mut fixed = [0u8; 16]; // ifinfomsg: family, pad, type, index, flags, change
        fixed[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        fixed[8..12].copy_from_slice(&flags.to_ne_bytes());
        fixed[12..16].copy_from_slice(&(libc::IFF_UP as u32).to_ne_bytes());
        self.request(Message::new(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, &fixed))
            .map(|_| ())
    }

    /// `ip addr add ADDR/PREFIX dev X`; false if it was there already.
    pub fn add_address(&mut self, ifindex: u32, addr: Ipv4Addr, prefix: u8) -> io::Result<bool> {
        let mut fixed = [0u8; 8]; // ifaddrmsg: family, prefixlen, flags, scope, index
        fixed[0] = libc::AF_INET as u8;
        fixed[1] = prefix;
        fixed[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        let flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
        self.request(
            Message::new(RTM_NEWADDR, flags, &fixed)
                .attr(IFA_LOCAL, &addr.octets())
                .attr(IFA_ADDRESS, &addr.octets()),
        )
    }

    /// `ip route add default dev X table TABLE`; false if it was there.
    pub fn add_default_route(&mut self, ifindex: u32, table: u32) -> io::Result<bool> {
        // rtmsg: family, dst_len, src_len, tos, table, protocol, scope,
        // type, then u32 flags.
        let fixed = [
            libc::AF_INET as u8,
            0,
            0,
            0,
            header_table(table),
            RTPROT_BOOT,
            RT_SCOPE_LINK,
            RTN_UNICAST,
            0,
            0,
            0,
            0,
        ];
        let flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
        self.request(
            Message::new(RTM_NEWROUTE, flags, &fixed)
                .attr(RTA_TABLE, &table.to_ne_bytes())
                .attr(RTA_OIF, &ifindex.to_ne_bytes()),
        )
    }

    /// Whether an IPv4 rule `from ADDR lookup TABLE` exists.
    pub fn has_source_rule(&mut self, addr: Ipv4Addr, table: u32) -> io::Result<bool> {
        let fixed = [libc::AF_INET as u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let seq = self.send(Message::new(
            RTM_GETRULE,
            NLM_F_REQUEST | NLM_F_DUMP,
            &fixed,
        ))?;
        let mut found = false;
        loop {
            let n = receive(&self.fd, &mut self.buf)?;
            for (kind, flags, s, body) in messages(&self.buf[..n]) {
                if s != seq {
                    continue;
                }
                match kind {
                    NLMSG_DONE => return Ok(found),
                    NLMSG_ERROR => {
                        return Err(io::Error::from_raw_os_error(-error_code(body)));
                    }
                    RTM_NEWRULE if body.len() >= RULE_HEADER => {
                        // fib_rule_hdr: family, dst_len, src_len, tos, table,
                        // two reserved, action, then u32 flags.
                        let mut rule_table = u32::from(body[4]);
                        let mut src = None;
                        for (a, payload) in attributes(&body[RULE_HEADER..]) {
                            match a {
                                FRA_TABLE if payload.len() == 4 => {
                                    rule_table = u32::from_ne_bytes(payload.try_into().unwrap())
                                }
                                FRA_SRC if payload.len() == 4 => {
                                    src = Some(Ipv4Addr::new(
                                        payload[0], payload[1], payload[2], payload[3],
                                    ))
                                }
                                _ => {}
                            }
                        }
                        found |= body[2] == 32 && src == Some(addr) && rule_table == table;
                    }
                    _ => {}
                }
                // A dump is multipart and ends with NLMSG_DONE; anything
                // else means the kernel sent a single answer.
                if flags & NLM_F_MULTI == 0 {
                    return Ok(found);
                }
            }
        }
    }

    /// `ip rule add from ADDR table TABLE` (the kernel picks the priority,
    /// as it does for `ip`).
    pub fn add_source_rule(&mut self, addr: Ipv4Addr, table: u32) -> io::Result<bool> {
        let mut fixed = [0u8; RULE_HEADER];
        fixed[0] = libc::AF_INET as u8;
        fixed[2] = 32;
        fixed[4] = header_table(table);
        fixed[7] = FR_ACT_TO_TBL;
        let flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
        self.request(
            Message::new(RTM_NEWRULE, flags, &fixed)
                .attr(FRA_SRC, &addr.octets())
                .attr(FRA_TABLE, &table.to_ne_bytes()),
        )
    }
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

/// Receives the link changes of the namespace it was opened in, as any
/// program subscribed to RTMGRP_LINK does.
#[derive(Debug)]
pub struct LinkMonitor {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl LinkMonitor {
    /// Subscribes in the calling thread's network namespace.
    pub fn open() -> io::Result<LinkMonitor> {
        Ok(LinkMonitor {
            fd: open_socket(RTMGRP_LINK)?,
            buf: vec![0; 64 * 1024],
        })
    }

    /// The notifications that arrive within `timeout` of the call, those
    /// of one datagram at a time (empty when none came).
    pub fn next(&mut self, timeout: Duration) -> io::Result<Vec<LinkNotice>> {
        set_receive_timeout(&self.fd, timeout.max(Duration::from_micros(1)))?;
        let n = match receive(&self.fd, &mut self.buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for (kind, _, _, body) in messages(&self.buf[..n]) {
            if kind != RTM_NEWLINK || body.len() < 16 {
                continue;
            }
            let ifindex = u32::from_ne_bytes(body[4..8].try_into().unwrap());
            let flags = u32::from_ne_bytes(body[8..12].try_into().unwrap());
            let name = attributes(&body[16..])
                .find(|(a, _)| *a == IFLA_IFNAME)
                .map(|(_, p)| String::from_utf8_lossy(p.split(|&b| b == 0).next().unwrap_or(p)))
                .unwrap_or_default()
                .into_owned();
            out.push(LinkNotice {
                ifindex,
                name,
                up: flags & libc::IFF_UP as u32 != 0,
                running: flags & libc::IFF_RUNNING as u32 != 0,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_attributes_round_trip() {
        let m = Message::new(RTM_NEWADDR, NLM_F_REQUEST, &[1, 2, 3, 4, 5])
            .attr(IFA_LOCAL, &[10, 7, 0, 1])
            .attr(IFLA_IFNAME, b"wifi\0")
            .finish(9);
        assert_eq!(m.len() % 4, 0);
        // Two messages back to back, as a dump sends them.
        let two = [m.clone(), m].concat();
        let parsed: Vec<_> = messages(&two).collect();
        assert_eq!(parsed.len(), 2);
        let (kind, flags, seq, body) = parsed[0];
        assert_eq!((kind, flags, seq), (RTM_NEWADDR, NLM_F_REQUEST, 9));
        let attrs: Vec<_> = attributes(&body[8..]).collect();
        assert_eq!(
            attrs,
            vec![
                (IFA_LOCAL, &[10u8, 7, 0, 1][..]),
                (IFLA_IFNAME, &b"wifi\0"[..])
            ]
        );
    }

    #[test]
    fn truncated_input_ends_the_walk_instead_of_panicking() {
        let m = Message::new(RTM_NEWLINK, 0, &[0; 16]).finish(1);
        for cut in 0..m.len() {
            assert_eq!(messages(&m[..cut]).count(), 0, "cut at {cut}");
        }
        assert_eq!(attributes(&[8, 0, 1, 0, 1]).count(), 0);
        assert_eq!(attributes(&[2, 0, 1, 0]).count(), 0);
        assert_eq!(error_code(&[]), 0);
    }
}

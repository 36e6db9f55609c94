//! A UDP socket with kernel receive timestamps and batched syscalls
//! (recvmmsg/sendmmsg). `batch = 1` makes one syscall per datagram, which
//! is what the batching measurement compares against (docs/NET.md).
//!
//! With `gso`, consecutive datagrams of one size to one address leave as a
//! single UDP GSO send (a UDP_SEGMENT control message; the kernel cuts the
//! segments, on loopback only at the receiving socket, if at all). With
//! `gro`, the socket asks for UDP_GRO: the kernel may hand us several
//! datagrams of one flow coalesced, with their segment size, and a GSO
//! send on loopback arrives that way in one piece.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

use crate::cmsg;
use crate::sockaddr::{from_storage, to_storage};

/// Largest datagram we accept; convoy sends at most `max_datagram` (1472).
pub const SLOT: usize = 2048;
/// A receive slot with GRO: one coalesced datagram of up to 64 KiB.
const GRO_SLOT: usize = 65_536;
/// Most segments in one GSO send (the kernel's UDP_MAX_SEGMENTS is 64 on
/// older kernels, 128 on newer), and most payload bytes (the UDP length
/// field's limit over IPv4).
const GSO_MAX_SEGMENTS: usize = 64;
const GSO_MAX_BYTES: usize = 65_507;
const SEND_CMSG_SPACE: usize = cmsg::SEND_SPACE;
const CMSG_SPACE: usize = cmsg::RECV_SPACE;
/// Socket buffers asked for, so a burst at 1 Gbit/s is not dropped on
/// loopback while the other side is busy.
const SOCKET_BUFFER: libc::c_int = 8 << 20;

/// One received datagram's metadata; its bytes are in the batch's slot.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub from: SocketAddr,
    pub len: usize,
    /// SO_TIMESTAMPNS: CLOCK_REALTIME (seconds, nanoseconds).
    pub kernel_time: Option<(i64, i64)>,
    /// SO_RXQ_OVFL: datagrams this socket dropped (full receive buffer)
    /// since it was opened.
    pub dropped: Option<u32>,
    /// With GRO, the size of each coalesced datagram (the last may be
    /// shorter); otherwise `len`.
    pub segment: usize,
    /// Our address it was sent to (IP_PKTINFO / IPV6_PKTINFO), on a
    /// socket bound to a wildcard address.
    pub local: Option<IpAddr>,
}

pub struct NetSocket {
    socket: UdpSocket,
    fd: RawFd,
    pub timestamps: bool,
    /// UDP GSO in use for sends (asked for, and the kernel takes it).
    gso: std::cell::Cell<bool>,
    /// UDP GRO enabled on the socket.
    pub gro: bool,
    /// An IPv6 socket (which also carries IPv4, mapped, unless bound to
    /// an IPv6 address).
    v6: bool,
    /// Datagrams arrive with their destination address (IP_PKTINFO /
    /// IPV6_RECVPKTINFO): bound to a wildcard address, unconnected.
    pub pktinfo: bool,
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, value: libc::c_int) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt_int(fd: RawFd, level: i32, name: i32) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: passes a pointer to a live c_int and its size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut value as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if r == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

impl NetSocket {
    /// Binds `local`; with `peer`, also connects to it, so ICMP "port
    /// unreachable" comes back as ECONNREFUSED (a client wants that).
    /// A client's socket: any local address of the server's family,
    /// connected to the server.
    pub fn connect_to(server: SocketAddr) -> Result<NetSocket, crate::error::NetError> {
        let local: SocketAddr = if server.is_ipv4() {
            "0.0.0.0:0".parse().expect("valid")
        } else {
            "[::]:0".parse().expect("valid")
        };
        NetSocket::bind(local, Some(server))
            .map_err(|err| crate::error::NetError::Unreachable { addr: server, err })
    }

    pub fn bind(local: SocketAddr, peer: Option<SocketAddr>) -> io::Result<NetSocket> {
        Self::configure(UdpSocket::bind(local)?, peer)
    }

    /// Binds `local` with SO_REUSEPORT, so several sockets (one per
    /// worker) share the port; see [`crate::steer`] for which gets what.
    pub fn bind_reuseport(local: SocketAddr) -> io::Result<NetSocket> {
        let socket = unbound_udp(&local)?;
        setsockopt_int(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
        bind_raw(&socket, &local)?;
        Self::configure(socket, None)
    }

    /// A client socket for one path: bound to `local` (port 0) and, when
    /// given, to its interface `device` (SO_BINDTODEVICE); with `server`,
    /// connected to it. The path manager leaves them unconnected: a
    /// multi-homed server answers a path from the address of the interface
    /// its answer leaves by, not necessarily the one the client sent to,
    /// and a connected socket would drop those answers. The device binding keeps datagrams on that interface
    /// whatever the routing tables say, and makes sends fail while it is
    /// down instead of leaving by another interface with this source
    /// address. It needs CAP_NET_RAW on kernels before 5.7; without it the
    /// source address alone decides (source routing, as `convoy emu` and
    /// most multi-homed hosts set up).
    pub fn bind_path(
        local: std::net::IpAddr,
        device: Option<&str>,
        server: Option<SocketAddr>,
    ) -> io::Result<NetSocket> {
        let local = SocketAddr::from((local, 0));
        let socket = unbound_udp(&local)?;
        if let Some(d) = device {
            // SAFETY: passes the name's bytes and their length.
            let _ = unsafe {
                libc::setsockopt(
                    socket.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_BINDTODEVICE,
                    d.as_ptr() as *const libc::c_void,
                    d.len() as libc::socklen_t,
                )
            };
        }
        bind_raw(&socket, &local)?;
        Self::configure(socket, server)
    }

    fn configure(socket: UdpSocket, peer: Option<SocketAddr>) -> io::Result<NetSocket> {
        if let Some(p) = peer {
            socket.connect(p)?;
        }
        socket.set_nonblocking(true)?;
        let fd = socket.as_raw_fd();
        // As root the *FORCE variants pass rmem_max/wmem_max; otherwise the
        // plain ones give what the system allows. Neither failing is fatal.
        for (force, plain) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            if setsockopt_int(fd, libc::SOL_SOCKET, force, SOCKET_BUFFER).is_err() {
                let _ = setsockopt_int(fd, libc::SOL_SOCKET, plain, SOCKET_BUFFER);
            }
        }
        let timestamps = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1).is_ok();
        let local = socket.local_addr()?;
        let v6 = local.is_ipv6();
        // A server on a wildcard address learns which of the host's
        // addresses each datagram was sent to, and answers from it
        // (crate::cmsg); a socket bound to one address needs no telling.
        let pktinfo = peer.is_none()
            && local.ip().is_unspecified()
            && if v6 {
                setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1).is_ok()
            } else {
                setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_PKTINFO, 1).is_ok()
            };
        // The socket's own drop count rides on each datagram: unlike
        // /proc/net/snmp's RcvbufErrors it is not mixed with other programs'.
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1);
        Ok(NetSocket {
            socket,
            fd,
            timestamps,
            gso: std::cell::Cell::new(false),
            gro: false,
            v6,
            pktinfo,
        })
    }

    /// Asks for `bytes` of receive buffer (as root past rmem_max). A
    /// server gets more than a client: it takes the sum of every
    /// connection's traffic and must ride out being descheduled.
    pub fn set_receive_buffer(&self, bytes: libc::c_int) {
        if setsockopt_int(self.fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes).is_err() {
            let _ = setsockopt_int(self.fd, libc::SOL_SOCKET, libc::SO_RCVBUF, bytes);
        }
    }

    /// Asks for UDP GSO on sends and GRO on receives; each is used only if
    /// the kernel accepts it (see [`NetSocket::gso`] and `gro`).
    pub fn set_offload(&mut self, gso: bool, gro: bool) {
        // A kernel that knows UDP_SEGMENT (4.18+) answers getsockopt; a
        // device that cannot take it fails the first send with EIO, and we
        // fall back then (send_batch).
        self.gso
            .set(gso && getsockopt_int(self.fd, libc::SOL_UDP, libc::UDP_SEGMENT).is_ok());
        self.gro =
            setsockopt_int(self.fd, libc::SOL_UDP, libc::UDP_GRO, i32::from(gro)).is_ok() && gro;
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd
    }

    pub fn gso(&self) -> bool {
        self.gso.get()
    }

    /// Receives up to `batch.capacity()` datagrams without blocking.
    /// Returns how many (0 when none are waiting).
    pub fn recv_batch(&self, batch: &mut RecvBatch, max: usize) -> io::Result<usize> {
        let n = max.clamp(1, batch.slots);
        batch.prepare(n);
        // SAFETY: `prepare` pointed every header at buffers owned by `batch`,
        // which outlives the call; n ≤ the number of headers.
        let r = unsafe {
            libc::recvmmsg(
                self.fd,
                batch.headers.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let r = r as usize;
        batch.collect(r);
        Ok(r)
    }

    /// Sends up to `max` of the batch's datagrams starting at `from`;
    /// returns how many the kernel took (0 if its buffer is full). With GSO,
    /// `max` counts sendmmsg messages, each a run of datagrams.
    pub fn send_batch(&self, batch: &mut SendBatch, from: usize, max: usize) -> io::Result<usize> {
        if from >= batch.len {
            return Ok(0);
        }
        loop {
            let gso = self.gso.get();
            let messages = batch.prepare(from, max.max(1), gso, self.v6);
            // SAFETY: `prepare` filled `messages` headers pointing at buffers
            // owned by `batch`, which outlives the call.
            let r = unsafe {
                libc::sendmmsg(
                    self.fd,
                    batch.headers.as_mut_ptr(),
                    messages as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                // EIO: the route's device cannot checksum GSO segments;
                // EINVAL: a kernel that rejects our segment count or size.
                // Either way, send them one by one from now on.
                if gso && matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL)) {
                    self.gso.set(false);
                    continue;
                }
                return match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                    _ => Err(e),
                };
            }
            return Ok(batch.groups[..r as usize].iter().sum());
        }
    }

    /// Waits until the socket is readable (or writable, with `writable`)
    /// or `timeout` passes (`None`: forever). Nanosecond resolution (ppoll),
    /// unlike poll's milliseconds.
    pub fn wait(&self, timeout: Option<std::time::Duration>, writable: bool) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: if writable {
                libc::POLLOUT
            } else {
                libc::POLLIN
            },
            revents: 0,
        };
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs() as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: one valid pollfd; tsp is null or points at a live timespec.
        let r = unsafe { libc::ppoll(&mut pfd, 1, tsp, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(e);
        }
        Ok(r > 0)
    }
}

/// Waits until one of `fds` is readable or `timeout` passes (ppoll, with
/// nanosecond resolution); the caller reads each `revents`. Returns
/// whether any is ready (an interrupted wait counts as none).
pub fn wait_readable(fds: &mut [libc::pollfd], timeout: std::time::Duration) -> io::Result<bool> {
    for p in fds.iter_mut() {
        p.events = libc::POLLIN;
        p.revents = 0;
    }
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` is a live slice of pollfds of the length passed; ts is
    // a live timespec.
    let r = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(r > 0)
}

/// A UDP socket of `local`'s family, not yet bound.
fn unbound_udp(local: &SocketAddr) -> io::Result<UdpSocket> {
    let family = if local.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: socket() takes no pointers; a non-negative result is a
    // descriptor we own, handed to UdpSocket at once.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::IPPROTO_UDP,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is ours; from here the UdpSocket closes it.
    Ok(unsafe { <UdpSocket as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

fn bind_raw(socket: &UdpSocket, local: &SocketAddr) -> io::Result<()> {
    // SAFETY: zeroed sockaddr_storage is valid; to_storage fills it.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = to_storage(local, &mut storage);
    // SAFETY: storage holds a sockaddr of `len` bytes.
    let r = unsafe {
        libc::bind(
            socket.as_raw_fd(),
            &storage as *const libc::sockaddr_storage as *const libc::sockaddr,
            len,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Buffers for one recvmmsg call. The headers point into the other
/// vectors, which are allocated once and never resized, so the pointers
/// stay valid; they are refreshed before every call anyway.
pub struct RecvBatch {
    slots: usize,
    /// Bytes per slot: one datagram, or one GRO-coalesced run of them.
    slot: usize,
    data: Vec<u8>,
    addrs: Vec<libc::sockaddr_storage>,
    control: Vec<u8>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    pub received: Vec<Received>,
}

impl RecvBatch {
    /// `gro`: slots big enough for coalesced datagrams (64 KiB each).
    pub fn new(slots: usize, gro: bool) -> RecvBatch {
        let slots = slots.max(1);
        let slot = if gro { GRO_SLOT } else { SLOT };
        // SAFETY: all-zero is valid for these plain C structs.
        let zero_addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let zero_hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        RecvBatch {
            slots,
            slot,
            data: vec![0; slots * slot],
            addrs: vec![zero_addr; slots],
            control: vec![0; slots * CMSG_SPACE],
            iovecs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                slots
            ],
            headers: vec![zero_hdr; slots],
            received: Vec::with_capacity(slots),
        }
    }

    /// The bytes of received slot `i` (with GRO, several datagrams of
    /// `received[i].segment` bytes each).
    pub fn datagram(&self, i: usize) -> &[u8] {
        &self.data[i * self.slot..i * self.slot + self.received[i].len]
    }

    fn prepare(&mut self, n: usize) {
        for i in 0..n {
            self.iovecs[i] = libc::iovec {
                iov_base: self.data[i * self.slot..].as_mut_ptr() as *mut libc::c_void,
                iov_len: self.slot,
            };
            let h = &mut self.headers[i];
            h.msg_len = 0;
            h.msg_hdr.msg_name = &mut self.addrs[i] as *mut _ as *mut libc::c_void;
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            h.msg_hdr.msg_iov = &mut self.iovecs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control =
                self.control[i * CMSG_SPACE..].as_mut_ptr() as *mut libc::c_void;
            h.msg_hdr.msg_controllen = CMSG_SPACE as _;
            h.msg_hdr.msg_flags = 0;
        }
    }

    fn collect(&mut self, n: usize) {
        self.received.clear();
        for i in 0..n {
            let h = &self.headers[i];
            let from =
                from_storage(&self.addrs[i]).unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
            let c = cmsg::read(&h.msg_hdr);
            let len = (h.msg_len as usize).min(self.slot);
            self.received.push(Received {
                from,
                len,
                kernel_time: c.time,
                dropped: c.dropped,
                segment: c.segment.filter(|&s| s > 0).unwrap_or(len).max(1),
                local: c.local,
            });
        }
    }
}

/// Datagrams waiting for one sendmmsg call.
pub struct SendBatch {
    slots: usize,
    data: Vec<u8>,
    lens: Vec<usize>,
    dests: Vec<SocketAddr>,
    /// The source address each datagram names, if any (crate::cmsg).
    locals: Vec<Option<IpAddr>>,
    /// Which connection each datagram belongs to: a GSO send carries one
    /// connection's datagrams only, because the receiving kernel steers a
    /// GSO packet to one socket by its first datagram (crate::steer).
    flows: Vec<u64>,
    /// Which of the driver's sockets each datagram leaves by (its path's).
    socks: Vec<usize>,
    addrs: Vec<libc::sockaddr_storage>,
    addr_lens: Vec<libc::socklen_t>,
    iovecs: Vec<libc::iovec>,
    /// One header per message of the next call (a datagram, or with GSO a
    /// run of them).
    headers: Vec<libc::mmsghdr>,
    control: Vec<u8>,
    /// Datagrams in each message of the next call.
    groups: Vec<usize>,
    pub len: usize,
}

impl SendBatch {
    pub fn new(slots: usize) -> SendBatch {
        let slots = slots.max(1);
        // SAFETY: all-zero is valid for these plain C structs.
        let zero_addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let zero_hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        SendBatch {
            slots,
            data: vec![0; slots * SLOT],
            lens: vec![0; slots],
            dests: vec![SocketAddr::from(([0, 0, 0, 0], 0)); slots],
            locals: vec![None; slots],
            flows: vec![0; slots],
            socks: vec![0; slots],
            addrs: vec![zero_addr; slots],
            addr_lens: vec![0; slots],
            iovecs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                slots
            ],
            headers: vec![zero_hdr; slots],
            control: vec![0; slots * SEND_CMSG_SPACE],
            groups: Vec::with_capacity(slots),
            len: 0,
        }
    }

    pub fn is_full(&self) -> bool {
        self.len == self.slots
    }

    /// The next free slot's buffer, to write a datagram into.
    pub fn next_buffer(&mut self) -> &mut [u8] {
        let i = self.len;
        &mut self.data[i * SLOT..(i + 1) * SLOT]
    }

    /// Commits the datagram written into `next_buffer`; `flow` names its
    /// connection (datagrams of different flows never share a GSO send),
    /// `socket` the driver's socket it leaves by, `local` the source
    /// address it names (`None`: the socket's).
    pub fn push(
        &mut self,
        len: usize,
        to: SocketAddr,
        local: Option<IpAddr>,
        flow: u64,
        socket: usize,
    ) {
        let i = self.len;
        self.lens[i] = len;
        self.dests[i] = to;
        self.locals[i] = local;
        self.flows[i] = flow;
        self.socks[i] = socket;
        self.addr_lens[i] = to_storage(&to, &mut self.addrs[i]);
        self.len += 1;
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The socket datagram `i` leaves by.
    pub fn socket_of(&self, i: usize) -> usize {
        self.socks[i]
    }

    /// How many datagrams from `i` on leave by the same socket as `i`
    /// (one sendmmsg call covers at most these).
    pub fn socket_run(&self, i: usize) -> usize {
        (i..self.len)
            .take_while(|&j| self.socks[j] == self.socks[i])
            .count()
    }

    /// How many datagrams from `i` on can leave as one GSO send: a run of
    /// one size to one address from one flow, and at most one shorter
    /// datagram to end it.
    fn gso_run(&self, i: usize) -> usize {
        let size = self.lens[i];
        let mut n = 1;
        let mut bytes = size;
        while i + n < self.len
            && n < GSO_MAX_SEGMENTS
            && self.dests[i + n] == self.dests[i]
            && self.locals[i + n] == self.locals[i]
            && self.flows[i + n] == self.flows[i]
            && self.socks[i + n] == self.socks[i]
            && self.lens[i + n] <= size
            && bytes + self.lens[i + n] <= GSO_MAX_BYTES
        {
            bytes += self.lens[i + n];
            n += 1;
            if self.lens[i + n - 1] < size {
                break;
            }
        }
        n
    }

    /// Fills the headers for up to `max` messages from datagram `from` on;
    /// returns how many messages.
    fn prepare(&mut self, from: usize, max: usize, gso: bool, v6: bool) -> usize {
        self.groups.clear();
        for i in from..self.len {
            self.iovecs[i] = libc::iovec {
                iov_base: self.data[i * SLOT..].as_mut_ptr() as *mut libc::c_void,
                iov_len: self.lens[i],
            };
        }
        let mut i = from;
        let end = from + self.socket_run(from);
        while i < end && self.groups.len() < max {
            let n = if gso { self.gso_run(i) } else { 1 };
            let g = self.groups.len();
            let h = &mut self.headers[g];
            h.msg_len = 0;
            h.msg_hdr.msg_name = &mut self.addrs[i] as *mut _ as *mut libc::c_void;
            h.msg_hdr.msg_namelen = self.addr_lens[i];
            h.msg_hdr.msg_iov = &mut self.iovecs[i];
            h.msg_hdr.msg_iovlen = n as _;
            h.msg_hdr.msg_flags = 0;
            let control = &mut self.control[g * SEND_CMSG_SPACE..(g + 1) * SEND_CMSG_SPACE];
            let segment = (n > 1).then_some(self.lens[i] as u16);
            cmsg::write_send(&mut h.msg_hdr, control, segment, self.locals[i], v6);
            self.groups.push(n);
            i += n;
        }
        self.groups.len()
    }
}

//! A UDP socket with kernel receive timestamps and batched syscalls
//! (recvmmsg/sendmmsg). `batch = 1` makes one syscall per datagram, which
//! is what the batching measurement compares against (docs/NET.md).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

use crate::sockaddr::{from_storage, to_storage};

/// Largest datagram we accept; convoy sends at most `max_datagram` (1472).
pub const SLOT: usize = 2048;
/// Room for one SCM_TIMESTAMPNS control message (and a spare).
const CMSG_SPACE: usize = 64;
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
}

pub struct NetSocket {
    socket: UdpSocket,
    fd: RawFd,
    pub timestamps: bool,
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

impl NetSocket {
    /// Binds `local`; with `peer`, also connects to it, so ICMP "port
    /// unreachable" comes back as ECONNREFUSED (a client wants that).
    pub fn bind(local: SocketAddr, peer: Option<SocketAddr>) -> io::Result<NetSocket> {
        let socket = UdpSocket::bind(local)?;
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
        Ok(NetSocket {
            socket,
            fd,
            timestamps,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd
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

    /// Sends `batch.len()` datagrams starting at `from`; returns how many
    /// the kernel took (0 if its buffer is full).
    pub fn send_batch(&self, batch: &mut SendBatch, from: usize, max: usize) -> io::Result<usize> {
        let n = (batch.len - from).min(max.max(1));
        if n == 0 {
            return Ok(0);
        }
        batch.prepare(from, n);
        // SAFETY: headers from..from+n point at buffers owned by `batch`.
        let r = unsafe {
            libc::sendmmsg(
                self.fd,
                batch.headers.as_mut_ptr().add(from),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        Ok(r as usize)
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

    /// Like `wait(timeout, false)`, but also returns when `other` becomes
    /// readable. Returns (socket readable, `other` readable).
    pub fn wait_readable_or(
        &self,
        timeout: std::time::Duration,
        other: RawFd,
    ) -> io::Result<(bool, bool)> {
        let mut pfds = [self.fd, other].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: two valid pollfds; ts is a live timespec.
        let r = unsafe { libc::ppoll(pfds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok((false, false));
            }
            return Err(e);
        }
        Ok((pfds[0].revents != 0, pfds[1].revents != 0))
    }
}

/// Buffers for one recvmmsg call. The headers point into the other
/// vectors, which are allocated once and never resized, so the pointers
/// stay valid; they are refreshed before every call anyway.
pub struct RecvBatch {
    slots: usize,
    data: Vec<u8>,
    addrs: Vec<libc::sockaddr_storage>,
    control: Vec<u8>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    pub received: Vec<Received>,
}

impl RecvBatch {
    pub fn new(slots: usize) -> RecvBatch {
        let slots = slots.max(1);
        // SAFETY: all-zero is valid for these plain C structs.
        let zero_addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let zero_hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        RecvBatch {
            slots,
            data: vec![0; slots * SLOT],
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

    /// The bytes of received datagram `i`.
    pub fn datagram(&self, i: usize) -> &[u8] {
        &self.data[i * SLOT..i * SLOT + self.received[i].len]
    }

    fn prepare(&mut self, n: usize) {
        for i in 0..n {
            self.iovecs[i] = libc::iovec {
                iov_base: self.data[i * SLOT..].as_mut_ptr() as *mut libc::c_void,
                iov_len: SLOT,
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
            let kernel_time = timestamp_from_control(&h.msg_hdr);
            self.received.push(Received {
                from,
                len: (h.msg_len as usize).min(SLOT),
                kernel_time,
            });
        }
    }
}

/// Finds SCM_TIMESTAMPNS among the control messages of one header.
fn timestamp_from_control(hdr: &libc::msghdr) -> Option<(i64, i64)> {
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled,
    // bounded by msg_controllen; the timespec is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                return Some((ts.tv_sec as i64, ts.tv_nsec as i64));
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    None
}

/// Datagrams waiting for one sendmmsg call.
pub struct SendBatch {
    slots: usize,
    data: Vec<u8>,
    lens: Vec<usize>,
    addrs: Vec<libc::sockaddr_storage>,
    addr_lens: Vec<libc::socklen_t>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
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

    /// Commits the datagram written into `next_buffer`.
    pub fn push(&mut self, len: usize, to: SocketAddr) {
        let i = self.len;
        self.lens[i] = len;
        self.addr_lens[i] = to_storage(&to, &mut self.addrs[i]);
        self.len += 1;
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    fn prepare(&mut self, from: usize, n: usize) {
        for i in from..from + n {
            self.iovecs[i] = libc::iovec {
                iov_base: self.data[i * SLOT..].as_mut_ptr() as *mut libc::c_void,
                iov_len: self.lens[i],
            };
            let h = &mut self.headers[i];
            h.msg_len = 0;
            h.msg_hdr.msg_name = &mut self.addrs[i] as *mut _ as *mut libc::c_void;
            h.msg_hdr.msg_namelen = self.addr_lens[i];
            h.msg_hdr.msg_iov = &mut self.iovecs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = std::ptr::null_mut();
            h.msg_hdr.msg_controllen = 0;
            h.msg_hdr.msg_flags = 0;
        }
    }
}

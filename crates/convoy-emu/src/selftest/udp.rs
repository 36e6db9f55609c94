//! UDP load and probes for the self-test: a paced sender in the client
//! namespace and a receiver in the server namespace that takes each
//! packet's arrival time from the kernel (SO_TIMESTAMPNS), so the receiving
//! thread's own wake-up delay is not charged to the emulator.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::emulator::{Emulator, Side};
use crate::error::EmuError;

/// Nanoseconds since the Unix epoch on CLOCK_REALTIME, the clock
/// SO_TIMESTAMPNS reports in.
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One received datagram: its first 16 bytes (sequence number and send
/// time, when the sender wrote them), its length and kernel arrival time.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    pub seq: u64,
    pub sent_ns: u64,
    pub len: usize,
    pub at_ns: u64,
}

pub fn socket(emu: &Emulator, side: Side, addr: &str) -> Result<UdpSocket, EmuError> {
    let sock = emu
        .netns(side)
        .run(|| UdpSocket::bind(addr))?
        .map_err(|e| EmuError::io(format!("binding UDP {addr}"), e))?;
    Ok(sock)
}

/// Receives until `stop` is set (checked every 50 ms of silence).
pub fn receive(sock: UdpSocket, stop: Arc<AtomicBool>) -> Result<Vec<Arrival>, EmuError> {
    let fd = sock.as_raw_fd();
    let on: libc::c_int = 1;
    // SAFETY: valid socket and option buffer.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(EmuError::last_os("SO_TIMESTAMPNS"));
    }
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| EmuError::io("receive timeout", e))?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65_536];
    let mut control = [0u64; 16];
    while !stop.load(Ordering::SeqCst) {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; zero is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: every pointer in msg is valid for its length.
        let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
        if n < 0 {
            continue; // timeout or EINTR: look at `stop` again
        }
        let n = n as usize;
        let mut at_ns = realtime_ns();
        // SAFETY: walking the control buffer the kernel filled.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    at_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let word = |i: usize| {
            buf.get(i..i + 8)
                .filter(|_| n >= i + 8)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
        };
        out.push(Arrival {
            seq: word(0),
            sent_ns: word(8),
            len: n,
            at_ns,
        });
    }
    Ok(out)
}

/// Sends `payload`-byte datagrams to `to` at `bps` (counting IP bytes,
/// payload + 28) for `duration`, each stamped with its sequence number and
/// CLOCK_REALTIME send time. Catches up in bursts if it falls behind, so the
/// offered rate holds on average.
///
/// Runs on a thread of its own, which it makes real-time.
pub fn send_paced(
    sock: UdpSocket,
    to: &'static str,
    payload: usize,
    bps: f64,
    duration: Duration,
) -> Result<u64, EmuError> {
    std::thread::spawn(move || send_paced_here(&sock, to, payload, bps, duration))
        .join()
        .map_err(|_| EmuError::io("UDP sender", std::io::Error::other("panicked")))
}

fn send_paced_here(
    sock: &UdpSocket,
    to: &str,
    payload: usize,
    bps: f64,
    duration: Duration,
) -> u64 {
    // SAFETY: plain syscall; sleeps below should not be rounded up by 50 µs.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64) };
    // The sender is the measuring instrument: a preemption between taking
    // the timestamp and sending would be charged to the emulator.
    crate::pump::set_realtime();
    let interval = (payload + 28) as f64 * 8.0 / bps;
    let mut buf = vec![0u8; payload.max(16)];
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < duration {
        let due = (start.elapsed().as_secs_f64() / interval) as u64 + 1;
        while sent < due {
            buf[0..8].copy_from_slice(&sent.to_le_bytes());
            buf[8..16].copy_from_slice(&realtime_ns().to_le_bytes());
            // A full socket buffer is a drop before the link: skip it.
            let _ = sock.send_to(&buf[..payload], to);
            sent += 1;
        }
        let next = Duration::from_secs_f64(interval * sent as f64);
        if let Some(wait) = next.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    sent
}

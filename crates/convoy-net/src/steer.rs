//! One server, every core: N UDP sockets on one port (SO_REUSEPORT), one
//! per worker thread, and a classic-BPF program (SO_ATTACH_REUSEPORT_CBPF)
//! that hands each datagram to the socket its connection id names.
//!
//! Without the program the kernel picks a socket by a hash of the source
//! address, so a vehicle whose address changed (handover, NAT rebinding)
//! would land on a worker that does not know its connection. The program
//! reads the worker byte of the destination connection id
//! (`convoy_proto::cid`, byte 3 of the id) at its place in the short or
//! long header, and returns it modulo N: the index of the socket in the
//! group, which is the order the sockets were bound in. A client's first
//! Initial carries a random id, so new handshakes spread evenly, and its
//! repeats (same id) reach the same worker. A datagram too short to hold
//! an id makes the program fail, which the kernel treats as socket 0.

use std::io;
use std::os::fd::RawFd;

use convoy_proto::cid::WORKER_OFFSET;

/// Where the destination connection id starts: short header (type byte,
/// then the id) and long header (type, 4-byte version, then the id).
const SHORT_DCID: u32 = 1;
const LONG_DCID: u32 = 5;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The steering program for `workers` sockets. The socket data it sees
/// starts at the UDP payload.
pub fn program(workers: u32) -> Vec<libc::sock_filter> {
    use libc::{
        BPF_A, BPF_ABS, BPF_ALU, BPF_B, BPF_JA, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_MOD, BPF_RET,
    };
    let ld_b = (BPF_LD | BPF_B | BPF_ABS) as u16;
    vec![
        // A = type byte; long headers have the top bit set.
        stmt(ld_b, 0),
        jump((BPF_JMP | BPF_JSET | BPF_K) as u16, 0x80, 2, 0),
        // Short header: the worker byte of the id.
        stmt(ld_b, SHORT_DCID + WORKER_OFFSET as u32),
        stmt((BPF_JMP | BPF_JA) as u16, 1),
        // Long header.
        stmt(ld_b, LONG_DCID + WORKER_OFFSET as u32),
        stmt((BPF_ALU | BPF_MOD | BPF_K) as u16, workers.max(1)),
        stmt((BPF_RET | BPF_A) as u16, 0),
    ]
}

/// Attaches the steering program to a socket of the group (any one: the
/// program belongs to the group).
pub fn attach(fd: RawFd, workers: u32) -> io::Result<()> {
    let mut filter = program(workers);
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: passes a pointer to a live sock_fprog whose filter array
    // outlives the call; the kernel copies it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            &prog as *const libc::sock_fprog as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

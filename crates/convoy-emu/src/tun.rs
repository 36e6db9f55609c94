//! TUN devices: layer-3 interfaces whose packets a process reads and writes.
//!
//! `IFF_NO_PI` so that a read returns exactly one IP packet with nothing
//! before it, and no `IFF_VNET_HDR`: without offloads the kernel hands over
//! wire-sized packets (at most the MTU), which is what the link model must
//! see to serialise and lose them one by one.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::EmuError;

/// One TUN device, open non-blocking. The device lives in the network
/// namespace of the thread that created it and disappears when this is
/// dropped.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Creates the device `name` in the calling thread's network namespace.
    pub fn create(path: &Path, name: &str) -> Result<Tun, EmuError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(|cause| EmuError::NoTun {
                path: path.display().to_string(),
                cause,
            })?;
        // SAFETY: ifreq is plain old data; zero is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes().take(15)) {
            *dst = src as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one ifreq.
        if unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) } != 0 {
            return Err(EmuError::last_os(format!("creating TUN device {name}")));
        }
        Ok(Tun {
            fd: file.into(),
            name: name.to_owned(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn as_raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Reads one packet; `WouldBlock` when none is waiting.
    #[inline]
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Hands one packet to the kernel as if it had arrived on the device.
    #[inline]
    pub fn send(&self, packet: &[u8]) -> io::Result<usize> {
        // SAFETY: packet is valid for packet.len() bytes.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

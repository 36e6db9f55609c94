//! Waking a driver thread that sleeps in `ppoll`, from another thread.
//!
//! The driver sleeps until a datagram or a protocol deadline (up to 100 ms
//! when idle). Code that hands it work from outside (the tokio API's
//! commands, a cancelled future, a stop request) would otherwise wait for
//! that sleep to end; an eventfd polled beside the socket ends it at once.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An eventfd: [`Waker::wake`] makes it readable until
/// [`Waker::drain`]. Cheap to call from any thread, any number of times.
#[derive(Debug)]
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    /// A new, unsignalled waker.
    pub fn new() -> io::Result<Waker> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a
        // fresh descriptor that we own from here on.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is valid and owned by nobody else.
        Ok(Waker {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Makes the driver's current (or next) sleep end at once.
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64. A full counter (EAGAIN)
        // means it is already signalled, which is all we want.
        unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }

    /// Clears the signal, so the next sleep lasts until its deadline.
    pub fn drain(&self) {
        let mut n: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64; non-blocking, so
        // an unsignalled eventfd returns EAGAIN, which is fine.
        unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                &mut n as *mut u64 as *mut libc::c_void,
                8,
            )
        };
    }

    /// The descriptor to poll for readability.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(w: &Waker) -> bool {
        let mut p = libc::pollfd {
            fd: w.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    #[test]
    fn wake_then_drain() {
        let w = Waker::new().unwrap();
        assert!(!readable(&w));
        w.wake();
        w.wake();
        assert!(readable(&w));
        w.drain();
        assert!(!readable(&w));
    }
}

//! Live frames from a Linux SocketCAN interface (a raw CAN socket,
//! CAN FD frames included), read with a timeout so a stop is noticed.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use super::candump::{Frame, MAX_DATA};

const CAN_EFF_FLAG: u32 = 0x8000_0000;
const CAN_RTR_FLAG: u32 = 0x4000_0000;
const CAN_ERR_FLAG: u32 = 0x2000_0000;
/// `struct can_frame` and `struct canfd_frame`: id (4), length (1),
/// flags and padding (3), data (8 or 64).
const CLASSIC_MTU: usize = 16;
const FD_MTU: usize = 8 + MAX_DATA;

/// A raw CAN socket bound to one interface.
pub struct CanSocket {
    fd: OwnedFd,
    iface: String,
}

impl CanSocket {
    /// Opens `iface` (e.g. `can0`, `vcan0`); errors name the interface.
    pub fn open(iface: &str, timeout: Duration) -> io::Result<CanSocket> {
        let name = std::ffi::CString::new(iface)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
        // SAFETY: plain libc calls on a name we own; every result is checked.
        unsafe {
            let index = libc::if_nametoindex(name.as_ptr());
            if index == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no CAN interface {iface:?}"),
                ));
            }
            let raw = libc::socket(
                libc::AF_CAN,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::CAN_RAW,
            );
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            let fd = OwnedFd::from_raw_fd(raw);
            let on: libc::c_int = 1;
            // Without this the kernel hides CAN FD frames from us; an old
            // kernel without FD support refuses it, and classic frames
            // still come.
            libc::setsockopt(
                raw,
                libc::SOL_CAN_RAW,
                libc::CAN_RAW_FD_FRAMES,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
            let tv = libc::timeval {
                tv_sec: timeout.as_secs() as libc::time_t,
                tv_usec: timeout.subsec_micros() as libc::suseconds_t,
            };
            if libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            ) < 0
            {
                return Err(io::Error::last_os_error());
            }
            let mut addr: libc::sockaddr_can = std::mem::zeroed();
            addr.can_family = libc::AF_CAN as libc::sa_family_t;
            addr.can_ifindex = index as libc::c_int;
            if libc::bind(
                raw,
                (&addr as *const libc::sockaddr_can).cast(),
                std::mem::size_of::<libc::sockaddr_can>() as libc::socklen_t,
            ) < 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(CanSocket {
                fd,
                iface: iface.to_owned(),
            })
        }
    }

    /// The next frame, or `Ok(None)` when the timeout passed first.
    /// Error frames are skipped: they carry no signals.
    pub fn recv(&self) -> io::Result<Option<Frame<'_>>> {
        let mut buf = [0u8; FD_MTU];
        loop {
            // SAFETY: reads at most buf.len() bytes into buf.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Ok(None),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            let n = n as usize;
            if n != CLASSIC_MTU && n != FD_MTU {
                continue;
            }
            let raw_id = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
            if raw_id & CAN_ERR_FLAG != 0 {
                continue;
            }
            let extended = raw_id & CAN_EFF_FLAG != 0;
            let cap = n - 8;
            let len = usize::from(buf[4]).min(cap);
            let mut frame = Frame {
                t_ns: convoy_telemetry::now_ns(),
                iface: &self.iface,
                id: raw_id & if extended { 0x1FFF_FFFF } else { 0x7FF },
                extended,
                fd: n == FD_MTU,
                remote: raw_id & CAN_RTR_FLAG != 0,
                len,
                data: [0; MAX_DATA],
            };
            frame.data[..len].copy_from_slice(&buf[8..8 + len]);
            return Ok(Some(frame));
        }
    }

    /// Sends a classic frame (tests put frames on a virtual bus with it).
    pub fn send(&self, id: u32, extended: bool, data: &[u8]) -> io::Result<()> {
        let mut buf = [0u8; CLASSIC_MTU];
        let id = if extended { id | CAN_EFF_FLAG } else { id };
        buf[..4].copy_from_slice(&id.to_ne_bytes());
        let len = data.len().min(8);
        buf[4] = len as u8;
        buf[8..8 + len].copy_from_slice(&data[..len]);
        // SAFETY: writes buf, which we own, in full.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

//! Anonymous network namespaces and the processes that live in them.
//!
//! The namespaces are never named (no `ip netns add`, no bind mount under
//! /run/netns): each exists only while the emulator holds its file
//! descriptor or a process lives in it. So whatever happens to the emulator,
//! even SIGKILL, the kernel removes the namespace and its interfaces once the
//! processes inside are gone, and those get SIGKILL from the kernel when the
//! emulator dies (`PR_SET_PDEATHSIG`). Nothing is left behind to clean by hand.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::EmuError;

/// A network namespace held open by a file descriptor.
#[derive(Debug)]
pub struct Netns {
    fd: OwnedFd,
    inode: u64,
}

impl Netns {
    /// A new, empty network namespace (only a loopback, down).
    ///
    /// Network namespaces are per thread, so a short-lived thread unshares
    /// and hands back a descriptor; the caller's namespace never changes.
    pub fn create() -> Result<Netns, EmuError> {
        std::thread::spawn(|| {
            // SAFETY: plain syscall; affects only this thread.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(EmuError::last_os("unshare(CLONE_NEWNET)"));
            }
            Netns::of_current_thread()
        })
        .join()
        .unwrap_or_else(|_| {
            Err(EmuError::io(
                "namespace thread",
                io::Error::other("panicked"),
            ))
        })
    }

    fn of_current_thread() -> Result<Netns, EmuError> {
        let f = File::open("/proc/thread-self/ns/net")
            .map_err(|e| EmuError::io("/proc/thread-self/ns/net", e))?;
        let inode = f
            .metadata()
            .map_err(|e| EmuError::io("/proc/thread-self/ns/net", e))?
            .ino();
        Ok(Netns {
            fd: f.into(),
            inode,
        })
    }

    /// The namespace's inode: `/proc/PID/ns/net` of a process inside reads
    /// `net:[INODE]`.
    pub fn inode(&self) -> u64 {
        self.inode
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Moves the calling thread into this namespace.
    pub fn enter(&self) -> Result<(), EmuError> {
        // SAFETY: a valid namespace descriptor; affects only this thread.
        if unsafe { libc::setns(self.fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(EmuError::last_os("setns(CLONE_NEWNET)"));
        }
        Ok(())
    }

    /// Runs `f` on a thread inside this namespace: sockets and TUN devices
    /// it creates belong to the namespace and stay there when used later
    /// from any thread.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, EmuError> {
        std::thread::scope(|s| {
            s.spawn(|| {
                self.enter()?;
                Ok(f())
            })
            .join()
            .unwrap_or_else(|_| {
                Err(EmuError::io(
                    "namespace thread",
                    io::Error::other("panicked"),
                ))
            })
        })
    }

    /// Makes `cmd` start inside this namespace, in a mount namespace of its
    /// own where /sys shows this namespace's interfaces (as `ip netns exec`
    /// does). With `own_group` it also leads a new process group, so that it
    /// and everything it forks can be signalled together.
    ///
    /// The kernel kills the child when the thread that spawned it exits
    /// (`PR_SET_PDEATHSIG`), so spawn long-lived children from the main
    /// thread.
    pub fn prepare(&self, cmd: &mut Command, own_group: bool) {
        let fd = self.fd.as_raw_fd();
        // SAFETY: the closure runs between fork and exec and makes only
        // async-signal-safe syscalls, with no allocation.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // Best effort: without it only /sys/class/net is wrong.
                if libc::unshare(libc::CLONE_NEWNS) == 0 {
                    let none = std::ptr::null::<libc::c_char>();
                    libc::mount(
                        none,
                        c"/".as_ptr(),
                        none,
                        libc::MS_REC | libc::MS_SLAVE,
                        std::ptr::null(),
                    );
                    libc::umount2(c"/sys".as_ptr(), libc::MNT_DETACH);
                    libc::mount(
                        c"sysfs".as_ptr(),
                        c"/sys".as_ptr(),
                        c"sysfs".as_ptr(),
                        0,
                        std::ptr::null(),
                    );
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if own_group && libc::setpgid(0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Runs `ip -batch -` inside the namespace with these commands.
    pub fn ip_batch(&self, commands: &str) -> Result<(), EmuError> {
        let mut cmd = Command::new("ip");
        cmd.args(["-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        self.prepare(&mut cmd, false);
        let fail = |detail: String| EmuError::Command {
            command: "ip -batch -".into(),
            detail,
        };
        let mut child = cmd
            .spawn()
            .map_err(|e| fail(format!("cannot start ip (iproute2): {e}")))?;
        let mut stdin = child.stdin.take().expect("piped");
        stdin
            .write_all(commands.as_bytes())
            .map_err(|e| fail(e.to_string()))?;
        drop(stdin);
        let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
        if !out.status.success() {
            let msg = String::from_utf8_lossy(&out.stderr);
            return Err(fail(msg.trim().replace('\n', "; ")));
        }
        Ok(())
    }

    /// Writes a sysctl under /proc/sys/net as seen from inside the namespace.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), EmuError> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        self.run(|| std::fs::write(&path, value))?
            .map_err(|e| EmuError::io(format!("sysctl {key}={value}"), e))
    }

    /// Process ids of every process whose network namespace is this one.
    pub fn processes(&self) -> Vec<i32> {
        let want = format!("net:[{}]", self.inode);
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/ns/net"))
                    .is_ok_and(|l| l.as_os_str() == want.as_str())
            })
            .collect()
    }

    /// Ends every process inside: SIGTERM, then SIGKILL for whatever is left
    /// after `grace`. Returns once none is left (or after a further second).
    pub fn kill_all(&self, grace: Duration) {
        let mut signal = libc::SIGTERM;
        let start = Instant::now();
        loop {
            let pids = self.processes();
            if pids.is_empty() {
                return;
            }
            for pid in &pids {
                // SAFETY: plain syscall.
                unsafe { libc::kill(*pid, signal) };
            }
            reap_children();
            if start.elapsed() >= grace {
                signal = libc::SIGKILL;
            }
            if start.elapsed() >= grace + Duration::from_secs(1) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Collects exited children without blocking. The emulator is a child
/// subreaper, so orphans of its commands end up here too.
pub fn reap_children() {
    loop {
        let mut status = 0;
        // SAFETY: plain syscall.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
    }
}

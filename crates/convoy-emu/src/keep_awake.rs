//! Keeps idle CPUs polling while the emulator runs, on machines where the
//! kernel's PM QoS request ([`crate::emulator::cpu_latency_hint`]) cannot.
//!
//! A packet that arrives while every thread waiting for it sleeps is only as
//! timely as the wake-up of an idle CPU. With a cpuidle driver, the PM QoS
//! request makes idle CPUs poll; without one (a VM whose guest idles with a
//! plain HLT, which exits to the hypervisor) the request changes nothing,
//! and the wake-up waits for the host to run the virtual CPU again: 0.2 to
//! 5 ms on a shared 2-core VM (measured: ping through a 0 ms link had p50
//! 0.8 ms and max 4.8 ms against 0.1 ms over a plain veth pair, and a 20 ms
//! each-way link failed `convoy emu selftest`'s 40 ± 1 ms RTT in 3 of 3
//! runs). There the emulator runs one busy thread per CPU at SCHED_IDLE,
//! the lowest priority the kernel has: it runs only when nothing else on
//! that CPU is runnable and yields to any thread that wakes, so the CPU
//! never halts and a wake-up costs microseconds (the same link: 40.28–40.45
//! ms, 30 of 30 samples within 40 ± 1).
//!
//! The cost: those CPUs burn their idle time (as PM QoS polling does), and
//! the load average counts the busy threads while the emulator runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The busy threads; they stop when this is dropped.
pub struct KeepAwake {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// Whether the kernel has a cpuidle driver, the part PM QoS steers. Without
/// one (`none`, or no cpuidle directory) idle CPUs halt whatever is asked.
pub fn idle_is_controllable() -> bool {
    std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver")
        .map(|d| {
            let d = d.trim();
            !d.is_empty() && d != "none"
        })
        .unwrap_or(false)
}

impl KeepAwake {
    /// One busy thread per CPU this process may run on, each pinned to its
    /// CPU. `None` when no thread could be started.
    pub fn start() -> Option<KeepAwake> {
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<JoinHandle<()>> = allowed_cpus()
            .into_iter()
            .filter_map(|cpu| {
                let stop = stop.clone();
                std::thread::Builder::new()
                    .name(format!("emu-awake-{cpu}"))
                    .spawn(move || {
                        if !pin_idle(cpu) {
                            return; // a busy thread at normal priority would steal the CPU
                        }
                        while !stop.load(Ordering::Relaxed) {
                            std::hint::spin_loop();
                        }
                    })
                    .ok()
            })
            .collect();
        (!threads.is_empty()).then_some(KeepAwake { stop, threads })
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The CPUs in this process's affinity mask.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let ok =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) }
            == 0;
    if !ok {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: reads a bit of the set filled above, index in range.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Pins the calling thread to `cpu` (best effort) and drops it to
/// SCHED_IDLE; false if it could not be dropped.
fn pin_idle(cpu: usize) -> bool {
    // SAFETY: plain data and syscalls on the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threads_stop_when_dropped() {
        let awake = KeepAwake::start().expect("a thread per allowed CPU");
        assert_eq!(awake.threads.len(), allowed_cpus().len());
        drop(awake); // joins: a thread that ignored the flag would hang here
    }
}

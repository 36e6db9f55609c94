//! One link direction on the OS clock: a thread that reads packets from the
//! sending side's TUN device, offers them to a convoy-link `LinkDirection`,
//! and writes each delivered packet to the receiving side's TUN device at
//! its delivery time.
//!
//! One thread per direction, so the two directions of a busy link (data one
//! way, ACKs the other) run on different cores and never wait for each
//! other. Waking on time is what the emulator's accuracy rests on: the
//! thread sleeps in `ppoll` with a nanosecond timeout and a 1 ns timer slack
//! until shortly before the next event, then spins the rest of the way
//! (reading any packet that arrives meanwhile), because a sleeping thread
//! on a loaded VM wakes tens of microseconds late.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::FromRawFd;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use convoy_link::{
    Dur, Enqueued, FaultStage, Faulted, LinkDirection, RecordKind, RecordWriter, Stats, Time,
};

use crate::ap::SmartAp;
use crate::error::EmuError;
use crate::packet;
use crate::pcap::PcapWriter;
use crate::tun::Tun;

/// Packets read per turn before deliveries are looked at again, so a flood
/// on the ingress side cannot delay deliveries by more than this many reads.
const READ_BATCH: usize = 32;

/// Lateness histogram: 1 µs buckets up to 10 ms, then one overflow bucket.
const LATE_BUCKETS: usize = 10_001;

/// Tells every pump to finish; an eventfd wakes those asleep in `ppoll`.
#[derive(Debug)]
pub struct Stopper {
    flag: AtomicBool,
    event: OwnedFd,
}

impl Stopper {
    pub fn new() -> Result<Stopper, EmuError> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(EmuError::last_os("eventfd"));
        }
        Ok(Stopper {
            flag: AtomicBool::new(false),
            // SAFETY: fd was just created and is owned by nobody else.
            event: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a valid buffer.
        unsafe { libc::write(self.event.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    fn stopped(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    /// Sleeps for `timeout` (for ever if `None`) or until told to stop;
    /// true once told to stop.
    pub(crate) fn sleep(&self, timeout: Option<Duration>) -> bool {
        let mut fd = libc::pollfd {
            fd: self.event.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        // SAFETY: one valid pollfd; the timeout outlives the call. EINTR
        // just ends the sleep early, which the caller's loop tolerates.
        unsafe { libc::ppoll(&mut fd, 1, ts_ptr, std::ptr::null()) };
        self.stopped()
    }
}

/// How a pump keeps time.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Spin instead of sleeping for this long before each event.
    pub spin: Duration,
    /// Run under SCHED_FIFO (when permitted).
    pub realtime: bool,
}

/// Moves the calling thread to SCHED_FIFO at a low real-time priority.
///
/// On a busy machine (compilers, the programs under test) an ordinary
/// thread that wakes for a delivery can wait a whole scheduler slice,
/// milliseconds, for a core; a real-time thread preempts them at once. The
/// thread never runs for long without sleeping (it blocks whenever no
/// packet is due), and the kernel's real-time throttling keeps 5 % of each
/// core for others in any case. Failure (no privilege) is silently
/// tolerated: timing is then best effort.
pub fn set_realtime() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: plain syscall on the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
}

/// Counters readable while the emulator runs.
#[derive(Debug, Default)]
pub struct LiveCounters {
    pub delivered_packets: AtomicU64,
    pub delivered_bytes: AtomicU64,
}

/// Where a pump's output goes besides the egress device.
pub struct PumpOutputs {
    pub records: Option<RecordWriter<BufWriter<File>>>,
    /// The shared capture, this direction's interface index in it, and the
    /// Unix time of the emulator's epoch in nanoseconds.
    pub pcap: Option<(Arc<Mutex<PcapWriter>>, u32, u64)>,
}

/// What one direction did, returned when it stops.
#[derive(Clone, Debug)]
pub struct DirectionReport {
    /// `link:up` or `link:down`.
    pub label: String,
    pub stats: Stats,
    /// Delivery write time minus model delivery time, in microseconds.
    pub late_p50_us: u64,
    pub late_p99_us: u64,
    pub late_max_us: u64,
    pub write_errors: u64,
}

/// What a pump does with the contents of packets, beyond carrying them.
#[derive(Default)]
pub struct Inspect {
    /// The link's smart access point, shared with the other direction, and
    /// this direction's index in it (0 up, 1 down).
    pub ap: Option<(Arc<Mutex<SmartAp>>, usize)>,
    /// What the link's queue tells packets apart by.
    pub flows: FlowKey,
    /// Extra delay after the link for packets from or to a port.
    pub port_delay: Vec<(u16, Dur)>,
}

impl Inspect {
    fn any(&self) -> bool {
        self.ap.is_some() || self.flows != FlowKey::None || !self.port_delay.is_empty()
    }
}

/// The key a packet is queued under ([`convoy_link::PacketMeta::flow`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowKey {
    /// One queue: nothing to tell apart.
    #[default]
    None,
    /// The 5-tuple's hash: per-flow queueing (FQ-CoDel).
    FiveTuple,
    /// The client side's address (the source going up, the destination
    /// coming down): a cell's per-UE buffers.
    ClientAddress { up: bool },
}

pub struct Pump {
    label: String,
    link: LinkDirection,
    ingress: Arc<Tun>,
    egress: Arc<Tun>,
    epoch: Instant,
    spin: Duration,
    realtime: bool,
    stopper: Arc<Stopper>,
    live: Arc<LiveCounters>,
    out: PumpOutputs,
    /// Payloads inside the model, by packet id.
    store: HashMap<u64, Vec<u8>>,
    /// Every read lands here first, so a packet is never cut short whatever
    /// MTU a program sets inside a namespace; it is then copied into a
    /// pooled buffer of its own size.
    scratch: Vec<u8>,
    pool: Vec<Vec<u8>>,
    next_id: u64,
    late: Vec<u64>,
    late_max_ns: u64,
    write_errors: u64,
    /// Duplication, corruption and reordering after the link.
    faults: Option<FaultStage>,
    inspect: Inspect,
    /// Packets serving their port's extra delay: one FIFO per distinct
    /// delay, so each stays in delivery order.
    held: Vec<(Dur, HeldLine)>,
}

/// Packets due at a time, in the order they are due.
type HeldLine = VecDeque<(Time, Vec<u8>)>;

impl Pump {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        label: String,
        link: LinkDirection,
        ingress: Arc<Tun>,
        egress: Arc<Tun>,
        epoch: Instant,
        timing: Timing,
        stopper: Arc<Stopper>,
        live: Arc<LiveCounters>,
        out: PumpOutputs,
    ) -> Pump {
        Pump {
            label,
            link,
            ingress,
            egress,
            epoch,
            spin: timing.spin,
            realtime: timing.realtime,
            stopper,
            live,
            out,
            store: HashMap::new(),
            scratch: vec![0; 65_536],
            pool: Vec::new(),
            next_id: 0,
            late: vec![0; LATE_BUCKETS],
            late_max_ns: 0,
            write_errors: 0,
            faults: None,
            inspect: Inspect::default(),
            held: Vec::new(),
        }
    }

    /// Turns on the access point, flow hashing or port delays.
    pub fn with_inspect(mut self, inspect: Inspect) -> Pump {
        let mut delays: Vec<Dur> = inspect.port_delay.iter().map(|&(_, d)| d).collect();
        delays.sort();
        delays.dedup();
        self.held = delays.into_iter().map(|d| (d, VecDeque::new())).collect();
        self.inspect = inspect;
        self
    }

    /// Puts a fault stage after the link (none if it has no faults).
    pub fn with_faults(mut self, faults: FaultStage) -> Pump {
        self.faults = Some(faults);
        self
    }

    pub fn spawn(self) -> Result<JoinHandle<Result<DirectionReport, EmuError>>, EmuError> {
        std::thread::Builder::new()
            .name(format!("emu {}", self.label))
            .spawn(move || self.run())
            .map_err(|e| EmuError::io("starting a link thread", e))
    }

    #[inline]
    fn now(&self) -> Time {
        Time::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    fn run(mut self) -> Result<DirectionReport, EmuError> {
        // SAFETY: plain syscall. The default 50 µs slack would make every
        // timed wake-up up to 50 µs late.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64) };
        if self.realtime {
            set_realtime();
        }
        while !self.stopper.stopped() {
            let read = self.read_batch()?;
            self.deliver_due();
            self.drain_records()?;
            if read == READ_BATCH {
                continue;
            }
            self.wait()?;
        }
        self.finish()
    }

    /// Reads up to `READ_BATCH` packets, offering each to the model at the
    /// instant it was read.
    fn read_batch(&mut self) -> Result<usize, EmuError> {
        for n in 0..READ_BATCH {
            match self.ingress.recv(&mut self.scratch) {
                Ok(len) => {
                    let id = self.next_id;
                    self.next_id += 1;
                    let now = self.now();
                    let flow = if self.inspect.any() {
                        self.look_at(now, len)
                    } else {
                        0
                    };
                    if let Enqueued::Accepted = self.link.enqueue_flow(now, len as u32, id, flow) {
                        let mut buf = self.pool.pop().unwrap_or_default();
                        buf.clear();
                        buf.extend_from_slice(&self.scratch[..len]);
                        self.store.insert(id, buf);
                    }
                }
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(n),
                    io::ErrorKind::Interrupted => {}
                    _ => {
                        return Err(EmuError::io(
                            format!("reading from {}", self.ingress.name()),
                            e,
                        ))
                    }
                },
            }
        }
        Ok(READ_BATCH)
    }

    /// The access point sees the packet just read (and may rewrite it);
    /// returns its flow hash for per-flow queues.
    fn look_at(&mut self, now: Time, len: usize) -> u64 {
        let pkt = &mut self.scratch[..len];
        let parsed = packet::parse(pkt);
        if let Some((ap, dir)) = &self.inspect.ap {
            let mut ap = ap.lock().unwrap_or_else(|p| p.into_inner());
            ap.note_queue(*dir, self.link.sojourn());
            ap.on_packet(*dir, now, pkt, parsed.as_ref());
        }
        match (parsed, self.inspect.flows) {
            (Some(p), FlowKey::FiveTuple) => p.tuple.hash(),
            (Some(p), FlowKey::ClientAddress { up }) => {
                u64::from(u32::from(if up { p.tuple.src } else { p.tuple.dst }))
            }
            _ => 0,
        }
    }

    /// The extra delay of a delivered packet, by its ports.
    fn extra_delay(&self, buf: &[u8]) -> Option<usize> {
        if self.held.is_empty() {
            return None;
        }
        let p = packet::parse(buf)?;
        let (_, d) = self
            .inspect
            .port_delay
            .iter()
            .find(|(port, _)| *port == p.tuple.sport || *port == p.tuple.dport)?;
        self.held.iter().position(|(h, _)| h == d)
    }

    /// When the next held packet is due.
    fn next_held(&self) -> Option<Time> {
        self.held
            .iter()
            .filter_map(|(_, q)| q.front().map(|f| f.0))
            .min()
    }

    fn deliver_due(&mut self) {
        let now = self.now();
        let mut faults = self.faults.take();
        while let Some(d) = self.link.poll_delivery(now) {
            match &mut faults {
                Some(f) => f.push(d),
                None => self.write(Faulted {
                    delivery: d,
                    copy: false,
                    more: false,
                    corrupt_bit: None,
                }),
            }
        }
        if let Some(f) = &mut faults {
            while let Some(x) = f.pop(now) {
                self.write(x);
            }
        }
        self.faults = faults;
        for i in 0..self.held.len() {
            while self.held[i].1.front().is_some_and(|f| f.0 <= now) {
                if let Some((at, buf)) = self.held[i].1.pop_front() {
                    self.write_out(buf, at);
                }
            }
        }
    }

    /// One delivery after the fault stage: its payload, corrupted if the
    /// stage says so, goes out now or after its port's extra delay.
    fn write(&mut self, f: Faulted) {
        let d = f.delivery;
        let buf = if f.more {
            // Another arrival of this packet follows: keep the original.
            match self.store.get(&d.id) {
                Some(b) => b.clone(),
                None => return,
            }
        } else {
            match self.store.remove(&d.id) {
                Some(b) => b,
                None => return,
            }
        };
        let mut buf = buf;
        if let Some(bit) = f.corrupt_bit {
            corrupt(&mut buf, bit);
        }
        if let Some(i) = self.extra_delay(&buf) {
            let at = d.at + self.held[i].0;
            self.held[i].1.push_back((at, buf));
            return;
        }
        self.write_out(buf, d.at);
    }

    /// Writes a delivered packet due at `at` to the receiving side.
    fn write_out(&mut self, buf: Vec<u8>, at: Time) {
        let len = buf.len();
        // Lateness is taken as the write starts: the write itself runs
        // the receiving side's network stack and would count that too.
        let late = self.now().saturating_since(at).as_nanos();
        if self.egress.send(&buf[..len]).is_err() {
            // The kernel refused it (e.g. its backlog is full): a loss
            // the receiver sees, counted but not fatal.
            self.write_errors += 1;
        }
        self.late[((late / 1000) as usize).min(LATE_BUCKETS - 1)] += 1;
        self.late_max_ns = self.late_max_ns.max(late);
        self.live.delivered_packets.fetch_add(1, Ordering::Relaxed);
        self.live
            .delivered_bytes
            .fetch_add(len as u64, Ordering::Relaxed);
        if let Some((pcap, iface, base)) = &self.out.pcap {
            let ts = base + at.as_nanos();
            let mut w = pcap.lock().unwrap_or_else(|p| p.into_inner());
            // A failing capture must not stop the traffic; the error
            // shows when the capture is flushed at the end.
            let _ = w.packet(*iface, ts, &buf[..len]);
        }
        self.pool.push(buf);
    }

    /// Frees the payloads the model dropped after queueing them, and writes
    /// records when asked to.
    fn drain_records(&mut self) -> Result<(), EmuError> {
        let records = self.link.take_records();
        for r in &records {
            if let RecordKind::Drop(_) = r.kind {
                if let Some(buf) = self.store.remove(&r.id) {
                    self.pool.push(buf);
                }
            }
        }
        if let Some(w) = &mut self.out.records {
            w.write_all(&records)
                .map_err(|e| EmuError::io(format!("writing records of {}", self.label), e))?;
        }
        Ok(())
    }

    /// Sleeps until the next model event or an arriving packet.
    fn wait(&mut self) -> Result<(), EmuError> {
        let faulted = self.faults.as_ref().and_then(FaultStage::next_event_time);
        let held = match (faulted, self.next_held()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let next = match (self.link.next_event_time(), held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let timeout = match next {
            None => None,
            Some(t) => {
                let left = t.saturating_since(self.now());
                let left = Duration::from_nanos(left.as_nanos());
                if left <= self.spin {
                    return self.spin_until(t);
                }
                Some(left - self.spin)
            }
        };
        let mut fds = [
            libc::pollfd {
                fd: self.ingress.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.stopper.event.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        // SAFETY: two valid pollfds; the timeout outlives the call.
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, ts_ptr, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(EmuError::io("ppoll", e));
            }
        }
        Ok(())
    }

    /// Busy-waits for `t`, still taking in packets as they come.
    fn spin_until(&mut self, t: Time) -> Result<(), EmuError> {
        while self.now() < t {
            if self.read_batch()? > 0 || self.stopper.stopped() {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        Ok(())
    }

    fn finish(mut self) -> Result<DirectionReport, EmuError> {
        if let Some(w) = self.out.records.take() {
            w.into_inner()
                .flush()
                .map_err(|e| EmuError::io(format!("writing records of {}", self.label), e))?;
        }
        let total: u64 = self.late.iter().sum();
        let quantile = |q: f64| -> u64 {
            let want = ((total as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (us, n) in self.late.iter().enumerate() {
                seen += n;
                if seen >= want {
                    return us as u64;
                }
            }
            0
        };
        Ok(DirectionReport {
            label: self.label.clone(),
            stats: *self.link.stats(),
            late_p50_us: if total == 0 { 0 } else { quantile(0.5) },
            late_p99_us: if total == 0 { 0 } else { quantile(0.99) },
            late_max_us: self.late_max_ns / 1000,
            write_errors: self.write_errors,
        })
    }
}

/// Flips one bit of an IPv4 packet's transport payload (`bit` modulo its
/// length in bits), past the IP and UDP/TCP headers so the packet is still
/// delivered, and clears a UDP checksum (optional over IPv4) so the flipped
/// bit reaches the application, whose own integrity check must catch it.
/// A TCP segment keeps its checksum, and the receiving kernel drops it as
/// it would a segment corrupted on the wire.
fn corrupt(packet: &mut [u8], bit: u64) {
    let Some(&first) = packet.first() else {
        return;
    };
    let mut start = 0;
    if first >> 4 == 4 && packet.len() >= 20 {
        let ihl = usize::from(first & 0x0f) * 4;
        match packet[9] {
            17 if packet.len() >= ihl + 8 => {
                packet[ihl + 6] = 0;
                packet[ihl + 7] = 0;
                start = ihl + 8;
            }
            6 if packet.len() >= ihl + 20 => {
                start = ihl + usize::from(packet[ihl + 12] >> 4) * 4;
            }
            _ => start = ihl,
        }
    }
    let start = start.min(packet.len());
    let payload = &mut packet[start..];
    if payload.is_empty() {
        return;
    }
    let bit = bit % (payload.len() as u64 * 8);
    payload[(bit / 8) as usize] ^= 1 << (bit % 8);
}

#[cfg(test)]
mod fault_tests {
    use super::corrupt;

    #[test]
    fn corruption_lands_in_the_udp_payload_and_clears_the_checksum() {
        let mut p = vec![0u8; 28 + 10];
        p[0] = 0x45;
        p[9] = 17;
        p[26] = 0xab;
        p[27] = 0xcd;
        let before = p.clone();
        corrupt(&mut p, 12345);
        assert_eq!(&p[..26], &before[..26], "IP and UDP header kept");
        assert_eq!(&p[26..28], &[0, 0], "checksum cleared");
        let flipped: u32 = p[28..]
            .iter()
            .zip(&before[28..])
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert_eq!(flipped, 1);
        let mut tiny = vec![1u8];
        corrupt(&mut tiny, 3);
        assert_eq!(tiny, vec![1u8 ^ 8]);
    }
}

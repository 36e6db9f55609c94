//! One request on one stream, server side: parse the header, then store
//! an upload, send a download, or count perf bytes.

use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use convoy_proto::{Connection, StreamError, StreamId};

use crate::error::NetError;
use crate::perf_stamps::{wall_ns, LatencyMeter};
use crate::request::{validate_name, Reply, Request};
use crate::store::{PartialUpload, PutStart, Store};

/// How often a perf server reports what it has received.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Bytes queued for a stream, written as its credit allows.
#[derive(Default)]
pub struct Outbox {
    buf: Vec<u8>,
    finish: bool,
    finished: bool,
}

impl Outbox {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    pub fn finish_when_empty(&mut self) {
        self.finish = true;
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn flush(&mut self, c: &mut Connection, id: StreamId) -> Result<(), StreamError> {
        while !self.buf.is_empty() {
            match c.write(id, &self.buf) {
                Ok(0) | Err(StreamError::Blocked) => break,
                Ok(n) => {
                    self.buf.drain(..n);
                }
                Err(e) => return Err(e),
            }
        }
        if self.buf.is_empty() && self.finish && !self.finished {
            c.finish(id)?;
            self.finished = true;
        }
        Ok(())
    }
}

/// What the server log shows.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ServerEvent {
    Connected {
        peer: SocketAddr,
    },
    Stored {
        peer: SocketAddr,
        name: String,
        bytes: u64,
        resumed_from: u64,
        blake3: String,
    },
    Sent {
        peer: SocketAddr,
        name: String,
        bytes: u64,
    },
    PerfDone {
        peer: SocketAddr,
        bytes: u64,
        seconds: f64,
        cpu_seconds: f64,
    },
    Failed {
        peer: SocketAddr,
        error: String,
    },
    Closed {
        peer: SocketAddr,
        reason: String,
    },
}

enum Phase {
    Header,
    Put {
        upload: Box<PartialUpload>,
        name: String,
        from: u64,
    },
    Get {
        file: File,
        left: u64,
        name: String,
        sent: u64,
    },
    Perf {
        expected: u64,
        received: u64,
        started: Duration,
        cpu_start: Duration,
        next_progress: Duration,
        /// A timed perf counts until here, then answers.
        deadline: Option<Duration>,
        latency: LatencyMeter,
    },
    /// A timed perf answered: what still arrives is dropped unread.
    PerfOver,
    Done,
}

pub struct Session {
    inbox: Vec<u8>,
    pub out: Outbox,
    phase: Phase,
    peer: SocketAddr,
    /// The partial file this session writes, so a newer run of the same
    /// upload can take it over.
    pub partial: Option<PathBuf>,
}

/// CPU time (user + system) this process has used.
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the zeroed struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

impl Session {
    pub fn new(peer: SocketAddr) -> Session {
        Session {
            inbox: Vec::new(),
            out: Outbox::default(),
            phase: Phase::Header,
            peer,
            partial: None,
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done) && self.out.is_empty()
    }

    /// Drops an upload without deleting its partial file (another session
    /// took it over, or the connection ended): a later run resumes it.
    pub fn abandon(&mut self) {
        self.phase = Phase::Done;
        self.partial = None;
    }

    pub fn step(
        &mut self,
        c: &mut Connection,
        id: StreamId,
        store: Option<&Store>,
        now: Duration,
        scratch: &mut [u8],
        events: &mut Vec<ServerEvent>,
    ) {
        if let Err(e) = self.advance(c, id, store, now, scratch, events) {
            if let Phase::Put { upload, .. } = std::mem::replace(&mut self.phase, Phase::Done) {
                // A disk that is full or failing will not take the rest.
                if matches!(e, NetError::File { .. }) {
                    upload.discard();
                }
            }
            self.phase = Phase::Done;
            self.partial = None;
            events.push(ServerEvent::Failed {
                peer: self.peer,
                error: e.to_string(),
            });
            self.out.push(
                &Reply::Error {
                    message: e.to_string(),
                }
                .encode(),
            );
            self.out.finish_when_empty();
        }
        let _ = self.out.flush(c, id);
    }

    fn advance(
        &mut self,
        c: &mut Connection,
        id: StreamId,
        store: Option<&Store>,
        now: Duration,
        scratch: &mut [u8],
        events: &mut Vec<ServerEvent>,
    ) -> Result<(), NetError> {
        if let Phase::Get { .. } = self.phase {
            return self.send_file(c, id, scratch, events);
        }
        loop {
            let fin = match c.read(id, scratch) {
                Ok(0) => true,
                Ok(n) => {
                    self.on_data(&scratch[..n], store, now)?;
                    false
                }
                Err(StreamError::Blocked) => break,
                Err(e) => return Err(e.into()),
            };
            if fin {
                self.on_fin(now, events)?;
                break;
            }
        }
        if let Phase::Perf {
            deadline: Some(deadline),
            ..
        } = self.phase
        {
            if now >= deadline {
                self.end_timed_perf(now, events);
                return Ok(());
            }
        }
        if let Phase::Perf {
            received,
            next_progress,
            ..
        } = &mut self.phase
        {
            if now >= *next_progress {
                *next_progress = now + PROGRESS_EVERY;
                self.out.push(
                    &Reply::Progress {
                        received: *received,
                    }
                    .encode(),
                );
            }
        }
        if let Phase::Get { .. } = self.phase {
            return self.send_file(c, id, scratch, events);
        }
        Ok(())
    }

    fn on_data(
        &mut self,
        data: &[u8],
        store: Option<&Store>,
        now: Duration,
    ) -> Result<(), NetError> {
        match &mut self.phase {
            Phase::Header => {
                self.inbox.extend_from_slice(data);
                if let Some((req, used)) = Request::decode(&self.inbox)? {
                    let rest = self.inbox.split_off(used);
                    self.inbox = Vec::new();
                    self.start(req, store, now)?;
                    if !rest.is_empty() {
                        self.on_data(&rest, store, now)?;
                    }
                }
                Ok(())
            }
            Phase::Put { upload, .. } => upload.write(data),
            Phase::Perf {
                received, latency, ..
            } => {
                latency.take(*received, data, wall_ns());
                *received += data.len() as u64;
                Ok(())
            }
            Phase::PerfOver => Ok(()),
            Phase::Get { .. } | Phase::Done => Err(NetError::Protocol("unexpected data".into())),
        }
    }

    fn start(
        &mut self,
        req: Request,
        store: Option<&Store>,
        now: Duration,
    ) -> Result<(), NetError> {
        let need_store =
            || store.ok_or_else(|| NetError::Remote("this server only runs perf".into()));
        match req {
            Request::Put { name, size, hash } => {
                validate_name(&name).map_err(NetError::Remote)?;
                match need_store()?.begin_put(&name, size, hash)? {
                    PutStart::AlreadyStored => {
                        self.out.push(&Reply::PutFrom { offset: size }.encode());
                        self.out.push(&Reply::Stored { hash }.encode());
                        self.out.finish_when_empty();
                        self.phase = Phase::Done;
                    }
                    PutStart::Resume(upload) => {
                        self.out.push(
                            &Reply::PutFrom {
                                offset: upload.written,
                            }
                            .encode(),
                        );
                        self.partial = Some(upload.path.clone());
                        let from = upload.written;
                        self.phase = Phase::Put { upload, name, from };
                    }
                }
            }
            Request::Get { name, offset } => {
                validate_name(&name).map_err(NetError::Remote)?;
                let (mut file, size, hash) =
                    need_store()?.open_get(&name).map_err(|e| match e {
                        NetError::File { err, .. }
                            if err.kind() == std::io::ErrorKind::NotFound =>
                        {
                            NetError::Remote(format!("no file named {name:?} on the server"))
                        }
                        other => other,
                    })?;
                let offset = offset.min(size);
                std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(offset))
                    .map_err(|e| NetError::file(&name, e))?;
                self.out.push(&Reply::GetMeta { size, hash }.encode());
                self.phase = Phase::Get {
                    file,
                    left: size - offset,
                    name,
                    sent: 0,
                };
            }
            Request::Perf { bytes, millis } => {
                self.phase = Phase::Perf {
                    expected: bytes,
                    received: 0,
                    started: now,
                    cpu_start: cpu_time(),
                    next_progress: now + PROGRESS_EVERY,
                    deadline: (bytes == 0 && millis > 0)
                        .then(|| now + Duration::from_millis(millis)),
                    latency: LatencyMeter::default(),
                };
            }
        }
        Ok(())
    }

    fn on_fin(&mut self, now: Duration, events: &mut Vec<ServerEvent>) -> Result<(), NetError> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Put { upload, name, from } => {
                if !upload.is_complete() {
                    let (got, size) = (upload.written, upload.size);
                    return Err(NetError::Protocol(format!(
                        "upload ended at {got} of {size} bytes"
                    )));
                }
                let bytes = upload.size;
                let hash = upload.commit()?;
                self.partial = None;
                self.out.push(&Reply::Stored { hash }.encode());
                events.push(ServerEvent::Stored {
                    peer: self.peer,
                    name,
                    bytes,
                    resumed_from: from,
                    blake3: convoy_proto::crypto::hex(&hash),
                });
            }
            Phase::Perf {
                expected,
                received,
                started,
                cpu_start,
                mut latency,
                ..
            } => {
                if expected != 0 && received != expected {
                    return Err(NetError::Protocol(format!(
                        "perf got {received} of {expected} bytes"
                    )));
                }
                self.perf_done(now, received, started, cpu_start, &mut latency, events);
            }
            Phase::PerfOver => {}
            Phase::Header => {
                return Err(NetError::Protocol("stream ended before the request".into()))
            }
            // A download's request side ends right after the request; our
            // side finishes when the file is sent.
            other => {
                self.phase = other;
                return Ok(());
            }
        }
        self.out.finish_when_empty();
        Ok(())
    }

    /// A timed perf's window closed: answer with what arrived in it, and
    /// drop what still comes (the client stops on the answer).
    fn end_timed_perf(&mut self, now: Duration, events: &mut Vec<ServerEvent>) {
        if let Phase::Perf {
            received,
            started,
            cpu_start,
            mut latency,
            ..
        } = std::mem::replace(&mut self.phase, Phase::PerfOver)
        {
            self.perf_done(now, received, started, cpu_start, &mut latency, events);
        }
    }

    fn perf_done(
        &mut self,
        now: Duration,
        received: u64,
        started: Duration,
        cpu_start: Duration,
        latency: &mut LatencyMeter,
        events: &mut Vec<ServerEvent>,
    ) {
        let cpu = cpu_time().saturating_sub(cpu_start);
        self.out.push(
            &Reply::PerfDone {
                received,
                cpu_ns: cpu.as_nanos() as u64,
                latency: latency.summary(),
            }
            .encode(),
        );
        events.push(ServerEvent::PerfDone {
            peer: self.peer,
            bytes: received,
            seconds: now.saturating_sub(started).as_secs_f64(),
            cpu_seconds: cpu.as_secs_f64(),
        });
    }

    fn send_file(
        &mut self,
        c: &mut Connection,
        id: StreamId,
        scratch: &mut [u8],
        events: &mut Vec<ServerEvent>,
    ) -> Result<(), NetError> {
        self.out.flush(c, id)?;
        let Phase::Get {
            file,
            left,
            name,
            sent,
        } = &mut self.phase
        else {
            return Ok(());
        };
        while self.out.is_empty() && *left > 0 {
            let room = c.write_room(id).min(scratch.len()).min(*left as usize);
            if room == 0 {
                return Ok(());
            }
            let n = file
                .read(&mut scratch[..room])
                .map_err(|e| NetError::file(name.as_str(), e))?;
            if n == 0 {
                return Err(NetError::Protocol(format!(
                    "{name} shrank while being sent"
                )));
            }
            let w = c.write(id, &scratch[..n])?;
            // `write` takes at most write_room, so a short write only
            // happens if room shrank; keep the rest for the next turn.
            self.out.push(&scratch[w..n]);
            *left -= n as u64;
            *sent += n as u64;
        }
        if *left == 0 {
            events.push(ServerEvent::Sent {
                peer: self.peer,
                name: name.clone(),
                bytes: *sent,
            });
            self.phase = Phase::Done;
            self.out.finish_when_empty();
        }
        Ok(())
    }
}

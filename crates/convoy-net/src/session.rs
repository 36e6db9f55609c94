//! One request on one stream, server side: parse the header, then store
//! an upload, send a download, or count perf bytes.

use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use convoy_proto::{Connection, StreamError, StreamId};

use crate::auth::{read_name, write_name, Authorizer, Identity};
use crate::error::NetError;
use crate::perf_stamps::{wall_ns, LatencyMeter};
use crate::perf_timeline::ReadTimeline;
use crate::request::{Reply, Request};
use crate::server::committer::{Job, Outcome, Work};
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

/// What the server log shows. `vehicle` is the registered name of the
/// peer's key on a server with an authorizer (absent otherwise), so logs
/// name the vehicle, not only its address.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ServerEvent {
    Connected {
        peer: SocketAddr,
        #[serde(skip_serializing_if = "Option::is_none")]
        vehicle: Option<String>,
    },
    /// A key the authorizer refused (unknown or revoked); the connection
    /// is closed with `reason`.
    Refused {
        peer: SocketAddr,
        key: String,
        reason: String,
    },
    Stored {
        peer: SocketAddr,
        #[serde(skip_serializing_if = "Option::is_none")]
        vehicle: Option<String>,
        name: String,
        bytes: u64,
        resumed_from: u64,
        blake3: String,
    },
    Sent {
        peer: SocketAddr,
        #[serde(skip_serializing_if = "Option::is_none")]
        vehicle: Option<String>,
        name: String,
        bytes: u64,
    },
    PerfDone {
        peer: SocketAddr,
        #[serde(skip_serializing_if = "Option::is_none")]
        vehicle: Option<String>,
        bytes: u64,
        /// From the request to the answer.
        seconds: f64,
        cpu_seconds: f64,
        /// From the first byte the application read to the last.
        duration_s: f64,
        /// `bytes` over `duration_s`, bits per second.
        goodput_bps: f64,
        /// Every gap of 20 ms or more between two reads of data, as
        /// `[start_ms, length_ms]` from the first byte.
        stalls: Vec<[f64; 2]>,
        /// Bytes read per 100 ms from the first byte.
        timeline: Vec<u64>,
    },
    Failed {
        peer: SocketAddr,
        #[serde(skip_serializing_if = "Option::is_none")]
        vehicle: Option<String>,
        error: String,
    },
    Closed {
        peer: SocketAddr,
        #[serde(skip_serializing_if = "Option::is_none")]
        vehicle: Option<String>,
        reason: String,
    },
}

/// What a session needs from the server around it.
pub struct SessionCtx<'a> {
    pub store: Option<&'a Store>,
    /// Who the peer is (`None` on a server without an authorizer).
    pub who: Option<&'a Identity>,
    /// Asked again before an upload is acknowledged.
    pub auth: Option<&'a dyn Authorizer>,
    /// The peer's static key.
    pub key: Option<[u8; 32]>,
}

impl SessionCtx<'_> {
    fn vehicle(&self) -> Option<String> {
        self.who.map(|w| w.name.clone())
    }

    /// The upload's key is still registered (a revocation since the
    /// connection began stops the upload before it is acknowledged).
    fn still_allowed(&self) -> Result<(), NetError> {
        if let (Some(auth), Some(key)) = (self.auth, self.key.as_ref()) {
            auth.identify(key)
                .map_err(|why| NetError::Remote(format!("{}{why}", crate::auth::REFUSED_PREFIX)))?;
        }
        Ok(())
    }
}

enum Phase {
    Header,
    Put {
        upload: Box<PartialUpload>,
        /// As the client named it, and as stored (namespace included).
        name: String,
        stored: String,
        from: u64,
    },
    /// The upload is complete and handed to the commit thread
    /// ([`Session::take_job`]); "stored" waits for [`Session::committed`].
    Committing {
        name: String,
        from: u64,
        bytes: u64,
        /// Logged as stored once durable (not for a re-confirmation of
        /// what an earlier run stored).
        announce: bool,
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
        /// When the application got the data (stalls, per-100 ms bytes).
        reads: ReadTimeline,
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
    /// upload can take it over. Kept until the commit is done.
    pub partial: Option<PathBuf>,
    /// Storage work for the commit thread, waiting to be handed over.
    job: Option<Job>,
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
            job: None,
        }
    }

    /// The storage work this session waits for, to run off the protocol
    /// thread; its outcome comes back through [`Session::committed`].
    pub fn take_job(&mut self) -> Option<Job> {
        self.job.take()
    }

    /// The commit thread is done with this session's job: say "stored"
    /// only now, with the file fsynced, renamed, its directory fsynced and
    /// the hook run; or report why not.
    pub fn committed(
        &mut self,
        outcome: Outcome,
        ctx: &SessionCtx<'_>,
        events: &mut Vec<ServerEvent>,
    ) {
        let Phase::Committing {
            name,
            from,
            bytes,
            announce,
        } = std::mem::replace(&mut self.phase, Phase::Done)
        else {
            return;
        };
        self.partial = None;
        match outcome {
            Ok(hash) => {
                self.out.push(&Reply::Stored { hash }.encode());
                self.out.finish_when_empty();
                if announce {
                    events.push(ServerEvent::Stored {
                        peer: self.peer,
                        vehicle: ctx.vehicle(),
                        name,
                        bytes,
                        resumed_from: from,
                        blake3: convoy_proto::crypto::hex(&hash),
                    });
                }
            }
            Err(e) => self.fail(&e, ctx, events),
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
        ctx: &SessionCtx<'_>,
        now: Duration,
        scratch: &mut [u8],
        events: &mut Vec<ServerEvent>,
    ) {
        if let Err(e) = self.advance(c, id, ctx, now, scratch, events) {
            if let Phase::Put { upload, .. } = std::mem::replace(&mut self.phase, Phase::Done) {
                // A disk that is full or failing will not take the rest.
                if matches!(e, NetError::File { .. }) {
                    upload.discard();
                }
            }
            self.fail(&e, ctx, events);
        }
        let _ = self.out.flush(c, id);
    }

    /// Ends the request with an error the client reads.
    fn fail(&mut self, e: &NetError, ctx: &SessionCtx<'_>, events: &mut Vec<ServerEvent>) {
        self.phase = Phase::Done;
        self.partial = None;
        self.job = None;
        events.push(ServerEvent::Failed {
            peer: self.peer,
            vehicle: ctx.vehicle(),
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

    fn advance(
        &mut self,
        c: &mut Connection,
        id: StreamId,
        ctx: &SessionCtx<'_>,
        now: Duration,
        scratch: &mut [u8],
        events: &mut Vec<ServerEvent>,
    ) -> Result<(), NetError> {
        match self.phase {
            Phase::Get { .. } => return self.send_file(c, id, ctx, scratch, events),
            // The request side has ended; nothing to do until the commit
            // thread answers.
            Phase::Committing { .. } => return Ok(()),
            _ => {}
        }
        loop {
            let fin = match c.read(id, scratch) {
                Ok(0) => true,
                Ok(n) => {
                    self.on_data(&scratch[..n], ctx, now)?;
                    false
                }
                Err(StreamError::Blocked) => break,
                Err(e) => return Err(e.into()),
            };
            if fin {
                self.on_fin(now, ctx, events)?;
                break;
            }
        }
        if let Phase::Perf {
            deadline: Some(deadline),
            ..
        } = self.phase
        {
            if now >= deadline {
                self.end_timed_perf(now, ctx, events);
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
            return self.send_file(c, id, ctx, scratch, events);
        }
        Ok(())
    }

    fn on_data(
        &mut self,
        data: &[u8],
        ctx: &SessionCtx<'_>,
        now: Duration,
    ) -> Result<(), NetError> {
        match &mut self.phase {
            Phase::Header => {
                self.inbox.extend_from_slice(data);
                if let Some((req, used)) = Request::decode(&self.inbox)? {
                    let rest = self.inbox.split_off(used);
                    self.inbox = Vec::new();
                    self.start(req, ctx, now)?;
                    if !rest.is_empty() {
                        self.on_data(&rest, ctx, now)?;
                    }
                }
                Ok(())
            }
            Phase::Put { upload, .. } => upload.write(data),
            Phase::Perf {
                received,
                latency,
                reads,
                ..
            } => {
                latency.take(*received, data, wall_ns());
                reads.read(now, data.len() as u64);
                *received += data.len() as u64;
                Ok(())
            }
            Phase::PerfOver => Ok(()),
            Phase::Committing { .. } | Phase::Get { .. } | Phase::Done => {
                Err(NetError::Protocol("unexpected data".into()))
            }
        }
    }

    fn start(&mut self, req: Request, ctx: &SessionCtx<'_>, now: Duration) -> Result<(), NetError> {
        let need_store = || {
            ctx.store
                .ok_or_else(|| NetError::Remote("this server only runs perf".into()))
        };
        match req {
            Request::Put { name, size, hash } => {
                let stored = write_name(ctx.who, &name).map_err(NetError::Remote)?;
                match need_store()?.begin_put(&stored, size, hash)? {
                    PutStart::AlreadyStored => {
                        // An earlier run stored it but its client never
                        // heard: queue it again (idempotent), then confirm.
                        self.out.push(&Reply::PutFrom { offset: size }.encode());
                        self.job = Some(Job {
                            stored,
                            who: ctx.who.cloned(),
                            work: Work::Requeue {
                                bytes: size,
                                blake3: hash,
                            },
                        });
                        self.phase = Phase::Committing {
                            name,
                            from: size,
                            bytes: size,
                            announce: false,
                        };
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
                        self.phase = Phase::Put {
                            upload,
                            name,
                            stored,
                            from,
                        };
                    }
                }
            }
            Request::Get { name, offset } => {
                let stored = read_name(ctx.who, &name).map_err(NetError::Remote)?;
                let (mut file, size, hash) =
                    need_store()?.open_get(&stored).map_err(|e| match e {
                        NetError::File { err, .. }
                            if matches!(
                                err.kind(),
                                std::io::ErrorKind::NotFound | std::io::ErrorKind::IsADirectory
                            ) =>
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
                    reads: ReadTimeline::default(),
                };
            }
        }
        Ok(())
    }

    fn on_fin(
        &mut self,
        now: Duration,
        ctx: &SessionCtx<'_>,
        events: &mut Vec<ServerEvent>,
    ) -> Result<(), NetError> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Put {
                upload,
                name,
                stored,
                from,
            } => {
                if !upload.is_complete() {
                    let (got, size) = (upload.written, upload.size);
                    return Err(NetError::Protocol(format!(
                        "upload ended at {got} of {size} bytes"
                    )));
                }
                // A key revoked during the upload gets no acknowledgement;
                // its bytes stay in the partial file, never committed.
                ctx.still_allowed()?;
                // fsync, rename, directory fsync and the hook block for
                // milliseconds: they run on the commit thread, and the
                // reply waits for them (`committed`).
                let bytes = upload.size;
                self.job = Some(Job {
                    stored,
                    who: ctx.who.cloned(),
                    work: Work::Commit(upload),
                });
                self.phase = Phase::Committing {
                    name,
                    from,
                    bytes,
                    announce: true,
                };
                return Ok(());
            }
            Phase::Perf {
                expected,
                received,
                started,
                cpu_start,
                mut latency,
                reads,
                ..
            } => {
                if expected != 0 && received != expected {
                    return Err(NetError::Protocol(format!(
                        "perf got {received} of {expected} bytes"
                    )));
                }
                self.perf_done(
                    now,
                    (received, started, cpu_start),
                    (&mut latency, &reads),
                    ctx,
                    events,
                );
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
    fn end_timed_perf(
        &mut self,
        now: Duration,
        ctx: &SessionCtx<'_>,
        events: &mut Vec<ServerEvent>,
    ) {
        if let Phase::Perf {
            received,
            started,
            cpu_start,
            mut latency,
            reads,
            ..
        } = std::mem::replace(&mut self.phase, Phase::PerfOver)
        {
            self.perf_done(
                now,
                (received, started, cpu_start),
                (&mut latency, &reads),
                ctx,
                events,
            );
        }
    }

    /// Answers a perf run with what arrived, `(bytes, when it started, the
    /// CPU time then)`, and reports it with when the data was read.
    fn perf_done(
        &mut self,
        now: Duration,
        (received, started, cpu_start): (u64, Duration, Duration),
        (latency, reads): (&mut LatencyMeter, &ReadTimeline),
        ctx: &SessionCtx<'_>,
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
            vehicle: ctx.vehicle(),
            bytes: received,
            seconds: now.saturating_sub(started).as_secs_f64(),
            cpu_seconds: cpu.as_secs_f64(),
            duration_s: reads.span().as_secs_f64(),
            goodput_bps: match reads.span().as_secs_f64() {
                0.0 => 0.0,
                span => received as f64 * 8.0 / span,
            },
            stalls: reads.stalls_ms(),
            timeline: reads.timeline().to_vec(),
        });
    }

    fn send_file(
        &mut self,
        c: &mut Connection,
        id: StreamId,
        ctx: &SessionCtx<'_>,
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
                vehicle: ctx.vehicle(),
                name: name.clone(),
                bytes: *sent,
            });
            self.phase = Phase::Done;
            self.out.finish_when_empty();
        }
        Ok(())
    }
}

//! One request on one stream, server side: parse the header, then store
//! an upload, send a download, or count perf bytes.

use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use convoy_proto::{Connection, StreamError, StreamId};

use crate::auth::{read_name, write_name, Identity};
use crate::error::NetError;
use crate::perf_stamps::{wall_ns, LatencyMeter};
use crate::perf_timeline::ReadTimeline;
use crate::request::{Reply, Request};
use crate::server::committer::{Job, Open, Opened, Outcome, Work};
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
        /// Bytes read per `timeline_bin_s` from the first byte.
        timeline: Vec<u64>,
        /// The timeline's bin width: 10 ms, doubled as a long run goes on.
        timeline_bin_s: f64,
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
    /// A worker saw the stop flag: it takes no new connections or streams
    /// and finishes the `commits` it has begun (once per worker).
    Draining { connections: usize, commits: usize },
    /// A worker closed its `connections` after `millis`: `complete` if
    /// every commit was answered and delivered, else the drain limit cut
    /// `commits` still running and `undelivered` connections whose data
    /// had not all reached the peer (a committed file stays stored; its
    /// client, asking again, is told so without sending it again).
    Drained {
        millis: f64,
        complete: bool,
        connections: usize,
        commits: usize,
        undelivered: usize,
    },
}

/// What a session needs from the server around it.
pub struct SessionCtx<'a> {
    pub store: Option<&'a Store>,
    /// Who the peer is (`None` on a server without an authorizer).
    pub who: Option<&'a Identity>,
    /// The peer's static key (asked about again before a commit).
    pub key: Option<[u8; 32]>,
}

impl SessionCtx<'_> {
    fn vehicle(&self) -> Option<String> {
        self.who.map(|w| w.name.clone())
    }
}

enum Phase {
    Header,
    /// The request needs a file read before its first reply (a hash); the
    /// open thread does it ([`Session::take_job`]), the reply waits for
    /// [`Session::job_done`].
    Opening {
        name: String,
        stored: String,
        /// A download, from this offset; an upload if `None`.
        download_from: Option<u64>,
    },
    Put {
        upload: Box<PartialUpload>,
        /// As the client named it, and as stored (namespace included).
        name: String,
        stored: String,
        from: u64,
        /// Bytes still to drop before writing: a client that sent its file
        /// from the start (`Request::Put::from_start`) resends what the
        /// partial already holds.
        skip: u64,
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
    /// A control stream: the server's app takes it over
    /// ([`Session::take_control`]) with the bytes that came behind the
    /// header.
    Control {
        early: Vec<u8>,
    },
    /// The server is stopping: what still arrives is read and dropped
    /// (an upload's partial file keeps what it had, for the client to
    /// resume), so the peer's flow control never stalls the connection
    /// while the replies of commits in flight reach it.
    Stopped,
    Done,
}

/// What an upload a stopping server cut short is told.
pub const SHUTTING_DOWN: &str =
    "the server is shutting down; the upload resumes from what it stored on the next run";

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
    /// The client sends its file from byte 0 without waiting for the
    /// resume offset (`Request::Put::from_start`).
    from_start: bool,
    /// What the client still sends is of no use (a file sent from the
    /// start that was stored already): read and dropped.
    drop_data: bool,
}

/// A stored file that is not there, as the client should read it.
fn no_such(name: &str, e: NetError) -> NetError {
    match e {
        NetError::File { err, .. }
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::IsADirectory
            ) =>
        {
            NetError::Remote(format!("no file named {name:?} on the server"))
        }
        other => other,
    }
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
            from_start: false,
            drop_data: false,
        }
    }

    /// The storage work this session waits for, to run off the protocol
    /// thread; its outcome comes back through [`Session::committed`].
    pub fn take_job(&mut self) -> Option<Job> {
        self.job.take()
    }

    /// This session's job is done. A commit: say "stored" only now, with
    /// the file fsynced, renamed, its directory fsynced and the hook run;
    /// or report why not. An open: go on with the request.
    pub fn job_done(
        &mut self,
        outcome: Outcome,
        ctx: &SessionCtx<'_>,
        events: &mut Vec<ServerEvent>,
    ) {
        match (std::mem::replace(&mut self.phase, Phase::Done), outcome) {
            (
                Phase::Committing {
                    name,
                    from,
                    bytes,
                    announce,
                },
                Outcome::Stored(stored),
            ) => self.committed(stored, (name, from, bytes, announce), ctx, events),
            (
                Phase::Opening {
                    name,
                    stored,
                    download_from,
                },
                Outcome::Opened(opened),
            ) => {
                let opened = match download_from {
                    Some(_) => opened.map_err(|e| no_such(&name, e)),
                    None => opened,
                };
                let went_on = opened.and_then(|opened| match opened {
                    Opened::Put(start) => {
                        self.put_started(start, name, stored, ctx)?;
                        // Data sent right behind the request header.
                        let early = std::mem::take(&mut self.inbox);
                        if early.is_empty() {
                            Ok(())
                        } else {
                            self.on_data(&early, ctx, Duration::ZERO)
                        }
                    }
                    Opened::Get { file, size, hash } => {
                        self.get_started(file, size, hash, name, download_from.unwrap_or(0))
                    }
                });
                if let Err(e) = went_on {
                    self.fail(&e, ctx, events);
                }
            }
            // Not waiting for this (abandoned or failed meanwhile).
            (phase, _) => self.phase = phase,
        }
    }

    fn committed(
        &mut self,
        outcome: Result<[u8; 32], NetError>,
        (name, from, bytes, announce): (String, u64, u64, bool),
        ctx: &SessionCtx<'_>,
        events: &mut Vec<ServerEvent>,
    ) {
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

    /// A control stream's header was read: the session ends here, and
    /// the bytes read behind the header go to the control session.
    pub fn take_control(&mut self) -> Option<Vec<u8>> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Control { early } => Some(early),
            other => {
                self.phase = other;
                None
            }
        }
    }

    /// Its upload is being made durable: the committer's outcome is still
    /// to come, whether or not the connection lives to take the reply.
    pub fn is_committing(&self) -> bool {
        matches!(self.phase, Phase::Committing { .. })
    }

    pub fn is_done(&self) -> bool {
        // A file sent from the start that was stored already is read to
        // its end: bytes left unread in the stream would hold the
        // connection's flow-control credit.
        matches!(self.phase, Phase::Done) && self.out.is_empty() && !self.drop_data
    }

    /// The server is stopping: unless its commit is running (then it is
    /// answered), the request goes no further and what arrives for it is
    /// dropped; an upload's partial file stays for the client's next run.
    /// An upload is told so (its client stops sending it and hears the
    /// answers to its other uploads before the connection closes; a bare
    /// end of stream read as a broken protocol, and the client quit
    /// without them).
    pub fn stop(&mut self) {
        if matches!(
            self.phase,
            Phase::Committing { .. } | Phase::Done | Phase::Stopped
        ) {
            return;
        }
        let upload = matches!(
            self.phase,
            Phase::Put { .. }
                | Phase::Opening {
                    download_from: None,
                    ..
                }
        );
        if upload {
            self.out.push(
                &Reply::Error {
                    message: SHUTTING_DOWN.into(),
                }
                .encode(),
            );
        }
        self.phase = Phase::Stopped;
        self.partial = None;
        self.job = None;
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
            // Nothing to do until the commit or open thread answers; what
            // the peer sends meanwhile waits in the stream, under its flow
            // control.
            Phase::Committing { .. } | Phase::Opening { .. } => return Ok(()),
            _ => {}
        }
        loop {
            let fin = match c.read(id, scratch) {
                Ok(0) => true,
                Ok(n) => {
                    self.on_data(&scratch[..n], ctx, now)?;
                    if matches!(self.phase, Phase::Committing { .. } | Phase::Opening { .. }) {
                        // The header started a job: the rest (a file sent
                        // from the start, and its FIN) waits in the stream
                        // until the job's outcome says where it goes.
                        break;
                    }
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
            Phase::Put { upload, skip, .. } => {
                let dropped = (*skip).min(data.len() as u64) as usize;
                *skip -= dropped as u64;
                upload.write(&data[dropped..])
            }
            // The rest of the read that held the request header.
            Phase::Opening { .. } => {
                self.inbox.extend_from_slice(data);
                Ok(())
            }
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
            Phase::PerfOver | Phase::Stopped => Ok(()),
            Phase::Control { early } => {
                early.extend_from_slice(data);
                Ok(())
            }
            Phase::Committing { .. } | Phase::Done if self.drop_data => Ok(()),
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
            Request::Put {
                name,
                size,
                hash,
                from_start,
            } => {
                self.from_start = from_start;
                let stored = write_name(ctx.who, &name).map_err(NetError::Remote)?;
                let store = need_store()?;
                let owner = ctx.who.map_or("", |w| w.name.as_str());
                if store.put_needs_reading(owner, &stored, size, &hash) {
                    self.open_off_thread(name, stored, None, Open::Put { size, hash }, ctx);
                } else {
                    let start = store.begin_put(owner, &stored, size, hash)?;
                    self.put_started(start, name, stored, ctx)?;
                }
            }
            Request::Get { name, offset } => {
                let stored = read_name(ctx.who, &name).map_err(NetError::Remote)?;
                let store = need_store()?;
                if store.get_needs_reading(&stored) {
                    self.open_off_thread(name, stored, Some(offset), Open::Get, ctx);
                } else {
                    let (file, size, hash) =
                        store.open_get(&stored).map_err(|e| no_such(&name, e))?;
                    self.get_started(file, size, hash, name, offset)?;
                }
            }
            Request::Control => self.phase = Phase::Control { early: Vec::new() },
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

    fn open_off_thread(
        &mut self,
        name: String,
        stored: String,
        download_from: Option<u64>,
        open: Open,
        ctx: &SessionCtx<'_>,
    ) {
        self.job = Some(Job {
            stored: stored.clone(),
            who: ctx.who.cloned(),
            key: ctx.key,
            work: Work::Open(open),
        });
        self.phase = Phase::Opening {
            name,
            stored,
            download_from,
        };
    }

    fn put_started(
        &mut self,
        start: PutStart,
        name: String,
        stored: String,
        ctx: &SessionCtx<'_>,
    ) -> Result<(), NetError> {
        match start {
            PutStart::AlreadyStored { size, blake3 } => {
                // An earlier run stored it but its client never heard:
                // queue it again (idempotent), then confirm.
                self.out.push(&Reply::PutFrom { offset: size }.encode());
                self.drop_data = self.from_start;
                self.job = Some(Job {
                    stored,
                    who: ctx.who.cloned(),
                    key: ctx.key,
                    work: Work::Requeue {
                        bytes: size,
                        blake3,
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
                    skip: if self.from_start { from } else { 0 },
                };
            }
        }
        Ok(())
    }

    fn get_started(
        &mut self,
        mut file: File,
        size: u64,
        hash: [u8; 32],
        name: String,
        offset: u64,
    ) -> Result<(), NetError> {
        if !self.inbox.is_empty() {
            return Err(NetError::Protocol("unexpected data".into()));
        }
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
                ..
            } => {
                if !upload.is_complete() {
                    let (got, size) = (upload.written, upload.size);
                    return Err(NetError::Protocol(format!(
                        "upload ended at {got} of {size} bytes"
                    )));
                }
                // fsync, rename, directory fsync and the hook block for
                // milliseconds: they run on the commit thread (which asks
                // about the key again first: a key revoked during the
                // upload is never acknowledged), and the reply waits for
                // them (`job_done`).
                let bytes = upload.size;
                self.job = Some(Job {
                    stored,
                    who: ctx.who.cloned(),
                    key: ctx.key,
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
            Phase::PerfOver | Phase::Stopped => {}
            Phase::Header => {
                return Err(NetError::Protocol("stream ended before the request".into()))
            }
            // A download's request side ends right after the request; our
            // side finishes when the file is sent. A file sent from the
            // start that was stored already has been dropped to its end.
            other => {
                self.phase = other;
                self.drop_data = false;
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
            timeline_bin_s: reads.bin().as_secs_f64(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::committer;

    fn ctx(store: &Store) -> SessionCtx<'_> {
        SessionCtx {
            store: Some(store),
            who: None,
            key: None,
        }
    }

    fn replies(s: &mut Session) -> Vec<Reply> {
        let mut buf = std::mem::take(&mut s.out.buf);
        let mut out = Vec::new();
        while let Some((r, used)) = Reply::decode(&buf).unwrap() {
            out.push(r);
            buf.drain(..used);
        }
        out
    }

    /// Sends `req`; returns the job the session handed over, if any.
    fn request(s: &mut Session, store: &Store, req: Request) -> Option<Job> {
        s.on_data(&req.encode(), &ctx(store), Duration::ZERO)
            .unwrap();
        s.take_job()
    }

    #[test]
    fn a_get_hashes_an_unhashed_file_off_the_driver_and_answers_when_done() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        std::fs::write(dir.path().join("big.bin"), vec![7u8; 3 << 20]).unwrap();
        let get = || Request::Get {
            name: "big.bin".into(),
            offset: 0,
        };

        let mut s = Session::new("127.0.0.1:1".parse().unwrap());
        let job = request(&mut s, &store, get()).expect("the hash is the open thread's");
        assert!(matches!(job.work, Work::Open(Open::Get)));
        assert!(replies(&mut s).is_empty(), "no answer before the hash");
        let outcome = committer::run(job, &store, None, None, None);
        s.job_done(outcome, &ctx(&store), &mut Vec::new());
        let expected = *blake3::hash(&vec![7u8; 3 << 20]).as_bytes();
        assert!(matches!(
            replies(&mut s)[..],
            [Reply::GetMeta { size, hash }] if size == 3 << 20 && hash == expected
        ));

        // Hashed once: the next get answers at once.
        let mut again = Session::new("127.0.0.1:1".parse().unwrap());
        assert!(request(&mut again, &store, get()).is_none());
        assert!(matches!(replies(&mut again)[..], [Reply::GetMeta { .. }]));
    }

    #[test]
    fn a_new_upload_starts_at_once_and_a_resumed_one_is_hashed_off_the_driver() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let data = vec![3u8; 1 << 20];
        let put = || Request::Put {
            name: "up.bin".into(),
            size: data.len() as u64,
            hash: *blake3::hash(&data).as_bytes(),
            from_start: false,
        };
        let mut first = Session::new("127.0.0.1:1".parse().unwrap());
        assert!(request(&mut first, &store, put()).is_none());
        assert!(matches!(
            replies(&mut first)[..],
            [Reply::PutFrom { offset: 0 }]
        ));
        first
            .on_data(&data[..4096], &ctx(&store), Duration::ZERO)
            .unwrap();
        first.abandon();

        let mut second = Session::new("127.0.0.1:1".parse().unwrap());
        let job = request(&mut second, &store, put()).expect("resume reads the partial");
        assert!(matches!(job.work, Work::Open(Open::Put { .. })));
        let outcome = committer::run(job, &store, None, None, None);
        second.job_done(outcome, &ctx(&store), &mut Vec::new());
        assert!(matches!(
            replies(&mut second)[..],
            [Reply::PutFrom { offset: 4096 }]
        ));
    }

    /// Puts `data` as "up.bin", sent from the start, through `s`, running
    /// every job the session hands over; returns its replies.
    fn put_from_start(s: &mut Session, store: &Store, data: &[u8]) -> Vec<Reply> {
        let req = Request::Put {
            name: "up.bin".into(),
            size: data.len() as u64,
            hash: *blake3::hash(data).as_bytes(),
            from_start: true,
        };
        let mut events = Vec::new();
        let run = |s: &mut Session, events: &mut Vec<ServerEvent>| {
            while let Some(job) = s.take_job() {
                let outcome = committer::run(job, store, None, None, None);
                s.job_done(outcome, &ctx(store), events);
            }
        };
        // The header and the file arrive in one read, as they do when the
        // client writes both at once.
        let mut first = req.encode();
        first.extend_from_slice(&data[..data.len() / 2]);
        s.on_data(&first, &ctx(store), Duration::ZERO).unwrap();
        run(s, &mut events);
        s.on_data(&data[data.len() / 2..], &ctx(store), Duration::ZERO)
            .unwrap();
        s.on_fin(Duration::ZERO, &ctx(store), &mut events).unwrap();
        run(s, &mut events);
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, ServerEvent::Failed { .. })),
            "{events:?}"
        );
        replies(s)
    }

    #[test]
    fn a_file_sent_from_the_start_skips_what_a_partial_holds() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let hash = *blake3::hash(&data).as_bytes();
        // An earlier run left 4096 bytes.
        let mut earlier = Session::new("127.0.0.1:1".parse().unwrap());
        let req = Request::Put {
            name: "up.bin".into(),
            size: data.len() as u64,
            hash,
            from_start: false,
        };
        assert!(request(&mut earlier, &store, req).is_none());
        earlier
            .on_data(&data[..4096], &ctx(&store), Duration::ZERO)
            .unwrap();
        earlier.abandon();

        let mut s = Session::new("127.0.0.1:1".parse().unwrap());
        let got = put_from_start(&mut s, &store, &data);
        assert!(
            matches!(got[..], [Reply::PutFrom { offset: 4096 }, Reply::Stored { hash: h }] if h == hash),
            "{got:?}"
        );
        assert_eq!(std::fs::read(dir.path().join("up.bin")).unwrap(), data);
        assert!(s.is_done());
    }

    #[test]
    fn a_file_sent_from_the_start_that_is_stored_already_is_read_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let data = vec![9u8; 3000];
        let hash = *blake3::hash(&data).as_bytes();
        let mut first = Session::new("127.0.0.1:1".parse().unwrap());
        let got = put_from_start(&mut first, &store, &data);
        assert!(
            matches!(
                got[..],
                [Reply::PutFrom { offset: 0 }, Reply::Stored { .. }]
            ),
            "{got:?}"
        );

        // Its client never heard: it sends the whole file again.
        let mut again = Session::new("127.0.0.1:1".parse().unwrap());
        let got = put_from_start(&mut again, &store, &data);
        assert!(
            matches!(got[..], [Reply::PutFrom { offset: 3000 }, Reply::Stored { hash: h }] if h == hash),
            "{got:?}"
        );
        assert!(
            again.is_done(),
            "done once the resent file is read to its end"
        );
        assert_eq!(std::fs::read(dir.path().join("up.bin")).unwrap(), data);
    }

    #[test]
    fn a_get_of_a_missing_file_is_refused_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut s = Session::new("127.0.0.1:1".parse().unwrap());
        let req = Request::Get {
            name: "nope".into(),
            offset: 0,
        };
        let err = s
            .on_data(&req.encode(), &ctx(&store), Duration::ZERO)
            .unwrap_err();
        assert!(err.to_string().contains("no file named \"nope\""), "{err}");
    }
}

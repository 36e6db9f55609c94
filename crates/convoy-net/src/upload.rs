//! Client side of uploads: hash the file, ask the server where to resume,
//! send the rest, and return only once the server says the file is on
//! disk under its final name with the same BLAKE3.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use convoy_proto::{Connection, ConnectionHandle, Endpoint, StreamError, StreamId};

use crate::client::{live, read_replies, Client, Progress, ProgressFn};
use crate::driver::{Application, Step};
use crate::error::NetError;
use crate::multipath::{path_progress, PathNames, PathProgress};
use crate::request::{validate_name, Reply, Request};
use crate::session::Outbox;
use crate::store::hash_file;

/// How often progress callbacks run.
pub const PROGRESS_TICK: Duration = Duration::from_millis(200);

/// File reads per step, and the buffer replies are read through.
const SCRATCH: usize = 256 * 1024;

#[derive(Clone, Debug, serde::Serialize)]
pub struct UploadReport {
    pub name: String,
    pub bytes: u64,
    /// Bytes the server already had from an earlier, interrupted run.
    pub resumed_from: u64,
    pub seconds: f64,
    pub blake3: String,
}

/// Where an upload's bytes come from: a file (the agent's spool, `convoy
/// send`), or memory (the fleet load generator's segments, which it makes
/// in memory so that ten thousand vehicles need no file each a second).
enum Source {
    File(File),
    Bytes(std::io::Cursor<Vec<u8>>),
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Source::File(f) => f.read(buf),
            Source::Bytes(b) => b.read(buf),
        }
    }
}

impl Seek for Source {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        match self {
            Source::File(f) => f.seek(pos),
            Source::Bytes(b) => b.seek(pos),
        }
    }
}

/// Files up to this size go from byte 0 right behind their request
/// (`Request::Put::from_start`) instead of waiting a round trip for the
/// resume offset: a live telemetry segment is a few hundred bytes, and on
/// a cellular uplink that holds seconds of queue that round trip is most
/// of its median upload time (`convoy-sim/tests/two_lanes.rs`,
/// `a_cell_of_vehicles`). Resending a partial of this size costs less
/// than the round trip on any link it matters on.
pub const FROM_START_MAX: u64 = 64 * 1024;

/// Whether a file of `size` bytes goes from byte 0 without waiting for
/// the resume offset.
fn sends_from_start(size: u64) -> bool {
    size <= FROM_START_MAX
}

/// One upload's protocol: the request, the server's resume offset, the
/// data from there, and the server's "stored" with the same BLAKE3.
pub(crate) struct OneUpload {
    file: Source,
    path: std::path::PathBuf,
    name: String,
    request: Option<Request>,
    size: u64,
    hash: [u8; 32],
    stream: Option<StreamId>,
    out: Outbox,
    inbox: Vec<u8>,
    resume_from: Option<u64>,
    pos: u64,
    finished: bool,
    pub(crate) stored: bool,
    started: Duration,
}

impl OneUpload {
    /// Hashes the file (the server checks the whole of it, resumed or not).
    fn open(path: &Path, name: Option<&str>) -> Result<OneUpload, NetError> {
        let name = match name {
            Some(n) => n.to_owned(),
            None => path
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| NetError::Config(format!("{}: no file name", path.display())))?
                .to_owned(),
        };
        validate_name(&name).map_err(NetError::Config)?;
        let (hash, size) = hash_file(path)?;
        let file = File::open(path).map_err(|e| NetError::file(path, e))?;
        Ok(OneUpload::new(Source::File(file), path, name, size, hash))
    }

    /// An upload of `data`, held in memory, as `name`.
    pub(crate) fn from_bytes(name: String, data: Vec<u8>) -> Result<OneUpload, NetError> {
        validate_name(&name).map_err(NetError::Config)?;
        let hash = *blake3::hash(&data).as_bytes();
        let size = data.len() as u64;
        let path = Path::new(&name).to_owned();
        let source = Source::Bytes(std::io::Cursor::new(data));
        Ok(OneUpload::new(source, &path, name, size, hash))
    }

    fn new(file: Source, path: &Path, name: String, size: u64, hash: [u8; 32]) -> OneUpload {
        let from_start = sends_from_start(size);
        OneUpload {
            file,
            path: path.to_owned(),
            request: Some(Request::Put {
                name: name.clone(),
                size,
                hash,
                from_start,
            }),
            name,
            size,
            hash,
            stream: None,
            out: Outbox::default(),
            inbox: Vec::new(),
            // Sent from the start: the server skips what it holds.
            resume_from: from_start.then_some(0),
            pos: 0,
            finished: false,
            stored: false,
            started: Duration::ZERO,
        }
    }

    /// Sends the request, reads replies, and writes file data while the
    /// connection has room (uploads in a batch share it in the order their
    /// steps come; their requests and confirmations overlap).
    pub(crate) fn step(
        &mut self,
        c: &mut Connection,
        now: Duration,
        scratch: &mut [u8],
    ) -> Result<(), NetError> {
        let id = match self.stream {
            Some(id) => id,
            None => {
                let id = match c.open_stream() {
                    Ok(id) => id,
                    // More files in the batch than the server's stream
                    // credit: this one starts once an earlier one ends.
                    Err(StreamError::StreamLimit) => return Ok(()),
                    Err(e) => return Err(e.into()),
                };
                let req = self.request.take().expect("sent once");
                self.out.push(&req.encode());
                self.stream = Some(id);
                self.started = now;
                id
            }
        };
        self.out.flush(c, id)?;
        let (replies, fin) = read_replies(c, id, &mut self.inbox, scratch)?;
        for r in replies {
            match r {
                // Sent from the start: the server drops what it holds.
                Reply::PutFrom { offset } if offset <= self.size && sends_from_start(self.size) => {
                }
                Reply::PutFrom { offset } if offset <= self.size => {
                    self.file
                        .seek(SeekFrom::Start(offset))
                        .map_err(|e| NetError::file(&self.path, e))?;
                    self.resume_from = Some(offset);
                    self.pos = offset;
                }
                Reply::Stored { hash } if hash == self.hash => self.stored = true,
                Reply::Stored { .. } => {
                    return Err(NetError::Integrity(
                        "the server stored a file whose BLAKE3 differs from ours".into(),
                    ))
                }
                Reply::Error { message } => return Err(NetError::Remote(message)),
                other => {
                    return Err(NetError::Protocol(format!("unexpected reply {other:?}")));
                }
            }
        }
        if self.stored {
            return Ok(());
        }
        if fin {
            return Err(NetError::Protocol(
                "the server ended the upload without confirming it".into(),
            ));
        }
        // Data goes behind the whole request header, never into it.
        if self.resume_from.is_some() && !self.finished && self.out.is_empty() {
            while self.pos < self.size {
                let room = c.write_room(id).min(scratch.len());
                if room == 0 {
                    break;
                }
                let want = room.min((self.size - self.pos) as usize);
                let n = self
                    .file
                    .read(&mut scratch[..want])
                    .map_err(|e| NetError::file(&self.path, e))?;
                if n == 0 {
                    return Err(NetError::file(
                        &self.path,
                        std::io::Error::other("the file shrank during the upload"),
                    ));
                }
                let w = c.write(id, &scratch[..n])?;
                self.pos += w as u64;
                if w < n {
                    self.file
                        .seek(SeekFrom::Start(self.pos))
                        .map_err(|e| NetError::file(&self.path, e))?;
                    break;
                }
            }
            if self.pos == self.size {
                c.finish(id)?;
                self.finished = true;
            }
        }
        Ok(())
    }

    /// Bytes still to hand over to the connection.
    fn left(&self) -> u64 {
        self.size.saturating_sub(self.pos)
    }

    /// What the server holds: what it had before, and what it acknowledged.
    fn held(&self, c: &Connection) -> u64 {
        let acked = self.stream.map(|id| c.stream_acked(id)).unwrap_or(0);
        (self.resume_from.unwrap_or(0) + acked).min(self.pos)
    }

    fn report(&self, now: Duration) -> UploadReport {
        UploadReport {
            name: self.name.clone(),
            bytes: self.size,
            resumed_from: self.resume_from.unwrap_or(0),
            seconds: now.saturating_sub(self.started).as_secs_f64(),
            blake3: convoy_proto::crypto::hex(&self.hash),
        }
    }
}

struct UploadApp<'p> {
    h: ConnectionHandle,
    server: SocketAddr,
    upload: OneUpload,
    scratch: Vec<u8>,
    progress: Option<ProgressFn<'p>>,
    next_tick: Duration,
    /// Path id to interface name, for the per-path figures.
    names: PathNames,
}

impl Application for UploadApp<'_> {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        let c = live(ep, self.h, self.server)?;
        self.upload.step(c, now, &mut self.scratch)?;
        if self.upload.stored {
            return Ok(Step::Done);
        }
        if now >= self.next_tick {
            self.next_tick = now + PROGRESS_TICK;
            if let Some(p) = self.progress.as_mut() {
                // What the server holds, not what we handed the connection:
                // with a bounded send side they differ by a fraction of a
                // second, but a progress bar that runs ahead lies.
                p(Progress {
                    done: self.upload.held(c),
                    total: self.upload.size,
                    elapsed: now.saturating_sub(self.upload.started),
                    paths: figures(c, &self.names, true),
                });
            }
        }
        Ok(Step::Continue)
    }

    fn wake_at(&self) -> Option<Duration> {
        Some(self.next_tick)
    }
}

/// The connection's per-path progress figures, with interface names
/// from the path manager; `sending`: an upload.
pub(crate) fn figures(c: &Connection, names: &PathNames, sending: bool) -> Vec<PathProgress> {
    let names = names.borrow();
    path_progress(c, |id| names.get(&id).cloned(), sending)
}

/// Where [`Client::upload_queue`] takes its files and reports them stored.
pub trait UploadQueue {
    /// The next file to upload and its name; `None` ends the queue once
    /// what is in flight is confirmed (unless [`UploadQueue::refilled`]
    /// says to ask again meanwhile). Asked whenever there is room in the
    /// window, so a queue fed from elsewhere (a spool) keeps the
    /// connection busy without a gap between batches.
    fn next(&mut self) -> Option<(std::path::PathBuf, String)>;
    /// Asked on each turn while uploads are still in flight after `next`
    /// said `None`: `true` if `next` may have a file again (a queue fed
    /// from elsewhere, such as a spool a segmenter adds to), so that file
    /// goes out beside those in flight instead of waiting for the last of
    /// them to be confirmed. By default `false`: `None` ends the queue.
    /// Keep it cheap (a counter compared); `next` is the expensive ask.
    fn refilled(&mut self) -> bool {
        false
    }
    /// The `index`-th file (counting from 0 in the order `next` gave them)
    /// is durable at the server. Called as each confirmation arrives,
    /// which need not be the order `next` gave them: a log taken after a
    /// camera file is confirmed while the camera file is still going.
    fn stored(&mut self, index: usize, report: UploadReport);
    /// The `index`-th file was not stored: the server refused or cut it,
    /// or it could not be read. No file is taken after it; the call ends
    /// with the first such error once the others in flight are confirmed
    /// or failed. Ignored unless implemented.
    fn failed(&mut self, _index: usize, _error: &NetError) {}
    /// Every [`PROGRESS_TICK`], each path's figures (interface, rate,
    /// RTT, bytes, share). Ignored unless implemented.
    fn paths(&mut self, _paths: Vec<PathProgress>) {}
}

/// Several uploads on one connection, up to `window` at once: their
/// requests, resume offsets and "stored" confirmations overlap, so a queue
/// of small files is not a round trip each, and the one with the least
/// left sends first.
struct QueueApp<'q> {
    h: ConnectionHandle,
    server: SocketAddr,
    queue: &'q mut dyn UploadQueue,
    ended: bool,
    index: usize,
    window: usize,
    active: std::collections::VecDeque<(usize, OneUpload)>,
    /// The first upload that failed (the server refused or ended it, its
    /// file could not be read): no new file is taken, the others in flight
    /// go on to their confirmations, then the queue ends with this error.
    failed: Option<NetError>,
    scratch: Vec<u8>,
    next_tick: Duration,
    names: PathNames,
}

impl Application for QueueApp<'_> {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        // Until a turn confirms nothing: a confirmation makes room for the
        // next file, whose request should not wait for a network event.
        loop {
            // A queue that ran dry while uploads are in flight is asked
            // again once it says it was refilled: otherwise a file made
            // just after the queue ran dry waited for every upload in
            // flight to be confirmed (two round trips through a queue the
            // other lane's bulk data fills), and then for its own. That
            // made an agent's live telemetry reach the server in batches,
            // one batch's round trips apart.
            if self.ended && !self.active.is_empty() && self.queue.refilled() {
                self.ended = false;
            }
            while !self.ended && self.active.len() < self.window {
                let Some((path, name)) = self.queue.next() else {
                    self.ended = true;
                    break;
                };
                self.active
                    .push_back((self.index, OneUpload::open(&path, Some(&name))?));
                self.index += 1;
            }
            if self.active.is_empty() {
                return match self.failed.take() {
                    Some(e) => Err(e),
                    None => Ok(Step::Done),
                };
            }
            let c = live(ep, self.h, self.server)?;
            if now >= self.next_tick {
                self.next_tick = now + PROGRESS_TICK;
                self.queue.paths(figures(c, &self.names, true));
            }
            // The upload with the least data left writes first, the others
            // into what room it leaves: a log taken after a camera file goes
            // out in its own size's time instead of waiting behind the whole
            // camera file, and files of one size still go one after another
            // (the order given breaks ties), so each is done as early as it
            // can be.
            let mut order: Vec<usize> = (0..self.active.len()).collect();
            order.sort_by_key(|&i| self.active[i].1.left());
            // Uploads leaving the window (failed or confirmed) make this
            // turn go round again: for the next file, or, once the window
            // is empty, to end the queue without waiting for an event.
            let waiting = self.active.len();
            let mut failed_now = Vec::new();
            for k in order {
                let (index, u) = &mut self.active[k];
                let index = *index;
                if !u.stored {
                    // One upload's failure is its own: a server that is
                    // stopping refuses the uploads still receiving but
                    // answers those it is committing, and those answers
                    // are heard before the queue ends with the error.
                    if let Err(e) = u.step(c, now, &mut self.scratch) {
                        self.queue.failed(index, &e);
                        self.failed.get_or_insert(e);
                        self.ended = true;
                        failed_now.push(index);
                    }
                }
            }
            // Each confirmation is reported as it arrives, not behind an
            // earlier upload still going: held in order, a server's
            // "stored" for a small file sat behind a large one, and was
            // never heard of when the connection ended first (a server's
            // SIGTERM drain, an outage), though the file was durable.
            let queue = &mut *self.queue;
            self.active.retain(|(index, u)| {
                if failed_now.contains(index) {
                    return false;
                }
                if u.stored {
                    queue.stored(*index, u.report(now));
                    return false;
                }
                true
            });
            if self.active.len() == waiting {
                return Ok(Step::Continue);
            }
        }
    }

    fn wake_at(&self) -> Option<Duration> {
        Some(self.next_tick)
    }
}

impl Client {
    /// Uploads `path` as `name` (default: its file name). Returns once the
    /// server has it durably; an interrupted upload resumes on the next call
    /// with the same content and name, from any client process.
    pub fn upload(
        &mut self,
        path: &Path,
        name: Option<&str>,
        progress: Option<ProgressFn<'_>>,
    ) -> Result<UploadReport, NetError> {
        let mut app = UploadApp {
            h: self.handle,
            server: self.server,
            upload: OneUpload::open(path, name)?,
            scratch: vec![0; SCRATCH],
            progress,
            next_tick: Duration::ZERO,
            names: self.path_names(),
        };
        self.run_transfer(&mut app)?;
        Ok(app.upload.report(self.driver.now()))
    }

    /// Uploads what `queue` gives, in order, with up to `window` in flight,
    /// telling it as the server confirms each one durable. Returns when the
    /// queue has ended and everything taken is confirmed. On an error, the
    /// files confirmed so far were reported and the rest were not stored
    /// (they resume on a later call).
    pub fn upload_queue(
        &mut self,
        queue: &mut dyn UploadQueue,
        window: usize,
    ) -> Result<(), NetError> {
        let mut app = QueueApp {
            h: self.handle,
            server: self.server,
            queue,
            ended: false,
            index: 0,
            window: window.max(1),
            active: Default::default(),
            failed: None,
            scratch: vec![0; SCRATCH],
            next_tick: Duration::ZERO,
            names: self.path_names(),
        };
        self.run_transfer(&mut app)
    }
}

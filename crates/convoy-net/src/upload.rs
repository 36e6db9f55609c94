//! Client side of uploads: hash the file, ask the server where to resume,
//! send the rest, and return only once the server says the file is on
//! disk under its final name with the same BLAKE3.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use convoy_proto::{ConnectionHandle, Endpoint, StreamId};

use crate::client::{live, read_replies, Client, Progress, ProgressFn};
use crate::driver::{Application, Step};
use crate::error::NetError;
use crate::request::{validate_name, Reply, Request};
use crate::session::Outbox;
use crate::store::hash_file;

/// How often progress callbacks run.
pub const PROGRESS_TICK: Duration = Duration::from_millis(200);

#[derive(Clone, Debug, serde::Serialize)]
pub struct UploadReport {
    pub name: String,
    pub bytes: u64,
    /// Bytes the server already had from an earlier, interrupted run.
    pub resumed_from: u64,
    pub seconds: f64,
    pub blake3: String,
}

struct UploadApp<'p> {
    h: ConnectionHandle,
    server: SocketAddr,
    file: File,
    path: std::path::PathBuf,
    request: Option<Request>,
    size: u64,
    hash: [u8; 32],
    stream: Option<StreamId>,
    out: Outbox,
    inbox: Vec<u8>,
    resume_from: Option<u64>,
    pos: u64,
    finished: bool,
    stored: bool,
    scratch: Vec<u8>,
    progress: Option<ProgressFn<'p>>,
    started: Duration,
    next_tick: Duration,
}

impl Application for UploadApp<'_> {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        let c = live(ep, self.h, self.server)?;
        let id = match self.stream {
            Some(id) => id,
            None => {
                let id = c.open_stream()?;
                let req = self.request.take().expect("sent once");
                self.out.push(&req.encode());
                self.stream = Some(id);
                self.started = now;
                id
            }
        };
        self.out.flush(c, id)?;
        let (replies, fin) = read_replies(c, id, &mut self.inbox, &mut self.scratch)?;
        for r in replies {
            match r {
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
            return Ok(Step::Done);
        }
        if fin {
            return Err(NetError::Protocol(
                "the server ended the upload without confirming it".into(),
            ));
        }
        if self.resume_from.is_some() && !self.finished {
            while self.pos < self.size {
                let room = c.write_room(id).min(self.scratch.len());
                if room == 0 {
                    break;
                }
                let want = room.min((self.size - self.pos) as usize);
                let n = self
                    .file
                    .read(&mut self.scratch[..want])
                    .map_err(|e| NetError::file(&self.path, e))?;
                if n == 0 {
                    return Err(NetError::file(
                        &self.path,
                        std::io::Error::other("the file shrank during the upload"),
                    ));
                }
                let w = c.write(id, &self.scratch[..n])?;
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
        if now >= self.next_tick {
            self.next_tick = now + PROGRESS_TICK;
            if let Some(p) = self.progress.as_mut() {
                // What the server holds, not what we handed the connection:
                // with a bounded send side they differ by a fraction of a
                // second, but a progress bar that runs ahead lies.
                let held = self.resume_from.unwrap_or(0) + c.stream_acked(id);
                p(Progress {
                    done: held.min(self.pos),
                    total: self.size,
                    elapsed: now.saturating_sub(self.started),
                });
            }
        }
        Ok(Step::Continue)
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
        let mut app = UploadApp {
            h: self.handle,
            server: self.server,
            file,
            path: path.to_owned(),
            request: Some(Request::Put {
                name: name.clone(),
                size,
                hash,
            }),
            size,
            hash,
            stream: None,
            out: Outbox::default(),
            inbox: Vec::new(),
            resume_from: None,
            pos: 0,
            finished: false,
            stored: false,
            scratch: vec![0; 256 * 1024],
            progress,
            started: Duration::ZERO,
            next_tick: Duration::ZERO,
        };
        self.run_transfer(&mut app)?;
        let seconds = self.driver.now().saturating_sub(app.started).as_secs_f64();
        Ok(UploadReport {
            name,
            bytes: size,
            resumed_from: app.resume_from.unwrap_or(0),
            seconds,
            blake3: convoy_proto::crypto::hex(&hash),
        })
    }
}

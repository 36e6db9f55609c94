//! Client side of downloads: resume from a local partial file
//! (`DEST.convoy-part`), check BLAKE3 over the whole file, fsync, and only
//! then rename to DEST.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use convoy_proto::{ConnectionHandle, Endpoint, StreamError, StreamId};

use crate::client::{live, Client, Progress, ProgressFn};
use crate::driver::{Application, Step};
use crate::error::NetError;
use crate::request::{validate_name, Reply, Request};
use crate::session::Outbox;
use crate::store::sync_dir;
use crate::upload::PROGRESS_TICK;

#[derive(Clone, Debug, serde::Serialize)]
pub struct DownloadReport {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
    pub resumed_from: u64,
    pub seconds: f64,
    pub blake3: String,
}

/// Where an interrupted download of `dest` is kept.
pub fn partial_path(dest: &Path) -> PathBuf {
    let mut s = dest.as_os_str().to_owned();
    s.push(".convoy-part");
    PathBuf::from(s)
}

struct DownloadApp<'p> {
    h: ConnectionHandle,
    server: SocketAddr,
    request: Option<Request>,
    stream: Option<StreamId>,
    out: Outbox,
    inbox: Vec<u8>,
    meta: Option<(u64, [u8; 32])>,
    file: File,
    part: PathBuf,
    hasher: blake3::Hasher,
    have: u64,
    done: bool,
    scratch: Vec<u8>,
    progress: Option<ProgressFn<'p>>,
    started: Duration,
    next_tick: Duration,
    /// Path id to interface name, for the per-path figures.
    names: crate::multipath::PathNames,
}

impl DownloadApp<'_> {
    fn on_bytes(&mut self, data: &[u8]) -> Result<(), NetError> {
        if self.meta.is_none() {
            self.inbox.extend_from_slice(data);
            let Some((reply, used)) = Reply::decode(&self.inbox)? else {
                return Ok(());
            };
            match reply {
                Reply::GetMeta { size, hash } => self.meta = Some((size, hash)),
                Reply::Error { message } => return Err(NetError::Remote(message)),
                other => return Err(NetError::Protocol(format!("unexpected reply {other:?}"))),
            }
            let rest = self.inbox.split_off(used);
            self.inbox = Vec::new();
            return self.on_bytes_after_meta(&rest);
        }
        self.on_bytes_after_meta(data)
    }

    fn on_bytes_after_meta(&mut self, data: &[u8]) -> Result<(), NetError> {
        if data.is_empty() {
            return Ok(());
        }
        self.file
            .write_all(data)
            .map_err(|e| NetError::file(&self.part, e))?;
        self.hasher.update(data);
        self.have += data.len() as u64;
        Ok(())
    }

    fn on_fin(&mut self) -> Result<(), NetError> {
        let Some((size, hash)) = self.meta else {
            return Err(NetError::Protocol(
                "the server ended the download early".into(),
            ));
        };
        let got = *self.hasher.finalize().as_bytes();
        if self.have != size || got != hash {
            // A partial file from a different version of the remote file:
            // drop it so the next run starts clean.
            let _ = fs::remove_file(&self.part);
            return Err(NetError::Integrity(format!(
                "downloaded {} of {size} bytes with a different BLAKE3; the partial file was removed, run again",
                self.have
            )));
        }
        self.file
            .sync_all()
            .map_err(|e| NetError::file(&self.part, e))?;
        self.done = true;
        Ok(())
    }
}

impl Application for DownloadApp<'_> {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        let c = live(ep, self.h, self.server)?;
        let id = match self.stream {
            Some(id) => id,
            None => {
                let id = c.open_stream()?;
                self.out
                    .push(&self.request.take().expect("sent once").encode());
                self.out.finish_when_empty();
                self.stream = Some(id);
                self.started = now;
                id
            }
        };
        self.out.flush(c, id)?;
        let mut buf = std::mem::take(&mut self.scratch);
        let result = loop {
            match c.read(id, &mut buf) {
                Ok(0) => break self.on_fin(),
                Ok(n) => {
                    if let Err(e) = self.on_bytes(&buf[..n]) {
                        break Err(e);
                    }
                }
                Err(StreamError::Blocked) => break Ok(()),
                Err(e) => break Err(e.into()),
            }
        };
        self.scratch = buf;
        result?;
        if self.done {
            return Ok(Step::Done);
        }
        if now >= self.next_tick {
            self.next_tick = now + PROGRESS_TICK;
            if let (Some(p), Some((size, _))) = (self.progress.as_mut(), self.meta) {
                p(Progress {
                    done: self.have,
                    total: size,
                    elapsed: now.saturating_sub(self.started),
                    paths: crate::upload::figures(c, &self.names, false),
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
    /// Downloads `name` to `dest`. An interrupted download leaves
    /// `DEST.convoy-part`, which the next call resumes.
    pub fn download(
        &mut self,
        name: &str,
        dest: &Path,
        progress: Option<ProgressFn<'_>>,
    ) -> Result<DownloadReport, NetError> {
        validate_name(name).map_err(NetError::Config)?;
        let part = partial_path(dest);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&part)
            .map_err(|e| NetError::file(&part, e))?;
        let mut hasher = blake3::Hasher::new();
        let mut have = 0u64;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = file.read(&mut buf).map_err(|e| NetError::file(&part, e))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            have += n as u64;
        }
        let mut app = DownloadApp {
            h: self.handle,
            server: self.server,
            request: Some(Request::Get {
                name: name.to_owned(),
                offset: have,
            }),
            stream: None,
            out: Outbox::default(),
            inbox: Vec::new(),
            meta: None,
            file,
            part: part.clone(),
            hasher,
            have,
            done: false,
            scratch: vec![0; 256 * 1024],
            progress,
            started: Duration::ZERO,
            next_tick: Duration::ZERO,
            names: self.path_names(),
        };
        self.run_transfer(&mut app)?;
        let (size, hash) = app.meta.expect("done implies metadata");
        fs::rename(&part, dest).map_err(|e| NetError::file(dest, e))?;
        let parent = dest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        sync_dir(parent)?;
        Ok(DownloadReport {
            name: name.to_owned(),
            path: dest.to_owned(),
            bytes: size,
            resumed_from: have,
            seconds: self.driver.now().saturating_sub(app.started).as_secs_f64(),
            blake3: convoy_proto::crypto::hex(&hash),
        })
    }
}

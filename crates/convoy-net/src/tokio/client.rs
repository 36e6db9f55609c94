//! The async client handle and its transfers, each a value that can be
//! configured, observed through [`Upload::progress`] and the like, and
//! then awaited.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use ::tokio::sync::mpsc::{self, UnboundedSender};
use ::tokio::sync::{oneshot, watch};
use convoy_proto::ConnectionStats;

use super::cancel::CancelOnDrop;
use super::worker::{self, Command, Job, Reply};
use crate::client::{ClientOptions, Progress};
use crate::error::NetError;
use crate::perf::{PerfAmount, PerfInterval, PerfReport};
use crate::wake::Waker;
use crate::{DownloadReport, UploadReport};

/// The future of a transfer: `Send` and `'static`, so it can be awaited
/// in place or given to `tokio::spawn`. Dropping it cancels the transfer
/// (see the [module docs](super#cancellation)).
pub type Pending<T> = Pin<Box<dyn Future<Output = Result<T, NetError>> + Send + 'static>>;

/// An async client: a handle to one connection, run by a driver thread of
/// its own (see the [module docs](super) for why).
///
/// Cloning gives another handle to the same connection; transfers from
/// all handles run one after another. If the connection ends, the next
/// transfer connects again ([module docs](super#when-the-connection-ends)).
/// The connection is closed by [`Client::close`], or when the last handle
/// and the last transfer are dropped.
#[derive(Clone, Debug)]
pub struct Client {
    commands: UnboundedSender<Command>,
    waker: Arc<Waker>,
    server: SocketAddr,
}

impl Client {
    /// Connects and finishes the handshake with the server.
    ///
    /// Fails with [`NetError::Closed`] if the handshake does not finish
    /// within [`ClientOptions::handshake_timeout`] (the server is not
    /// there, or does not hold [`ClientOptions::server_key`]), and at once
    /// with [`NetError::Refused`] if nothing listens on a local address.
    pub async fn connect(opts: ClientOptions) -> Result<Client, NetError> {
        let server = opts.server;
        let waker = Arc::new(Waker::new().map_err(NetError::Socket)?);
        let (commands, queue) = mpsc::unbounded_channel();
        let (connected, done) = oneshot::channel();
        let (guard, cancel) = CancelOnDrop::new(waker.clone());
        worker::spawn(opts, queue, waker.clone(), cancel, connected)
            .map_err(|e| NetError::Config(format!("cannot start the driver thread: {e}")))?;
        done.await.map_err(|_| gone(server))??;
        guard.disarm();
        Ok(Client {
            commands,
            waker,
            server,
        })
    }

    /// The server's address.
    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// Uploads the file at `path`, stored under its own file name unless
    /// [`Upload::name`] says otherwise. Await the result to run it: it
    /// resolves once the server has the whole file durably on disk with
    /// the same BLAKE3 as ours. An earlier, interrupted upload of the same
    /// name and content (from any client) is resumed where it stopped;
    /// [`UploadReport::resumed_from`] says where.
    pub fn upload(&self, path: impl AsRef<Path>) -> Upload {
        Upload {
            client: self.clone(),
            path: path.as_ref().to_owned(),
            name: None,
            progress: watch::Sender::new(Progress::default()),
        }
    }

    /// Downloads the server's file `name` to `dest`, checked with BLAKE3
    /// and fsynced before it appears under `dest`. An interrupted download
    /// leaves `DEST.convoy-part`, which the next download resumes.
    pub fn download(&self, name: &str, dest: impl AsRef<Path>) -> Download {
        Download {
            client: self.clone(),
            name: name.to_owned(),
            dest: dest.as_ref().to_owned(),
            progress: watch::Sender::new(Progress::default()),
        }
    }

    /// Sends `amount` of filler to a perf server (`convoy perf --server`
    /// or any [`Server`](super::Server)) and reports the throughput it
    /// confirmed.
    pub fn perf(&self, amount: PerfAmount) -> Perf {
        Perf {
            client: self.clone(),
            amount,
            intervals: watch::Sender::new(PerfInterval::default()),
        }
    }

    /// The connection's counters (packets, losses, RTT, rate). Waits for
    /// the transfers queued before it; fails with [`NetError::Closed`] if
    /// the connection has ended and no transfer has connected again.
    pub async fn stats(&self) -> Result<ConnectionStats, NetError> {
        self.request(|reply| Job::Stats { reply }).await
    }

    /// Closes the connection, telling the server, and ends the driver
    /// thread once the transfers queued before it are done. Other handles'
    /// later transfers fail with [`NetError::Closed`].
    pub async fn close(self) {
        let _ = self.request(|reply| Job::Close { reply }).await;
    }

    /// Queues a job and waits for its reply. Dropping this future before
    /// the reply sets the job's cancel flag and wakes the driver thread.
    async fn request<T>(&self, job: impl FnOnce(Reply<T>) -> Job) -> Result<T, NetError> {
        let (reply, answer) = oneshot::channel();
        let (guard, cancel) = CancelOnDrop::new(self.waker.clone());
        self.commands
            .send(Command {
                job: job(reply),
                cancel,
            })
            .map_err(|_| gone(self.server))?;
        self.waker.wake();
        let result = answer.await.map_err(|_| gone(self.server))?;
        guard.disarm();
        result
    }
}

/// The error for a driver thread that is no longer there.
fn gone(server: SocketAddr) -> NetError {
    NetError::Closed {
        addr: server,
        reason: "the client was closed".into(),
    }
}

/// An upload: configure it, subscribe to its progress, then `.await` it
/// (see [`Client::upload`]).
#[must_use = "an upload does nothing until awaited"]
#[derive(Debug)]
pub struct Upload {
    client: Client,
    path: PathBuf,
    name: Option<String>,
    progress: watch::Sender<Progress>,
}

impl Upload {
    /// Stores the file under `name` on the server (one path component,
    /// not starting with `.`).
    pub fn name(mut self, name: impl Into<String>) -> Upload {
        self.name = Some(name.into());
        self
    }

    /// The upload's progress: bytes handed to the connection, counting
    /// what the server had from an earlier run, updated every 200 ms and
    /// once at the end (only then has the server confirmed them all).
    pub fn progress(&self) -> watch::Receiver<Progress> {
        self.progress.subscribe()
    }
}

impl IntoFuture for Upload {
    type Output = Result<UploadReport, NetError>;
    type IntoFuture = Pending<UploadReport>;

    fn into_future(self) -> Self::IntoFuture {
        let Upload {
            client,
            path,
            name,
            progress,
        } = self;
        Box::pin(async move {
            client
                .request(|reply| Job::Upload {
                    path,
                    name,
                    progress,
                    reply,
                })
                .await
        })
    }
}

/// A download: subscribe to its progress, then `.await` it (see
/// [`Client::download`]).
#[must_use = "a download does nothing until awaited"]
#[derive(Debug)]
pub struct Download {
    client: Client,
    name: String,
    dest: PathBuf,
    progress: watch::Sender<Progress>,
}

impl Download {
    /// The download's progress: bytes we hold, counting what an earlier
    /// run left, updated every 200 ms and once at the end. `total` is 0
    /// until the server has said how big the file is.
    pub fn progress(&self) -> watch::Receiver<Progress> {
        self.progress.subscribe()
    }
}

impl IntoFuture for Download {
    type Output = Result<DownloadReport, NetError>;
    type IntoFuture = Pending<DownloadReport>;

    fn into_future(self) -> Self::IntoFuture {
        let Download {
            client,
            name,
            dest,
            progress,
        } = self;
        Box::pin(async move {
            client
                .request(|reply| Job::Download {
                    name,
                    dest,
                    progress,
                    reply,
                })
                .await
        })
    }
}

/// A perf run: subscribe to its per-second lines, then `.await` it (see
/// [`Client::perf`]).
#[must_use = "a perf run does nothing until awaited"]
#[derive(Debug)]
pub struct Perf {
    client: Client,
    amount: PerfAmount,
    intervals: watch::Sender<PerfInterval>,
}

impl Perf {
    /// The latest one-second line (all of them are in
    /// [`PerfReport::intervals`] at the end).
    pub fn intervals(&self) -> watch::Receiver<PerfInterval> {
        self.intervals.subscribe()
    }
}

impl IntoFuture for Perf {
    type Output = Result<PerfReport, NetError>;
    type IntoFuture = Pending<PerfReport>;

    fn into_future(self) -> Self::IntoFuture {
        let Perf {
            client,
            amount,
            intervals,
        } = self;
        Box::pin(async move {
            client
                .request(|reply| Job::Perf {
                    amount,
                    intervals,
                    reply,
                })
                .await
        })
    }
}

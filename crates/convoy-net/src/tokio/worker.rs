//! The async client's driver thread: it owns a blocking [`crate::Client`],
//! keeps its connection alive between commands, runs the commands the
//! async handles queue, one at a time, and connects again for the next
//! transfer when the connection has ended.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ::tokio::sync::mpsc::error::TryRecvError;
use ::tokio::sync::mpsc::UnboundedReceiver;
use ::tokio::sync::{oneshot, watch};
use convoy_proto::{ConnectionHandle, ConnectionStats, Endpoint};

use crate::client::{live, Client as BlockingClient, ClientOptions, Progress};
use crate::driver::{Application, Step};
use crate::error::NetError;
use crate::perf::{PerfAmount, PerfInterval, PerfReport};
use crate::wake::Waker;
use crate::{DownloadReport, UploadReport};

/// Where a command's result goes.
pub(super) type Reply<T> = oneshot::Sender<Result<T, NetError>>;

/// What the async handles ask the driver thread to do.
pub(super) enum Job {
    Upload {
        path: PathBuf,
        name: Option<String>,
        progress: watch::Sender<Progress>,
        reply: Reply<UploadReport>,
    },
    Download {
        name: String,
        dest: PathBuf,
        progress: watch::Sender<Progress>,
        reply: Reply<DownloadReport>,
    },
    Perf {
        amount: PerfAmount,
        intervals: watch::Sender<PerfInterval>,
        reply: Reply<PerfReport>,
    },
    Stats {
        reply: Reply<ConnectionStats>,
    },
    Close {
        reply: Reply<()>,
    },
}

/// A job and the flag its future sets when dropped.
pub(super) struct Command {
    pub job: Job,
    pub cancel: Arc<AtomicBool>,
}

/// Starts the thread: it connects (stopping if `cancel` is set), reports
/// the outcome on `connected`, then serves commands until every handle is
/// dropped or one of them closes the client.
pub(super) fn spawn(
    opts: ClientOptions,
    commands: UnboundedReceiver<Command>,
    waker: Arc<Waker>,
    cancel: Arc<AtomicBool>,
    connected: oneshot::Sender<Result<(), NetError>>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(format!("convoy-client {}", opts.server))
        .spawn(move || {
            let client =
                match BlockingClient::connect_with(opts.clone(), cancel, Some(waker.clone())) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = connected.send(Err(e));
                        return;
                    }
                };
            if connected.send(Ok(())).is_err() {
                // The connect future was dropped just as we finished.
                client.close();
                return;
            }
            Worker {
                opts,
                waker,
                commands,
                client: Some(client),
                ended: String::new(),
            }
            .run();
        })
        .map(|_| ())
}

struct Worker {
    opts: ClientOptions,
    waker: Arc<Waker>,
    commands: UnboundedReceiver<Command>,
    /// The connection; `None` once it has ended, until the next transfer
    /// connects again.
    client: Option<BlockingClient>,
    /// Why the last connection ended.
    ended: String,
}

impl Worker {
    fn run(mut self) {
        while let Some(Command { job, cancel }) = self.next_command() {
            if cancel.load(Ordering::Acquire) {
                // Its future is gone: it never starts.
                continue;
            }
            match job {
                Job::Upload {
                    path,
                    name,
                    progress,
                    reply,
                } => {
                    let r = self.transfer(cancel, |c| {
                        let mut report = |p| {
                            progress.send_replace(p);
                        };
                        c.upload(&path, name.as_deref(), Some(&mut report))
                    });
                    if let Ok(r) = &r {
                        progress.send_replace(finished(r.bytes, r.seconds));
                    }
                    let _ = reply.send(r);
                }
                Job::Download {
                    name,
                    dest,
                    progress,
                    reply,
                } => {
                    let r = self.transfer(cancel, |c| {
                        let mut report = |p| {
                            progress.send_replace(p);
                        };
                        c.download(&name, &dest, Some(&mut report))
                    });
                    if let Ok(r) = &r {
                        progress.send_replace(finished(r.bytes, r.seconds));
                    }
                    let _ = reply.send(r);
                }
                Job::Perf {
                    amount,
                    intervals,
                    reply,
                } => {
                    let mode = self.opts.mode.name();
                    let r = self.transfer(cancel, |c| {
                        let mut report = |iv: &PerfInterval| {
                            intervals.send_replace(iv.clone());
                        };
                        c.perf(amount, mode, &mut report)
                    });
                    let _ = reply.send(r);
                }
                Job::Stats { reply } => {
                    let _ = reply.send(match &self.client {
                        Some(c) => Ok(c.stats()),
                        None => Err(self.ended_error()),
                    });
                }
                Job::Close { reply } => {
                    if let Some(c) = self.client.take() {
                        c.close();
                    }
                    let _ = reply.send(Ok(()));
                    return;
                }
            }
        }
        // Every handle is gone: say goodbye to the server.
        if let Some(c) = self.client.take() {
            c.close();
        }
    }

    /// Runs one transfer, interruptible through `cancel`, connecting again
    /// first if the last connection has ended.
    fn transfer<T>(
        &mut self,
        cancel: Arc<AtomicBool>,
        run: impl FnOnce(&mut BlockingClient) -> Result<T, NetError>,
    ) -> Result<T, NetError> {
        let client = match &mut self.client {
            Some(c) => {
                c.interrupt = cancel;
                c
            }
            None => self.client.insert(BlockingClient::connect_with(
                self.opts.clone(),
                cancel,
                Some(self.waker.clone()),
            )?),
        };
        run(client)
    }

    fn ended_error(&self) -> NetError {
        NetError::Closed {
            addr: self.opts.server,
            reason: self.ended.clone(),
        }
    }

    /// Waits for the next command while the driver keeps the connection
    /// going; `None` once every handle has been dropped.
    fn next_command(&mut self) -> Option<Command> {
        if let Some(client) = &mut self.client {
            let mut idle = Idle {
                h: client.handle,
                server: self.opts.server,
                commands: &mut self.commands,
                got: None,
            };
            match client.driver.run(&mut idle) {
                Ok(()) => return idle.got,
                Err(e) => {
                    self.ended = match e {
                        NetError::Closed { reason, .. } => reason,
                        other => other.to_string(),
                    };
                    self.client = None;
                }
            }
        }
        // No connection to keep: just wait.
        self.commands.blocking_recv()
    }
}

/// The last progress of a finished transfer: all of it.
fn finished(bytes: u64, seconds: f64) -> Progress {
    Progress {
        done: bytes,
        total: bytes,
        elapsed: Duration::from_secs_f64(seconds),
        paths: Vec::new(),
    }
}

/// The application between transfers: it only watches the connection and
/// the command queue. The driver wakes it when a command is queued.
struct Idle<'a> {
    h: ConnectionHandle,
    server: SocketAddr,
    commands: &'a mut UnboundedReceiver<Command>,
    got: Option<Command>,
}

impl Application for Idle<'_> {
    fn step(&mut self, ep: &mut Endpoint, _now: Duration) -> Result<Step, NetError> {
        live(ep, self.h, self.server)?;
        match self.commands.try_recv() {
            Ok(c) => {
                self.got = Some(c);
                Ok(Step::Done)
            }
            Err(TryRecvError::Empty) => Ok(Step::Continue),
            Err(TryRecvError::Disconnected) => Ok(Step::Done),
        }
    }
}

//! The async server: a blocking [`crate::Server`] on a driver thread of
//! its own, with its events on a tokio `broadcast` channel.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ::tokio::sync::{broadcast, oneshot};

use crate::error::NetError;
use crate::server::{Server as BlockingServer, ServerOptions};
use crate::session::ServerEvent;
use crate::wake::Waker;

/// Events kept for a subscriber that has not read them; one slower than
/// this misses the oldest (its `recv` says how many).
const EVENT_BACKLOG: usize = 1024;

/// An async server. It serves from [`Server::bind`] on, on a driver thread
/// of its own (see the [module docs](super) for why), until it is
/// stopped ([`Server::stop`], a [`StopHandle`], dropping the `Server` or
/// its [`Server::run`] future) or, with [`ServerOptions::once`], until its
/// first client has gone.
#[derive(Debug)]
pub struct Server {
    local_addr: SocketAddr,
    stop: StopHandle,
    events: broadcast::Sender<ServerEvent>,
    done: Option<oneshot::Receiver<Result<(), NetError>>>,
}

/// Stops a [`Server`] from anywhere (another task, a signal handler task).
#[derive(Clone, Debug)]
pub struct StopHandle {
    flag: Arc<AtomicBool>,
    waker: Arc<Waker>,
}

impl StopHandle {
    /// Tells the server to close its connections and stop; returns at
    /// once. Uploads in progress keep their partial files, which the
    /// clients' next uploads resume.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Release);
        self.waker.wake();
    }
}

impl Server {
    /// Opens the storage directory, binds the socket and starts serving.
    /// Errors here are the operator's: a directory that is not there or
    /// not writable, an address in use.
    pub async fn bind(opts: ServerOptions) -> Result<Server, NetError> {
        let waker = Arc::new(Waker::new().map_err(NetError::Socket)?);
        let (events, _) = broadcast::channel(EVENT_BACKLOG);
        let (bound_tx, bound) = oneshot::channel();
        let (done_tx, done) = oneshot::channel();
        let thread_waker = waker.clone();
        let thread_events = events.clone();
        std::thread::Builder::new()
            .name(format!("convoy-server {}", opts.listen))
            .spawn(move || {
                let mut server = match BlockingServer::bind(opts) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = bound_tx.send(Err(e));
                        return;
                    }
                };
                let addr = match server.local_addr() {
                    Ok(a) => a,
                    Err(e) => {
                        let _ = bound_tx.send(Err(NetError::Socket(e)));
                        return;
                    }
                };
                server.set_waker(thread_waker);
                server.on_event(move |e| {
                    // No subscriber: nobody wants it.
                    let _ = thread_events.send(e.clone());
                });
                if bound_tx.send(Ok((addr, server.stop_flag()))).is_err() {
                    return; // the bind future was dropped
                }
                let _ = done_tx.send(server.run());
            })
            .map_err(|e| NetError::Config(format!("cannot start the driver thread: {e}")))?;
        let (local_addr, flag) = bound
            .await
            .map_err(|_| NetError::Config("the server's driver thread ended".into()))??;
        Ok(Server {
            local_addr,
            stop: StopHandle { flag, waker },
            events,
            done: Some(done),
        })
    }

    /// The address the server listens on (with the port the system chose,
    /// if it was bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A new subscription to what the server does: every connection,
    /// upload stored, download sent, perf run and error, from now on.
    pub fn events(&self) -> broadcast::Receiver<ServerEvent> {
        self.events.subscribe()
    }

    /// A handle that stops this server, for another task.
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// Tells the server to stop (see [`StopHandle::stop`]); await
    /// [`Server::run`] to know when it has.
    pub fn stop(&self) {
        self.stop.stop();
    }

    /// Waits until the server stops, and says why: `Ok` when it was told
    /// to (or, with `once`, its client has gone), an error if its socket
    /// failed. Dropping this future stops the server.
    pub async fn run(mut self) -> Result<(), NetError> {
        let done = self.done.take().expect("run takes the server");
        done.await
            .map_err(|_| NetError::Config("the server's driver thread ended".into()))?
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.stop();
    }
}

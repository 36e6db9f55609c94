//! The async API (feature `tokio`): [`Client`] and [`Server`] for tokio
//! programs.
//!
//! ```no_run
//! # async fn f() -> Result<(), convoy_net::NetError> {
//! use convoy_net::{parse_server_key, ClientOptions};
//! let key = parse_server_key("server.key.pub")?;
//! let client = convoy_net::tokio::Client::connect(ClientOptions::new(
//!     "127.0.0.1:4433".parse().unwrap(),
//!     key,
//! ))
//! .await?;
//! let upload = client.upload("drive.log");
//! let mut progress = upload.progress();
//! tokio::spawn(async move {
//!     while progress.changed().await.is_ok() {
//!         let p = progress.borrow().clone();
//!         eprintln!("{} of {} bytes", p.done, p.total);
//!     }
//! });
//! let report = upload.await?;
//! println!("stored {} ({} bytes)", report.name, report.bytes);
//! client.close().await;
//! # Ok(()) }
//! ```
//!
//! # Design: a driver thread per client and per server
//!
//! convoy paces its datagrams to the rate controller's send times with an
//! error of tens of microseconds (it sleeps in `ppoll`, then spins the
//! last 200 µs). tokio's timers have a 1 ms resolution, and a tokio worker
//! spinning would stall every other task on it, so the protocol does not
//! run on tokio at all. Each [`Client`] and [`Server`] owns one dedicated
//! thread running the same driver and the same blocking code as
//! [`crate::Client`] and [`crate::Server`] (so the `convoy` command and
//! the async API share one implementation). The async handles talk to
//! that thread over tokio channels: a command queue (`mpsc`), one
//! `oneshot` per reply, a `watch` per transfer for progress and a
//! `broadcast` for server events. An eventfd polled beside the socket
//! wakes the thread when a command arrives, so commands start at once
//! rather than at the driver's next 100 ms tick.
//!
//! Nothing here blocks a tokio worker: awaiting a transfer awaits a
//! `oneshot`, and the only work done on the caller's task is spawning the
//! thread in [`Client::connect`] and [`Server::bind`]. This also means
//! the API works on any runtime flavour, including `current_thread`, and
//! needs only tokio's `sync` feature. It is not `spawn_blocking` around
//! the blocking API: that would hold one of tokio's blocking-pool threads
//! (meant for short calls) for each connection's whole life, and
//! dropping the future would not stop the transfer.
//!
//! Between transfers the client's thread keeps the connection alive
//! (acknowledgements, keep-alives, noticing the server's close), which
//! the blocking client cannot do while its owner is busy elsewhere.
//!
//! # Transfers on one client run one after another
//!
//! A [`Client`] is a cheap handle ([`Clone`]) to one connection. Every
//! transfer started on it is queued and runs in turn, in the order they
//! were first polled. For parallel transfers, connect more clients: each
//! has its own connection and thread.
//!
//! # Cancellation
//!
//! Dropping a transfer's future (for example through
//! `tokio::time::timeout` or `select!`) stops the transfer at once (the
//! driver thread is woken), and nothing is left half-done: an upload's
//! bytes so far stay in the server's partial file and the next upload of
//! the same file (same name and content, from any client) resumes there;
//! a download's stay in `DEST.convoy-part` for the next download to
//! resume. Stopping a transfer midway closes the connection (telling the
//! server), and the client connects again for its next transfer (see
//! below). A queued transfer whose future is dropped never starts.
//!
//! # When the connection ends
//!
//! If the connection ends (the server went away or closed it, nothing was
//! heard for [`ClientOptions::idle_timeout`](crate::ClientOptions), or a
//! transfer was cancelled), the transfer running then fails with that
//! error, and the next transfer on the same [`Client`] connects again
//! with the same options first. So a program on a vehicle can simply
//! retry an upload until it succeeds; each attempt resumes the last.

// Every public item of the async API is documented.
#![warn(missing_docs)]

mod cancel;
mod client;
mod server;
mod worker;

pub use client::{Client, Download, Pending, Perf, Upload};
pub use server::{Server, StopHandle};

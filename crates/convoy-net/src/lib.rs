//! convoy-net: convoy-proto on real UDP sockets, and convoy's library API.
//!
//! * [`Client`] (blocking): [`Client::upload`], [`Client::download`],
//!   [`Client::perf`], all resumable and checked with BLAKE3 end to end;
//!   [`Client::interrupt_flag`] stops a transfer from another thread.
//! * [`Server`] (blocking): stores uploads durably (temporary file, fsync,
//!   rename, directory fsync, then the client is told), serves downloads
//!   and perf.
//! * `convoy_net::tokio` (feature `tokio`): the same client and server for
//!   async programs. The protocol still runs on a dedicated driver thread,
//!   because tokio's timers cannot pace datagrams to tens of microseconds;
//!   the module's docs say how the two talk.
//! * [`Driver`] runs an [`convoy_proto::Endpoint`] on a socket: pacing to
//!   the protocol's send times (sleep, then spin), SO_TIMESTAMPNS receive
//!   times fed to the rate estimators, recvmmsg/sendmmsg batches.
//!
//! ```no_run
//! use convoy_net::{Client, ClientOptions, parse_server_key};
//! let key = parse_server_key("server.key.pub").unwrap();
//! let mut client = Client::connect(ClientOptions::new("127.0.0.1:4433".parse().unwrap(), key)).unwrap();
//! let report = client.upload(std::path::Path::new("drive.log"), None, None).unwrap();
//! println!("stored {} bytes", report.bytes);
//! client.close();
//! ```

pub mod auth;
pub mod client;
pub mod clock;
pub mod cmsg;
pub mod control;
pub mod download;
pub mod driver;
pub mod error;
pub mod fleetload;
mod interrupt;
pub mod keys;
pub mod loadgen;
pub mod multipath;
pub mod netlink;
pub mod pacing;
pub mod partials;
pub mod perf;
pub mod perf_stamps;
pub mod perf_timeline;
pub mod request;
pub mod server;
pub mod session;
pub mod sockaddr;
pub mod socket;
pub mod stats;
pub mod steer;
pub mod store;
#[cfg(feature = "tokio")]
pub mod tokio;
pub mod upload;
pub mod wake;

pub use auth::{Authorizer, CommitHook, Committed, Identity, Role};
pub use client::{Client, ClientOptions, Progress};
pub use control::ControlHook;
pub use convoy_proto::cc::Priority;
pub use download::DownloadReport;
pub use driver::{Application, Driver, DriverConfig, Step};
pub use error::NetError;
pub use keys::{load_keypair, parse_server_key, write_keypair};
pub use perf::{PerfAmount, PerfInterval, PerfReport};
pub use server::{Server, ServerOptions, ServerStats};
pub use session::ServerEvent;
pub use upload::{UploadQueue, UploadReport};

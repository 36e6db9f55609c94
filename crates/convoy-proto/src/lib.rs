//! convoy-proto: convoy's transport as one deterministic, sans-IO state
//! machine. It never reads a clock or touches a socket: drivers (real UDP in
//! convoy-net, virtual time in the simulator and tests) hand in datagrams and
//! the time, and take out datagrams and the next deadline.

pub mod capprobe;
pub mod cc;
pub mod cid;
pub mod coding;
pub mod config;
pub mod connection;
pub mod crypto;
pub mod endpoint;
pub mod handshake;
pub mod received;
pub mod recovery;
pub mod rtt;
pub mod stream;
pub mod wire;

pub use config::{AeadChoice, Config, Mode, RateControl};
pub use connection::{
    CloseReason, Connection, ConnectionStats, Event, PathError, PathEvent, PathInfo, PathState,
    Role, Transmit,
};
pub use convoy_codec::CodeKind;
pub use crypto::Keypair;
pub use endpoint::{ConnectError, ConnectionHandle, Endpoint, EndpointTransmit};
pub use stream::{StreamError, StreamId};

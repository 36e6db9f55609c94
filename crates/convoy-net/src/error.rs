//! What can go wrong, in words an operator can act on.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("cannot listen on {addr}: {err}")]
    Bind { addr: SocketAddr, err: io::Error },
    #[error("nothing is listening at {0} (connection refused)")]
    Refused(SocketAddr),
    #[error("cannot reach {addr}: {err}")]
    Unreachable { addr: SocketAddr, err: io::Error },
    #[error("socket error: {0}")]
    Socket(io::Error),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("connection to {addr} failed: {reason}")]
    Closed { addr: SocketAddr, reason: String },
    #[error("the server refused: {0}")]
    Remote(String),
    #[error("{}: {err}", path.display())]
    File { path: PathBuf, err: io::Error },
    #[error("the peer broke the transfer protocol: {0}")]
    Protocol(String),
    #[error("integrity check failed: {0}")]
    Integrity(String),
    #[error("interrupted")]
    Interrupted,
}

impl NetError {
    pub fn file(path: impl Into<PathBuf>, err: io::Error) -> NetError {
        NetError::File {
            path: path.into(),
            err,
        }
    }
}

/// A stream call the protocol refused: a bug or a peer breaking the rules,
/// not something the operator caused.
impl From<convoy_proto::StreamError> for NetError {
    fn from(e: convoy_proto::StreamError) -> NetError {
        NetError::Protocol(e.to_string())
    }
}

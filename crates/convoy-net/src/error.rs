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
    /// The server refused our key (unknown or revoked), at the handshake
    /// or mid-upload, as opposed to refusing one request (a full disk).
    pub fn is_key_refused(&self) -> bool {
        match self {
            // The close reason as `live` words it: the peer's code first.
            NetError::Closed { reason, .. } => {
                let peer = convoy_proto::CloseReason::Peer {
                    code: crate::auth::REFUSED_CODE,
                    reason: String::new(),
                };
                reason.starts_with(&peer.to_string())
            }
            NetError::Remote(message) => message.starts_with(crate::auth::REFUSED_PREFIX),
            _ => false,
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use convoy_proto::CloseReason;

    #[test]
    fn a_refused_key_is_told_from_a_refused_request() {
        let addr: SocketAddr = "127.0.0.1:4433".parse().unwrap();
        let closed = |r: CloseReason| NetError::Closed {
            addr,
            reason: r.to_string(),
        };
        let revoked = CloseReason::Peer {
            code: crate::auth::REFUSED_CODE,
            reason: "refused: v2 is revoked".into(),
        };
        assert!(closed(revoked).is_key_refused());
        assert!(NetError::Remote("refused: v2 is revoked".into()).is_key_refused());
        let full = NetError::Remote("v2/a.log: No space left on device (os error 28)".into());
        assert!(!full.is_key_refused());
        assert!(!closed(CloseReason::IdleTimeout).is_key_refused());
        let other = CloseReason::Peer {
            code: 0,
            reason: "refused: ".into(),
        };
        assert!(!closed(other).is_key_refused());
    }
}

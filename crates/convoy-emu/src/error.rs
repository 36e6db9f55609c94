//! Errors: each says what went wrong and, where it helps, what to do.

use std::io;

use convoy_link::{ConfigError, TraceError};

/// A `--link` specification could not be understood.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error(
        "link name {0:?} must be 1 to 15 letters, digits, '-' or '_' (it names the interfaces)"
    )]
    BadName(String),
    #[error(
        "{0:?}: a link is its name, then its options: NAME:KEY=VALUE,... (for example link:{0})"
    )]
    NoName(String),
    #[error("unknown option {key:?} (expected one of: {expected})")]
    UnknownKey { key: String, expected: &'static str },
    #[error("option {0:?} needs a value, as in {0}=...")]
    MissingValue(String),
    #[error("{key}: expected {expected}, found {found:?}")]
    BadValue {
        key: String,
        expected: &'static str,
        found: String,
    },
    #[error("{0} is given twice")]
    Duplicate(String),
    #[error("{key}: {found:?} is neither a rate (such as 50mbit or unlimited) nor a readable trace file")]
    NotRateOrTrace { key: String, found: String },
    #[error(
        "offset= replays a trace from a point into it, but this direction's rate is not a trace"
    )]
    OffsetWithoutTrace,
    #[error(
        "{0}=down: an interface is down both ways, so write outage-policy=down \
         (no up-/down- prefix); per-direction outages (up-outage=...) still apply"
    )]
    DownPolicyOneDirection(String),
    #[error(
        "outage-policy=down takes the interface down during outages, but this link has none: \
         add outage=START-END[/...] or a rate from a *.csv trace (its up column)"
    )]
    DownPolicyWithoutOutages,
    // Not `#[from]`: that would also make it the error's source, and
    // error-chain printers would then repeat the message.
    #[error("{0}")]
    Trace(TraceError),
    #[error("{0}")]
    Config(ConfigError),
}

impl From<TraceError> for SpecError {
    fn from(e: TraceError) -> SpecError {
        SpecError::Trace(e)
    }
}

impl From<ConfigError> for SpecError {
    fn from(e: ConfigError) -> SpecError {
        SpecError::Config(e)
    }
}

/// Anything that stops the emulator from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    #[error("--link {spec}: {cause}")]
    Spec { spec: String, cause: Box<SpecError> },
    #[error("two links are named {0:?}; each link needs its own name")]
    DuplicateLink(String),
    #[error("at most {max} links are supported, got {got}")]
    TooManyLinks { max: usize, got: usize },
    #[error("needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) to create network namespaces and TUN devices; run it with sudo")]
    NotRoot,
    #[error("cannot open {path}: {cause}; load the tun module (modprobe tun) or, in a container, pass the device in (--device /dev/net/tun)")]
    NoTun { path: String, cause: io::Error },
    #[error("{what}: {cause}")]
    Io { what: String, cause: io::Error },
    #[error("`{command}` failed: {detail}")]
    Command { command: String, detail: String },
    #[error("the server command exited ({status}) before the client command started")]
    ServerExited { status: String },
}

impl EmuError {
    /// A `--link` specification's error.
    pub fn spec(spec: impl Into<String>, cause: SpecError) -> EmuError {
        EmuError::Spec {
            spec: spec.into(),
            cause: Box::new(cause),
        }
    }

    pub(crate) fn io(what: impl Into<String>, cause: io::Error) -> EmuError {
        EmuError::Io {
            what: what.into(),
            cause,
        }
    }

    /// The last OS error, with what was being done.
    pub(crate) fn last_os(what: impl Into<String>) -> EmuError {
        EmuError::io(what, io::Error::last_os_error())
    }
}

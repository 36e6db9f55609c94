//! Errors: what went wrong, where, and what was expected instead.

use std::path::PathBuf;

/// A link or model was configured with values it cannot honour.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("{what} must be a probability in [0, 1], got {value}")]
    Probability { what: &'static str, value: f64 },
    #[error("constant capacity must be greater than 0 bit/s")]
    ZeroRate,
    #[error("every-n-th loss needs n >= 1, got 0")]
    ZeroPeriod,
    #[error("{what} is taken from the time-series trace, but the link has no series trace")]
    NoSeries { what: &'static str },
    #[error("capacity is taken from the time-series trace, but it has no rate column")]
    SeriesWithoutRate,
    #[error("down interval must end after it starts, got [{start_ns} ns, {end_ns} ns)")]
    EmptyDownInterval { start_ns: u64, end_ns: u64 },
    #[error(
        "series repeat period ({period_ns} ns) must be longer than the last interval's start ({last_start_ns} ns)"
    )]
    RepeatPeriod { period_ns: u64, last_start_ns: u64 },
    #[error("802.11 contention window: CWmin ({cw_min}) must not exceed CWmax ({cw_max})")]
    MacWindow { cw_min: u16, cw_max: u16 },
    #[error(
        "802.11 retries need a rate-driven link (a constant rate or a time-series trace), \
         not a Mahimahi trace: its opportunities say when bytes leave, not how long a frame takes"
    )]
    MacNeedsRate,
    #[error(
        "802.11 retries lose frames on the air, after the queue; loss before the queue cannot be retried"
    )]
    MacLossBeforeQueue,
}

/// What a trace or record line should have held.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    #[error("expected at least one timestamp in milliseconds, found none")]
    NoTimestamps,
    #[error("expected a timestamp in milliseconds, found an empty line")]
    EmptyLine,
    #[error("expected a non-negative integer number of milliseconds, found {found:?}")]
    NotAnInteger { found: String },
    #[error("expected a timestamp >= the previous one ({previous} ms), found {found} ms")]
    Decreasing { previous: u64, found: u64 },
    #[error("expected a timestamp of at most {max} ms, found {found} ms")]
    TooLarge { max: u64, found: u64 },
    #[error(
        "expected the last timestamp (the trace's period) to be greater than 0 ms, found 0: the trace would last no time"
    )]
    ZeroPeriod,
    #[error("expected a header row such as {example:?}, found no rows")]
    MissingHeader { example: &'static str },
    #[error("expected a column name among {expected}, found {found:?}")]
    UnknownColumn {
        found: String,
        expected: &'static str,
    },
    #[error("column {column:?}: expected a unit among {expected}, found {found:?}")]
    UnknownUnit {
        column: String,
        found: String,
        expected: &'static str,
    },
    #[error("column {column:?} appears more than once (perhaps with two units)")]
    DuplicateColumn { column: String },
    #[error("expected a column {expected} in the header, found none")]
    MissingColumn { expected: &'static str },
    #[error("expected {expected} comma-separated fields (as in the header), found {found}")]
    FieldCount { expected: usize, found: usize },
    #[error("column {column:?}: expected {expected}, found {found:?}")]
    BadValue {
        column: String,
        found: String,
        expected: &'static str,
    },
    #[error("column {column:?}: expected a value greater than the previous row's ({previous}), found {found}")]
    NotIncreasing {
        column: String,
        previous: String,
        found: String,
    },
    #[error("expected the first interval to start at 0, found {found}")]
    FirstStartNotZero { found: String },
    #[error("expected at least one data row after the header, found none")]
    NoRows,
}

/// A trace or record file could not be used. `Display` gives `file:line: what
/// was expected`, the form editors and CI logs link to.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    // The I/O error is part of the message rather than a `source`, so
    // error-chain printers do not repeat it.
    #[error("{}: cannot read: {cause}", path.display())]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{source_name}:{line}: {kind}")]
    Parse {
        /// The file's path, or a name given by the caller for in-memory text.
        source_name: String,
        /// 1-based line number.
        line: usize,
        kind: ParseErrorKind,
    },
}

impl TraceError {
    pub(crate) fn parse(source_name: &str, line: usize, kind: ParseErrorKind) -> TraceError {
        TraceError::Parse {
            source_name: source_name.to_owned(),
            line,
            kind,
        }
    }

    /// The 1-based line of a parse error, `None` for I/O errors.
    pub fn line(&self) -> Option<usize> {
        match self {
            TraceError::Io { .. } => None,
            TraceError::Parse { line, .. } => Some(*line),
        }
    }

    /// What a parse error expected, `None` for I/O errors.
    pub fn kind(&self) -> Option<&ParseErrorKind> {
        match self {
            TraceError::Io { .. } => None,
            TraceError::Parse { kind, .. } => Some(kind),
        }
    }
}

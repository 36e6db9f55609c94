//! Errors: what was wrong with a parameter or an input file, in one line.

/// A model was given a parameter it cannot use.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("{what} must be a finite number greater than 0, got {value}")]
    NotPositive { what: &'static str, value: f64 },
    #[error("{what} must be a finite number, got {value}")]
    NotFinite { what: &'static str, value: f64 },
    #[error("CSQ must be between 0 and 31 (99 means unknown and is not a level), got {value}")]
    Csq { value: f64 },
    #[error("{what} needs at least {min}, got {got}")]
    TooFew {
        what: &'static str,
        min: usize,
        got: usize,
    },
}

/// A SUMO file (network, polygons, FCD) could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{source_name}:{location}: {kind}")]
pub struct SumoError {
    pub source_name: String,
    /// `line N` when known, else `byte N`.
    pub location: String,
    pub kind: SumoErrorKind,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SumoErrorKind {
    #[error("malformed XML: {0}")]
    Xml(String),
    #[error("<{element}> needs attribute {attribute:?}")]
    MissingAttribute {
        element: &'static str,
        attribute: &'static str,
    },
    #[error("<{element}> attribute {attribute:?}: expected {expected}, found {found:?}")]
    BadAttribute {
        element: &'static str,
        attribute: &'static str,
        expected: &'static str,
        found: String,
    },
    #[error("expected a SUMO {expected} file (root <{root}>), found root <{found}>")]
    WrongRoot {
        expected: &'static str,
        root: &'static str,
        found: String,
    },
    #[error("the file ends before its root element </{0}> closes")]
    Truncated(&'static str),
    #[error("expected {0}, found none")]
    Empty(&'static str),
    #[error("<timestep time=\"{found}\"> goes back in time (previous {previous})")]
    TimeBackwards { previous: f64, found: f64 },
}

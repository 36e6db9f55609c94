//! Trace formats: Mahimahi packet-delivery traces and convoy's time-series
//! trace (docs/TRACES.md defines both).

pub(crate) mod decimal;
pub mod mahimahi;
pub mod series;

use std::path::Path;

use crate::error::TraceError;

pub(crate) fn read_to_string(path: &Path) -> Result<String, TraceError> {
    std::fs::read_to_string(path).map_err(|cause| TraceError::Io {
        path: path.to_path_buf(),
        cause,
    })
}

/// Lines of `text` numbered from 1, without the `\n`/`\r\n` terminator and
/// without the empty piece after a final newline (a file normally ends with
/// one). A UTF-8 byte-order mark on the first line is dropped.
pub(crate) fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let body = text.strip_suffix('\n').unwrap_or(text);
    let empty = text.is_empty();
    body.split('\n')
        .filter(move |_| !empty)
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .enumerate()
        .map(|(i, l)| (i + 1, l))
}

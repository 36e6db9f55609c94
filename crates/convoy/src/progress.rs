//! One status line on stderr for long measurements, shown only when stderr
//! is a terminal so logs and `--json` pipelines stay clean.

use std::io::{IsTerminal, Write};

pub fn update(what: &str) {
    let mut err = std::io::stderr();
    if err.is_terminal() {
        let _ = write!(err, "\r\x1b[2K{what} ...");
        let _ = err.flush();
    }
}

pub fn clear() {
    let mut err = std::io::stderr();
    if err.is_terminal() {
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

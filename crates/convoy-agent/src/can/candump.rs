//! candump log lines, as can-utils' `candump -L` writes them and
//! `canplayer` reads them:
//!
//! ```text
//! (1764000000.006910) can0 100#AC0A1A0100000000      classic frame, 11-bit id
//! (1764000000.052885) can0 18FF0000#00044A90          29-bit id (8 hex digits)
//! (1764000000.060000) can0 123#R                      remote request (no data)
//! (1764000000.070000) can0 123##1DEADBEEF             CAN FD: flags nibble, then data
//! ```
//!
//! The parser never allocates and borrows the interface name from the
//! line, because a log is read at millions of lines a second.

use std::fmt;

/// Longest payload: a CAN FD frame.
pub const MAX_DATA: usize = 64;

/// Payload lengths a CAN FD frame may have (ISO 11898-1 DLC table).
const FD_LENGTHS: [usize; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64];

/// One frame of a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The log's timestamp: nanoseconds since the Unix epoch.
    pub t_ns: i64,
    pub iface: &'a str,
    /// The identifier without flags: 11 bits, or 29 when `extended`.
    pub id: u32,
    pub extended: bool,
    pub fd: bool,
    pub remote: bool,
    pub len: usize,
    pub data: [u8; MAX_DATA],
}

impl Frame<'_> {
    pub fn payload(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

/// Why a line is not a frame; the column is 1-based.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    pub column: usize,
    pub reason: &'static str,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.reason)
    }
}

impl std::error::Error for LineError {}

fn err(column: usize, reason: &'static str) -> LineError {
    LineError { column, reason }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Parses one line (without its newline; a trailing `\r` or spaces are
/// allowed).
pub fn parse_line(line: &str) -> Result<Frame<'_>, LineError> {
    let b = line.as_bytes();
    // (SECONDS.FRACTION)
    if b.first() != Some(&b'(') {
        return Err(err(1, "expected '(' before the timestamp"));
    }
    let close = b
        .iter()
        .position(|&c| c == b')')
        .ok_or(err(2, "no ')' after the timestamp"))?;
    let t_ns = parse_time(&b[1..close]).ok_or(err(2, "timestamp is not SECONDS.FRACTION"))?;
    let mut i = close + 1;
    if b.get(i) != Some(&b' ') {
        return Err(err(i + 1, "expected one space after the timestamp"));
    }
    i += 1;
    let iface_start = i;
    while i < b.len() && b[i] != b' ' {
        i += 1;
    }
    if i == iface_start || i == b.len() {
        return Err(err(
            iface_start + 1,
            "expected an interface name, then a space",
        ));
    }
    let iface = &line[iface_start..i];
    i += 1;
    let id_start = i;
    let mut id: u32 = 0;
    while i < b.len() && b[i] != b'#' {
        let d = hex(b[i]).ok_or(err(i + 1, "the identifier is not hexadecimal"))?;
        if i - id_start >= 8 {
            return Err(err(i + 1, "the identifier has more than 8 hex digits"));
        }
        id = (id << 4) | u32::from(d);
        i += 1;
    }
    let extended = match i - id_start {
        3 if id <= 0x7FF => false,
        3 => return Err(err(id_start + 1, "an 11-bit identifier is at most 7FF")),
        8 if id <= 0x1FFF_FFFF => true,
        // candump writes error frames with the CAN_ERR_FLAG bit in the
        // id; they carry no signals, so they are refused here by name.
        8 => {
            return Err(err(
                id_start + 1,
                "an error frame or a flag in the identifier",
            ))
        }
        _ => {
            return Err(err(
                id_start + 1,
                "the identifier has neither 3 nor 8 hex digits",
            ))
        }
    };
    if i == b.len() {
        return Err(err(i + 1, "expected '#' after the identifier"));
    }
    i += 1;
    let mut frame = Frame {
        t_ns,
        iface,
        id,
        extended,
        fd: false,
        remote: false,
        len: 0,
        data: [0; MAX_DATA],
    };
    let end = b.len()
        - b.iter()
            .rev()
            .take_while(|&&c| c == b' ' || c == b'\r')
            .count();
    match b.get(i) {
        Some(b'#') => {
            frame.fd = true;
            let flags = b.get(i + 1).copied().and_then(hex);
            if flags.is_none() || i + 1 >= end {
                return Err(err(i + 2, "a CAN FD frame needs a flags digit after '##'"));
            }
            i += 2;
        }
        Some(b'R') | Some(b'r') => {
            frame.remote = true;
            // An optional length digit (the requested DLC); no data.
            i += 1;
            if i < end {
                let d = hex(b[i]).filter(|d| *d <= 8);
                if d.is_none() || i + 1 != end {
                    return Err(err(i + 1, "a remote frame has at most one length digit"));
                }
            }
            return Ok(frame);
        }
        _ => {}
    }
    let limit = if frame.fd { MAX_DATA } else { 8 };
    while i < end {
        if b[i] == b'.' {
            // cansend's optional separators between bytes.
            i += 1;
            continue;
        }
        let hi = hex(b[i]).ok_or(err(i + 1, "data is not hexadecimal"))?;
        let lo = b
            .get(i + 1)
            .filter(|_| i + 1 < end)
            .and_then(|&c| hex(c))
            .ok_or(err(i + 2, "data has an odd number of hex digits"))?;
        if frame.len == limit {
            return Err(err(
                i + 1,
                if frame.fd {
                    "more than 64 data bytes"
                } else {
                    "more than 8 data bytes in a classic frame"
                },
            ));
        }
        frame.data[frame.len] = (hi << 4) | lo;
        frame.len += 1;
        i += 2;
    }
    if frame.fd && !FD_LENGTHS.contains(&frame.len) {
        return Err(err(end, "not a length a CAN FD frame can have"));
    }
    Ok(frame)
}

/// `SECONDS.FRACTION` (up to 9 fraction digits) → ns since the epoch.
fn parse_time(b: &[u8]) -> Option<i64> {
    let dot = b.iter().position(|&c| c == b'.')?;
    let (secs, frac) = (&b[..dot], &b[dot + 1..]);
    if secs.is_empty() || secs.len() > 12 || frac.is_empty() || frac.len() > 9 {
        return None;
    }
    let mut s: i64 = 0;
    for &c in secs {
        if !c.is_ascii_digit() {
            return None;
        }
        s = s * 10 + i64::from(c - b'0');
    }
    let mut ns: i64 = 0;
    for &c in frac {
        if !c.is_ascii_digit() {
            return None;
        }
        ns = ns * 10 + i64::from(c - b'0');
    }
    for _ in frac.len()..9 {
        ns *= 10;
    }
    Some(s * 1_000_000_000 + ns)
}

/// Writes a frame as a candump log line (the benchmark and the tests
/// make logs with it; the parser must read back what it writes).
pub fn format_line(f: &Frame<'_>) -> String {
    use std::fmt::Write;
    let mut s = format!(
        "({}.{:06}) {} ",
        f.t_ns.div_euclid(1_000_000_000),
        f.t_ns.rem_euclid(1_000_000_000) / 1000,
        f.iface
    );
    if f.extended {
        let _ = write!(s, "{:08X}#", f.id);
    } else {
        let _ = write!(s, "{:03X}#", f.id);
    }
    if f.remote {
        s.push('R');
        return s;
    }
    if f.fd {
        s.push_str("#0");
    }
    for byte in f.payload() {
        let _ = write!(s, "{byte:02X}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_of_each_kind() {
        let f = parse_line("(1764000000.006910) can0 100#AC0A1A0100000000").unwrap();
        assert_eq!(
            (f.t_ns, f.iface, f.id, f.extended),
            (1_764_000_000_006_910_000, "can0", 0x100, false)
        );
        assert_eq!(f.payload(), &[0xAC, 0x0A, 0x1A, 0x01, 0, 0, 0, 0]);
        let f = parse_line("(1.5) vcan1 18FF0000#00044A90\r").unwrap();
        assert_eq!(
            (f.t_ns, f.id, f.extended, f.len),
            (1_500_000_000, 0x18FF_0000, true, 4)
        );
        let f = parse_line("(2.000001) can0 123#R").unwrap();
        assert!(f.remote && f.len == 0);
        parse_line("(2.000001) can0 123#R8").unwrap();
        let f = parse_line("(2.0) can0 123##1000102030405060708090A0B").unwrap();
        assert!(f.fd && f.len == 12);
        let f = parse_line("(2.0) can0 7FF#").unwrap();
        assert_eq!(f.len, 0);
        let f = parse_line("(2.0) can0 7FF#11.22.33").unwrap();
        assert_eq!(f.payload(), &[0x11, 0x22, 0x33]);
    }

    #[test]
    fn garbage_says_where_and_why() {
        for (line, col) in [
            ("", 1),
            ("1764000000.0 can0 100#00", 1),
            ("(17x.0) can0 100#00", 2),
            ("(1.0)can0 100#00", 6),
            ("(1.0) can0", 7),
            ("(1.0) can0 1G0#00", 13),
            ("(1.0) can0 1000#00", 12),
            ("(1.0) can0 800#00", 12),
            ("(1.0) can0 100#0", 17),
            ("(1.0) can0 100#000102030405060708", 32),
            ("(1.0) can0 100##", 17),
            ("(1.0) can0 100##1000102030405060708", 35),
            ("(1.0) can0 20000001#00", 12),
            ("(1.0) can0 100", 15),
            ("(1.0) can0 100#RR", 17),
        ] {
            let e = parse_line(line).unwrap_err();
            assert_eq!(e.column, col, "{line:?}: {e}");
        }
    }

    proptest::proptest! {
        /// Whatever the bytes, the parser answers (no panic), and a line
        /// it accepts is written back by `format_line` as the same frame.
        #[test]
        fn any_line_parses_or_is_refused(line in "\\PC{0,80}") {
            if let Ok(f) = parse_line(&line) {
                let again = format_line(&f);
                let g = parse_line(&again).unwrap();
                proptest::prop_assert_eq!((g.id, g.extended, g.fd, g.remote, g.payload()), (f.id, f.extended, f.fd, f.remote, f.payload()));
            }
        }

        /// Frames written by `format_line` read back exactly.
        #[test]
        fn written_frames_read_back(
            secs in 0i64..4_000_000_000, micros in 0i64..1_000_000,
            extended: bool, id in 0u32..0x2000_0000, fd: bool,
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..=64),
        ) {
            let id = if extended { id } else { id & 0x7FF };
            let len = if fd { *FD_LENGTHS.iter().rev().find(|&&l| l <= data.len()).unwrap() } else { data.len().min(8) };
            let mut f = Frame { t_ns: secs * 1_000_000_000 + micros * 1000, iface: "can0", id, extended, fd, remote: false, len, data: [0; MAX_DATA] };
            f.data[..len].copy_from_slice(&data[..len]);
            let line = format_line(&f);
            proptest::prop_assert_eq!(parse_line(&line).unwrap(), f);
        }

        /// Lines that look almost right: a valid line with one byte changed.
        #[test]
        fn mutated_lines_never_panic(pos in 0usize..40, byte in proptest::num::u8::ANY) {
            let mut b = b"(1764000000.006910) can0 100#AC0A1A0100000000".to_vec();
            let p = pos % b.len();
            b[p] = byte;
            if let Ok(s) = std::str::from_utf8(&b) {
                let _ = parse_line(s);
            }
        }
    }
}

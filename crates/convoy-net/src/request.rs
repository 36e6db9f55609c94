//! The small application protocol spoken on each stream (docs/NET.md):
//! the client's request header, then the server's reply records. Stream
//! data after the header is the raw file (upload, download) or filler
//! (perf).

use crate::error::NetError;
use crate::perf_stamps::LatencySummary;

const MAGIC: &[u8; 4] = b"CVY1";
pub const MAX_NAME: usize = 1024;
/// Most `/`-separated components in a name.
pub const MAX_DEPTH: usize = 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Store `size` bytes hashing to `hash` under `name`; data follows.
    Put {
        name: String,
        size: u64,
        hash: [u8; 32],
        /// The data follows the request at once, from byte 0, without
        /// waiting for the resume offset: the server skips what it already
        /// holds. One round trip less for a file small enough that
        /// resending a partial costs less than that round trip (a live
        /// telemetry segment). Otherwise the data goes from the offset the
        /// server answers.
        from_start: bool,
    },
    /// Send `name` from byte `offset` on.
    Get { name: String, offset: u64 },
    /// Count what follows: `bytes` of it, or (`bytes` = 0) what arrives in
    /// the `millis` after the request (0: until the stream finishes).
    Perf { bytes: u64, millis: u64 },
    /// Open the control stream: from here on both directions carry
    /// control frames ([`crate::control`]).
    Control,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Upload accepted: send from `offset` (bytes already stored).
    PutFrom {
        offset: u64,
    },
    /// The upload is on disk under its final name (fsynced, renamed).
    Stored {
        hash: [u8; 32],
    },
    /// Download metadata; the file's bytes from the requested offset follow.
    GetMeta {
        size: u64,
        hash: [u8; 32],
    },
    /// Perf: bytes received so far.
    Progress {
        received: u64,
    },
    /// Perf: everything received (in the timed window), the server's CPU
    /// time for this client, and the write-to-read latency of the stamps
    /// it read.
    PerfDone {
        received: u64,
        cpu_ns: u64,
        latency: LatencySummary,
    },
    Error {
        message: String,
    },
}

/// Checks a stored-file name: one or more `/`-separated components, none
/// empty, none starting with '.', no NUL or backslash, at most
/// [`MAX_NAME`] bytes and [`MAX_DEPTH`] components, so a name is always a
/// path inside the server's directory (`2026-11-24/cam0/000123.mcap`).
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("name must be 1..={MAX_NAME} bytes"));
    }
    if name.contains('\0') || name.contains('\\') {
        return Err(format!(
            "invalid name {name:?}: no NUL or backslash allowed"
        ));
    }
    let mut depth = 0;
    for part in name.split('/') {
        depth += 1;
        if part.is_empty() || part.starts_with('.') {
            return Err(format!(
                "invalid name {name:?}: components must be non-empty and not start with '.'"
            ));
        }
    }
    if depth > MAX_DEPTH {
        return Err(format!(
            "invalid name {name:?}: more than {MAX_DEPTH} components"
        ));
    }
    Ok(())
}

impl Request {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        let (op, name) = match self {
            Request::Put {
                name,
                from_start: false,
                ..
            } => (1u8, name.as_str()),
            Request::Put {
                name,
                from_start: true,
                ..
            } => (5, name.as_str()),
            Request::Get { name, .. } => (2, name.as_str()),
            Request::Perf { .. } => (3, ""),
            Request::Control => (4, ""),
        };
        out.push(op);
        out.extend_from_slice(&(name.len() as u16).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        match self {
            Request::Put { size, hash, .. } => {
                out.extend_from_slice(&size.to_be_bytes());
                out.extend_from_slice(hash);
            }
            Request::Get { offset, .. } => out.extend_from_slice(&offset.to_be_bytes()),
            Request::Perf { bytes, millis } => {
                out.extend_from_slice(&bytes.to_be_bytes());
                out.extend_from_slice(&millis.to_be_bytes());
            }
            Request::Control => {}
        }
        out
    }

    /// Parses a request from the start of `buf`: `Ok(None)` if more bytes
    /// are needed, else the request and the bytes it took.
    pub fn decode(buf: &[u8]) -> Result<Option<(Request, usize)>, NetError> {
        let mut r = Reader { buf, pos: 0 };
        let Some(magic) = r.take(4) else {
            return Ok(None);
        };
        if magic != MAGIC {
            return Err(NetError::Protocol("not a convoy request".into()));
        }
        let Some(op) = r.u8() else { return Ok(None) };
        let Some(name_len) = r.u16() else {
            return Ok(None);
        };
        let Some(name) = r.take(usize::from(name_len)) else {
            return Ok(None);
        };
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| NetError::Protocol("name is not UTF-8".into()))?;
        let req = match op {
            1 | 5 => {
                let (Some(size), Some(hash)) = (r.u64(), r.take(32)) else {
                    return Ok(None);
                };
                Request::Put {
                    name,
                    size,
                    hash: hash.try_into().expect("32 bytes"),
                    from_start: op == 5,
                }
            }
            2 => {
                let Some(offset) = r.u64() else {
                    return Ok(None);
                };
                Request::Get { name, offset }
            }
            3 => {
                let (Some(bytes), Some(millis)) = (r.u64(), r.u64()) else {
                    return Ok(None);
                };
                Request::Perf { bytes, millis }
            }
            4 => Request::Control,
            _ => return Err(NetError::Protocol(format!("unknown request {op}"))),
        };
        Ok(Some((req, r.pos)))
    }
}

impl Reply {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48);
        match self {
            Reply::PutFrom { offset } => {
                out.push(1);
                out.extend_from_slice(&offset.to_be_bytes());
            }
            Reply::Stored { hash } => {
                out.push(2);
                out.extend_from_slice(hash);
            }
            Reply::GetMeta { size, hash } => {
                out.push(3);
                out.extend_from_slice(&size.to_be_bytes());
                out.extend_from_slice(hash);
            }
            Reply::Progress { received } => {
                out.push(4);
                out.extend_from_slice(&received.to_be_bytes());
            }
            Reply::PerfDone {
                received,
                cpu_ns,
                latency,
            } => {
                out.push(5);
                for v in [
                    *received,
                    *cpu_ns,
                    latency.samples,
                    latency.p50_us,
                    latency.p95_us,
                    latency.p99_us,
                ] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
            }
            Reply::Error { message } => {
                let m = &message.as_bytes()[..message.len().min(1000)];
                out.push(0xEE);
                out.extend_from_slice(&(m.len() as u16).to_be_bytes());
                out.extend_from_slice(m);
            }
        }
        out
    }

    /// Like [`Request::decode`], for one reply record.
    pub fn decode(buf: &[u8]) -> Result<Option<(Reply, usize)>, NetError> {
        let mut r = Reader { buf, pos: 0 };
        let Some(kind) = r.u8() else { return Ok(None) };
        let reply = match kind {
            1 => r.u64().map(|offset| Reply::PutFrom { offset }),
            2 => r.take(32).map(|h| Reply::Stored {
                hash: h.try_into().expect("32 bytes"),
            }),
            3 => match (r.u64(), r.take(32)) {
                (Some(size), Some(h)) => Some(Reply::GetMeta {
                    size,
                    hash: h.try_into().expect("32 bytes"),
                }),
                _ => None,
            },
            4 => r.u64().map(|received| Reply::Progress { received }),
            5 => match [r.u64(), r.u64(), r.u64(), r.u64(), r.u64(), r.u64()] {
                [Some(received), Some(cpu_ns), Some(samples), Some(p50_us), Some(p95_us), Some(p99_us)] => {
                    Some(Reply::PerfDone {
                        received,
                        cpu_ns,
                        latency: LatencySummary {
                            samples,
                            p50_us,
                            p95_us,
                            p99_us,
                        },
                    })
                }
                _ => None,
            },
            0xEE => match r.u16() {
                Some(n) => r.take(usize::from(n)).map(|m| Reply::Error {
                    message: String::from_utf8_lossy(m).into_owned(),
                }),
                None => None,
            },
            _ => return Err(NetError::Protocol(format!("unknown reply {kind}"))),
        };
        Ok(reply.map(|x| (x, r.pos)))
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.buf.get(self.pos..self.pos + n)?;
        self.pos += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_wait_for_more_bytes() {
        for req in [
            Request::Put {
                name: "log.bin".into(),
                size: 7,
                hash: [9; 32],
                from_start: false,
            },
            Request::Put {
                name: "live/000001.seg".into(),
                size: 300,
                hash: [5; 32],
                from_start: true,
            },
            Request::Get {
                name: "a".into(),
                offset: 123,
            },
            Request::Perf {
                bytes: 0,
                millis: 40_000,
            },
            Request::Control,
        ] {
            let bytes = req.encode();
            for cut in 0..bytes.len() {
                assert!(Request::decode(&bytes[..cut]).unwrap().is_none());
            }
            assert_eq!(
                Request::decode(&bytes).unwrap(),
                Some((req.clone(), bytes.len()))
            );
        }
        assert!(Request::decode(b"HTTP/1.1").is_err());
    }

    #[test]
    fn replies_round_trip() {
        for rep in [
            Reply::PutFrom { offset: 5 },
            Reply::Stored { hash: [1; 32] },
            Reply::GetMeta {
                size: 4,
                hash: [2; 32],
            },
            Reply::Progress { received: 8 },
            Reply::PerfDone {
                received: 8,
                cpu_ns: 9,
                latency: LatencySummary {
                    samples: 3,
                    p50_us: 10,
                    p95_us: 20,
                    p99_us: 30,
                },
            },
            Reply::Error {
                message: "disk full".into(),
            },
        ] {
            let bytes = rep.encode();
            for cut in 0..bytes.len() {
                assert!(Reply::decode(&bytes[..cut]).unwrap().is_none());
            }
            assert_eq!(Reply::decode(&bytes).unwrap(), Some((rep, bytes.len())));
        }
    }

    #[test]
    fn names_cannot_escape_the_directory() {
        for bad in [
            "", "../x", ".hidden", ".", "a/../b", "/abs", "a//b", "a/", "a\\b", "a\0b",
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        assert!(validate_name("vehicle-7.log").is_ok());
        assert!(validate_name("2026-11-24/cam0/000123.mcap").is_ok());
        assert!(validate_name("a/".repeat(16).trim_end_matches('/')).is_ok());
        assert!(validate_name("a/".repeat(17).trim_end_matches('/')).is_err());
    }
}

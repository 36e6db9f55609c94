//! Segment files: a bounded batch of samples, one JSON object per line,
//! compressed as one zstd frame (`.jsonl.zst`). JSON lines keep every
//! producer trivial and every segment readable with `zstdcat`; zstd
//! shrinks repetitive telemetry about tenfold.
//!
//! Each line is `{"t_ns":…,"path":"…","value":…}`. The reader is strict:
//! a segment that does not decompress, or a line that does not parse,
//! is corrupt and reported with its line number, so the ingest never
//! indexes half a segment as if it were whole.

use std::io::{Read, Write};

use crate::{Sample, Value};

/// The file name extension of telemetry segments.
pub const SEGMENT_EXT: &str = "jsonl.zst";

/// zstd level: 3 is zstd's default, fast enough for a vehicle's CPU.
const LEVEL: i32 = 3;

/// Writes samples into one compressed segment.
pub struct SegmentWriter<W: Write> {
    enc: zstd::stream::Encoder<'static, W>,
    samples: u64,
    raw_bytes: u64,
    line: Vec<u8>,
}

impl<W: Write> SegmentWriter<W> {
    pub fn new(out: W) -> std::io::Result<SegmentWriter<W>> {
        Ok(SegmentWriter {
            enc: zstd::stream::Encoder::new(out, LEVEL)?,
            samples: 0,
            raw_bytes: 0,
            line: Vec::with_capacity(128),
        })
    }

    pub fn push(&mut self, s: &Sample) -> std::io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, s).map_err(std::io::Error::other)?;
        self.line.push(b'\n');
        self.push_line(&self.line.clone())
    }

    /// Appends one line already in segment form (ends with `\n`).
    pub fn push_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.enc.write_all(line)?;
        self.samples += 1;
        self.raw_bytes += line.len() as u64;
        Ok(())
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Uncompressed bytes so far.
    pub fn raw_bytes(&self) -> u64 {
        self.raw_bytes
    }

    /// Ends the zstd frame and returns the output.
    pub fn finish(self) -> std::io::Result<W> {
        self.enc.finish()
    }
}

/// One line of a segment, borrowed from the decompressed bytes.
#[derive(serde::Deserialize)]
pub struct LineRef<'a> {
    pub t_ns: i64,
    #[serde(borrow)]
    pub path: &'a str,
    pub value: ValueRef<'a>,
}

/// A value borrowed from the segment.
#[derive(serde::Deserialize, Debug, PartialEq)]
#[serde(untagged)]
pub enum ValueRef<'a> {
    Bool(bool),
    Number(f64),
    Text(#[serde(borrow)] std::borrow::Cow<'a, str>),
}

impl ValueRef<'_> {
    pub fn to_owned(&self) -> Value {
        match self {
            ValueRef::Bool(b) => Value::Bool(*b),
            ValueRef::Number(x) => Value::Number(*x),
            ValueRef::Text(s) => Value::Text(s.to_string()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    #[error("segment does not decompress: {0}")]
    Compression(std::io::Error),
    #[error("segment line {line}: {why}")]
    Line { line: usize, why: String },
    #[error("segment is larger than {0} bytes uncompressed")]
    TooLarge(u64),
}

/// Reads a whole segment (bounded by `max_bytes` uncompressed).
pub struct SegmentReader {
    raw: Vec<u8>,
}

impl SegmentReader {
    pub fn new(input: impl Read, max_bytes: u64) -> Result<SegmentReader, SegmentError> {
        let mut dec = zstd::stream::Decoder::new(input).map_err(SegmentError::Compression)?;
        let mut raw = Vec::new();
        (&mut dec)
            .take(max_bytes + 1)
            .read_to_end(&mut raw)
            .map_err(SegmentError::Compression)?;
        if raw.len() as u64 > max_bytes {
            return Err(SegmentError::TooLarge(max_bytes));
        }
        Ok(SegmentReader { raw })
    }

    /// Uncompressed size.
    pub fn raw_len(&self) -> usize {
        self.raw.len()
    }

    /// Calls `f` for every line, in order; stops at the first bad line.
    pub fn for_each(&self, mut f: impl FnMut(LineRef<'_>)) -> Result<u64, SegmentError> {
        let mut n = 0u64;
        for (i, line) in self.raw.split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let l: LineRef<'_> = serde_json::from_slice(line).map_err(|e| SegmentError::Line {
                line: i + 1,
                why: e.to_string(),
            })?;
            f(l);
            n += 1;
        }
        Ok(n)
    }

    /// Every sample, owned (tests and small tools).
    pub fn samples(&self) -> Result<Vec<Sample>, SegmentError> {
        let mut out = Vec::new();
        self.for_each(|l| {
            out.push(Sample {
                t_ns: l.t_ns,
                path: l.path.to_owned(),
                value: l.value.to_owned(),
            })
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(i: i64) -> Sample {
        Sample {
            t_ns: 1_764_000_000_000_000_000 + i,
            path: if i % 2 == 0 {
                "Vehicle.Speed"
            } else {
                "Vehicle.Private.Note"
            }
            .into(),
            value: match i % 3 {
                0 => Value::Number(i as f64 * 0.5),
                1 => Value::Bool(i % 2 == 0),
                _ => Value::Text(format!("note \"{i}\"\n")),
            },
        }
    }

    #[test]
    fn segments_round_trip() {
        let mut w = SegmentWriter::new(Vec::new()).unwrap();
        let samples: Vec<_> = (0..1000).map(sample).collect();
        for s in &samples {
            w.push(s).unwrap();
        }
        assert_eq!(w.samples(), 1000);
        let bytes = w.finish().unwrap();
        assert!(
            bytes.len() < 1000 * 40,
            "compressed to {} bytes",
            bytes.len()
        );
        let r = SegmentReader::new(&bytes[..], 1 << 30).unwrap();
        assert_eq!(r.samples().unwrap(), samples);
    }

    #[test]
    fn corrupt_and_truncated_segments_are_errors() {
        let mut w = SegmentWriter::new(Vec::new()).unwrap();
        for i in 0..100 {
            w.push(&sample(i)).unwrap();
        }
        let bytes = w.finish().unwrap();
        assert!(SegmentReader::new(&bytes[..bytes.len() / 2], 1 << 30).is_err());
        assert!(SegmentReader::new(&b"garbage"[..], 1 << 30).is_err());
        assert!(matches!(
            SegmentReader::new(&bytes[..], 10),
            Err(SegmentError::TooLarge(10))
        ));
        let mut w = SegmentWriter::new(Vec::new()).unwrap();
        w.push_line(b"{\"t_ns\":1,\"path\":\"Vehicle.Speed\",\"value\":1}\n")
            .unwrap();
        w.push_line(b"{\"t_ns\":oops}\n").unwrap();
        let r = SegmentReader::new(&w.finish().unwrap()[..], 1 << 30).unwrap();
        let err = r.for_each(|_| {}).unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(r) = SegmentReader::new(&bytes[..], 1 << 20) {
                let _ = r.for_each(|_| {});
            }
        }
    }
}

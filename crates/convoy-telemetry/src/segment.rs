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

thread_local! {
    /// One decompression context per thread, reused by
    /// [`SegmentReader::from_bytes`]: making one (and its input buffer)
    /// for every segment costs more than decompressing a small segment.
    static CONTEXT: std::cell::RefCell<zstd::zstd_safe::DCtx<'static>> =
        std::cell::RefCell::new(zstd::zstd_safe::DCtx::create());
}

impl SegmentReader {
    pub fn new(input: impl Read, max_bytes: u64) -> Result<SegmentReader, SegmentError> {
        let dec = zstd::stream::Decoder::new(input).map_err(SegmentError::Compression)?;
        Self::read_bounded(dec, max_bytes)
    }

    /// A segment already in memory (the server's indexer), decompressed
    /// with this thread's reused context.
    pub fn from_bytes(input: &[u8], max_bytes: u64) -> Result<SegmentReader, SegmentError> {
        CONTEXT.with(|ctx| {
            // A reader on the same thread inside this one (none today)
            // gets a context of its own rather than a panic.
            let Ok(mut ctx) = ctx.try_borrow_mut() else {
                return Self::new(input, max_bytes);
            };
            let dec = zstd::stream::read::Decoder::with_context(input, &mut ctx);
            Self::read_bounded(dec, max_bytes)
        })
    }

    fn read_bounded(mut dec: impl Read, max_bytes: u64) -> Result<SegmentReader, SegmentError> {
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

    #[test]
    fn a_reused_context_forgets_a_segment_it_did_not_finish() {
        let segment = |n: i64| {
            let mut w = SegmentWriter::new(Vec::new()).unwrap();
            for i in 0..n {
                w.push(&sample(i)).unwrap();
            }
            w.finish().unwrap()
        };
        let (long, short) = (segment(500), segment(3));
        // Cut off mid-frame, and stopped at the size bound mid-frame:
        // either leaves the thread's context inside a frame.
        assert!(SegmentReader::from_bytes(&long[..long.len() / 2], 1 << 30).is_err());
        assert!(SegmentReader::from_bytes(&long, 100).is_err());
        let r = SegmentReader::from_bytes(&short, 1 << 30).unwrap();
        assert_eq!(r.samples().unwrap().len(), 3);
        let r = SegmentReader::from_bytes(&long, 1 << 30).unwrap();
        assert_eq!(r.samples().unwrap().len(), 500);
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(r) = SegmentReader::new(&bytes[..], 1 << 20) {
                let _ = r.for_each(|_| {});
            }
        }

        #[test]
        fn in_memory_and_streamed_reads_agree(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let streamed = SegmentReader::new(&bytes[..], 1 << 20).map(|r| r.raw);
            let in_memory = SegmentReader::from_bytes(&bytes, 1 << 20).map(|r| r.raw);
            prop_assert_eq!(streamed.ok(), in_memory.ok());
        }
    }
}

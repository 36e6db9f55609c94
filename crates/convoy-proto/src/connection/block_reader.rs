//! Reads one block's frames as its bytes become known, in order: first from
//! its source symbols as they arrive (coding is systematic, so a source
//! symbol *is* the block's bytes at its place), then the rest once the
//! block decodes. A STREAM frame's data is handed to the stream piece by
//! piece, so an application reads bytes as soon as every byte before them
//! arrived, without waiting for the generation to decode.

use crate::stream::Streams;
use crate::wire::cursor::Reader;
use crate::wire::frame::{parse_stream_header, PADDING, RESET_STREAM, STREAM};
use crate::wire::{Frames, WireError};

/// The longest frame header a block may hold (STREAM: type, flags, three
/// varints; RESET_STREAM: type and three varints).
const MAX_HEADER: usize = 2 + 3 * 8;

/// Inside a STREAM frame's data.
#[derive(Clone, Copy, Debug)]
struct Partial {
    stream: u64,
    offset: u64,
    left: u64,
    fin: bool,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct BlockReader {
    /// Bytes of the block taken so far (including `carry`).
    pos: usize,
    /// The start of a frame whose header is not complete yet.
    carry: Vec<u8>,
    partial: Option<Partial>,
}

impl BlockReader {
    /// Bytes of the block read so far: the next `feed` starts here.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Takes the block's next bytes (from `position()` on).
    pub fn feed(&mut self, mut data: &[u8], streams: &mut Streams) -> Result<(), String> {
        loop {
            if let Some(p) = self.partial.as_mut() {
                let n = (p.left.min(data.len() as u64)) as usize;
                let last = n as u64 == p.left;
                if n > 0 || last {
                    streams
                        .on_stream_frame(p.stream, p.offset, p.fin && last, &data[..n])
                        .map_err(|e| e.to_string())?;
                }
                p.offset += n as u64;
                p.left -= n as u64;
                data = &data[n..];
                self.pos += n;
                if last {
                    self.partial = None;
                } else {
                    return Ok(());
                }
            }
            if data.is_empty() {
                return Ok(());
            }
            if self.carry.is_empty() && data[0] == PADDING {
                let zeros = data.iter().take_while(|&&b| b == PADDING).count();
                data = &data[zeros..];
                self.pos += zeros;
                continue;
            }
            // A frame starts at the carry (if any) or at `data`.
            let had = self.carry.len();
            let take = data.len().min(MAX_HEADER + 64);
            self.carry.extend_from_slice(&data[..take]);
            let used = self.frame(streams)?;
            match used {
                None => {
                    // Incomplete: everything is in the carry now.
                    self.carry.truncate(had + take);
                    if take < data.len() {
                        return Err(malformed(WireError::Invalid("oversized frame header")));
                    }
                    self.pos += take;
                    return Ok(());
                }
                Some(used) => {
                    // `used` counts from the carry's start.
                    let from_data = used - had;
                    self.carry.clear();
                    data = &data[from_data..];
                    self.pos += from_data;
                }
            }
        }
    }

    /// Parses the frame at the start of the carry: `Some(bytes used)`, or
    /// `None` if the carry ends inside it. Blocks hold STREAM,
    /// RESET_STREAM and PADDING only.
    fn frame(&mut self, streams: &mut Streams) -> Result<Option<usize>, String> {
        let buf = &self.carry;
        match buf[0] {
            STREAM => Ok(parse_stream_header(buf).map_err(malformed)?.map(|h| {
                self.partial = Some(Partial {
                    stream: h.stream,
                    offset: h.offset,
                    left: h.data_len,
                    fin: h.fin,
                });
                h.header_len
            })),
            RESET_STREAM => {
                let mut r = Reader::new(&buf[1..]);
                let fields = (|| Ok::<_, WireError>((r.varint()?, r.varint()?, r.varint()?)))();
                match fields {
                    Ok((stream, final_size, code)) => {
                        let used = buf.len() - r.remaining();
                        streams
                            .on_reset(stream, final_size, code)
                            .map_err(|e| e.to_string())?;
                        Ok(Some(used))
                    }
                    Err(WireError::Truncated) => Ok(None),
                    Err(e) => Err(malformed(e)),
                }
            }
            other => match Frames::new(&buf[..1]).next() {
                Some(Err(WireError::UnknownFrameType(t))) => {
                    Err(malformed(WireError::UnknownFrameType(t)))
                }
                _ => Err(format!("frame type {other:#04x} not allowed in a block")),
            },
        }
    }

    /// The block ended: nothing may be left half read.
    pub fn finish(&self) -> Result<(), String> {
        if self.partial.is_some() || !self.carry.is_empty() {
            return Err("a block ends inside a frame".into());
        }
        Ok(())
    }
}

fn malformed(e: WireError) -> String {
    format!("bad frame in a block: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{StreamId, StreamLimits};
    use crate::wire::cursor::Writer;
    use crate::wire::frame::write_frame;
    use crate::wire::Frame;

    /// A block as a sender packs it: STREAM frames of two streams, a
    /// RESET_STREAM and padding.
    fn block() -> Vec<u8> {
        let mut buf = vec![0u8; 4096];
        let mut w = Writer::new(&mut buf);
        let a: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let b: Vec<u8> = (0..700u32).map(|i| (i * 7) as u8).collect();
        for f in [
            Frame::Stream {
                stream: 0,
                offset: 0,
                fin: false,
                data: &a,
            },
            Frame::Stream {
                stream: 4,
                offset: 0,
                fin: true,
                data: &b,
            },
            Frame::ResetStream {
                stream: 8,
                final_size: 0,
                code: 3,
            },
            Frame::Padding,
            Frame::Padding,
        ] {
            write_frame(&mut w, &f).unwrap();
        }
        let n = w.len();
        buf.truncate(n);
        buf
    }

    fn read_all(streams: &mut Streams, id: u64) -> Vec<u8> {
        let mut out = vec![0u8; 8192];
        let n = streams.read(StreamId(id), &mut out).unwrap_or(0);
        out.truncate(n);
        out
    }

    #[test]
    fn pieces_of_any_size_deliver_the_same_bytes_as_the_whole_block() {
        let whole = block();
        for piece in [1usize, 2, 3, 7, 13, 100, 1400, whole.len()] {
            let mut streams = Streams::new(false, StreamLimits::default());
            let mut r = BlockReader::default();
            for chunk in whole.chunks(piece) {
                assert_eq!(r.position(), whole.len() - whole[r.position()..].len());
                r.feed(chunk, &mut streams).unwrap();
            }
            r.finish().unwrap();
            assert_eq!(r.position(), whole.len());
            let a = read_all(&mut streams, 0);
            assert_eq!(
                a,
                (0..1000u32).map(|i| i as u8).collect::<Vec<_>>(),
                "piece {piece}"
            );
            assert_eq!(read_all(&mut streams, 4).len(), 700, "piece {piece}");
        }
    }

    #[test]
    fn a_prefix_is_readable_before_the_rest_arrives_and_the_rest_follows() {
        let whole = block();
        let mut streams = Streams::new(false, StreamLimits::default());
        let mut r = BlockReader::default();
        r.feed(&whole[..600], &mut streams).unwrap();
        let early = read_all(&mut streams, 0);
        assert!(
            early.len() > 500,
            "read {} bytes of the first frame early",
            early.len()
        );
        r.feed(&whole[r.position()..], &mut streams).unwrap();
        r.finish().unwrap();
        assert_eq!(early.len() + read_all(&mut streams, 0).len(), 1000);
    }

    #[test]
    fn garbage_and_truncation_are_errors_not_panics() {
        let mut streams = Streams::new(false, StreamLimits::default());
        let mut r = BlockReader::default();
        assert!(
            r.feed(&[0x01], &mut streams).is_err(),
            "PING is not allowed in a block"
        );
        let whole = block();
        let mut r = BlockReader::default();
        r.feed(&whole[..50], &mut streams).unwrap();
        assert!(r.finish().is_err(), "ends inside a frame");
        let mut r = BlockReader::default();
        assert!(r.feed(&[0x3f, 1, 2], &mut streams).is_err());
    }
}

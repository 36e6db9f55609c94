//! Frames: the contents of protected packets and of coded blocks.
//!
//! A frame is a type byte and its fields (varints unless said otherwise).
//! Two families share the one codec:
//!
//! * **Packet frames** travel uncoded inside one protected packet. Either
//!   they carry a coded symbol (always the packet's last frame: its length
//!   is the rest of the packet), or they are *state* (acknowledgments, block
//!   status, rate reports, credit) that the next packet repeats, so none of
//!   them is ever retransmitted.
//! * **Pipe frames** ([`Frame::Stream`], [`Frame::ResetStream`]) travel inside
//!   coded blocks, which are delivered reliably by coding, so they need no
//!   retransmission either.

use std::ops::RangeInclusive;

use super::cursor::{Reader, Writer};
use super::WireError;

pub const PADDING: u8 = 0x00;
pub const PING: u8 = 0x01;
pub const ACK: u8 = 0x02;
pub const TRAIN: u8 = 0x03;
pub const SYMBOL: u8 = 0x04;
pub const BLOCK_STATUS: u8 = 0x05;
pub const RATE_REPORT: u8 = 0x06;
pub const MAX_DATA: u8 = 0x07;
pub const MAX_STREAM_DATA: u8 = 0x08;
pub const MAX_BLOCKS: u8 = 0x09;
pub const DATA_BLOCKED: u8 = 0x0a;
pub const STREAM_DATA_BLOCKED: u8 = 0x0b;
pub const CLOSE: u8 = 0x0c;
pub const RECEIVE_TIME: u8 = 0x0d;
pub const PATH_CHALLENGE: u8 = 0x0e;
pub const PATH_RESPONSE: u8 = 0x0f;
pub const PATH_STATUS: u8 = 0x12;
pub const PATH_ABANDON: u8 = 0x13;
pub const PAIR_PROBE: u8 = 0x14;
pub const PAIR_REPORT: u8 = 0x15;
pub const MAX_STREAMS: u8 = 0x16;
pub const PREFIX_SYMBOL: u8 = 0x17;
/// A source symbol that does not name its block's K: block id, esi.
pub const SOURCE: u8 = 0x18;
/// 0x40..=0x7f: a source symbol numbered 0..=63 in the type's low six
/// bits, not naming K: block id only. At 20 Mbit/s a 25 ms block has
/// about 44 sources, so nearly every data packet takes this form.
pub const SHORT_SOURCE: u8 = 0x40;
const SHORT_SOURCE_ESI: u8 = 0x3f;
const SHORT_SOURCE_LAST: u8 = SHORT_SOURCE | SHORT_SOURCE_ESI;
pub const STREAM: u8 = 0x10;
pub const RESET_STREAM: u8 = 0x11;

/// At most this many ranges in one ACK frame; older gaps age out and are
/// declared lost by the sender's time threshold instead.
pub const MAX_ACK_RANGES: usize = 32;
/// At most this many entries in one BLOCK_STATUS frame.
pub const MAX_STATUS_ENTRIES: usize = 256;

/// One parsed frame, borrowing from the packet or block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A run of zero bytes.
    Padding,
    Ping,
    Ack(Ack<'a>),
    /// Marks the packet as part of a packet train (RCDP rate control).
    Train(TrainTag),
    Symbol(Symbol<'a>),
    BlockStatus(BlockStatus<'a>),
    /// The receiver's capacity estimate from one train.
    RateReport {
        train_id: u64,
        bytes_per_sec: u64,
    },
    /// Connection credit: the peer may send stream bytes up to this sum of
    /// stream offsets.
    MaxData(u64),
    MaxStreamData {
        stream: u64,
        max: u64,
    },
    /// The peer may start blocks with ids below this.
    MaxBlocks(u64),
    /// Stream credit: the peer may open streams whose index (id / 2) is
    /// below this. Sent only to peers that announced a stream limit in
    /// their transport parameters (older ones do not know the frame).
    MaxStreams(u64),
    DataBlocked(u64),
    StreamDataBlocked {
        stream: u64,
        limit: u64,
    },
    Close {
        code: u64,
        reason: &'a [u8],
    },
    /// When packet `pn` arrived, in microseconds on the receiver's own
    /// clock (any epoch, fixed for the connection): with the packet's send
    /// time it gives the sender one-way delays up to a constant, so it can
    /// tell its own queue from the return path's, and the arrival spacing
    /// the bottleneck imposed, free of the return path's jitter.
    ReceiveTime {
        pn: u64,
        time_us: u64,
    },
    /// Path validation: the peer echoes the 8 bytes in a PATH_RESPONSE on
    /// the same path, proving it receives at that address.
    PathChallenge([u8; 8]),
    PathResponse([u8; 8]),
    /// The sender's wish for a path: `backup` (standby: no data while
    /// another path works) or available. `seq` grows with each change, so a
    /// late, reordered status never overrides a newer one.
    PathStatus {
        path: u8,
        seq: u64,
        backup: bool,
    },
    /// The sender stopped using a path (silent too long, or its interface
    /// went down); sent on another path.
    PathAbandon {
        path: u8,
        code: u64,
    },
    /// One of the two packets of a CapProbe packet pair, sent back to back
    /// on one path (docs/PROTOCOL.md, "CapProbe path grading").
    PairProbe {
        pair: u64,
        second: bool,
    },
    /// The receiver's measurement of a pair: when its first packet arrived
    /// (the receiver's clock, µs) and how long after it the second did.
    PairReport {
        pair: u64,
        first_us: u64,
        dispersion_us: u64,
    },
    Stream {
        stream: u64,
        offset: u64,
        fin: bool,
        data: &'a [u8],
    },
    ResetStream {
        stream: u64,
        final_size: u64,
        code: u64,
    },
}

/// Position of a packet in a train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrainTag {
    pub train_id: u64,
    pub index: u32,
    pub len: u32,
}

/// One encoding symbol of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol<'a> {
    pub block_id: u32,
    pub esi: u32,
    /// Bytes of the block, whole symbols: the frame carries the number of
    /// source symbols K, and the block is K × the symbol's length (a
    /// sender pads its last source symbol with zeros, which a block's
    /// reader takes as PADDING). A writer rounds up to whole symbols.
    /// `None`: a source symbol (SOURCE, SHORT_SOURCE) that leaves K to
    /// its block's first source and its repairs, which always name it
    /// ([`names_k`]); its receiver holds it until one of them arrives.
    pub block_len: Option<u32>,
    /// `Some(n)`: a repair over source symbols `0..n` only (a
    /// PREFIX_SYMBOL frame, sent only to a peer that offered to take
    /// them); `None`: a source symbol or a repair over the whole block.
    pub prefix: Option<u32>,
    pub payload: &'a [u8],
}

/// Acknowledged packet numbers: ranges in descending order, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack<'a> {
    pub largest: u64,
    /// Microseconds between receiving `largest` and sending this frame.
    pub delay_us: u64,
    range_count: u64,
    first_range: u64,
    raw: &'a [u8],
}

impl Ack<'_> {
    /// The acknowledged ranges, highest first.
    pub fn ranges(&self) -> impl Iterator<Item = RangeInclusive<u64>> + '_ {
        let mut r = Reader::new(self.raw);
        let mut end = self.largest;
        let mut start = self.largest - self.first_range;
        let mut left = self.range_count;
        let mut first = true;
        std::iter::from_fn(move || {
            if first {
                first = false;
                return Some(start..=end);
            }
            if left == 0 {
                return None;
            }
            left -= 1;
            // Validated at parse time, so these cannot fail or underflow.
            let gap = r.varint().ok()?;
            let len = r.varint().ok()?;
            end = start - gap - 2;
            start = end - len;
            Some(start..=end)
        })
    }
}

/// Decoding progress of every block from `done_below` up to the highest
/// block seen. A block not listed has had no symbol arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockStatus<'a> {
    /// Every block below this is decoded.
    pub done_below: u32,
    count: u64,
    raw: &'a [u8],
}

/// One entry of a BLOCK_STATUS frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockProgress {
    pub block_id: u32,
    /// Useful symbols held (RLNC: rank; RaptorQ: distinct ids, capped at K-1
    /// while not decodable, so the sender knows one more is needed).
    pub useful: u32,
    /// Decodable (or decoded): the sender may forget the block.
    pub done: bool,
}

impl BlockStatus<'_> {
    pub fn entries(&self) -> impl Iterator<Item = BlockProgress> + '_ {
        let mut r = Reader::new(self.raw);
        let mut next = u64::from(self.done_below);
        (0..self.count).map_while(move |_| {
            let delta = r.varint().ok()?;
            let useful = r.varint_u32().ok()?;
            let done = r.u8().ok()? != 0;
            let id = next + delta;
            next = id + 1;
            Some(BlockProgress {
                block_id: id as u32,
                useful,
                done,
            })
        })
    }
}

/// Iterates over the frames of a packet payload or a block.
#[derive(Clone)]
pub struct Frames<'a> {
    r: Reader<'a>,
    failed: bool,
}

impl<'a> Frames<'a> {
    pub fn new(payload: &'a [u8]) -> Self {
        Frames {
            r: Reader::new(payload),
            failed: false,
        }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, WireError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.r.is_empty() {
            return None;
        }
        let item = parse_frame(&mut self.r);
        self.failed = item.is_err();
        Some(item)
    }
}

fn parse_frame<'a>(r: &mut Reader<'a>) -> Result<Frame<'a>, WireError> {
    let kind = r.u8()?;
    Ok(match kind {
        PADDING => {
            while r.rest().first() == Some(&0) {
                r.u8()?;
            }
            Frame::Padding
        }
        PING => Frame::Ping,
        ACK => Frame::Ack(parse_ack(r)?),
        TRAIN => {
            let train_id = r.varint()?;
            let index = r.varint_u32()?;
            let len = r.varint_u32()?;
            if len == 0 || index >= len {
                return Err(WireError::Invalid("train index outside the train"));
            }
            Frame::Train(TrainTag {
                train_id,
                index,
                len,
            })
        }
        SYMBOL | PREFIX_SYMBOL => {
            let block_id = r.varint_u32()?;
            let esi = r.varint_u32()?;
            let k = r.varint_u32()?;
            let prefix = if kind == PREFIX_SYMBOL {
                Some(r.varint_u32()?)
            } else {
                None
            };
            // The symbol is the packet's last frame: it runs to the end.
            let payload = r.bytes(r.remaining())?;
            if payload.is_empty() || k == 0 {
                return Err(WireError::Invalid("empty symbol or block"));
            }
            let block_len = u32::try_from(payload.len())
                .ok()
                .and_then(|size| size.checked_mul(k))
                .ok_or(WireError::Invalid("block longer than 2^32 bytes"))?;
            if let Some(covered) = prefix {
                // A prefix is a repair's (ids from K up) over 1 to K - 1
                // sources: K would be a plain SYMBOL, and anything else
                // names sources the block does not have.
                if covered == 0 || covered >= k || esi < k {
                    return Err(WireError::Invalid("prefix symbol outside its block"));
                }
            }
            Frame::Symbol(Symbol {
                block_id,
                esi,
                block_len: Some(block_len),
                prefix,
                payload,
            })
        }
        SOURCE | SHORT_SOURCE..=SHORT_SOURCE_LAST => {
            let block_id = r.varint_u32()?;
            let esi = if kind == SOURCE {
                r.varint_u32()?
            } else {
                u32::from(kind & SHORT_SOURCE_ESI)
            };
            let payload = r.bytes(r.remaining())?;
            if payload.is_empty() {
                return Err(WireError::Invalid("empty symbol or block"));
            }
            Frame::Symbol(Symbol {
                block_id,
                esi,
                block_len: None,
                prefix: None,
                payload,
            })
        }
        BLOCK_STATUS => Frame::BlockStatus(parse_block_status(r)?),
        RATE_REPORT => Frame::RateReport {
            train_id: r.varint()?,
            bytes_per_sec: r.varint()?,
        },
        MAX_DATA => Frame::MaxData(r.varint()?),
        MAX_STREAM_DATA => Frame::MaxStreamData {
            stream: r.varint()?,
            max: r.varint()?,
        },
        MAX_BLOCKS => Frame::MaxBlocks(r.varint()?),
        MAX_STREAMS => Frame::MaxStreams(r.varint()?),
        DATA_BLOCKED => Frame::DataBlocked(r.varint()?),
        STREAM_DATA_BLOCKED => Frame::StreamDataBlocked {
            stream: r.varint()?,
            limit: r.varint()?,
        },
        CLOSE => Frame::Close {
            code: r.varint()?,
            reason: r.length_prefixed()?,
        },
        RECEIVE_TIME => Frame::ReceiveTime {
            pn: r.varint()?,
            time_us: r.varint()?,
        },
        PATH_CHALLENGE => Frame::PathChallenge(r.array()?),
        PATH_RESPONSE => Frame::PathResponse(r.array()?),
        PATH_STATUS => {
            let path = r.u8()?;
            let seq = r.varint()?;
            let backup = match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err(WireError::Invalid("path status")),
            };
            Frame::PathStatus { path, seq, backup }
        }
        PATH_ABANDON => Frame::PathAbandon {
            path: r.u8()?,
            code: r.varint()?,
        },
        PAIR_PROBE => {
            let pair = r.varint()?;
            let second = match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err(WireError::Invalid("pair probe index")),
            };
            Frame::PairProbe { pair, second }
        }
        PAIR_REPORT => Frame::PairReport {
            pair: r.varint()?,
            first_us: r.varint()?,
            dispersion_us: r.varint()?,
        },
        STREAM => {
            let fin = r.u8()?;
            if fin > 1 {
                return Err(WireError::Invalid("stream flags"));
            }
            let stream = r.varint()?;
            let offset = r.varint()?;
            let data = r.length_prefixed()?;
            if offset
                .checked_add(data.len() as u64)
                .is_none_or(|end| end > super::cursor::VARINT_MAX)
            {
                return Err(WireError::Invalid("stream offset overflows"));
            }
            Frame::Stream {
                stream,
                offset,
                fin: fin == 1,
                data,
            }
        }
        RESET_STREAM => Frame::ResetStream {
            stream: r.varint()?,
            final_size: r.varint()?,
            code: r.varint()?,
        },
        other => return Err(WireError::UnknownFrameType(other)),
    })
}

fn parse_ack<'a>(r: &mut Reader<'a>) -> Result<Ack<'a>, WireError> {
    let largest = r.varint()?;
    let delay_us = r.varint()?;
    let range_count = r.varint()?;
    let first_range = r.varint()?;
    if range_count as usize > MAX_ACK_RANGES || first_range > largest {
        return Err(WireError::Invalid("ACK ranges"));
    }
    // Walk the ranges once to validate them, so that iterating later cannot
    // underflow; the raw bytes are kept for that later walk.
    let before = r.rest();
    let mut smallest = largest - first_range;
    for _ in 0..range_count {
        let gap = r.varint()?;
        let len = r.varint()?;
        let end = smallest
            .checked_sub(gap)
            .and_then(|v| v.checked_sub(2))
            .ok_or(WireError::Invalid("ACK range below zero"))?;
        smallest = end
            .checked_sub(len)
            .ok_or(WireError::Invalid("ACK range below zero"))?;
    }
    let raw = &before[..before.len() - r.remaining()];
    Ok(Ack {
        largest,
        delay_us,
        range_count,
        first_range,
        raw,
    })
}

fn parse_block_status<'a>(r: &mut Reader<'a>) -> Result<BlockStatus<'a>, WireError> {
    let done_below = r.varint_u32()?;
    let count = r.varint()?;
    if count as usize > MAX_STATUS_ENTRIES {
        return Err(WireError::Invalid("too many block status entries"));
    }
    let before = r.rest();
    let mut next = u64::from(done_below);
    for _ in 0..count {
        let id = next
            .checked_add(r.varint()?)
            .filter(|&id| id <= u64::from(u32::MAX))
            .ok_or(WireError::Invalid("block id above 32 bits"))?;
        r.varint_u32()?;
        if r.u8()? > 1 {
            return Err(WireError::Invalid("block status flags"));
        }
        next = id + 1;
    }
    let raw = &before[..before.len() - r.remaining()];
    Ok(BlockStatus {
        done_below,
        count,
        raw,
    })
}

/// Source symbols of a block of `block_len` bytes in `symbol_len`-byte
/// symbols (K, what a SYMBOL frame carries).
pub fn source_symbols(block_len: u32, symbol_len: usize) -> u32 {
    block_len.div_ceil(u32::try_from(symbol_len.max(1)).unwrap_or(u32::MAX))
}

/// Whether a symbol's frame names its block's K (SYMBOL, PREFIX_SYMBOL)
/// or leaves it out (SOURCE, SHORT_SOURCE). A block's first source and
/// every repair name it: a receiver that lost the first source cannot
/// read past it before a repair fills the gap, and that repair names K,
/// so leaving K out of the other sources delays nothing.
pub fn names_k(esi: u32, block_len: u32, symbol_len: usize, prefix: Option<u32>) -> bool {
    esi == 0 || prefix.is_some() || esi >= source_symbols(block_len, symbol_len)
}

/// The SHORT_SOURCE type byte that carries source `esi`, if its id fits.
fn short_source_type(esi: u32) -> Option<u8> {
    u8::try_from(esi)
        .ok()
        .filter(|&e| e <= SHORT_SOURCE_ESI)
        .map(|e| SHORT_SOURCE | e)
}

/// Bytes [`write_symbol_header`] takes, so a sender can size the payload.
pub fn symbol_header_len(
    block_id: u32,
    esi: u32,
    block_len: Option<u32>,
    prefix: Option<u32>,
    payload_len: usize,
) -> usize {
    use super::cursor::varint_len;
    let Some(block_len) = block_len else {
        let esi_len = short_source_type(esi).map_or(varint_len(esi.into()), |_| 0);
        return 1 + varint_len(block_id.into()) + esi_len;
    };
    1 + varint_len(block_id.into())
        + varint_len(esi.into())
        + varint_len(source_symbols(block_len, payload_len).into())
        + prefix.map_or(0, |n| varint_len(n.into()))
}

/// Writes a symbol frame's header; the caller then writes exactly
/// `payload_len` bytes of symbol, and nothing after it: the symbol's
/// length is what is left of the packet. `block_len: None` writes a
/// source symbol without K (SHORT_SOURCE for ids below 64, else SOURCE);
/// senders choose with [`names_k`].
pub fn write_symbol_header(
    w: &mut Writer<'_>,
    block_id: u32,
    esi: u32,
    block_len: Option<u32>,
    prefix: Option<u32>,
    payload_len: usize,
) -> Result<(), WireError> {
    let Some(block_len) = block_len else {
        if prefix.is_some() {
            return Err(WireError::Invalid("a prefix repair names its block's K"));
        }
        if let Some(kind) = short_source_type(esi) {
            w.u8(kind)?;
            return w.varint(block_id.into());
        }
        w.u8(SOURCE)?;
        w.varint(block_id.into())?;
        return w.varint(esi.into());
    };
    w.u8(if prefix.is_some() {
        PREFIX_SYMBOL
    } else {
        SYMBOL
    })?;
    w.varint(block_id.into())?;
    w.varint(esi.into())?;
    w.varint(source_symbols(block_len, payload_len).into())?;
    if let Some(covered) = prefix {
        w.varint(covered.into())?;
    }
    Ok(())
}

/// Writes an ACK frame from ranges given highest first (at most
/// [`MAX_ACK_RANGES`] + 1 are written; the rest are dropped).
pub fn write_ack(
    w: &mut Writer<'_>,
    ranges: &[RangeInclusive<u64>],
    delay_us: u64,
) -> Result<(), WireError> {
    let Some(first) = ranges.first() else {
        return Err(WireError::Invalid("ACK with no ranges"));
    };
    let ranges = &ranges[..ranges.len().min(MAX_ACK_RANGES + 1)];
    w.u8(ACK)?;
    w.varint(*first.end())?;
    w.varint(delay_us)?;
    w.varint(ranges.len() as u64 - 1)?;
    w.varint(first.end() - first.start())?;
    let mut smallest = *first.start();
    for r in &ranges[1..] {
        if *r.end() + 2 > smallest {
            return Err(WireError::Invalid("ACK ranges overlap or touch"));
        }
        w.varint(smallest - r.end() - 2)?;
        w.varint(r.end() - r.start())?;
        smallest = *r.start();
    }
    Ok(())
}

/// Writes a BLOCK_STATUS frame; `entries` must be in increasing block order,
/// all at or above `done_below`.
pub fn write_block_status(
    w: &mut Writer<'_>,
    done_below: u32,
    entries: &[BlockProgress],
) -> Result<(), WireError> {
    let entries = &entries[..entries.len().min(MAX_STATUS_ENTRIES)];
    w.u8(BLOCK_STATUS)?;
    w.varint(done_below.into())?;
    w.varint(entries.len() as u64)?;
    let mut next = done_below;
    for e in entries {
        if e.block_id < next {
            return Err(WireError::Invalid("block status out of order"));
        }
        w.varint(u64::from(e.block_id - next))?;
        w.varint(e.useful.into())?;
        w.u8(u8::from(e.done))?;
        next = e.block_id.saturating_add(1);
    }
    Ok(())
}

/// Writes any frame whose fields are all in the enum (everything but ACK and
/// BLOCK_STATUS, which have their own writers). A SYMBOL must be the last
/// frame of its packet. All or nothing: a frame that does not fit leaves the
/// writer as it was, so callers may stop at the first error.
pub fn write_frame(w: &mut Writer<'_>, frame: &Frame<'_>) -> Result<(), WireError> {
    let start = w.len();
    let written = write_frame_fields(w, frame);
    if written.is_err() {
        w.truncate(start);
    }
    written
}

fn write_frame_fields(w: &mut Writer<'_>, frame: &Frame<'_>) -> Result<(), WireError> {
    match *frame {
        Frame::Padding => w.u8(PADDING),
        Frame::Ping => w.u8(PING),
        Frame::Train(t) => {
            w.u8(TRAIN)?;
            w.varint(t.train_id)?;
            w.varint(t.index.into())?;
            w.varint(t.len.into())
        }
        Frame::Symbol(s) => {
            write_symbol_header(w, s.block_id, s.esi, s.block_len, s.prefix, s.payload.len())?;
            w.bytes(s.payload)
        }
        Frame::RateReport {
            train_id,
            bytes_per_sec,
        } => {
            w.u8(RATE_REPORT)?;
            w.varint(train_id)?;
            w.varint(bytes_per_sec)
        }
        Frame::MaxData(v) => two(w, MAX_DATA, v, None),
        Frame::MaxStreamData { stream, max } => two(w, MAX_STREAM_DATA, stream, Some(max)),
        Frame::MaxBlocks(v) => two(w, MAX_BLOCKS, v, None),
        Frame::MaxStreams(v) => two(w, MAX_STREAMS, v, None),
        Frame::ReceiveTime { pn, time_us } => two(w, RECEIVE_TIME, pn, Some(time_us)),
        Frame::DataBlocked(v) => two(w, DATA_BLOCKED, v, None),
        Frame::StreamDataBlocked { stream, limit } => {
            two(w, STREAM_DATA_BLOCKED, stream, Some(limit))
        }
        Frame::PathChallenge(data) => {
            w.u8(PATH_CHALLENGE)?;
            w.bytes(&data)
        }
        Frame::PathResponse(data) => {
            w.u8(PATH_RESPONSE)?;
            w.bytes(&data)
        }
        Frame::PathStatus { path, seq, backup } => {
            w.u8(PATH_STATUS)?;
            w.u8(path)?;
            w.varint(seq)?;
            w.u8(u8::from(backup))
        }
        Frame::PathAbandon { path, code } => {
            w.u8(PATH_ABANDON)?;
            w.u8(path)?;
            w.varint(code)
        }
        Frame::PairProbe { pair, second } => {
            w.u8(PAIR_PROBE)?;
            w.varint(pair)?;
            w.u8(u8::from(second))
        }
        Frame::PairReport {
            pair,
            first_us,
            dispersion_us,
        } => {
            w.u8(PAIR_REPORT)?;
            w.varint(pair)?;
            w.varint(first_us)?;
            w.varint(dispersion_us)
        }
        Frame::Close { code, reason } => {
            w.u8(CLOSE)?;
            w.varint(code)?;
            w.length_prefixed(reason)
        }
        Frame::Stream {
            stream,
            offset,
            fin,
            data,
        } => {
            write_stream_header(w, stream, offset, fin, data.len())?;
            w.bytes(data)
        }
        Frame::ResetStream {
            stream,
            final_size,
            code,
        } => {
            w.u8(RESET_STREAM)?;
            w.varint(stream)?;
            w.varint(final_size)?;
            w.varint(code)
        }
        Frame::Ack(_) | Frame::BlockStatus(_) => {
            Err(WireError::Invalid("use write_ack / write_block_status"))
        }
    }
}

fn two(w: &mut Writer<'_>, kind: u8, a: u64, b: Option<u64>) -> Result<(), WireError> {
    w.u8(kind)?;
    w.varint(a)?;
    if let Some(b) = b {
        w.varint(b)?;
    }
    Ok(())
}

/// Writes a STREAM frame's header; exactly `data_len` bytes of data follow.
pub fn write_stream_header(
    w: &mut Writer<'_>,
    stream: u64,
    offset: u64,
    fin: bool,
    data_len: usize,
) -> Result<(), WireError> {
    w.u8(STREAM)?;
    w.u8(u8::from(fin))?;
    w.varint(stream)?;
    w.varint(offset)?;
    w.varint(data_len as u64)
}

/// A STREAM frame's header, without its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamHeader {
    pub stream: u64,
    pub offset: u64,
    pub data_len: u64,
    pub fin: bool,
    /// Bytes the header itself takes.
    pub header_len: usize,
}

/// The header of a STREAM frame at the start of `bytes`, or `None` if
/// `bytes` ends inside the header. Lets a reader hand out a frame's data in
/// pieces, as the block it travels in arrives symbol by symbol.
pub fn parse_stream_header(bytes: &[u8]) -> Result<Option<StreamHeader>, WireError> {
    let mut r = Reader::new(bytes);
    let header = (|| -> Result<(u64, u64, u64, bool), WireError> {
        if r.u8()? != STREAM {
            return Err(WireError::Invalid("not a STREAM frame"));
        }
        let fin = r.u8()?;
        if fin > 1 {
            return Err(WireError::Invalid("stream flags"));
        }
        let stream = r.varint()?;
        let offset = r.varint()?;
        let len = r.varint()?;
        if offset
            .checked_add(len)
            .is_none_or(|end| end > super::cursor::VARINT_MAX)
        {
            return Err(WireError::Invalid("stream offset overflows"));
        }
        Ok((stream, offset, len, fin == 1))
    })();
    match header {
        Ok((stream, offset, data_len, fin)) => Ok(Some(StreamHeader {
            stream,
            offset,
            data_len,
            fin,
            header_len: bytes.len() - r.remaining(),
        })),
        Err(WireError::Truncated) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Bytes a STREAM frame header takes for these fields.
pub fn stream_header_len(stream: u64, offset: u64, data_len: usize) -> usize {
    use super::cursor::varint_len;
    2 + varint_len(stream) + varint_len(offset) + varint_len(data_len as u64)
}

#[cfg(test)]
mod tests;

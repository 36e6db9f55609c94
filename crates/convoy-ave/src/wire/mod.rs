//! What AVE puts on the air: NHDP HELLO beacons in RFC 5444 packets, and
//! the data and route-discovery frames. Every parser is checked: a short,
//! long or garbled frame is an error, never a panic.

pub mod frame;
pub mod hello;

/// Why a frame could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("frame ends early")]
    Truncated,
    #[error("unknown frame type {0:#04x}")]
    UnknownType(u8),
    #[error("bad field: {0}")]
    Invalid(&'static str),
}

/// Bounds-checked big-endian reader.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.remaining() < n {
            return Err(WireError::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.bytes(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16, WireError> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    pub fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn i32(&mut self) -> Result<i32, WireError> {
        Ok(self.u32()? as i32)
    }
    pub fn u64(&mut self) -> Result<u64, WireError> {
        let b = self.bytes(8)?;
        Ok(u64::from_be_bytes(b.try_into().expect("8 bytes")))
    }
}

/// Metres → the decimetres carried on the wire, saturating.
pub(crate) fn to_dm(m: f64) -> i32 {
    (m * 10.0).round().clamp(i32::MIN as f64, i32::MAX as f64) as i32
}

pub(crate) fn from_dm(dm: i32) -> f64 {
    f64::from(dm) / 10.0
}

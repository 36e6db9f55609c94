//! Checked reading and writing over byte slices. Every read is bounds-checked
//! and returns [`WireError::Truncated`] instead of panicking, which is what
//! lets the parsers promise that no input panics.
//!
//! Integers are big-endian. Variable-length integers use the QUIC encoding
//! (RFC 9000 §16): the top two bits of the first byte give the length (1, 2,
//! 4 or 8 bytes), so values up to 2^62 - 1 fit.

use super::WireError;

/// Largest value a varint can carry.
pub const VARINT_MAX: u64 = (1 << 62) - 1;

/// Bytes needed to encode `v` as a varint.
pub fn varint_len(v: u64) -> usize {
    match v {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Reads fields from the front of a slice.
#[derive(Clone, Copy, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Everything not yet read.
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.buf.len() {
            return Err(WireError::Truncated);
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    pub fn varint(&mut self) -> Result<u64, WireError> {
        let first = *self.buf.first().ok_or(WireError::Truncated)?;
        let len = 1usize << (first >> 6);
        let raw = self.bytes(len)?;
        let mut v = u64::from(first & 0x3f);
        for &b in &raw[1..] {
            v = (v << 8) | u64::from(b);
        }
        Ok(v)
    }

    /// A varint that must fit in a `u32` (block ids, counts).
    pub fn varint_u32(&mut self) -> Result<u32, WireError> {
        u32::try_from(self.varint()?).map_err(|_| WireError::Invalid("value exceeds 32 bits"))
    }

    /// A varint length followed by that many bytes.
    pub fn length_prefixed(&mut self) -> Result<&'a [u8], WireError> {
        let len = self.varint()?;
        let len = usize::try_from(len).map_err(|_| WireError::Truncated)?;
        self.bytes(len)
    }
}

/// Appends fields to a slice, failing (not panicking) when it is full.
#[derive(Debug)]
pub struct Writer<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> Writer<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        Writer { buf, len: 0 }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.len
    }

    /// Forgets everything written after `len` bytes (a frame that did not
    /// fit must not leave half of itself in the packet).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    pub fn bytes(&mut self, data: &[u8]) -> Result<(), WireError> {
        let end = self.len + data.len();
        if end > self.buf.len() {
            return Err(WireError::BufferTooSmall);
        }
        self.buf[self.len..end].copy_from_slice(data);
        self.len = end;
        Ok(())
    }

    /// Reserves `n` bytes and returns them for the caller to fill in place
    /// (symbol payloads are encoded straight into the packet).
    pub fn reserve(&mut self, n: usize) -> Result<&mut [u8], WireError> {
        let end = self.len + n;
        if end > self.buf.len() {
            return Err(WireError::BufferTooSmall);
        }
        let start = self.len;
        self.len = end;
        Ok(&mut self.buf[start..end])
    }

    pub fn u8(&mut self, v: u8) -> Result<(), WireError> {
        self.bytes(&[v])
    }

    pub fn u16(&mut self, v: u16) -> Result<(), WireError> {
        self.bytes(&v.to_be_bytes())
    }

    pub fn u32(&mut self, v: u32) -> Result<(), WireError> {
        self.bytes(&v.to_be_bytes())
    }

    pub fn u64(&mut self, v: u64) -> Result<(), WireError> {
        self.bytes(&v.to_be_bytes())
    }

    pub fn varint(&mut self, v: u64) -> Result<(), WireError> {
        if v > VARINT_MAX {
            return Err(WireError::Invalid("varint above 2^62 - 1"));
        }
        let len = varint_len(v);
        let tag = (len.trailing_zeros() as u64) << (8 * len - 2);
        let bytes = (v | tag).to_be_bytes();
        self.bytes(&bytes[8 - len..])
    }

    pub fn length_prefixed(&mut self, data: &[u8]) -> Result<(), WireError> {
        self.varint(data.len() as u64)?;
        self.bytes(data)
    }

    /// Zero bytes up to `total` written (no-op when already there).
    pub fn pad_to(&mut self, total: usize) -> Result<(), WireError> {
        if total > self.buf.len() {
            return Err(WireError::BufferTooSmall);
        }
        if total > self.len {
            self.buf[self.len..total].fill(0);
            self.len = total;
        }
        Ok(())
    }

    pub fn into_written(self) -> &'a mut [u8] {
        &mut self.buf[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_boundaries_round_trip_with_minimal_length() {
        for v in [
            0,
            63,
            64,
            16_383,
            16_384,
            1_073_741_823,
            1_073_741_824,
            VARINT_MAX,
        ] {
            let mut buf = [0u8; 8];
            let mut w = Writer::new(&mut buf);
            w.varint(v).unwrap();
            assert_eq!(w.len(), varint_len(v));
            let n = w.len();
            let mut r = Reader::new(&buf[..n]);
            assert_eq!(r.varint().unwrap(), v);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn rfc9000_examples_decode() {
        let cases: [(&[u8], u64); 4] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ];
        for (bytes, v) in cases {
            assert_eq!(Reader::new(bytes).varint().unwrap(), v);
        }
    }

    #[test]
    fn short_input_is_an_error_not_a_panic() {
        assert_eq!(Reader::new(&[0x40]).varint(), Err(WireError::Truncated));
        assert_eq!(Reader::new(&[]).u32(), Err(WireError::Truncated));
        assert_eq!(
            Reader::new(&[5, 1, 2]).length_prefixed(),
            Err(WireError::Truncated)
        );
        let mut buf = [0u8; 1];
        assert_eq!(Writer::new(&mut buf).u16(7), Err(WireError::BufferTooSmall));
        assert!(Writer::new(&mut buf).varint(VARINT_MAX + 1).is_err());
    }
}

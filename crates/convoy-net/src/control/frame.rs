//! Control frames: a 4-byte big-endian length, then the payload.

use crate::error::NetError;

/// The largest payload a control frame may carry (64 KiB): a request
/// names files and signals, never data. A peer announcing more is broken
/// or hostile, and its stream is refused rather than buffered.
pub const MAX_FRAME: usize = 64 * 1024;

/// One frame around `payload`.
pub fn encode_frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Collects stream bytes and yields whole frames.
#[derive(Default, Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
}

impl FrameReader {
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next whole frame, `Ok(None)` while more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, NetError> {
        let Some(len) = self.buf.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
        if len > MAX_FRAME {
            return Err(NetError::Protocol(format!(
                "control frame of {len} bytes (at most {MAX_FRAME})"
            )));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let frame = self.buf[4..4 + len].to_vec();
        self.buf.drain(..4 + len);
        Ok(Some(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_out_whole_whatever_the_cuts() {
        let mut bytes = encode_frame(b"{\"a\":1}");
        bytes.extend(encode_frame(b""));
        bytes.extend(encode_frame(&[7; 300]));
        for cut in 0..bytes.len() {
            let mut r = FrameReader::default();
            r.push(&bytes[..cut]);
            let mut got = Vec::new();
            while let Some(f) = r.next_frame().unwrap() {
                got.push(f);
            }
            r.push(&bytes[cut..]);
            while let Some(f) = r.next_frame().unwrap() {
                got.push(f);
            }
            assert_eq!(got, vec![b"{\"a\":1}".to_vec(), vec![], vec![7; 300]]);
        }
    }

    #[test]
    fn an_oversized_frame_is_refused_before_it_is_buffered() {
        let mut r = FrameReader::default();
        r.push(&((MAX_FRAME + 1) as u32).to_be_bytes());
        assert!(r.next_frame().unwrap_err().to_string().contains("at most"));
    }
}

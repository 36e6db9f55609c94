//! Frames other than beacons. The first byte tells them apart from an
//! RFC 5444 packet (whose first byte, version 0 with no flags, is 0x00).
//!
//! ```text
//! DATA  0x01 origin:u32 bundle:u32 created_ns:u64 hops:u8 strategy:u8
//!            mark_dm:i32 copies:u8 rsu:u32 len:u16 payload[len]
//! RREQ  0x02 origin:u32 rreq_id:u32 hops:u8 hop_limit:u8
//! RREP  0x03 origin:u32 rreq_id:u32 rsu:u32 hops:u8
//! ```
//!
//! `strategy` is the number of the strategy the last hop used (1 local,
//! 2 reactive, 3 geographic, 4 carry; 0 for the baselines' own frames);
//! `mark_dm` is the distance to the nearest RSU when the bundle entered
//! carry mode (the loop rule's d_th reference; −1 for none); `rsu` is the
//! RSU a reactive route leads to (0 for none).

use super::{from_dm, to_dm, Reader, WireError};
use crate::NodeId;

pub const DATA: u8 = 0x01;
pub const RREQ: u8 = 0x02;
pub const RREP: u8 = 0x03;

/// A bundle in flight: who made it, which one, and its routing state.
#[derive(Clone, Debug, PartialEq)]
pub struct DataHeader {
    pub origin: NodeId,
    pub bundle: u32,
    pub created_ns: u64,
    pub hops: u8,
    pub strategy: u8,
    /// Metres; `None` until the bundle was first carried.
    pub mark_m: Option<f64>,
    pub copies: u8,
    pub rsu: NodeId,
    pub len: u16,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    Data(DataHeader),
    Rreq {
        origin: NodeId,
        rreq_id: u32,
        hops: u8,
        hop_limit: u8,
    },
    Rrep {
        origin: NodeId,
        rreq_id: u32,
        rsu: NodeId,
        hops: u8,
    },
}

impl Frame {
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Frame::Data(h) => {
                out.push(DATA);
                out.extend_from_slice(&h.origin.to_be_bytes());
                out.extend_from_slice(&h.bundle.to_be_bytes());
                out.extend_from_slice(&h.created_ns.to_be_bytes());
                out.push(h.hops);
                out.push(h.strategy);
                out.extend_from_slice(&h.mark_m.map_or(-1, to_dm).to_be_bytes());
                out.push(h.copies);
                out.extend_from_slice(&h.rsu.to_be_bytes());
                out.extend_from_slice(&h.len.to_be_bytes());
                // The sensed content itself: the simulator's bundles are
                // opaque, so zeros of the right length.
                out.resize(out.len() + usize::from(h.len), 0);
            }
            Frame::Rreq {
                origin,
                rreq_id,
                hops,
                hop_limit,
            } => {
                out.push(RREQ);
                out.extend_from_slice(&origin.to_be_bytes());
                out.extend_from_slice(&rreq_id.to_be_bytes());
                out.push(*hops);
                out.push(*hop_limit);
            }
            Frame::Rrep {
                origin,
                rreq_id,
                rsu,
                hops,
            } => {
                out.push(RREP);
                out.extend_from_slice(&origin.to_be_bytes());
                out.extend_from_slice(&rreq_id.to_be_bytes());
                out.extend_from_slice(&rsu.to_be_bytes());
                out.push(*hops);
            }
        }
    }

    pub fn decode(buf: &[u8]) -> Result<Frame, WireError> {
        let mut r = Reader::new(buf);
        let f = match r.u8()? {
            DATA => {
                let origin = r.u32()?;
                let bundle = r.u32()?;
                let created_ns = r.u64()?;
                let hops = r.u8()?;
                let strategy = r.u8()?;
                if strategy > 4 {
                    return Err(WireError::Invalid("strategy"));
                }
                let mark = r.i32()?;
                let mark_m = match mark {
                    -1 => None,
                    m if m >= 0 => Some(from_dm(m)),
                    _ => return Err(WireError::Invalid("carry mark")),
                };
                let copies = r.u8()?;
                let rsu = r.u32()?;
                let len = r.u16()?;
                r.bytes(usize::from(len))?;
                Frame::Data(DataHeader {
                    origin,
                    bundle,
                    created_ns,
                    hops,
                    strategy,
                    mark_m,
                    copies,
                    rsu,
                    len,
                })
            }
            RREQ => Frame::Rreq {
                origin: r.u32()?,
                rreq_id: r.u32()?,
                hops: r.u8()?,
                hop_limit: r.u8()?,
            },
            RREP => Frame::Rrep {
                origin: r.u32()?,
                rreq_id: r.u32()?,
                rsu: r.u32()?,
                hops: r.u8()?,
            },
            t => return Err(WireError::UnknownType(t)),
        };
        if r.remaining() != 0 {
            return Err(WireError::Invalid("trailing bytes"));
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_truncations() {
        let frames = [
            Frame::Data(DataHeader {
                origin: 5,
                bundle: 77,
                created_ns: 123_456_789,
                hops: 3,
                strategy: 4,
                mark_m: Some(812.3),
                copies: 4,
                rsu: 9,
                len: 20,
            }),
            Frame::Rreq {
                origin: 1,
                rreq_id: 2,
                hops: 3,
                hop_limit: 5,
            },
            Frame::Rrep {
                origin: 1,
                rreq_id: 2,
                rsu: 4,
                hops: 2,
            },
        ];
        for f in frames {
            let mut b = Vec::new();
            f.encode(&mut b);
            assert_eq!(Frame::decode(&b).unwrap(), f);
            for n in 0..b.len() {
                assert!(Frame::decode(&b[..n]).is_err());
            }
            b.push(0);
            assert!(Frame::decode(&b).is_err());
        }
    }
}

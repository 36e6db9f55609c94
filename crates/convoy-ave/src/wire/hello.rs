//! NHDP HELLO messages (RFC 6130) in RFC 5444 packets, as AVE's beacons
//! (thesis Fig. 7.2): the sender's address, hop limit and count, a sequence
//! number, VALIDITY_TIME and INTERVAL_TIME message TLVs (RFC 5497 time
//! codes), and one address block listing the sender and its 1-hop
//! neighbours with LINK_STATUS, plus AVE's LOCATION, SPEED_VECT and
//! DESTINATION address TLVs on the sender's own address.
//!
//! Positions are map metres carried as signed decimetres (the thesis sends
//! latitude and longitude; a simulation's map is planar), the speed vector
//! as an angle in hundredths of a degree and a speed in cm/s. The AVE TLV
//! types sit in RFC 5444's experimental range (224–255).

use std::time::Duration;

use super::{from_dm, to_dm, Reader, WireError};
use crate::{NodeId, Vec2};

/// NHDP's HELLO message type (IANA "Message Types" registry).
pub const MSG_HELLO: u8 = 0;
// Message TLV types (RFC 5497).
const TLV_INTERVAL_TIME: u8 = 0;
const TLV_VALIDITY_TIME: u8 = 1;
// Address TLV types: RFC 6130's LOCAL_IF and LINK_STATUS, and AVE's.
const TLV_LOCAL_IF: u8 = 2;
const TLV_LINK_STATUS: u8 = 3;
const TLV_LOCATION: u8 = 224;
const TLV_SPEED_VECT: u8 = 225;
const TLV_DESTINATION: u8 = 226;
/// LOCAL_IF value THIS_IF.
const THIS_IF: u8 = 0;
/// The node is an RSU (AVE extension on the sender's address, experimental).
const TLV_RSU: u8 = 227;

/// RFC 5444 message flags: has originator, hop limit, hop count, sequence number.
const MSG_FLAGS: u8 = 0b1111;
/// TLV flags: thassingleindex (bit 4), thasvalue (bit 3), thasmultiindex (bit 2).
const THAS_SINGLE_INDEX: u8 = 0x10;
const THAS_VALUE: u8 = 0x08;
const THAS_MULTI_INDEX: u8 = 0x04;

/// The link status one neighbour is listed with (RFC 6130).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkStatus {
    Lost = 0,
    Symmetric = 1,
    Heard = 2,
}

impl LinkStatus {
    fn from_u8(v: u8) -> Result<LinkStatus, WireError> {
        match v {
            0 => Ok(LinkStatus::Lost),
            1 => Ok(LinkStatus::Symmetric),
            2 => Ok(LinkStatus::Heard),
            _ => Err(WireError::Invalid("link status")),
        }
    }
}

/// One beacon.
#[derive(Clone, Debug, PartialEq)]
pub struct Hello {
    pub origin: NodeId,
    pub seq: u16,
    pub is_rsu: bool,
    pub interval: Duration,
    pub validity: Duration,
    pub position: Vec2,
    pub velocity: Vec2,
    pub destination: Option<Vec2>,
    pub neighbors: Vec<(NodeId, LinkStatus)>,
}

/// RFC 5497 time code: value = (1 + a/8) · 2^b · C with C = 1/1024 s, a in
/// the low 3 bits and b in the high 5. Encodes the smallest code ≥ `t`.
pub fn time_code(t: Duration) -> u8 {
    let c = 1.0 / 1024.0;
    let t = t.as_secs_f64();
    for code in 0u16..=255 {
        if time_value(code as u8).as_secs_f64() >= t - c * 1e-9 {
            return code as u8;
        }
    }
    let _ = c;
    255
}

pub fn time_value(code: u8) -> Duration {
    let a = f64::from(code & 0x07);
    let b = i32::from(code >> 3);
    Duration::from_secs_f64((1.0 + a / 8.0) * 2f64.powi(b) / 1024.0)
}

fn angle_speed(v: Vec2) -> (u16, u16) {
    let speed = v.x.hypot(v.y);
    let mut deg = v.y.atan2(v.x).to_degrees();
    if deg < 0.0 {
        deg += 360.0;
    }
    (
        ((deg * 100.0).round() as u32 % 36000) as u16,
        (speed * 100.0).round().clamp(0.0, 65535.0) as u16,
    )
}

fn velocity_of(angle: u16, speed: u16) -> Vec2 {
    let a = (f64::from(angle) / 100.0).to_radians();
    let s = f64::from(speed) / 100.0;
    Vec2::new(s * a.cos(), s * a.sin())
}

impl Hello {
    /// The RFC 5444 packet: version 0 with no packet header fields, one message.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(0x00); // <version=0><pkt-flags=0>
        let msg_start = out.len();
        out.push(MSG_HELLO);
        out.push((MSG_FLAGS << 4) | 3); // flags | address length − 1
        out.extend_from_slice(&[0, 0]); // msg-size, patched below
        out.extend_from_slice(&self.origin.to_be_bytes());
        out.push(1); // hop limit: HELLOs are not forwarded
        out.push(0); // hop count
        out.extend_from_slice(&self.seq.to_be_bytes());
        // Message TLV block.
        let tlvs = [
            (TLV_VALIDITY_TIME, time_code(self.validity)),
            (TLV_INTERVAL_TIME, time_code(self.interval)),
        ];
        out.extend_from_slice(&((tlvs.len() * 4) as u16).to_be_bytes());
        for (t, v) in tlvs {
            out.extend_from_slice(&[t, THAS_VALUE, 1, v]);
        }
        // Address block: ourselves (index 0), then the neighbours; full
        // addresses (no head or tail compression).
        let n = 1 + self.neighbors.len().min(254);
        out.push(n as u8);
        out.push(0); // address-block flags: no head, no tail
        out.extend_from_slice(&self.origin.to_be_bytes());
        for (id, _) in self.neighbors.iter().take(254) {
            out.extend_from_slice(&id.to_be_bytes());
        }
        let tlv_len_at = out.len();
        out.extend_from_slice(&[0, 0]);
        let tlv_start = out.len();
        // LOCAL_IF = THIS_IF on index 0.
        out.extend_from_slice(&[TLV_LOCAL_IF, THAS_SINGLE_INDEX | THAS_VALUE, 0, 1, THIS_IF]);
        if n > 1 {
            // One LINK_STATUS value per neighbour (multivalue over 1..n−1).
            out.extend_from_slice(&[
                TLV_LINK_STATUS,
                THAS_MULTI_INDEX | THAS_VALUE | 0x02, // tismultivalue
                1,
                (n - 1) as u8,
                (n - 1) as u8,
            ]);
            for (_, s) in self.neighbors.iter().take(254) {
                out.push(*s as u8);
            }
        }
        let single = |out: &mut Vec<u8>, t: u8, v: &[u8]| {
            out.extend_from_slice(&[t, THAS_SINGLE_INDEX | THAS_VALUE, 0, v.len() as u8]);
            out.extend_from_slice(v);
        };
        let mut loc = Vec::with_capacity(8);
        loc.extend_from_slice(&to_dm(self.position.x).to_be_bytes());
        loc.extend_from_slice(&to_dm(self.position.y).to_be_bytes());
        single(out, TLV_LOCATION, &loc);
        let (a, s) = angle_speed(self.velocity);
        let mut sv = a.to_be_bytes().to_vec();
        sv.extend_from_slice(&s.to_be_bytes());
        single(out, TLV_SPEED_VECT, &sv);
        if let Some(d) = self.destination {
            let mut dv = to_dm(d.x).to_be_bytes().to_vec();
            dv.extend_from_slice(&to_dm(d.y).to_be_bytes());
            single(out, TLV_DESTINATION, &dv);
        }
        if self.is_rsu {
            single(out, TLV_RSU, &[1]);
        }
        let tlv_len = (out.len() - tlv_start) as u16;
        out[tlv_len_at..tlv_len_at + 2].copy_from_slice(&tlv_len.to_be_bytes());
        let size = (out.len() - msg_start) as u16;
        out[msg_start + 2..msg_start + 4].copy_from_slice(&size.to_be_bytes());
    }

    pub fn decode(buf: &[u8]) -> Result<Hello, WireError> {
        let mut r = Reader::new(buf);
        if r.u8()? != 0 {
            return Err(WireError::Invalid("RFC 5444 version or packet flags"));
        }
        if r.u8()? != MSG_HELLO {
            return Err(WireError::Invalid("message type"));
        }
        if r.u8()? != (MSG_FLAGS << 4) | 3 {
            return Err(WireError::Invalid("message flags"));
        }
        let size = usize::from(r.u16()?);
        if size != r.remaining() + 4 {
            return Err(WireError::Invalid("message size"));
        }
        let origin = r.u32()?;
        let _hop_limit = r.u8()?;
        let _hop_count = r.u8()?;
        let seq = r.u16()?;
        let mut validity = None;
        let mut interval = None;
        let len = usize::from(r.u16()?);
        let mut mt = Reader::new(r.bytes(len)?);
        while mt.remaining() > 0 {
            let (t, flags) = (mt.u8()?, mt.u8()?);
            if flags != THAS_VALUE {
                return Err(WireError::Invalid("message TLV flags"));
            }
            let len = usize::from(mt.u8()?);
            let v = mt.bytes(len)?;
            if len != 1 {
                return Err(WireError::Invalid("time TLV length"));
            }
            match t {
                TLV_VALIDITY_TIME => validity = Some(time_value(v[0])),
                TLV_INTERVAL_TIME => interval = Some(time_value(v[0])),
                _ => {}
            }
        }
        let n = usize::from(r.u8()?);
        if n == 0 || r.u8()? != 0 {
            return Err(WireError::Invalid("address block"));
        }
        let mut addrs = Vec::with_capacity(n);
        for _ in 0..n {
            addrs.push(r.u32()?);
        }
        if addrs[0] != origin {
            return Err(WireError::Invalid("first address is not the sender's"));
        }
        let mut status = vec![LinkStatus::Heard; n - 1];
        let (mut position, mut velocity, mut destination, mut is_rsu) = (None, None, None, false);
        let len = usize::from(r.u16()?);
        let mut at = Reader::new(r.bytes(len)?);
        while at.remaining() > 0 {
            let (t, flags) = (at.u8()?, at.u8()?);
            let (start, stop) = if flags & THAS_SINGLE_INDEX != 0 {
                let i = at.u8()?;
                (i, i)
            } else if flags & THAS_MULTI_INDEX != 0 {
                (at.u8()?, at.u8()?)
            } else {
                (0, (n - 1) as u8)
            };
            if start > stop || usize::from(stop) >= n {
                return Err(WireError::Invalid("address TLV index"));
            }
            let len = if flags & THAS_VALUE != 0 {
                usize::from(at.u8()?)
            } else {
                0
            };
            let v = at.bytes(len)?;
            let mut vr = Reader::new(v);
            match t {
                TLV_LINK_STATUS => {
                    let count = usize::from(stop - start) + 1;
                    if start == 0 || v.len() != count {
                        return Err(WireError::Invalid("LINK_STATUS"));
                    }
                    for (k, &b) in v.iter().enumerate() {
                        status[usize::from(start) - 1 + k] = LinkStatus::from_u8(b)?;
                    }
                }
                TLV_LOCATION if start == 0 => {
                    position = Some(Vec2::new(from_dm(vr.i32()?), from_dm(vr.i32()?)));
                }
                TLV_SPEED_VECT if start == 0 => velocity = Some(velocity_of(vr.u16()?, vr.u16()?)),
                TLV_DESTINATION if start == 0 => {
                    destination = Some(Vec2::new(from_dm(vr.i32()?), from_dm(vr.i32()?)));
                }
                TLV_RSU if start == 0 => is_rsu = true,
                _ => {}
            }
        }
        if r.remaining() != 0 {
            return Err(WireError::Invalid("bytes after the message"));
        }
        Ok(Hello {
            origin,
            seq,
            is_rsu,
            interval: interval.ok_or(WireError::Invalid("no INTERVAL_TIME"))?,
            validity: validity.ok_or(WireError::Invalid("no VALIDITY_TIME"))?,
            position: position.ok_or(WireError::Invalid("no LOCATION"))?,
            velocity: velocity.ok_or(WireError::Invalid("no SPEED_VECT"))?,
            destination,
            neighbors: addrs[1..].iter().copied().zip(status).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Hello {
        Hello {
            origin: 7,
            seq: 42,
            is_rsu: false,
            interval: Duration::from_secs(2),
            validity: Duration::from_secs(6),
            position: Vec2::new(1234.5, -17.2),
            velocity: Vec2::new(0.0, 13.0),
            destination: Some(Vec2::new(900.0, 800.0)),
            neighbors: vec![(3, LinkStatus::Symmetric), (9, LinkStatus::Heard)],
        }
    }

    #[test]
    fn round_trip() {
        let h = sample();
        let mut b = Vec::new();
        h.encode(&mut b);
        let d = Hello::decode(&b).unwrap();
        assert_eq!(d.origin, 7);
        assert_eq!(d.seq, 42);
        assert_eq!(d.interval, Duration::from_secs(2));
        assert_eq!(d.validity, Duration::from_secs(6));
        assert!((d.position.x - 1234.5).abs() < 0.051 && (d.position.y + 17.2).abs() < 0.051);
        assert!(d.velocity.x.abs() < 0.01 && (d.velocity.y - 13.0).abs() < 0.01);
        assert_eq!(d.destination, Some(Vec2::new(900.0, 800.0)));
        assert_eq!(d.neighbors, h.neighbors);
    }

    #[test]
    fn rfc5497_times() {
        assert_eq!(
            time_value(time_code(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            time_value(time_code(Duration::from_secs(6))),
            Duration::from_secs(6)
        );
        assert!(time_value(time_code(Duration::from_millis(300))) >= Duration::from_millis(300));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let mut b = Vec::new();
        sample().encode(&mut b);
        for n in 0..b.len() {
            assert!(
                Hello::decode(&b[..n]).is_err(),
                "prefix of {n} bytes parsed"
            );
        }
    }
}

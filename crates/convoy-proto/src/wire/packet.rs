//! Packet headers: one UDP datagram carries exactly one packet.
//!
//! ```text
//! long header (handshake phase, cleartext)
//!   type u8 | version u32 | dcid [8] | scid [8] | type-specific fields
//!     Initial   : token (varint len + bytes) | noise (varint len + bytes) | zero padding to 1200
//!     Retry     : token (varint len + bytes)
//!     Handshake : noise (varint len + bytes)
//! short header (after the handshake)
//!   type u8 = 0x40 | key phase (0x01) | dcid [8] | path id u8 | packet number (low 32 bits) u32 | AEAD(frames) | tag [16]
//! ```
//!
//! docs/PROTOCOL.md is the reference; the tests below pin the layouts.

use super::cursor::{Reader, Writer};
use super::WireError;

/// Protocol version carried by every long header ("CNY" 1).
pub const VERSION: u32 = 0x434e_5901;
/// Bytes of a connection id.
pub const CID_LEN: usize = 8;
/// Client Initial datagrams are padded to this size so that the server's
/// 3× anti-amplification budget always covers its handshake reply.
pub const MIN_INITIAL_SIZE: usize = 1200;
/// Bytes of the short header (type, dcid, path id, packet number).
pub const SHORT_HEADER_LEN: usize = 1 + CID_LEN + 1 + 4;
/// Bytes of the AEAD tag after the frames.
pub const TAG_LEN: usize = 16;

const TYPE_INITIAL: u8 = 0xc1;
const TYPE_RETRY: u8 = 0xc2;
const TYPE_HANDSHAKE: u8 = 0xc3;
const TYPE_PROTECTED: u8 = 0x40;
/// The key phase bit of the short header's type byte (key updates).
const KEY_PHASE: u8 = 0x01;
const LONG_HEADER_LEN: usize = 1 + 4 + 2 * CID_LEN;

/// Who a packet is for, chosen by that endpoint, so that packets find their
/// connection whatever address they come from (migration, NAT rebinding).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub [u8; CID_LEN]);

/// A parsed datagram. Borrowed fields point into the datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet<'a> {
    Initial {
        dcid: ConnectionId,
        scid: ConnectionId,
        token: &'a [u8],
        noise: &'a [u8],
    },
    Retry {
        dcid: ConnectionId,
        scid: ConnectionId,
        token: &'a [u8],
    },
    Handshake {
        dcid: ConnectionId,
        scid: ConnectionId,
        noise: &'a [u8],
    },
    Protected(Protected<'a>),
}

/// A short-header packet before decryption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protected<'a> {
    pub dcid: ConnectionId,
    pub path_id: u8,
    /// Which of two consecutive keys sealed the packet (key updates).
    pub key_phase: bool,
    /// The low 32 bits of the packet number; [`expand_packet_number`]
    /// recovers the full number.
    pub packet_number: u32,
    /// The header bytes: the AEAD's associated data.
    pub header: &'a [u8],
    /// Frames and tag.
    pub sealed: &'a [u8],
}

impl Packet<'_> {
    /// The connection id the packet is addressed to.
    pub fn dcid(&self) -> ConnectionId {
        match *self {
            Packet::Initial { dcid, .. }
            | Packet::Retry { dcid, .. }
            | Packet::Handshake { dcid, .. } => dcid,
            Packet::Protected(p) => p.dcid,
        }
    }
}

/// Parses one datagram's header. Never panics; any malformed input is an error.
pub fn parse(datagram: &[u8]) -> Result<Packet<'_>, WireError> {
    let mut r = Reader::new(datagram);
    let kind = r.u8()?;
    if kind & !KEY_PHASE == TYPE_PROTECTED {
        let dcid = ConnectionId(r.array()?);
        let path_id = r.u8()?;
        let packet_number = r.u32()?;
        let sealed = r.rest();
        if sealed.len() < TAG_LEN {
            return Err(WireError::Truncated);
        }
        return Ok(Packet::Protected(Protected {
            dcid,
            path_id,
            key_phase: kind & KEY_PHASE != 0,
            packet_number,
            header: &datagram[..SHORT_HEADER_LEN],
            sealed,
        }));
    }
    if !matches!(kind, TYPE_INITIAL | TYPE_RETRY | TYPE_HANDSHAKE) {
        return Err(WireError::UnknownPacketType(kind));
    }
    let version = r.u32()?;
    if version != VERSION {
        return Err(WireError::UnsupportedVersion(version));
    }
    let dcid = ConnectionId(r.array()?);
    let scid = ConnectionId(r.array()?);
    Ok(match kind {
        TYPE_INITIAL => {
            let token = r.length_prefixed()?;
            let noise = r.length_prefixed()?;
            if datagram.len() < MIN_INITIAL_SIZE {
                return Err(WireError::Invalid(
                    "Initial datagram shorter than 1200 bytes",
                ));
            }
            Packet::Initial {
                dcid,
                scid,
                token,
                noise,
            }
        }
        TYPE_RETRY => Packet::Retry {
            dcid,
            scid,
            token: r.length_prefixed()?,
        },
        _ => Packet::Handshake {
            dcid,
            scid,
            noise: r.length_prefixed()?,
        },
    })
}

fn long_header(
    w: &mut Writer<'_>,
    kind: u8,
    dcid: ConnectionId,
    scid: ConnectionId,
) -> Result<(), WireError> {
    w.u8(kind)?;
    w.u32(VERSION)?;
    w.bytes(&dcid.0)?;
    w.bytes(&scid.0)
}

/// Writes a client Initial padded to [`MIN_INITIAL_SIZE`]; returns its length.
pub fn write_initial(
    buf: &mut [u8],
    dcid: ConnectionId,
    scid: ConnectionId,
    token: &[u8],
    noise: &[u8],
) -> Result<usize, WireError> {
    let mut w = Writer::new(buf);
    long_header(&mut w, TYPE_INITIAL, dcid, scid)?;
    w.length_prefixed(token)?;
    w.length_prefixed(noise)?;
    w.pad_to(MIN_INITIAL_SIZE)?;
    Ok(w.len())
}

pub fn write_retry(
    buf: &mut [u8],
    dcid: ConnectionId,
    scid: ConnectionId,
    token: &[u8],
) -> Result<usize, WireError> {
    let mut w = Writer::new(buf);
    long_header(&mut w, TYPE_RETRY, dcid, scid)?;
    w.length_prefixed(token)?;
    Ok(w.len())
}

pub fn write_handshake(
    buf: &mut [u8],
    dcid: ConnectionId,
    scid: ConnectionId,
    noise: &[u8],
) -> Result<usize, WireError> {
    let mut w = Writer::new(buf);
    long_header(&mut w, TYPE_HANDSHAKE, dcid, scid)?;
    w.length_prefixed(noise)?;
    Ok(w.len())
}

/// Writes a short header; the frames follow it, then the tag. Only the low
/// 32 bits of the packet number travel (the AEAD nonce uses all 64).
pub fn write_short_header(
    w: &mut Writer<'_>,
    dcid: ConnectionId,
    path_id: u8,
    packet_number: u64,
    key_phase: bool,
) -> Result<(), WireError> {
    w.u8(TYPE_PROTECTED | if key_phase { KEY_PHASE } else { 0 })?;
    w.bytes(&dcid.0)?;
    w.u8(path_id)?;
    w.u32(packet_number as u32)
}

/// The full packet number closest to `largest + 1` whose low 32 bits are
/// `truncated` (RFC 9000 §A.3 with a 32-bit window). A wrong guess only
/// makes the AEAD fail, because the nonce is the full number.
pub fn expand_packet_number(largest: Option<u64>, truncated: u32) -> u64 {
    const WIN: u64 = 1 << 32;
    let expected = largest.map_or(0, |l| l + 1);
    let candidate = (expected & !(WIN - 1)) | u64::from(truncated);
    if candidate + WIN / 2 <= expected && candidate < (1 << 62) - WIN {
        candidate + WIN
    } else if candidate > expected + WIN / 2 && candidate >= WIN {
        candidate - WIN
    } else {
        candidate
    }
}

/// Bytes a long header takes before its type-specific fields.
pub const fn long_header_len() -> usize {
    LONG_HEADER_LEN
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ConnectionId = ConnectionId([1; 8]);
    const B: ConnectionId = ConnectionId([2; 8]);

    #[test]
    fn initial_is_padded_and_round_trips() {
        let mut buf = [0xffu8; 1500];
        let n = write_initial(&mut buf, A, B, b"tok", b"noise").unwrap();
        assert_eq!(n, MIN_INITIAL_SIZE);
        assert_eq!(&buf[..5], &[0xc1, 0x43, 0x4e, 0x59, 0x01]);
        let p = parse(&buf[..n]).unwrap();
        assert_eq!(
            p,
            Packet::Initial {
                dcid: A,
                scid: B,
                token: b"tok",
                noise: b"noise"
            }
        );
        assert!(
            parse(&buf[..n - 1]).is_err(),
            "an unpadded Initial is refused"
        );
    }

    #[test]
    fn short_header_layout() {
        let mut buf = [0u8; 64];
        let mut w = Writer::new(&mut buf);
        write_short_header(&mut w, A, 3, 0x0102_0304_0506_0708, true).unwrap();
        assert_eq!(w.len(), SHORT_HEADER_LEN);
        w.bytes(&[0xaa; TAG_LEN]).unwrap();
        let n = w.len();
        assert_eq!(&buf[10..14], &[5, 6, 7, 8], "low 32 bits on the wire");
        let Packet::Protected(p) = parse(&buf[..n]).unwrap() else {
            panic!("not protected")
        };
        assert_eq!(
            (p.dcid, p.path_id, p.packet_number, p.key_phase),
            (A, 3, 0x0506_0708, true)
        );
        assert_eq!(buf[0], 0x41, "key phase bit");
        assert_eq!(p.header, &buf[..SHORT_HEADER_LEN]);
        assert_eq!(p.sealed.len(), TAG_LEN);
    }

    #[test]
    fn packet_numbers_expand_across_the_32_bit_wrap() {
        assert_eq!(expand_packet_number(None, 0), 0);
        assert_eq!(expand_packet_number(Some(10), 11), 11);
        assert_eq!(expand_packet_number(Some(10), 5), 5, "reordered");
        assert_eq!(expand_packet_number(Some(0xffff_fff0), 3), 0x1_0000_0003);
        assert_eq!(
            expand_packet_number(Some(0x1_0000_0003), 0xffff_fff0),
            0xffff_fff0
        );
    }

    #[test]
    fn wrong_version_and_type_are_errors() {
        let mut buf = [0u8; 64];
        let n = write_handshake(&mut buf, A, B, b"x").unwrap();
        buf[4] ^= 1;
        assert!(matches!(
            parse(&buf[..n]),
            Err(WireError::UnsupportedVersion(_))
        ));
        assert_eq!(parse(&[0x07]), Err(WireError::UnknownPacketType(7)));
        assert_eq!(parse(&[]), Err(WireError::Truncated));
    }
}

//! Packet headers: one UDP datagram carries exactly one packet.
//!
//! ```text
//! long header (handshake phase, cleartext)
//!   type u8 | version u32 | dcid [8] | scid [8] | type-specific fields
//!     Initial   : token (varint len + bytes) | noise (varint len + bytes) | zero padding to 1200
//!     Retry     : token (varint len + bytes)
//!     Handshake : noise (varint len + bytes)
//!   Version (type 0xc0, version 0): the versions the sender speaks, u32 each
//! short header (after the handshake)
//!   type u8 = 0b01KPPPLL | dcid [6] | packet number (LL + 1 low bytes) | AEAD(frames) | tag [16]
//!     K key phase, PPP path id (0..=7), LL packet number length − 1
//!     dcid: the first 6 bytes of the 8-byte id; ids are minted with
//!     their last 2 bytes zero, so the 6 name them whole
//! ```
//!
//! docs/PROTOCOL.md is the reference; the tests below pin the layouts.

use super::cursor::{Reader, Writer};
use super::WireError;

/// Protocol version carried by every long header ("CNY" 3). Version 1
/// had a 14-byte short header (path id and a 4-byte packet number in
/// bytes of their own) and SYMBOL frames that carried their length and
/// the block's length in bytes; version 2 an 8-byte dcid in the short
/// header and the block's K in every SYMBOL frame.
pub const VERSION: u32 = 0x434e_5903;
/// Bytes of a connection id in a long header.
pub const CID_LEN: usize = 8;
/// Bytes of the connection id a short header carries: the id's first
/// bytes. Every id an endpoint mints ends in `CID_LEN - SHORT_CID_LEN`
/// zero bytes ([`ConnectionId::from_short`]), so these name it whole.
pub const SHORT_CID_LEN: usize = 6;
/// Client Initial datagrams are padded to this size so that the server's
/// 3× anti-amplification budget always covers its handshake reply.
pub const MIN_INITIAL_SIZE: usize = 1200;
/// The most bytes a short header takes (type, dcid, a 4-byte packet
/// number); it is 8 to 11 bytes long.
pub const SHORT_HEADER_LEN: usize = 1 + SHORT_CID_LEN + 4;
/// Bytes of the AEAD tag after the frames.
pub const TAG_LEN: usize = 16;
/// Paths a short header can name (its 3-bit path id field).
pub const PATH_IDS: usize = 8;

const TYPE_VERSION: u8 = 0xc0;
const TYPE_INITIAL: u8 = 0xc1;
const TYPE_RETRY: u8 = 0xc2;
const TYPE_HANDSHAKE: u8 = 0xc3;
/// The top two bits of a short header's type byte.
const SHORT_FORM: u8 = 0x40;
const FORM_MASK: u8 = 0xc0;
/// The key phase bit of the short header's type byte (key updates).
const KEY_PHASE: u8 = 0x20;
const PATH_SHIFT: u8 = 2;
const PATH_MASK: u8 = 0x07;
const PN_LEN_MASK: u8 = 0x03;
const LONG_HEADER_LEN: usize = 1 + 4 + 2 * CID_LEN;
/// At most this many versions are read from a Version packet.
const MAX_LISTED_VERSIONS: usize = 16;

/// Who a packet is for, chosen by that endpoint, so that packets find their
/// connection whatever address they come from (migration, NAT rebinding).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub [u8; CID_LEN]);

impl ConnectionId {
    /// The id whose first bytes a short header carried (the rest zero).
    pub fn from_short(short: [u8; SHORT_CID_LEN]) -> Self {
        let mut id = [0u8; CID_LEN];
        id[..SHORT_CID_LEN].copy_from_slice(&short);
        ConnectionId(id)
    }

    /// Whether a short header can name this id: its bytes past
    /// [`SHORT_CID_LEN`] are zero.
    pub fn fits_short_header(&self) -> bool {
        self.0[SHORT_CID_LEN..].iter().all(|&b| b == 0)
    }
}

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
    /// The peer does not speak the version we sent: the versions it does
    /// (u32 each, big-endian).
    Version {
        dcid: ConnectionId,
        scid: ConnectionId,
        versions: &'a [u8],
    },
}

/// A short-header packet before decryption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protected<'a> {
    pub dcid: ConnectionId,
    /// 0..=7.
    pub path_id: u8,
    /// Which of two consecutive keys sealed the packet (key updates).
    pub key_phase: bool,
    /// The low `8 × pn_len` bits of the packet number;
    /// [`expand_packet_number`] recovers the full number.
    pub packet_number: u32,
    /// Bytes of packet number on the wire, 1..=4.
    pub pn_len: u8,
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
            | Packet::Handshake { dcid, .. }
            | Packet::Version { dcid, .. } => dcid,
            Packet::Protected(p) => p.dcid,
        }
    }
}

/// The versions listed in a Version packet's `versions` field.
pub fn listed_versions(versions: &[u8]) -> impl Iterator<Item = u32> + '_ {
    versions
        .chunks_exact(4)
        .map(|v| u32::from_be_bytes([v[0], v[1], v[2], v[3]]))
}

/// Parses one datagram's header. Never panics; any malformed input is an error.
pub fn parse(datagram: &[u8]) -> Result<Packet<'_>, WireError> {
    let mut r = Reader::new(datagram);
    let kind = r.u8()?;
    if kind & FORM_MASK == SHORT_FORM {
        let dcid = ConnectionId::from_short(r.array()?);
        let pn_len = (kind & PN_LEN_MASK) + 1;
        let mut packet_number = 0u32;
        for b in r.bytes(usize::from(pn_len))? {
            packet_number = packet_number << 8 | u32::from(*b);
        }
        let header_len = datagram.len() - r.remaining();
        let sealed = r.rest();
        if sealed.len() < TAG_LEN {
            return Err(WireError::Truncated);
        }
        return Ok(Packet::Protected(Protected {
            dcid,
            path_id: (kind >> PATH_SHIFT) & PATH_MASK,
            key_phase: kind & KEY_PHASE != 0,
            packet_number,
            pn_len,
            header: &datagram[..header_len],
            sealed,
        }));
    }
    if kind & 0x80 == 0 {
        return Err(WireError::UnknownPacketType(kind));
    }
    let version = r.u32()?;
    if version == 0 {
        if kind != TYPE_VERSION {
            return Err(WireError::UnknownPacketType(kind));
        }
        let dcid = ConnectionId(r.array()?);
        let scid = ConnectionId(r.array()?);
        let versions = r.rest();
        if versions.is_empty() || !versions.len().is_multiple_of(4) {
            return Err(WireError::Invalid("Version packet's list"));
        }
        let versions = &versions[..versions.len().min(4 * MAX_LISTED_VERSIONS)];
        return Ok(Packet::Version {
            dcid,
            scid,
            versions,
        });
    }
    // The version first: another version may have other packet types.
    if version != VERSION {
        return Err(WireError::UnsupportedVersion(version));
    }
    if !matches!(kind, TYPE_INITIAL | TYPE_RETRY | TYPE_HANDSHAKE) {
        return Err(WireError::UnknownPacketType(kind));
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

/// A long header of another version: its version and connection ids, the
/// part every version of convoy lays out alike (a type byte with the top
/// bit set, version u32, dcid, scid), so that a Version packet can answer
/// it. `None` for anything else, our own version and Version packets
/// included.
pub fn foreign_long_header(datagram: &[u8]) -> Option<(u32, ConnectionId, ConnectionId)> {
    let mut r = Reader::new(datagram);
    if r.u8().ok()? & 0x80 == 0 {
        return None;
    }
    let version = r.u32().ok()?;
    if version == VERSION || version == 0 {
        return None;
    }
    Some((
        version,
        ConnectionId(r.array().ok()?),
        ConnectionId(r.array().ok()?),
    ))
}

/// Writes a Version packet to the sender of a foreign long header: its
/// `scid` becomes our `dcid` so that its connection finds the packet.
pub fn write_version(
    buf: &mut [u8],
    dcid: ConnectionId,
    scid: ConnectionId,
    versions: &[u32],
) -> Result<usize, WireError> {
    if versions.is_empty() {
        return Err(WireError::Invalid("Version packet with no version"));
    }
    let mut w = Writer::new(buf);
    w.u8(TYPE_VERSION)?;
    w.u32(0)?;
    w.bytes(&dcid.0)?;
    w.bytes(&scid.0)?;
    for &v in versions.iter().take(MAX_LISTED_VERSIONS) {
        w.u32(v)?;
    }
    Ok(w.len())
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

/// Bytes of packet number to send for `pn` when the peer has acknowledged
/// up to `largest_acked`: enough that the window the receiver expands in
/// is twice the packets that may be in flight (RFC 9000 §17.1), and never
/// fewer than 2. Packet numbers are one sequence across paths, so a packet
/// on a slow path can arrive after many newer ones on a fast path have
/// moved the receiver's reference; with 1 byte, 128 newer packets (a few
/// milliseconds of a fast path) made it expand wrong and fail the AEAD.
pub fn packet_number_len(pn: u64, largest_acked: Option<u64>) -> u8 {
    let unacked = largest_acked.map_or(pn + 1, |l| pn.saturating_sub(l));
    (2..=4u8)
        .find(|&n| unacked.saturating_mul(2) < 1u64 << (8 * u32::from(n)))
        .unwrap_or(4)
}

/// Writes a short header; the frames follow it, then the tag. Only the low
/// `pn_len` bytes of the packet number travel (the AEAD nonce uses all 64).
/// Returns the header's length.
pub fn write_short_header(
    w: &mut Writer<'_>,
    dcid: ConnectionId,
    path_id: u8,
    packet_number: u64,
    pn_len: u8,
    key_phase: bool,
) -> Result<usize, WireError> {
    if usize::from(path_id) >= PATH_IDS {
        return Err(WireError::Invalid("path id above 7"));
    }
    if !(1..=4).contains(&pn_len) {
        return Err(WireError::Invalid("packet number length"));
    }
    if !dcid.fits_short_header() {
        return Err(WireError::Invalid(
            "connection id longer than a short header's",
        ));
    }
    let start = w.len();
    w.u8(SHORT_FORM
        | if key_phase { KEY_PHASE } else { 0 }
        | path_id << PATH_SHIFT
        | (pn_len - 1))?;
    w.bytes(&dcid.0[..SHORT_CID_LEN])?;
    let bytes = packet_number.to_be_bytes();
    w.bytes(&bytes[8 - usize::from(pn_len)..])?;
    Ok(w.len() - start)
}

/// The full packet number closest to `largest + 1` whose low `8 × pn_len`
/// bits are `truncated` (RFC 9000 §A.3). A wrong guess only makes the AEAD
/// fail, because the nonce is the full number.
pub fn expand_packet_number(largest: Option<u64>, truncated: u32, pn_len: u8) -> u64 {
    let win: u64 = 1 << (8 * u32::from(pn_len.clamp(1, 4)));
    let half = win / 2;
    let expected = largest.map_or(0, |l| l + 1);
    let candidate = (expected & !(win - 1)) | (u64::from(truncated) & (win - 1));
    if candidate + half <= expected && candidate < (1 << 62) - win {
        candidate + win
    } else if candidate > expected + half && candidate >= win {
        candidate - win
    } else {
        candidate
    }
}

/// Bytes a long header takes before its type-specific fields.
pub const fn long_header_len() -> usize {
    LONG_HEADER_LEN
}

#[cfg(test)]
mod tests;

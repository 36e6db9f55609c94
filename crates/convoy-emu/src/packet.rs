//! Just enough IPv4, TCP and UDP to tell flows apart and to rewrite a TCP
//! receive window: what the smart access point and per-flow queueing need
//! from the real packets crossing the emulator.
//!
//! Parsing never trusts a length field: a truncated or garbage packet is
//! simply "not TCP/UDP" and crosses the link untouched.

use std::net::Ipv4Addr;

pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// TCP flags.
pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

/// Byte offset of the window field inside the TCP header.
const WINDOW_AT: usize = 14;
const CHECKSUM_AT: usize = 16;

/// The addresses and ports of a packet, as the sender wrote them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

impl FiveTuple {
    /// The same flow seen from the other end.
    pub fn reversed(&self) -> FiveTuple {
        FiveTuple {
            src: self.dst,
            dst: self.src,
            proto: self.proto,
            sport: self.dport,
            dport: self.sport,
        }
    }

    /// A well-mixed hash (FNV-1a then a final mix) for per-flow queues.
    pub fn hash(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |b: u8| {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        };
        self.src.octets().into_iter().for_each(&mut eat);
        self.dst.octets().into_iter().for_each(&mut eat);
        eat(self.proto);
        self.sport.to_be_bytes().into_iter().for_each(&mut eat);
        self.dport.to_be_bytes().into_iter().for_each(&mut eat);
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }
}

/// The TCP header fields the access point reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpInfo {
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    /// The raw 16-bit window field (scaled by the sender's shift unless this
    /// is a SYN).
    pub window: u16,
    /// The window scale option's shift, if the segment carries one.
    pub wscale: Option<u8>,
    /// The timestamps option (TSval, TSecr), if present.
    pub timestamps: Option<(u32, u32)>,
    pub payload: u32,
    /// Where the TCP header starts in the packet.
    pub offset: usize,
}

impl TcpInfo {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Sequence space the segment uses (payload, plus one for SYN and FIN).
    pub fn seq_len(&self) -> u32 {
        self.payload + u32::from(self.has(SYN)) + u32::from(self.has(FIN))
    }
}

/// A parsed IPv4 packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub tuple: FiveTuple,
    /// Total length in the IP header.
    pub len: u32,
    pub tcp: Option<TcpInfo>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses an IPv4 packet carrying TCP or UDP (first fragment only); `None`
/// for anything else or anything malformed.
pub fn parse(p: &[u8]) -> Option<Parsed> {
    if p.len() < 20 || p[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let total = usize::from(be16(p, 2));
    if ihl < 20 || total < ihl || total > p.len() {
        return None;
    }
    // A later fragment has no transport header.
    if be16(p, 6) & 0x1fff != 0 {
        return None;
    }
    let proto = p[9];
    let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
    let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]);
    let l4 = &p[ihl..total];
    let (sport, dport, tcp) = match proto {
        PROTO_UDP if l4.len() >= 8 => (be16(l4, 0), be16(l4, 2), None),
        PROTO_TCP if l4.len() >= 20 => {
            let doff = usize::from(l4[12] >> 4) * 4;
            if doff < 20 || doff > l4.len() {
                return None;
            }
            let (wscale, timestamps) = options(&l4[20..doff]);
            let info = TcpInfo {
                seq: be32(l4, 4),
                ack: be32(l4, 8),
                flags: l4[13],
                window: be16(l4, WINDOW_AT),
                wscale,
                timestamps,
                payload: (l4.len() - doff) as u32,
                offset: ihl,
            };
            (be16(l4, 0), be16(l4, 2), Some(info))
        }
        _ => return None,
    };
    Some(Parsed {
        tuple: FiveTuple {
            src,
            dst,
            proto,
            sport,
            dport,
        },
        len: total as u32,
        tcp,
    })
}

/// Window scale and timestamps from TCP options; malformed options end the
/// walk.
fn options(mut o: &[u8]) -> (Option<u8>, Option<(u32, u32)>) {
    let (mut ws, mut ts) = (None, None);
    while let Some(&kind) = o.first() {
        match kind {
            0 => break,
            1 => o = &o[1..],
            _ => {
                let Some(&len) = o.get(1) else { break };
                let len = usize::from(len);
                if len < 2 || len > o.len() {
                    break;
                }
                match (kind, len) {
                    // RFC 7323 §2.3: a shift above 14 is taken as 14.
                    (3, 3) => ws = Some(o[2].min(14)),
                    (8, 10) => ts = Some((be32(o, 2), be32(o, 6))),
                    _ => {}
                }
                o = &o[len..];
            }
        }
    }
    (ws, ts)
}

/// Writes `window` into the TCP header at `tcp_offset` and updates the TCP
/// checksum incrementally (RFC 1624, eqn. 3), so the segment stays valid.
pub fn set_window(p: &mut [u8], tcp_offset: usize, window: u16) {
    let w = tcp_offset + WINDOW_AT;
    let c = tcp_offset + CHECKSUM_AT;
    if p.len() < c + 2 {
        return;
    }
    let old = be16(p, w);
    if old == window {
        return;
    }
    p[w..w + 2].copy_from_slice(&window.to_be_bytes());
    let hc = be16(p, c);
    // HC' = ~(~HC + ~m + m')
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(window);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    p[c..c + 2].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// The TCP or UDP checksum a packet should carry (over the pseudo-header
/// and the segment, with the checksum field taken as zero).
pub fn transport_checksum(p: &[u8]) -> Option<u16> {
    let parsed = parse(p)?;
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let seg = &p[ihl..parsed.len as usize];
    let at = if parsed.tuple.proto == PROTO_TCP {
        16
    } else {
        6
    };
    let mut sum: u32 = 0;
    let mut add = |hi: u8, lo: u8| sum += u32::from(u16::from_be_bytes([hi, lo]));
    for pair in p[12..20].chunks(2) {
        add(pair[0], pair[1]);
    }
    add(0, parsed.tuple.proto);
    let l = seg.len() as u16;
    add((l >> 8) as u8, l as u8);
    for (i, pair) in seg.chunks(2).enumerate() {
        if i * 2 == at {
            continue;
        }
        add(pair[0], *pair.get(1).unwrap_or(&0));
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    Some(!(sum as u16))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds an IPv4/TCP segment with a correct checksum.
    #[allow(clippy::too_many_arguments)]
    pub fn tcp_packet(
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        seq: u32,
        ack: u32,
        flags: u8,
        window: u16,
        opts: &[u8],
        payload: usize,
    ) -> Vec<u8> {
        let doff = 20 + opts.len();
        assert_eq!(doff % 4, 0);
        let total = 20 + doff + payload;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[8] = 64;
        p[9] = PROTO_TCP;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        let t = &mut p[20..];
        t[0..2].copy_from_slice(&sport.to_be_bytes());
        t[2..4].copy_from_slice(&dport.to_be_bytes());
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        t[8..12].copy_from_slice(&ack.to_be_bytes());
        t[12] = ((doff / 4) as u8) << 4;
        t[13] = flags;
        t[14..16].copy_from_slice(&window.to_be_bytes());
        t[20..20 + opts.len()].copy_from_slice(opts);
        for (i, b) in t[doff..].iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        let c = transport_checksum(&p).unwrap();
        p[36..38].copy_from_slice(&c.to_be_bytes());
        p
    }

    pub fn udp_packet(
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        payload: usize,
    ) -> Vec<u8> {
        let total = 28 + payload;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[9] = PROTO_UDP;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p[24..26].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        p
    }

    /// MSS, SACK-permitted, timestamps, NOP, window scale 7: a Linux SYN.
    pub const SYN_OPTS: [u8; 20] = [
        2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
    ];

    #[test]
    fn parses_a_linux_syn() {
        let p = tcp_packet(
            [10, 7, 0, 1],
            [10, 7, 0, 2],
            40000,
            5201,
            1000,
            0,
            SYN,
            64240,
            &SYN_OPTS,
            0,
        );
        let parsed = parse(&p).unwrap();
        assert_eq!(parsed.tuple.sport, 40000);
        let tcp = parsed.tcp.unwrap();
        assert_eq!(tcp.wscale, Some(7));
        assert_eq!(tcp.timestamps, Some((1, 0)));
        assert_eq!(tcp.seq_len(), 1);
        assert_eq!(tcp.window, 64240);
    }

    #[test]
    fn window_rewrite_keeps_the_checksum_valid() {
        for (window, payload) in [(65535u16, 0usize), (1, 1448), (0x1234, 7), (0, 3)] {
            let mut p = tcp_packet(
                [10, 7, 0, 1],
                [10, 7, 0, 2],
                40000,
                5201,
                9,
                77,
                ACK,
                0xfedc,
                &[],
                payload,
            );
            let tcp = parse(&p).unwrap().tcp.unwrap();
            set_window(&mut p, tcp.offset, window);
            let after = parse(&p).unwrap().tcp.unwrap();
            assert_eq!(after.window, window);
            let carried = u16::from_be_bytes([p[36], p[37]]);
            assert_eq!(Some(carried), transport_checksum(&p), "window {window}");
        }
    }

    #[test]
    fn garbage_and_truncation_are_not_tcp() {
        let p = tcp_packet(
            [1, 2, 3, 4],
            [5, 6, 7, 8],
            1,
            2,
            0,
            0,
            ACK,
            100,
            &SYN_OPTS,
            10,
        );
        for cut in 0..p.len() {
            // Anything shorter than the IP total length is rejected.
            assert!(parse(&p[..cut]).is_none(), "cut at {cut}");
        }
        assert!(parse(&[0x60; 40]).is_none()); // IPv6
        let mut bad_doff = p.clone();
        bad_doff[32] = 0xf0; // data offset 60 > segment
        assert!(parse(&bad_doff).is_none());
        let mut frag = p.clone();
        frag[7] = 1; // fragment offset 8
        assert!(parse(&frag).is_none());
        // Options that claim more than is there end the walk quietly.
        assert_eq!(options(&[3, 9, 1]), (None, None));
        assert_eq!(options(&[8, 10, 0]), (None, None));
        assert_eq!(options(&[3, 3, 200]), (Some(14), None));
    }

    #[test]
    fn udp_and_hash() {
        let p = udp_packet([10, 7, 0, 2], [10, 7, 0, 1], 7000, 7001, 172);
        let parsed = parse(&p).unwrap();
        assert_eq!(parsed.tuple.proto, PROTO_UDP);
        assert!(parsed.tcp.is_none());
        assert_eq!(parsed.len, 200);
        let t = parsed.tuple;
        assert_ne!(t.hash(), t.reversed().hash());
        assert_eq!(t.reversed().reversed(), t);
    }
}

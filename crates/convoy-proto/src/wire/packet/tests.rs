use super::*;
use proptest::prelude::*;

const A: ConnectionId = ConnectionId([1, 1, 1, 1, 1, 1, 0, 0]);
const B: ConnectionId = ConnectionId([2, 2, 2, 2, 2, 2, 0, 0]);

#[test]
fn initial_is_padded_and_round_trips() {
    let mut buf = [0xffu8; 1500];
    let n = write_initial(&mut buf, A, B, b"tok", b"noise").unwrap();
    assert_eq!(n, MIN_INITIAL_SIZE);
    assert_eq!(&buf[..5], &[0xc1, 0x43, 0x4e, 0x59, 0x03]);
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
    let len = write_short_header(&mut w, A, 3, 0x0102_0304_0506_0708, 2, true).unwrap();
    assert_eq!(len, 9, "type, 6 bytes of dcid, 2 bytes of packet number");
    w.bytes(&[0xaa; TAG_LEN]).unwrap();
    let n = w.len();
    assert_eq!(
        buf[0], 0b0110_1101,
        "short form, key phase, path 3, 2-byte pn"
    );
    assert_eq!(&buf[1..7], &A.0[..6], "the id's first 6 bytes");
    assert_eq!(&buf[7..9], &[7, 8], "low 16 bits on the wire");
    let Packet::Protected(p) = parse(&buf[..n]).unwrap() else {
        panic!("not protected")
    };
    assert_eq!(
        (p.dcid, p.path_id, p.packet_number, p.pn_len, p.key_phase),
        (A, 3, 0x0708, 2, true)
    );
    assert_eq!(p.header, &buf[..9]);
    assert_eq!(p.sealed.len(), TAG_LEN);
}

#[test]
fn short_header_refuses_what_it_cannot_carry() {
    let mut buf = [0u8; 64];
    let mut w = Writer::new(&mut buf);
    assert!(write_short_header(&mut w, A, 8, 1, 1, false).is_err());
    assert!(write_short_header(&mut w, A, 0, 1, 0, false).is_err());
    assert!(write_short_header(&mut w, A, 0, 1, 5, false).is_err());
    let long = ConnectionId([1, 2, 3, 4, 5, 6, 7, 0]);
    assert!(
        write_short_header(&mut w, long, 0, 1, 2, false).is_err(),
        "an id a short header cannot name whole"
    );
    assert_eq!(w.len(), 0, "nothing written");
}

#[test]
fn packet_number_length_covers_twice_the_unacknowledged() {
    assert_eq!(packet_number_len(0, None), 2, "never fewer than 2");
    assert_eq!(packet_number_len(1000, Some(990)), 2);
    assert_eq!(packet_number_len(40_000, Some(8000)), 2);
    assert_eq!(
        packet_number_len(40_000, Some(7000)),
        3,
        "33 000 unacknowledged"
    );
    assert_eq!(packet_number_len(1 << 20, Some(1 << 19)), 3);
    assert_eq!(packet_number_len(1 << 40, Some(0)), 4);
}

#[test]
fn packet_numbers_expand_across_the_wrap() {
    assert_eq!(expand_packet_number(None, 0, 4), 0);
    assert_eq!(expand_packet_number(Some(10), 11, 4), 11);
    assert_eq!(expand_packet_number(Some(10), 5, 4), 5, "reordered");
    assert_eq!(expand_packet_number(Some(0xffff_fff0), 3, 4), 0x1_0000_0003);
    assert_eq!(
        expand_packet_number(Some(0x1_0000_0003), 0xffff_fff0, 4),
        0xffff_fff0
    );
    // RFC 9000 §A.3's example: largest 0xa82f30ea, 16 bits 0x9b32.
    assert_eq!(
        expand_packet_number(Some(0xa82f_30ea), 0x9b32, 2),
        0xa82f_9b32
    );
    assert_eq!(expand_packet_number(Some(0x1ff), 0x01, 1), 0x201);
}

#[test]
fn wrong_version_and_type_are_errors() {
    let mut buf = [0u8; 64];
    let n = write_handshake(&mut buf, A, B, b"x").unwrap();
    buf[4] ^= 3;
    assert!(matches!(
        parse(&buf[..n]),
        Err(WireError::UnsupportedVersion(0x434e_5900))
    ));
    assert_eq!(parse(&[0x07]), Err(WireError::UnknownPacketType(7)));
    assert_eq!(parse(&[]), Err(WireError::Truncated));
}

/// A version 1 peer's first datagram: its layout is fixed by the old
/// code, so it is written out here byte by byte.
fn v1_initial() -> Vec<u8> {
    let mut d = vec![0xc1, 0x43, 0x4e, 0x59, 0x01];
    d.extend_from_slice(&A.0);
    d.extend_from_slice(&B.0);
    d.extend_from_slice(&[0, 1, 0]);
    d.resize(MIN_INITIAL_SIZE, 0);
    d
}

#[test]
fn a_foreign_long_header_is_answered_with_the_versions_we_speak() {
    let old = v1_initial();
    assert_eq!(parse(&old), Err(WireError::UnsupportedVersion(0x434e_5901)));
    let (version, dcid, scid) = foreign_long_header(&old).unwrap();
    assert_eq!((version, dcid, scid), (0x434e_5901, A, B));
    let mut buf = [0u8; 64];
    let n = write_version(&mut buf, scid, dcid, &[VERSION]).unwrap();
    assert_eq!(n, LONG_HEADER_LEN + 4);
    let Packet::Version {
        dcid: d,
        scid: s,
        versions,
    } = parse(&buf[..n]).unwrap()
    else {
        panic!("not a Version packet")
    };
    assert_eq!((d, s), (B, A));
    assert_eq!(listed_versions(versions).collect::<Vec<_>>(), [VERSION]);
    assert!(foreign_long_header(&buf[..n]).is_none(), "never answered");
    let mut ours = [0u8; 1500];
    let n = write_initial(&mut ours, A, B, b"", b"x").unwrap();
    assert!(foreign_long_header(&ours[..n]).is_none());
    assert!(matches!(
        parse(&buf[..LONG_HEADER_LEN + 2]),
        Err(WireError::Invalid(_))
    ));
}

proptest! {
    #[test]
    fn short_headers_round_trip(
        dcid: [u8; SHORT_CID_LEN],
        path in 0u8..8,
        pn in 0u64..(1 << 62),
        acked_back in 0u64..(1 << 30),
        phase: bool,
        body in proptest::collection::vec(any::<u8>(), TAG_LEN..200),
    ) {
        let largest_acked = pn.checked_sub(acked_back + 1);
        let pn_len = packet_number_len(pn, largest_acked);
        let mut buf = vec![0u8; SHORT_HEADER_LEN + body.len()];
        let mut w = Writer::new(&mut buf);
        let dcid = ConnectionId::from_short(dcid);
        let hl = write_short_header(&mut w, dcid, path, pn, pn_len, phase).unwrap();
        w.bytes(&body).unwrap();
        let n = w.len();
        prop_assert_eq!(hl, 1 + SHORT_CID_LEN + usize::from(pn_len));
        let Ok(Packet::Protected(p)) = parse(&buf[..n]) else {
            return Err(TestCaseError::fail("not protected"));
        };
        prop_assert_eq!(p.dcid, dcid);
        prop_assert_eq!((p.path_id, p.key_phase, p.pn_len), (path, phase, pn_len));
        prop_assert_eq!(p.header.len(), hl);
        prop_assert_eq!(p.sealed, &body[..]);
        // The receiver has seen anything from the largest acknowledged up
        // to the packet before this one: both expand to `pn`.
        for seen in [largest_acked, pn.checked_sub(1)] {
            prop_assert_eq!(expand_packet_number(seen, p.packet_number, p.pn_len), pn);
        }
    }

    #[test]
    fn truncated_short_headers_are_errors(dcid: [u8; SHORT_CID_LEN], pn: u64, pn_len in 1u8..=4, cut in 0usize..27) {
        let mut buf = [0u8; 64];
        let mut w = Writer::new(&mut buf);
        let dcid = ConnectionId::from_short(dcid);
        let hl = write_short_header(&mut w, dcid, 0, pn, pn_len, false).unwrap();
        let n = hl + TAG_LEN;
        prop_assume!(cut < n);
        prop_assert!(parse(&buf[..cut]).is_err());
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1300)) {
        let _ = parse(&bytes);
        let _ = foreign_long_header(&bytes);
    }
}

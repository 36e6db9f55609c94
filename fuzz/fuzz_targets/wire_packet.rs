//! Any datagram: the packet parser and the frame parser (over whatever
//! follows the header, as if it had decrypted) must never panic. A short
//! header's packet number expands within its window, and a long header
//! of another version parses as a foreign one exactly when the parser
//! calls its version unsupported.
#![no_main]

use convoy_proto::wire::{packet, Frame, Frames, Packet, WireError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parsed = packet::parse(data);
    assert_eq!(
        packet::foreign_long_header(data).is_some(),
        matches!(parsed, Err(WireError::UnsupportedVersion(_))) && data.len() >= 21,
    );
    let body = match parsed {
        Ok(Packet::Protected(p)) => {
            assert!((1..=4).contains(&p.pn_len) && p.path_id < 8);
            assert_eq!(p.header.len(), 9 + usize::from(p.pn_len));
            let largest = data
                .get(..8)
                .map(|b| u64::from_be_bytes(b.try_into().unwrap()) >> 2);
            let pn = packet::expand_packet_number(largest, p.packet_number, p.pn_len);
            let win = 1u64 << (8 * p.pn_len);
            assert_eq!(pn & (win - 1), u64::from(p.packet_number));
            p.sealed
        }
        Ok(Packet::Initial { noise, .. }) | Ok(Packet::Handshake { noise, .. }) => noise,
        Ok(Packet::Retry { token, .. }) => token,
        Ok(Packet::Version { versions, .. }) => versions,
        Err(_) => data,
    };
    for frame in Frames::new(body) {
        match frame {
            Ok(Frame::Ack(ack)) => {
                for r in ack.ranges() {
                    assert!(r.start() <= r.end());
                }
            }
            Ok(Frame::BlockStatus(s)) => {
                let _ = s.entries().count();
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
});

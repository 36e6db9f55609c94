//! Any datagram: the packet parser and the frame parser (over whatever
//! follows the header, as if it had decrypted) must never panic.
#![no_main]

use convoy_proto::wire::{packet, Frame, Frames, Packet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let body = match packet::parse(data) {
        Ok(Packet::Protected(p)) => p.sealed,
        Ok(Packet::Initial { noise, .. }) | Ok(Packet::Handshake { noise, .. }) => noise,
        Ok(Packet::Retry { token, .. }) => token,
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

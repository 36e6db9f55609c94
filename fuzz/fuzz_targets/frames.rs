//! Any decrypted packet body or decoded block: the frame parser must never
//! panic, and every frame it accepts must re-encode to bytes it parses
//! back to the same frame.
#![no_main]

use convoy_proto::wire::cursor::Writer;
use convoy_proto::wire::frame::write_frame;
use convoy_proto::wire::{Frame, Frames};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut buf = vec![0u8; data.len() + 64];
    for frame in Frames::new(data) {
        let Ok(frame) = frame else { break };
        match frame {
            Frame::Ack(ack) => {
                for r in ack.ranges() {
                    assert!(r.start() <= r.end());
                }
            }
            Frame::BlockStatus(s) => {
                let _ = s.entries().count();
            }
            // Frames with plain fields round-trip through the writer, and
            // so does a symbol (the last frame: its length is the rest).
            Frame::Symbol(_)
            | Frame::Ping
            | Frame::MaxData(_)
            | Frame::MaxBlocks(_)
            | Frame::MaxStreams(_)
            | Frame::DataBlocked(_) => {
                let mut w = Writer::new(&mut buf);
                if write_frame(&mut w, &frame).is_ok() {
                    let n = w.len();
                    let again = Frames::new(&buf[..n]).next();
                    assert!(matches!(again, Some(Ok(ref f)) if *f == frame));
                }
            }
            _ => {}
        }
    }
});

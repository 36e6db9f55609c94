//! candump log lines and DBC files as a vehicle hands them to the agent's
//! CAN source: a bad line or DBC is an error, never a panic, and a frame
//! that parses decodes with the test DBC without one.
#![no_main]

use convoy_agent::can::{candump, Decoder};
use libfuzzer_sys::fuzz_target;

const DBC: &str = include_str!("../../crates/convoy-agent/tests/data/can/vehicle.dbc");

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    thread_local! {
        static DECODER: Decoder = Decoder::parse(DBC).expect("the test DBC parses");
    }
    DECODER.with(|dec| {
        for line in text.lines() {
            if let Ok(frame) = candump::parse_line(line) {
                dec.decode(&frame, |_, v| {
                    std::hint::black_box(v);
                });
            }
        }
    });
    if let Ok(dec) = Decoder::parse(text) {
        std::hint::black_box(dec.messages().len());
    }
});

//! Trace files as users hand them to `convoy emu` and the simulator:
//! Mahimahi packet-delivery traces and convoy time-series CSV. Malformed
//! input is an error with a line number, never a panic.
#![no_main]

use convoy_link::{MahimahiTrace, SeriesTrace};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = MahimahiTrace::parse(text, "fuzz");
    let _ = SeriesTrace::parse(text, "fuzz");
});

#![no_main]
//! Coverage-guided fuzzing of everything a received symbol touches in the
//! codec: `cargo +nightly fuzz run decoder_input` from this folder.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| convoy_codec::fuzzing::decoder_input(data));

//! Runs the fuzz target's body on random bytes at every `cargo test`; the
//! coverage-guided run is `cargo +nightly fuzz run decoder_input` in fuzz/.

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn decoder_input_never_panics(input in prop::collection::vec(any::<u8>(), 0..600)) {
        convoy_codec::fuzzing::decoder_input(&input);
    }

    /// Valid headers followed by well-formed records (right block, right
    /// length, small ids, some with junk bytes) reach deep into the decoders.
    #[test]
    fn decoder_input_with_valid_records(
        code in 0u8..2,
        s in 1u8..=32,
        len in 1u16..=512,
        records in prop::collection::vec((0u8..4, 0u32..80, any::<u8>(), any::<bool>()), 0..120),
    ) {
        let mut input = vec![code, s, len as u8, (len >> 8) as u8, 0];
        for (flags, esi, fill, short) in records {
            // flags: bit 0 → wrong block, bit 1 → decodability query.
            let block = (flags & 1) | ((flags >> 1) << 6);
            let payload_len = if short { s / 2 } else { s };
            input.push(block);
            input.extend(esi.to_le_bytes());
            input.push(payload_len);
            input.extend((0..payload_len).map(|i| fill.wrapping_mul(i.wrapping_add(1))));
        }
        convoy_codec::fuzzing::decoder_input(&input);
    }
}

//! RLNC behaviour: exact decoding once rank reaches g whatever was lost and
//! in whatever order symbols arrive; recoding; and refusal of bad input.

use convoy_codec::rlnc::{Decoder, Encoder, Generation, Recoder, SymbolKind};
use convoy_codec::{new_decoder, new_encoder, BlockInfo, CodeKind, CodecError, Pushed};
use proptest::prelude::*;

mod common;
use common::data_of;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever subset of source symbols is lost and replaced by coded ones,
    /// and in whatever order they arrive, the decoder completes exactly when
    /// its rank reaches g and then returns the original data.
    #[test]
    fn decodes_exactly_at_full_rank(
        g in 1usize..=64,
        s in 1usize..=96,
        tail in 0usize..96,
        lost in prop::collection::vec(any::<bool>(), 64),
        extra_seeds in prop::collection::vec(any::<u32>(), 64..80),
        order in any::<u64>(),
    ) {
        let len = (g - 1) * s + 1 + tail % s;
        let data = data_of(len, order);
        let encoder = Encoder::new(&data, s).unwrap();
        prop_assert_eq!(encoder.generation().size(), g);

        let mut sent: Vec<SymbolKind> = (0..g as u32)
            .filter(|&i| !lost[i as usize])
            .map(SymbolKind::Systematic)
            .collect();
        sent.extend(extra_seeds.iter().map(|&seed| SymbolKind::Seeded(seed)));
        // Shuffle deterministically from `order`.
        let mut x = order | 1;
        for i in (1..sent.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            sent.swap(i, (x % (i as u64 + 1)) as usize);
        }

        let mut decoder = Decoder::new(encoder.generation());
        let mut payload = vec![0u8; s];
        for &kind in &sent {
            let was_complete = decoder.is_complete();
            let rank_before = decoder.rank();
            encoder.write(kind, &mut payload).unwrap();
            let outcome = decoder.push(kind, &payload).unwrap();
            match outcome {
                Pushed::Useful => prop_assert_eq!(decoder.rank(), rank_before + 1),
                Pushed::Redundant => prop_assert_eq!(decoder.rank(), rank_before),
            }
            if was_complete {
                prop_assert_eq!(outcome, Pushed::Redundant);
            }
            prop_assert_eq!(decoder.is_complete(), decoder.rank() == g);
            // A source symbol known on its own is the right one (the
            // receiver hands these to the application before the
            // generation decodes), and once complete every one is known.
            for i in 0..g {
                match decoder.source_symbol(i) {
                    Some(sym) => {
                        let mut want = data[(i * s).min(len)..((i + 1) * s).min(len)].to_vec();
                        want.resize(s, 0);
                        prop_assert_eq!(sym, &want[..], "source symbol {}", i);
                    }
                    None => prop_assert!(!decoder.is_complete()),
                }
            }
            if decoder.is_complete() {
                prop_assert_eq!(&decoder.decoded().unwrap()[..len], &data[..]);
            } else {
                prop_assert!(decoder.decoded().is_none());
            }
        }
        // 64+ random combinations over GF(256) reach full rank with
        // overwhelming probability (failure < 2^-400).
        prop_assert!(decoder.is_complete());
    }

    /// A recoder that holds only part of a generation still emits symbols in
    /// the span of what it holds, which a decoder can combine with others.
    #[test]
    fn recoded_symbols_decode(
        g in 1usize..=40,
        s in 1usize..=64,
        relay_seeds in prop::collection::vec(any::<u32>(), 1..60),
        mix_seeds in prop::collection::vec(any::<u32>(), 80),
    ) {
        let data = data_of(g * s, g as u64 * 31 + s as u64);
        let encoder = Encoder::new(&data, s).unwrap();
        let mut recoder = Recoder::new(encoder.generation());
        let mut payload = vec![0u8; s];
        for &seed in &relay_seeds {
            encoder.write(SymbolKind::Seeded(seed), &mut payload).unwrap();
            recoder.push(SymbolKind::Seeded(seed), &payload).unwrap();
        }
        let relay_rank = recoder.rank();
        prop_assert!(relay_rank <= g.min(relay_seeds.len()));

        let mut decoder = Decoder::new(encoder.generation());
        let mut coeffs = vec![0u8; g];
        for &seed in &mix_seeds {
            recoder.recode(seed, &mut coeffs, &mut payload).unwrap();
            // The recoded payload is exactly what its coefficients say.
            let mut expected = vec![0u8; s];
            encoder.write(SymbolKind::Explicit(&coeffs), &mut expected).unwrap();
            prop_assert_eq!(&payload, &expected);
            decoder.push(SymbolKind::Explicit(&coeffs), &payload).unwrap();
        }
        // Recoded symbols never exceed the relay's rank.
        prop_assert_eq!(decoder.rank(), relay_rank);
        if relay_rank == g {
            prop_assert_eq!(decoder.decoded().unwrap(), &data[..]);
        }
    }
}

#[test]
fn systematic_only_needs_no_coding_work() {
    let data = data_of(32 * 1400, 7);
    let encoder = Encoder::new(&data, 1400).unwrap();
    let mut decoder = Decoder::new(encoder.generation());
    for i in 0..32 {
        let kind = SymbolKind::Systematic(i);
        decoder
            .push(kind, encoder.systematic(i as usize).unwrap())
            .unwrap();
    }
    assert_eq!(decoder.decoded().unwrap(), &data[..]);
    assert_eq!(decoder.stats().payload_row_ops, 0);
}

#[test]
fn last_arrival_finishes_quickly() {
    // 10 % of a 64-symbol generation lost: the coded symbols that replace
    // them arrive last, and the final one costs at most one pass over the
    // rows (reduce against < g pivots, eliminate from < g rows), never a
    // whole decode's O(g²).
    let g = 64;
    let data = data_of(g * 100, 3);
    let encoder = Encoder::new(&data, 100).unwrap();
    let mut decoder = Decoder::new(encoder.generation());
    let mut payload = vec![0u8; 100];
    for i in (0..g as u32).filter(|i| i % 10 != 0) {
        encoder
            .write(SymbolKind::Systematic(i), &mut payload)
            .unwrap();
        decoder.push(SymbolKind::Systematic(i), &payload).unwrap();
    }
    let mut seed = 1000;
    while !decoder.is_complete() {
        encoder
            .write(SymbolKind::Seeded(seed), &mut payload)
            .unwrap();
        decoder.push(SymbolKind::Seeded(seed), &payload).unwrap();
        seed += 1;
    }
    let stats = decoder.stats();
    assert!(stats.last_push_row_ops < 2 * g as u64, "{stats:?}");
    assert_eq!(decoder.decoded().unwrap(), &data[..]);
}

#[test]
fn duplicates_and_dependent_symbols_are_refused_without_payload_work() {
    let data = data_of(8 * 16, 9);
    let encoder = Encoder::new(&data, 16).unwrap();
    let mut decoder = Decoder::new(encoder.generation());
    let mut p = vec![0u8; 16];
    encoder.write(SymbolKind::Seeded(77), &mut p).unwrap();
    assert_eq!(
        decoder.push(SymbolKind::Seeded(77), &p).unwrap(),
        Pushed::Useful
    );
    let ops = decoder.stats().payload_row_ops;
    assert_eq!(
        decoder.push(SymbolKind::Seeded(77), &p).unwrap(),
        Pushed::Redundant
    );
    assert_eq!(decoder.stats().payload_row_ops, ops);
    assert_eq!(decoder.stats().redundant, 1);
    // Systematic duplicate.
    decoder
        .push(SymbolKind::Systematic(3), encoder.systematic(3).unwrap())
        .unwrap();
    let ops = decoder.stats().payload_row_ops;
    assert_eq!(
        decoder
            .push(SymbolKind::Systematic(3), encoder.systematic(3).unwrap())
            .unwrap(),
        Pushed::Redundant
    );
    assert_eq!(decoder.stats().payload_row_ops, ops);
}

#[test]
fn bad_input_is_a_typed_error_and_changes_nothing() {
    let generation = Generation::new(4, 8).unwrap();
    let mut decoder = Decoder::new(generation);
    assert_eq!(
        decoder.push(SymbolKind::Systematic(0), &[0; 7]),
        Err(CodecError::WrongSymbolLength {
            expected: 8,
            got: 7
        })
    );
    assert_eq!(
        decoder.push(SymbolKind::Systematic(4), &[0; 8]),
        Err(CodecError::IndexOutOfRange { index: 4, limit: 4 })
    );
    assert_eq!(
        decoder.push(SymbolKind::Explicit(&[1, 2, 3]), &[0; 8]),
        Err(CodecError::WrongCoefficientCount {
            expected: 4,
            got: 3
        })
    );
    assert_eq!(decoder.rank(), 0);
    // An all-zero explicit vector is valid input that carries nothing.
    assert_eq!(
        decoder.push(SymbolKind::Explicit(&[0; 4]), &[0; 8]),
        Ok(Pushed::Redundant)
    );

    assert!(matches!(
        Generation::new(0, 8),
        Err(CodecError::InvalidParams(_))
    ));
    assert!(matches!(
        Generation::new(256, 8),
        Err(CodecError::InvalidParams(_))
    ));
    assert!(matches!(
        Generation::new(4, 0),
        Err(CodecError::InvalidParams(_))
    ));
    assert!(matches!(
        Encoder::new(&[1; 256 * 4], 4),
        Err(CodecError::InvalidParams(_))
    ));
    assert!(matches!(
        Encoder::new(&[], 4),
        Err(CodecError::InvalidParams(_))
    ));

    let encoder = Encoder::new(&[5; 32], 8).unwrap();
    assert_eq!(
        encoder.write(SymbolKind::Seeded(9), &mut [0; 9]),
        Err(CodecError::WrongSymbolLength {
            expected: 8,
            got: 9
        })
    );
    let recoder = Recoder::new(generation);
    assert_eq!(
        recoder.recode(1, &mut [0; 4], &mut [0; 8]),
        Err(CodecError::NothingToRecode)
    );
}

#[test]
fn block_trait_rejects_other_blocks_and_reports_progress() {
    let data = data_of(1000, 11);
    let encoder = new_encoder(CodeKind::Rlnc, 42, &data, 100).unwrap();
    let info = *encoder.info();
    assert_eq!(info.source_symbols(), 10);
    let mut decoder = new_decoder(info).unwrap();
    let mut payload = vec![0u8; 100];
    encoder.write_symbol(0, &mut payload).unwrap();
    assert_eq!(
        decoder.push(41, 0, &payload),
        Err(CodecError::BlockMismatch {
            expected: 42,
            got: 41
        })
    );
    assert!(matches!(
        decoder.data(),
        Err(CodecError::NotDecodable {
            have: 0,
            needed: 10
        })
    ));
    // Lose the first five source symbols; repair with ids from 10 up.
    for esi in (5..10).chain(1_000_000..1_000_005) {
        encoder.write_symbol(esi, &mut payload).unwrap();
        decoder.push(42, esi, &payload).unwrap();
    }
    assert!(decoder.is_decodable());
    assert_eq!(decoder.useful_symbols(), 10);
    assert_eq!(decoder.data().unwrap(), &data[..]);
    // The same repair id in another block is another combination.
    let other = new_encoder(CodeKind::Rlnc, 43, &data, 100).unwrap();
    let mut a = vec![0u8; 100];
    let mut b = vec![0u8; 100];
    encoder.write_symbol(500, &mut a).unwrap();
    other.write_symbol(500, &mut b).unwrap();
    assert_ne!(a, b);
    assert!(matches!(
        BlockInfo::new(CodeKind::Rlnc, 0, 256 * 10, 10),
        Err(CodecError::InvalidParams(_))
    ));
}

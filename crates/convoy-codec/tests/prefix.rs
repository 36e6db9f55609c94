//! Prefix repairs: a repair that combines only the sources sent so far
//! fills a gap among them as soon as it and the rest of that prefix are in,
//! before the block's later symbols exist.

use convoy_codec::{new_decoder, new_encoder, BlockInfo, CodeKind, CodecError, Pushed};
use proptest::prelude::*;

mod common;
use common::data_of;

fn source(data: &[u8], s: usize, i: usize) -> Vec<u8> {
    let mut out = vec![0u8; s];
    let end = ((i + 1) * s).min(data.len());
    out[..end - i * s].copy_from_slice(&data[i * s..end]);
    out
}

#[test]
fn a_prefix_repair_recovers_a_lost_source_before_the_block_ends() {
    let (k, s) = (10usize, 32usize);
    let data = data_of(k * s, 7);
    let enc = new_encoder(CodeKind::Rlnc, 3, &data, s as u16).unwrap();
    let info = BlockInfo::new(CodeKind::Rlnc, 3, (k * s) as u32, s as u16).unwrap();
    let mut dec = new_decoder(info).unwrap();
    let mut out = vec![0u8; s];
    // Sources 0..5 go out, 2 is lost.
    for esi in [0u32, 1, 3, 4] {
        enc.write_symbol(esi, &mut out).unwrap();
        assert_eq!(dec.push(3, esi, &out).unwrap(), Pushed::Useful);
    }
    assert_eq!(dec.source_symbol(2), None);
    // A repair over the five sent so far: source 2 is solved now, while
    // sources 5..10 have not even been sent.
    enc.write_prefix_symbol(k as u32, 5, &mut out).unwrap();
    assert_eq!(
        dec.push_prefix(3, k as u32, 5, &out).unwrap(),
        Pushed::Useful
    );
    assert_eq!(dec.source_symbol(2), Some(&source(&data, s, 2)[..]));
    assert!(!dec.is_decodable());
    // The rest of the block arrives; it decodes with no further repair.
    for esi in 5..k as u32 {
        enc.write_symbol(esi, &mut out).unwrap();
        dec.push(3, esi, &out).unwrap();
    }
    assert!(dec.is_decodable());
    assert_eq!(dec.data().unwrap(), &data[..]);
}

#[test]
fn a_prefix_repair_covering_the_whole_block_is_the_plain_repair() {
    let (k, s) = (7usize, 16usize);
    let data = data_of(k * s - 3, 9);
    let enc = new_encoder(CodeKind::Rlnc, 11, &data, s as u16).unwrap();
    let (mut a, mut b) = (vec![0u8; s], vec![0u8; s]);
    enc.write_symbol(12, &mut a).unwrap();
    enc.write_prefix_symbol(12, k as u32, &mut b).unwrap();
    assert_eq!(a, b);
}

#[test]
fn bad_prefix_repairs_are_refused_and_leave_the_decoder_unchanged() {
    let (k, s) = (6usize, 16usize);
    let data = data_of(k * s, 1);
    let enc = new_encoder(CodeKind::Rlnc, 0, &data, s as u16).unwrap();
    let info = BlockInfo::new(CodeKind::Rlnc, 0, (k * s) as u32, s as u16).unwrap();
    let mut dec = new_decoder(info).unwrap();
    let mut out = vec![0u8; s];
    for (esi, covered) in [(6u32, 0u32), (6, 7), (6, u32::MAX), (2, 3)] {
        assert!(enc.write_prefix_symbol(esi, covered, &mut out).is_err());
        assert!(dec.push_prefix(0, esi, covered, &out).is_err());
    }
    assert!(matches!(
        dec.push_prefix(0, 6, 3, &out[..s - 1]),
        Err(CodecError::WrongSymbolLength { .. })
    ));
    assert!(matches!(
        dec.push_prefix(1, 6, 3, &out),
        Err(CodecError::BlockMismatch { .. })
    ));
    assert_eq!(dec.useful_symbols(), 0);
    // RaptorQ has no prefix repairs: it says so rather than mis-decoding.
    let rq = new_encoder(CodeKind::RaptorQ, 0, &data, s as u16).unwrap();
    assert!(rq.write_prefix_symbol(6, 3, &mut out).is_err());
    let info = BlockInfo::new(CodeKind::RaptorQ, 0, (k * s) as u32, s as u16).unwrap();
    let mut rq_dec = new_decoder(info).unwrap();
    assert!(rq_dec.push_prefix(0, 6, 3, &out).is_err());
    assert_eq!(rq_dec.source_symbol(0), None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Sources go out in order with prefix repairs interleaved, each over
    /// what was sent before it; some of both are lost. Every source the
    /// decoder says it knows is the right one, and (when every symbol it
    /// took was innovative, which random GF(256) coefficients give but for
    /// about 1 in 256) a lost source is known as soon as some prefix
    /// holding it has as many repairs over it as losses in it, whatever
    /// comes later in the block.
    #[test]
    fn losses_in_a_prefix_are_solved_once_that_prefix_has_enough_repairs(
        k in 1usize..=48,
        s in 1usize..=40,
        lost in prop::collection::vec(any::<bool>(), 48),
        repair_after in prop::collection::vec(any::<bool>(), 48),
        repair_lost in prop::collection::vec(any::<bool>(), 48),
        seed in any::<u64>(),
    ) {
        let data = data_of(k * s, seed);
        let enc = new_encoder(CodeKind::Rlnc, 5, &data, s as u16).unwrap();
        let info = BlockInfo::new(CodeKind::Rlnc, 5, (k * s) as u32, s as u16).unwrap();
        let mut dec = new_decoder(info).unwrap();
        let mut out = vec![0u8; s];
        let mut next_repair = k as u32;
        let mut all_useful = true;
        // Coverage of every repair that arrived so far.
        let mut arrived: Vec<usize> = Vec::new();
        for i in 0..k {
            if !lost[i] {
                enc.write_symbol(i as u32, &mut out).unwrap();
                all_useful &= dec.push(5, i as u32, &out).unwrap() == Pushed::Useful;
            }
            if repair_after[i] {
                let covered = (i + 1) as u32;
                enc.write_prefix_symbol(next_repair, covered, &mut out).unwrap();
                if !repair_lost[i] {
                    let got = dec.push_prefix(5, next_repair, covered, &out).unwrap();
                    all_useful &= got == Pushed::Useful;
                    if got == Pushed::Useful {
                        arrived.push(i + 1);
                    }
                }
                next_repair += 1;
            }
            // What is known now, with sources i + 1.. not yet sent.
            for j in 0..=i {
                if let Some(got) = dec.source_symbol(j as u32) {
                    prop_assert_eq!(got, &source(&data, s, j)[..]);
                }
            }
            if all_useful {
                for j in (0..=i).filter(|&j| lost[j]) {
                    let solvable = (j + 1..=i + 1).any(|t| {
                        arrived.iter().filter(|&&c| c <= t).count()
                            >= (0..t).filter(|&x| lost[x]).count()
                    });
                    if solvable {
                        prop_assert!(dec.source_symbol(j as u32).is_some(),
                            "lost source {} solvable after {} sent", j, i + 1);
                    }
                }
            }
        }
    }
}

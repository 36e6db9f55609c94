//! Any arrival order of a block's sources, with or without K, lost or
//! late, then repairs naming K: the block decodes to its bytes, and what
//! is read in order before that is the block's bytes at their place.

use proptest::prelude::*;

use super::*;
use convoy_codec::new_encoder;

const SIZE: usize = 16;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn sources_without_k_in_any_order_read_and_decode_whole(
        rlnc: bool,
        k in 1u32..40,
        data_seed: u64,
        // Per source: arrives (and where in the order), or is lost.
        fates in proptest::collection::vec((any::<bool>(), any::<u16>()), 40),
        keep_early: bool,
    ) {
        let code = if rlnc { CodeKind::Rlnc } else { CodeKind::RaptorQ };
        let data: Vec<u8> = (0..k as usize * SIZE)
            .map(|i| (data_seed.wrapping_mul(i as u64 + 1) >> 7) as u8)
            .collect();
        let enc = new_encoder(code, 3, &data, SIZE as u16).unwrap();
        let symbol = |esi: u32| {
            let mut out = vec![0u8; SIZE];
            enc.write_symbol(esi, &mut out).unwrap();
            out
        };
        let mut order: Vec<(u16, u32)> = (0..k)
            .filter(|&esi| fates[esi as usize].0)
            .map(|esi| (fates[esi as usize].1, esi))
            .collect();
        order.sort();
        let lost = k as usize - order.len();
        // Repairs name K; enough of them that RaptorQ decodes too.
        let mut arrivals: Vec<u32> = order.into_iter().map(|(_, esi)| esi).collect();
        arrivals.extend(k..k + lost as u32 + 4);

        let mut rx = CodedReceiver::new(code, 4);
        rx.set_keep_early(keep_early);
        let mut read = 0usize; // bytes read in order
        let mut completed = false;
        for esi in arrivals {
            if completed {
                break;
            }
            let payload = symbol(esi);
            // What a sender writes: K on the first source and on repairs.
            let names_k = esi == 0 || esi >= k;
            let s = Symbol {
                block_id: 3,
                esi,
                block_len: names_k.then_some(k * SIZE as u32),
                prefix: None,
                payload: &payload,
            };
            let in_order = rx.is_next_source(&s);
            let outcome = rx.on_symbol(&s);
            prop_assert_ne!(outcome, Received::Refused, "esi {}", esi);
            let mut take = |esi: u32, bytes: &[u8]| {
                if esi as usize * SIZE == read {
                    prop_assert_eq!(bytes, &data[read..read + SIZE]);
                    read += SIZE;
                }
                Ok(())
            };
            if matches!(outcome, Received::Useful | Received::Completed) && in_order {
                take(esi, &payload)?;
            }
            while let Some((esi, bytes)) = rx.take_early(3) {
                take(esi, &bytes)?;
            }
            completed = outcome == Received::Completed;
        }
        prop_assert!(completed, "{} of {} lost", lost, k);
        if lost == 0 && (rlnc || keep_early) {
            // Every source came: all of them were read as they arrived,
            // the ones held for K as soon as the first source named it.
            prop_assert_eq!(read, k as usize * SIZE);
        }
        let (id, bytes) = rx.decode_next(false).unwrap().unwrap();
        prop_assert_eq!(id, 3);
        prop_assert_eq!(&bytes, &data);
        prop_assert_eq!(rx.allocated_bytes(), 0);
    }
}

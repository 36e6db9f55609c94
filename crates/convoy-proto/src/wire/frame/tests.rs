use super::*;

fn encode(f: impl FnOnce(&mut Writer<'_>)) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let mut w = Writer::new(&mut buf);
    f(&mut w);
    let n = w.len();
    buf.truncate(n);
    buf
}

#[test]
fn ack_ranges_round_trip() {
    let ranges = [90..=100, 50..=80, 10..=10, 0..=5];
    let bytes = encode(|w| write_ack(w, &ranges, 250).unwrap());
    let frames: Vec<_> = Frames::new(&bytes).collect::<Result<_, _>>().unwrap();
    let Frame::Ack(ack) = frames[0] else { panic!() };
    assert_eq!((ack.largest, ack.delay_us), (100, 250));
    assert_eq!(ack.ranges().collect::<Vec<_>>(), ranges.to_vec());
}

#[test]
fn ack_ranges_that_would_go_below_zero_are_refused() {
    // largest 3, first range 3 (covers 0..=3), then a second range.
    let bytes = [ACK, 3, 0, 1, 3, 0, 0];
    assert!(Frames::new(&bytes).next().unwrap().is_err());
    assert!(write_ack(&mut Writer::new(&mut [0; 64]), &[5..=9, 4..=4], 0).is_err());
}

#[test]
fn block_status_round_trips() {
    let entries = [
        BlockProgress {
            block_id: 7,
            useful: 3,
            done: false,
        },
        BlockProgress {
            block_id: 8,
            useful: 40,
            done: true,
        },
        BlockProgress {
            block_id: 20,
            useful: 0,
            done: false,
        },
    ];
    let bytes = encode(|w| write_block_status(w, 5, &entries).unwrap());
    let Frame::BlockStatus(s) = Frames::new(&bytes).next().unwrap().unwrap() else {
        panic!()
    };
    assert_eq!(s.done_below, 5);
    assert_eq!(s.entries().collect::<Vec<_>>(), entries.to_vec());
}

#[test]
fn every_simple_frame_round_trips() {
    let frames = [
        Frame::Ping,
        Frame::Train(TrainTag {
            train_id: 9,
            index: 3,
            len: 32,
        }),
        Frame::RateReport {
            train_id: 4,
            bytes_per_sec: 2_500_000,
        },
        Frame::MaxData(1 << 40),
        Frame::MaxStreamData { stream: 4, max: 99 },
        Frame::MaxBlocks(12),
        Frame::DataBlocked(5),
        Frame::StreamDataBlocked {
            stream: 1,
            limit: 2,
        },
        Frame::Close {
            code: 3,
            reason: b"bye",
        },
        Frame::ReceiveTime {
            pn: 1 << 20,
            time_us: 86_400_000_000,
        },
        Frame::PathChallenge(*b"12345678"),
        Frame::PathResponse([0xff; 8]),
        Frame::PathStatus {
            path: 3,
            seq: 1 << 30,
            backup: true,
        },
        Frame::PathAbandon { path: 255, code: 2 },
        Frame::PairProbe {
            pair: 77,
            second: true,
        },
        Frame::PairReport {
            pair: 77,
            first_us: 1 << 35,
            dispersion_us: 1200,
        },
        Frame::Stream {
            stream: 8,
            offset: 1 << 33,
            fin: true,
            data: b"hello",
        },
        Frame::ResetStream {
            stream: 8,
            final_size: 10,
            code: 1,
        },
    ];
    let bytes = encode(|w| {
        for f in &frames {
            write_frame(w, f).unwrap();
        }
        w.pad_to(w.len() + 5).unwrap();
    });
    let parsed: Vec<_> = Frames::new(&bytes).collect::<Result<_, _>>().unwrap();
    assert_eq!(&parsed[..frames.len()], &frames);
    assert_eq!(parsed[frames.len()..], [Frame::Padding]);
}

#[test]
fn a_frame_that_does_not_fit_leaves_nothing_behind() {
    let mut buf = [0u8; 6];
    let mut w = Writer::new(&mut buf);
    write_frame(&mut w, &Frame::Ping).unwrap();
    let big = Frame::MaxStreamData {
        stream: 1 << 20,
        max: 1 << 40,
    };
    assert!(write_frame(&mut w, &big).is_err());
    assert_eq!(w.len(), 1, "no half frame after the PING");
    write_frame(&mut w, &Frame::MaxData(7)).unwrap();
    assert_eq!(w.len(), 3);
}

#[test]
fn truncated_and_bad_path_frames_are_errors() {
    for bad in [
        &[PATH_CHALLENGE, 1, 2, 3][..],
        &[PATH_RESPONSE][..],
        &[PATH_STATUS, 1, 0, 2][..],
        &[PATH_STATUS, 1][..],
        &[PATH_ABANDON, 1][..],
        &[PAIR_PROBE, 1, 2][..],
        &[PAIR_PROBE, 1][..],
        &[PAIR_REPORT, 1, 2][..],
    ] {
        assert!(
            Frames::new(bad).next().unwrap().is_err(),
            "{bad:?} should not parse"
        );
    }
}

#[test]
fn bad_frames_stop_the_iterator_with_an_error() {
    assert_eq!(
        Frames::new(&[0x3f]).next(),
        Some(Err(WireError::UnknownFrameType(0x3f)))
    );
    let mut it = Frames::new(&[TRAIN, 1, 5, 5, PING]);
    assert!(it.next().unwrap().is_err(), "index must be below len");
    assert!(it.next().is_none(), "nothing after an error");
    assert!(
        Frames::new(&[SYMBOL, 0, 0, 10]).next().unwrap().is_err(),
        "no symbol"
    );
    assert!(
        Frames::new(&[SYMBOL, 0, 0, 0, 7]).next().unwrap().is_err(),
        "K = 0"
    );
}

#[test]
fn garbage_and_truncated_prefix_symbols_are_refused() {
    // K = 5 sources of 2 bytes: a 10-byte block.
    let good = [PREFIX_SYMBOL, 0, 5, 5, 3, 0xaa, 0xbb];
    let Frame::Symbol(s) = Frames::new(&good).next().unwrap().unwrap() else {
        panic!()
    };
    assert_eq!(
        (s.esi, s.block_len, s.prefix, s.payload),
        (5, Some(10), Some(3), &[0xaa, 0xbb][..])
    );
    // Cut inside the header (or before the symbol's first byte); a cut
    // inside the symbol is a shorter symbol, which the AEAD rules out.
    for cut in 1..=5 {
        assert!(
            Frames::new(&good[..cut]).next().unwrap().is_err(),
            "truncated to {cut} bytes"
        );
    }
    for bad in [
        [PREFIX_SYMBOL, 0, 5, 5, 0, 0xaa, 0xbb], // covers nothing
        [PREFIX_SYMBOL, 0, 5, 5, 5, 0xaa, 0xbb], // covers the whole block
        [PREFIX_SYMBOL, 0, 5, 5, 9, 0xaa, 0xbb], // beyond the block
        [PREFIX_SYMBOL, 0, 4, 5, 3, 0xaa, 0xbb], // a source's id
        [PREFIX_SYMBOL, 0, 5, 0, 3, 0xaa, 0xbb], // an empty block
    ] {
        assert!(Frames::new(&bad).next().unwrap().is_err(), "{bad:?}");
    }
    // A prefix covering varint longer than its 4 bytes of u32.
    let long = [
        PREFIX_SYMBOL,
        0,
        5,
        5,
        0xc0,
        0,
        0,
        1,
        0,
        0,
        0,
        0,
        0xaa,
        0xbb,
    ];
    assert!(Frames::new(&long).next().unwrap().is_err());
    // K × symbol length beyond 2^32 bytes.
    let mut huge = vec![SYMBOL, 0, 0, 0x80, 0x10, 0, 0];
    huge.extend_from_slice(&[1; 4096]);
    assert!(Frames::new(&huge).next().unwrap().is_err());
}

#[test]
fn a_symbol_is_the_last_frame_and_runs_to_the_end() {
    let symbol = Symbol {
        block_id: 1,
        esi: 70_000,
        block_len: Some(9000),
        prefix: None,
        payload: b"abc",
    };
    let bytes = encode(|w| {
        write_frame(w, &Frame::Ping).unwrap();
        write_frame(w, &Frame::MaxData(7)).unwrap();
        write_frame(w, &Frame::Symbol(symbol)).unwrap();
    });
    let parsed: Vec<_> = Frames::new(&bytes).collect::<Result<_, _>>().unwrap();
    assert_eq!(
        parsed,
        [Frame::Ping, Frame::MaxData(7), Frame::Symbol(symbol)]
    );
    // 1 type + 1 block id + 4 symbol id + 2 K (3000): no length fields.
    assert_eq!(bytes.len(), 1 + 2 + 8 + 3);
    assert_eq!(
        symbol_header_len(1, 70_000, Some(9000), None, 3),
        8,
        "what a sender sizes its payload with"
    );
}

#[test]
fn sources_without_k_carry_small_ids_in_their_type_byte() {
    let payload = [0xaa, 0xbb, 0xcc];
    let bytes = encode(|w| write_symbol_header(w, 160, 44, None, None, 3).unwrap());
    assert_eq!(
        bytes,
        [SHORT_SOURCE | 44, 0x40, 160],
        "type + id 44, block id"
    );
    assert_eq!(symbol_header_len(160, 44, None, None, 3), 3);
    let bytes = encode(|w| write_symbol_header(w, 7, 64, None, None, 3).unwrap());
    assert_eq!(bytes, [SOURCE, 7, 0x40, 64], "an id past 63 travels apart");
    let mut frame = bytes.clone();
    frame.extend_from_slice(&payload);
    let Frame::Symbol(s) = Frames::new(&frame).next().unwrap().unwrap() else {
        panic!()
    };
    assert_eq!(
        (s.block_id, s.esi, s.block_len, s.prefix, s.payload),
        (7, 64, None, None, &payload[..])
    );
    for bad in [
        &[SHORT_SOURCE | 3, 0][..],
        &[SOURCE, 0, 5],
        &[SOURCE, 0],
        &[0x7f],
    ] {
        assert!(Frames::new(bad).next().unwrap().is_err(), "{bad:?}");
    }
    let mut buf = [0u8; 16];
    assert!(
        write_symbol_header(&mut Writer::new(&mut buf), 0, 9, None, Some(3), 3).is_err(),
        "a prefix repair always names K"
    );
}

/// Which symbols name K: the first source, and every repair.
#[test]
fn only_a_blocks_first_source_and_its_repairs_name_k() {
    // K = 4 symbols of 100 bytes.
    assert!(names_k(0, 400, 100, None));
    assert!(!names_k(1, 400, 100, None));
    assert!(!names_k(3, 400, 100, None));
    assert!(names_k(4, 400, 100, None), "a repair");
    assert!(names_k(5, 400, 100, Some(2)), "a repair over a prefix");
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn symbols_round_trip(
            block_id: u32,
            esi in 0u32..(1 << 30),
            k in 1u32..(1 << 14),
            prefix in proptest::option::of(1u32..(1 << 14)),
            payload in proptest::collection::vec(any::<u8>(), 1..1500),
            before_ping: bool,
            without_k: bool,
        ) {
            let prefix = prefix.filter(|&n| n < k);
            let esi = if prefix.is_some() { esi.max(k) } else { esi };
            // A source without K (SOURCE, SHORT_SOURCE): never a prefix.
            let block_len = (!without_k || prefix.is_some()).then(|| k * payload.len() as u32);
            let s = Symbol { block_id, esi, block_len, prefix, payload: &payload };
            let bytes = encode(|w| {
                if before_ping {
                    write_frame(w, &Frame::Ping).unwrap();
                }
                write_frame(w, &Frame::Symbol(s)).unwrap();
            });
            let header = symbol_header_len(block_id, esi, block_len, prefix, payload.len());
            prop_assert_eq!(bytes.len(), usize::from(before_ping) + header + payload.len());
            let parsed: Vec<_> = Frames::new(&bytes).collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(parsed.last(), Some(&Frame::Symbol(s)));
        }

        #[test]
        fn symbol_headers_cut_short_are_errors(
            block_id: u32,
            esi: u32,
            k in 1u32..(1 << 14),
        ) {
            let bytes = encode(|w| write_symbol_header(w, block_id, esi, Some(k), None, 1).unwrap());
            for cut in 1..=bytes.len() {
                prop_assert!(Frames::new(&bytes[..cut]).next().unwrap().is_err());
            }
            let bytes = encode(|w| write_symbol_header(w, block_id, esi, None, None, 1).unwrap());
            for cut in 1..=bytes.len() {
                prop_assert!(Frames::new(&bytes[..cut]).next().unwrap().is_err());
            }
        }

        #[test]
        fn garbage_frames_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            for f in Frames::new(&bytes) {
                if let Ok(Frame::Ack(a)) = f {
                    let _ = a.ranges().count();
                }
                if let Ok(Frame::BlockStatus(b)) = f {
                    let _ = b.entries().count();
                }
            }
        }
    }
}

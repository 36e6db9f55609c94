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
        Frame::Symbol(Symbol {
            block_id: 1,
            esi: 70_000,
            block_len: 9000,
            prefix: None,
            payload: b"abc",
        }),
        Frame::Symbol(Symbol {
            block_id: 1,
            esi: 3000,
            block_len: 9000,
            prefix: Some(2999),
            payload: b"abc",
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
    assert!(Frames::new(&[SYMBOL, 0, 0, 10, 0]).next().unwrap().is_err());
}

#[test]
fn garbage_and_truncated_prefix_symbols_are_refused() {
    // Block of 10 bytes in 2-byte symbols: K = 5.
    let good = [PREFIX_SYMBOL, 0, 5, 10, 3, 2, 0xaa, 0xbb];
    let Frame::Symbol(s) = Frames::new(&good).next().unwrap().unwrap() else {
        panic!()
    };
    assert_eq!(
        (s.esi, s.prefix, s.payload),
        (5, Some(3), &[0xaa, 0xbb][..])
    );
    for cut in 1..good.len() {
        assert!(
            Frames::new(&good[..cut]).next().unwrap().is_err(),
            "truncated to {cut} bytes"
        );
    }
    for bad in [
        [PREFIX_SYMBOL, 0, 5, 10, 0, 2, 0xaa, 0xbb], // covers nothing
        [PREFIX_SYMBOL, 0, 5, 10, 5, 2, 0xaa, 0xbb], // covers the whole block
        [PREFIX_SYMBOL, 0, 5, 10, 9, 2, 0xaa, 0xbb], // beyond the block
        [PREFIX_SYMBOL, 0, 4, 10, 3, 2, 0xaa, 0xbb], // a source's id
        [PREFIX_SYMBOL, 0, 5, 0, 3, 2, 0xaa, 0xbb],  // an empty block
    ] {
        assert!(Frames::new(&bad).next().unwrap().is_err(), "{bad:?}");
    }
    // A prefix covering varint longer than its 4 bytes of u32.
    let long = [
        PREFIX_SYMBOL,
        0,
        5,
        10,
        0xc0,
        0,
        0,
        1,
        0,
        0,
        0,
        0,
        2,
        0xaa,
        0xbb,
    ];
    assert!(Frames::new(&long).next().unwrap().is_err());
}

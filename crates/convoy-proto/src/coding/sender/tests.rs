use super::*;

#[test]
fn symbols_for_matches_expectation_with_margin() {
    assert_eq!(symbols_for(10, 0.0, 1.0), 10);
    assert_eq!(symbols_for(0, 0.5, 1.0), 0);
    let n = symbols_for(100, 0.3, 1.0);
    let (mean, sd) = (f64::from(n) * 0.7, (f64::from(n) * 0.21).sqrt());
    assert!(mean - sd >= 100.0 && mean - sd < 101.0, "n = {n}");
    assert!(symbols_for(100, 0.3, 2.0) > n);
}

#[test]
fn a_controller_that_tells_air_loss_from_drops_sizes_the_margins() {
    let mut s = sender();
    s.start_block(vec![7u8; 400]).unwrap();
    // Every loss counts into the sender's own rate (a burst of drops
    // at a full queue, here)...
    for _ in 0..100 {
        s.on_lost(0, 0);
    }
    assert!(s.loss_rate() > 0.3);
    let inflated = symbols_for(4, s.margin_loss(), 1.0);
    assert!(inflated > 6, "{inflated}");
    // ...but a path's controller that tells loss on the air from drops
    // at a full queue and timeouts sizes the margins with its reading.
    s.set_air_loss(Some(0.0));
    assert_eq!(symbols_for(4, s.margin_loss(), 1.0), 4);
    s.set_air_loss(None);
    assert_eq!(symbols_for(4, s.margin_loss(), 1.0), inflated);
}

fn sender() -> CodedSender {
    let cfg = CodingConfig {
        code: CodeKind::Rlnc,
        symbol_size: 100,
        block_symbols: 4,
        window: 2,
        margin_z: 1.0,
        idle_margin_z: 2.0,
        block_airtime: None,
    };
    CodedSender::new(cfg, 10)
}

/// A sender with one block of four source symbols, all sent.
fn one_block_sent() -> (CodedSender, [u8; 100]) {
    let mut s = sender();
    s.start_block(vec![1u8; 400]).unwrap();
    let mut out = [0u8; 100];
    for _ in 0..4 {
        let n = s.next_symbol().unwrap();
        s.emit(n, &mut out).unwrap();
    }
    (s, out)
}

#[test]
fn a_repair_answering_a_loss_covers_the_sources_whose_fate_is_known() {
    let (mut s, mut out) = one_block_sent();
    s.set_prefix_repairs(true);
    // Source 0 arrived, 1 was lost, 2 arrived; 3 is still on its way.
    s.on_acked(0, 0);
    s.on_lost(0, 1);
    s.on_acked(0, 2);
    let n = s.next_symbol().unwrap();
    assert_eq!((n.esi, n.prefix), (4, Some(3)), "over sources 0..3 only");
    s.emit(n, &mut out).unwrap();
    let mut want = [0u8; 100];
    s.blocks[0]
        .encoder
        .write_prefix_symbol(4, 3, &mut want)
        .unwrap();
    assert_eq!(out, want);
    // One prefix repair per declared loss: the margin's next repair is
    // for losses not seen yet, which may be past the prefix.
    let n = s.next_symbol().unwrap();
    assert_eq!((n.esi, n.prefix), (5, None));
    s.emit(n, &mut out).unwrap();
    // The prefix repair is lost: its loss is answered again, over
    // what is known by then.
    s.on_acked(0, 3);
    s.on_lost(0, 4);
    let n = s.next_symbol().unwrap();
    assert_eq!(
        n.prefix, None,
        "every source's fate is known: the whole block"
    );
}

#[test]
fn a_lost_prefix_repair_is_answered_again_with_a_prefix() {
    let (mut s, mut out) = one_block_sent();
    s.set_prefix_repairs(true);
    s.on_lost(0, 0);
    s.on_acked(0, 1);
    let n = s.next_symbol().unwrap();
    assert_eq!(n.prefix, Some(2));
    s.emit(n, &mut out).unwrap();
    while let Some(n) = s.next_symbol() {
        s.emit(n, &mut out).unwrap();
    }
    s.on_lost(0, 4);
    let n = s.next_symbol().unwrap();
    assert_eq!((n.esi >= 4, n.prefix), (true, Some(2)));
}

#[test]
fn a_loss_past_an_answered_prefix_gets_a_repair_over_the_whole_block() {
    // Fates learnt out of order, as over two paths: source 0 is lost and
    // answered by a repair over it alone; then source 3, on the fast
    // path, is lost while 1 and 2 are still on the slow one. Another
    // repair over source 0 alone would tell the receiver nothing.
    let (mut s, mut out) = one_block_sent();
    s.set_prefix_repairs(true);
    s.on_lost(0, 0);
    let n = s.next_symbol().unwrap();
    assert_eq!(n.prefix, Some(1));
    s.emit(n, &mut out).unwrap();
    s.on_lost(0, 3);
    let n = s.next_symbol().unwrap();
    assert_eq!(n.prefix, None, "the loss lies past the prefix");
}

#[test]
fn without_the_peers_consent_or_with_raptorq_repairs_cover_the_whole_block() {
    let (mut s, _) = one_block_sent();
    s.on_acked(0, 0);
    s.on_lost(0, 1);
    s.on_acked(0, 2);
    assert_eq!(s.next_symbol().unwrap().prefix, None, "an older peer");
    let mut rq = CodedSender::new(
        CodingConfig {
            code: CodeKind::RaptorQ,
            ..*s.config()
        },
        10,
    );
    rq.set_prefix_repairs(true);
    assert!(!rq.prefix_repairs);
}

#[test]
fn sources_lost_with_a_path_go_again_first_while_they_could_all_be_missing() {
    let (mut s, mut out) = one_block_sent();
    let before = s.loss_rate();
    // Sources 1 and 3 died with their path (2 and 0 were acknowledged).
    s.on_acked(0, 2);
    s.on_acked(0, 0);
    s.on_path_lost(0, 3, false);
    s.on_path_lost(0, 1, false);
    assert_eq!(s.loss_rate(), before, "a dead path is not link loss");
    let n = s.next_symbol().unwrap();
    assert_eq!(n.esi, 1, "the first lost source first");
    s.emit(n, &mut out).unwrap();
    let n = s.next_symbol().unwrap();
    assert_eq!(n.esi, 3);
    s.emit(n, &mut out).unwrap();
    assert_eq!(s.next_symbol(), None, "both on their way again");
}

#[test]
fn sources_that_probably_arrived_go_after_every_block_s_likely_lost_ones() {
    // Two blocks of four on a path that went down with all eight in
    // flight: block 0's first two left long before (their
    // acknowledgments died with the path), the rest in its last
    // forward delay.
    let mut s = sender();
    let mut out = [0u8; 100];
    for id in 0..2 {
        s.start_block(vec![id as u8; 400]).unwrap();
        for _ in 0..4 {
            let n = s.next_symbol().unwrap();
            s.emit(n, &mut out).unwrap();
        }
    }
    for (block, esi) in (0..2).flat_map(|b| (0..4).map(move |e| (b, e))) {
        s.on_path_lost(block, esi, block == 0 && esi < 2);
    }
    let mut order = Vec::new();
    while let Some(n) = s.next_symbol() {
        order.push((n.block_id, n.esi));
        s.emit(n, &mut out).unwrap();
    }
    // The reader waits on 0/2 first: it goes at once, and both blocks'
    // likely-lost sources go before the two that probably arrived.
    assert_eq!(
        order,
        [
            (0, 2),
            (0, 3),
            (1, 0),
            (1, 1),
            (1, 2),
            (1, 3),
            (0, 0),
            (0, 1)
        ]
    );
    // Their acknowledgments, late over the new path, would have taken
    // them off the list before their turn.
    let mut s2 = sender();
    s2.start_block(vec![1u8; 400]).unwrap();
    for _ in 0..4 {
        let n = s2.next_symbol().unwrap();
        s2.emit(n, &mut out).unwrap();
    }
    for esi in 0..4 {
        s2.on_path_lost(0, esi, esi < 2);
    }
    s2.on_late_ack(0, 0);
    s2.on_late_ack(0, 1);
    let sent: Vec<u32> = std::iter::from_fn(|| {
        let n = s2.next_symbol()?;
        s2.emit(n, &mut out).unwrap();
        Some(n.esi)
    })
    .collect();
    assert_eq!(sent, [2, 3]);
}

#[test]
fn a_source_that_probably_arrived_gives_way_to_lost_ones_only() {
    // Block 0's last two sources went with a path that went down long
    // after they left: they probably arrived. Block 1 has sources never
    // sent. If the guess was wrong (no late acknowledgment comes), new
    // data must not overtake them: the reader would wait on block 0.
    let mut s = sender();
    let mut out = [0u8; 100];
    s.start_block(vec![1u8; 400]).unwrap();
    for _ in 0..4 {
        let n = s.next_symbol().unwrap();
        s.emit(n, &mut out).unwrap();
    }
    s.start_block(vec![2u8; 400]).unwrap();
    s.on_acked(0, 0);
    s.on_acked(0, 1);
    s.on_path_lost(0, 2, true);
    s.on_path_lost(0, 3, true);
    let n = s.next_symbol().unwrap();
    assert_eq!((n.block_id, n.esi), (0, 2), "before block 1's first source");
}

#[test]
fn resends_give_way_to_repairs_once_the_block_lacks_fewer_symbols() {
    let (mut s, _) = one_block_sent();
    // Three acknowledged, then all four declared lost with the path:
    // the block lacks one symbol, so of four candidates at most one is
    // missing and a repair (always useful) is the better bet.
    for _ in 0..3 {
        s.on_acked(0, 0);
    }
    for esi in 0..4 {
        s.on_path_lost(0, esi, false);
    }
    let n = s.next_symbol().unwrap();
    assert!(n.esi >= 4, "a repair, not source {}", n.esi);
}

#[test]
fn a_late_acknowledgment_takes_a_source_off_the_resend_list() {
    let (mut s, mut out) = one_block_sent();
    // Source 0 was acknowledged; 1, 2 and 3 were in flight on a path
    // that died, but 1 and 2 had got through: their acknowledgments
    // arrive late, over another path.
    s.on_acked(0, 0);
    for esi in 1..4 {
        s.on_path_lost(0, esi, false);
    }
    s.on_late_ack(0, 1);
    s.on_late_ack(0, 2);
    // Only 3 goes again, as a source the in-order reader can use at
    // once (three candidates for one missing symbol would have been
    // a repair).
    let n = s.next_symbol().unwrap();
    assert_eq!(n.esi, 3);
    s.emit(n, &mut out).unwrap();
    assert_eq!(s.next_symbol(), None);
    // A late acknowledgment of a symbol that went again: the block has
    // all it lacked, and the copy's own acknowledgment changes nothing.
    s.on_late_ack(0, 3);
    assert_eq!(s.next_symbol(), None);
    s.on_acked(0, 3);
    assert_eq!(s.next_symbol(), None);
}

fn report_useful(s: &mut CodedSender, block_id: u32, useful: u32) {
    let mut buf = [0u8; 16];
    let mut w = crate::wire::cursor::Writer::new(&mut buf);
    let entry = crate::wire::BlockProgress {
        block_id,
        useful,
        done: false,
    };
    crate::wire::frame::write_block_status(&mut w, 0, &[entry]).unwrap();
    let n = w.len();
    match crate::wire::Frames::new(&buf[..n]).next() {
        Some(Ok(crate::wire::Frame::BlockStatus(status))) => {
            s.on_status(&status);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_copy_made_redundant_by_a_late_acknowledgment_does_not_hold_back_the_last_lost_source() {
    let (mut s, mut out) = one_block_sent();
    // The path died with 1, 2 and 3 in flight (0 was acknowledged); 1
    // goes again, then its first copy's acknowledgment comes late.
    s.on_acked(0, 0);
    for esi in 1..4 {
        s.on_path_lost(0, esi, false);
    }
    let n = s.next_symbol().unwrap();
    assert_eq!(n.esi, 1);
    s.emit(n, &mut out).unwrap();
    s.on_late_ack(0, 1);
    // 2 goes again too (it got through, but nothing says so yet), and
    // the receiver reports 0 and 1.
    let n = s.next_symbol().unwrap();
    assert_eq!(n.esi, 2);
    s.emit(n, &mut out).unwrap();
    report_useful(&mut s, 0, 2);
    // Two missing, and of the two copies in flight only 2's can help:
    // 3 goes now, not after the redundant copy of 1 is acknowledged.
    let n = s.next_symbol().expect("the last lost source waits");
    assert_eq!(n.esi, 3);
    s.emit(n, &mut out).unwrap();
    assert_eq!(s.next_symbol(), None);
    // The redundant copy's acknowledgment is not counted a second time.
    s.on_acked(0, 1);
    s.on_lost(0, 2);
    let n = s
        .next_symbol()
        .expect("2's copy was lost: the block lacks one");
    assert_eq!(n.block_id, 0);
}

#[test]
fn sends_sources_then_waits_then_repairs_after_loss() {
    let mut s = sender();
    s.start_block(vec![1u8; 400]).unwrap();
    let mut out = [0u8; 100];
    for esi in 0..4 {
        let n = s.next_symbol().unwrap();
        assert_eq!((n.block_id, n.esi), (0, esi));
        s.emit(n, &mut out).unwrap();
    }
    assert_eq!(
        s.next_symbol(),
        None,
        "no loss seen: four in flight suffice"
    );
    s.on_lost(0, 0);
    let n = s.next_symbol().unwrap();
    assert_eq!(n.esi, 4, "a fresh repair id, not a resend");
}

fn report_done_below(s: &mut CodedSender, done_below: u32) {
    let mut buf = [0u8; 16];
    let mut w = crate::wire::cursor::Writer::new(&mut buf);
    crate::wire::frame::write_block_status(&mut w, done_below, &[]).unwrap();
    let n = w.len();
    match crate::wire::Frames::new(&buf[..n]).next() {
        Some(Ok(crate::wire::Frame::BlockStatus(status))) => {
            s.on_status(&status);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_idle_sender_tops_blocks_up_to_the_idle_margin() {
    let mut s = sender();
    let mut out = [0u8; 100];
    s.start_block(vec![1u8; 400]).unwrap();
    for _ in 0..20 {
        s.on_lost(0, 0);
    }
    while let Some(n) = s.next_symbol() {
        s.emit(n, &mut out).unwrap();
    }
    let planned = s.blocks[0].sent;
    let extra = s.idle_symbol().expect("the idle margin (z 2) is above z 1");
    assert_eq!((extra.block_id, extra.esi), (0, planned));
    s.emit(extra, &mut out).unwrap();
    while let Some(n) = s.idle_symbol() {
        s.emit(n, &mut out).unwrap();
    }
    assert!(s.blocks[0].sent > planned);
    assert_eq!(s.next_symbol(), None, "the lean margin is long satisfied");
}

#[test]
fn blocks_that_needed_more_than_their_plan_are_counted() {
    let mut s = sender();
    let mut out = [0u8; 100];
    s.start_block(vec![1u8; 400]).unwrap();
    while let Some(n) = s.next_symbol() {
        s.emit(n, &mut out).unwrap();
    }
    s.start_block(vec![2u8; 400]).unwrap();
    while let Some(n) = s.next_symbol() {
        s.emit(n, &mut out).unwrap();
    }
    // Block 0 decodes from its plan; block 1 loses one symbol and gets
    // a repair beyond its plan.
    report_done_below(&mut s, 1);
    s.on_lost(1, 0);
    let n = s.next_symbol().unwrap();
    assert_eq!(n.block_id, 1);
    s.emit(n, &mut out).unwrap();
    report_done_below(&mut s, 2);
    let st = s.stats();
    assert_eq!((st.blocks_done, st.second_round_blocks), (2, 1));
}

#[test]
fn repair_of_an_older_block_goes_before_newer_sources() {
    let mut s = sender();
    let mut out = [0u8; 100];
    s.start_block(vec![1u8; 400]).unwrap();
    while let Some(n) = s.next_symbol() {
        s.emit(n, &mut out).unwrap();
    }
    s.start_block(vec![2u8; 400]).unwrap();
    assert!(!s.can_start_block(), "window of 2");
    s.on_lost(0, 0);
    assert_eq!(s.next_symbol().unwrap().block_id, 0);
}

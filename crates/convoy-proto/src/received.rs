//! Which packet numbers arrived: the replay window and the source of ACK
//! ranges, in one structure so the two can never disagree.

use std::collections::VecDeque;
use std::ops::RangeInclusive;

/// Packets further than this below the largest received are refused as
/// replays, whatever the ranges say.
pub const REPLAY_WINDOW: u64 = 1 << 16;
/// Ranges kept; older ones are forgotten, and the window floor moves up to
/// refuse anything below what is still known. Multipath needs many: a slow
/// path's packets land below a fast path's newest ones, and every one that
/// lands in a hole starts a range of its own until the holes fill. With too
/// few kept, a slow path's packets were refused as replays and went
/// unacknowledged until its sender declared them lost. At 16 bytes a
/// range, the worst case is 64 KiB a connection.
const MAX_RANGES: usize = 4096;
/// Arrivals remembered so that each ACK names the ranges they landed in.
const RECENT_ARRIVALS: usize = 64;

#[derive(Clone, Debug, Default)]
pub struct ReceivedPackets {
    /// Disjoint, non-adjacent ranges, highest first.
    ranges: VecDeque<RangeInclusive<u64>>,
    /// Everything below is refused.
    floor: u64,
    /// The newest arrivals' packet numbers, newest last.
    recent: VecDeque<u64>,
}

impl ReceivedPackets {
    /// Index of the first range that starts at or below `pn`.
    fn at_or_below(&self, pn: u64) -> usize {
        self.ranges.partition_point(|r| *r.start() > pn)
    }

    /// Whether `pn` would be accepted (not a replay, not too old). Checked
    /// after authentication, so forged packets cannot move the window.
    pub fn is_new(&self, pn: u64) -> bool {
        if pn < self.floor {
            return false;
        }
        if let Some(top) = self.ranges.front() {
            if pn.saturating_add(REPLAY_WINDOW) < *top.end() {
                return false;
            }
        }
        self.ranges
            .get(self.at_or_below(pn))
            .is_none_or(|r| !r.contains(&pn))
    }

    /// Records `pn` (which must be new).
    pub fn insert(&mut self, pn: u64) {
        let i = self.at_or_below(pn);
        self.ranges.insert(i, pn..=pn);
        // Merge with the lower neighbour, then the higher one, when touching.
        if i + 1 < self.ranges.len() && *self.ranges[i + 1].end() + 1 >= pn {
            let lo = *self.ranges[i + 1].start();
            self.ranges[i] = lo..=pn.max(*self.ranges[i + 1].end());
            self.ranges.remove(i + 1);
        }
        if i > 0 && *self.ranges[i - 1].start() <= *self.ranges[i].end() + 1 {
            let lo = *self.ranges[i].start();
            let hi = *self.ranges[i - 1].end();
            self.ranges[i - 1] = lo..=hi;
            self.ranges.remove(i);
        }
        while self.ranges.len() > MAX_RANGES {
            self.ranges.pop_back();
            self.floor = *self.ranges.back().expect("non-empty").start();
        }
        if let Some(top) = self.ranges.front() {
            self.floor = self.floor.max(top.end().saturating_sub(REPLAY_WINDOW));
        }
        if self.recent.len() == RECENT_ARRIVALS {
            self.recent.pop_front();
        }
        self.recent.push_back(pn);
    }

    /// Whether the newest packets are a run of exactly `n` just above a
    /// hole: the first moment an acknowledgment lets a sender whose packet
    /// threshold is `n` declare what the hole lacks lost.
    pub fn run_above_hole(&self, n: u64) -> bool {
        match (self.ranges.front(), self.ranges.get(1)) {
            (Some(top), Some(_)) => top.end() - top.start() + 1 == n,
            _ => false,
        }
    }

    pub fn largest(&self) -> Option<u64> {
        self.ranges.front().map(|r| *r.end())
    }

    /// Ranges highest first, all of them.
    pub fn ranges(&self) -> impl Iterator<Item = &RangeInclusive<u64>> {
        self.ranges.iter()
    }

    /// At most `max` ranges for one ACK frame, highest first: the highest
    /// range, then every range one of the newest arrivals landed in, then,
    /// if `refresh`, the highest of the rest while room is left. Naming
    /// only the highest ranges left a slow path's packets, which land below
    /// the fast path's, unacknowledged until the sender declared them lost;
    /// a range named by an arrival is acknowledged in every ACK while that
    /// arrival is among the newest ([`RECENT_ARRIVALS`]), which is several
    /// ACKs at any ACK cadence. Older ranges the sender has already been
    /// told of, so naming them in every ACK only costs bytes: under 2 %
    /// loss the full list is 32 ranges, 66 bytes in every feedback packet.
    /// A refresh now and then repeats them for a sender whose ACKs were
    /// lost several in a row.
    pub fn ack_ranges(&self, max: usize, refresh: bool) -> Vec<RangeInclusive<u64>> {
        if self.ranges.is_empty() || (refresh && self.ranges.len() <= max) {
            return self.ranges.iter().cloned().collect();
        }
        let mut picked: Vec<usize> = vec![0];
        for &pn in self.recent.iter().rev() {
            if picked.len() >= max {
                break;
            }
            let i = self.at_or_below(pn);
            let holds = self.ranges.get(i).is_some_and(|r| r.contains(&pn));
            if holds && !picked.contains(&i) {
                picked.push(i);
            }
        }
        let mut next = 1;
        while refresh && picked.len() < max {
            if !picked.contains(&next) {
                picked.push(next);
            }
            next += 1;
        }
        picked.sort_unstable();
        picked.into_iter().map(|i| self.ranges[i].clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_above_a_hole_is_seen_once_at_its_length() {
        let mut r = ReceivedPackets::default();
        let mut seen = Vec::new();
        for pn in [0u64, 1, 2, 4, 5, 6, 7, 3, 9] {
            r.insert(pn);
            seen.push(r.run_above_hole(3));
        }
        let want = [false, false, false, false, false, true, false, false, false];
        assert_eq!(seen, want);
    }

    #[test]
    fn between_refreshes_an_ack_names_only_the_newest_ranges() {
        // One packet in ten lost: 40 ranges. The 64 newest arrivals lie in
        // the top eight; a refresh names as many as fit.
        let mut r = ReceivedPackets::default();
        for pn in (0..400u64).filter(|pn| pn % 10 != 5) {
            r.insert(pn);
        }
        let lean = r.ack_ranges(33, false);
        assert_eq!(lean.len(), 8, "{lean:?}");
        assert_eq!(lean[0], 396..=399);
        assert_eq!(lean[7], 326..=334);
        assert_eq!(r.ack_ranges(33, true).len(), 33);
    }

    use proptest::prelude::*;

    #[test]
    fn duplicates_and_old_packets_are_refused() {
        let mut r = ReceivedPackets::default();
        for pn in [0, 1, 2, 5, 4] {
            assert!(r.is_new(pn));
            r.insert(pn);
        }
        assert!(!r.is_new(4));
        assert!(r.is_new(3));
        assert_eq!(r.ranges().cloned().collect::<Vec<_>>(), vec![4..=5, 0..=2]);
        r.insert(3);
        assert_eq!(r.ranges().cloned().collect::<Vec<_>>(), vec![0..=5]);
        r.insert(REPLAY_WINDOW + 100);
        assert!(!r.is_new(50), "below the replay window");
    }

    #[test]
    fn a_slow_paths_packet_far_below_the_newest_is_accepted_and_acknowledged() {
        // A fast path sends the even numbers, leaving 200 holes; the slow
        // path's odd packet arrives later, 150 ranges down.
        let mut r = ReceivedPackets::default();
        for pn in (0..400u64).step_by(2) {
            r.insert(pn);
        }
        assert!(r.is_new(99), "a late packet refused as a replay");
        r.insert(99);
        let ack = r.ack_ranges(33, true);
        assert_eq!(ack.len(), 33);
        assert_eq!(ack[0], 398..=398, "the highest range leads");
        assert!(
            ack.contains(&(98..=100)),
            "the late arrival's range is named"
        );
    }

    proptest! {
        #[test]
        fn ranges_and_acks_match_a_set(
            pns in proptest::collection::vec(0u64..300, 0..200),
            max in 1usize..40,
        ) {
            let mut r = ReceivedPackets::default();
            let mut set = std::collections::BTreeSet::new();
            let mut last_new = None;
            for pn in &pns {
                prop_assert_eq!(r.is_new(*pn), !set.contains(pn) && *pn >= r.floor);
                if r.is_new(*pn) {
                    r.insert(*pn);
                    set.insert(*pn);
                    last_new = Some(pn);
                }
            }
            let ranges: Vec<_> = r.ranges().cloned().collect();
            for w in ranges.windows(2) {
                prop_assert!(*w[1].end() + 1 < *w[0].start(), "disjoint, non-adjacent, descending");
            }
            let covered: std::collections::BTreeSet<u64> = ranges.iter().flat_map(|r| r.clone()).collect();
            let kept: std::collections::BTreeSet<u64> = set.range(r.floor..).copied().collect();
            prop_assert_eq!(covered, kept);
            let ack = r.ack_ranges(max, true);
            prop_assert_eq!(ack.len(), ranges.len().min(max));
            prop_assert_eq!(ack.first(), ranges.first());
            for w in ack.windows(2) {
                prop_assert!(*w[1].end() + 1 < *w[0].start(), "an ACK's ranges descend apart");
            }
            prop_assert!(ack.iter().all(|a| ranges.contains(a)), "an ACK names only held ranges");
            if let (Some(&last), true) = (last_new, max >= 2) {
                prop_assert!(ack.iter().any(|a| a.contains(&last)), "the newest arrival is named");
            }
            // Between refreshes: the highest range and the newest arrivals'
            // ranges, nothing else, and never more than a refresh names.
            let lean = r.ack_ranges(max, false);
            prop_assert!(lean.len() <= ack.len());
            prop_assert_eq!(lean.first(), ranges.first());
            for w in lean.windows(2) {
                prop_assert!(*w[1].end() + 1 < *w[0].start(), "an ACK's ranges descend apart");
            }
            prop_assert!(lean.iter().all(|a| ranges.contains(a)), "an ACK names only held ranges");
            if let (Some(&last), true) = (last_new, max >= 2) {
                prop_assert!(lean.iter().any(|a| a.contains(&last)), "the newest arrival is named");
            }
        }
    }
}

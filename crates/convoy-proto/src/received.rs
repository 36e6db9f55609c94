//! Which packet numbers arrived: the replay window and the source of ACK
//! ranges, in one structure so the two can never disagree.

use std::collections::VecDeque;
use std::ops::RangeInclusive;

/// Packets further than this below the largest received are refused as
/// replays, whatever the ranges say.
pub const REPLAY_WINDOW: u64 = 1 << 16;
/// Ranges kept (and so acknowledged); older ones are forgotten, and the
/// window floor moves up to refuse anything below what is still known.
const MAX_RANGES: usize = 64;

#[derive(Clone, Debug, Default)]
pub struct ReceivedPackets {
    /// Disjoint, non-adjacent ranges, highest first.
    ranges: VecDeque<RangeInclusive<u64>>,
    /// Everything below is refused.
    floor: u64,
}

impl ReceivedPackets {
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
        !self.ranges.iter().any(|r| r.contains(&pn))
    }

    /// Records `pn` (which must be new).
    pub fn insert(&mut self, pn: u64) {
        // Index of the first range at or below pn (ranges are highest first).
        let i = self
            .ranges
            .iter()
            .position(|r| *r.start() <= pn)
            .unwrap_or(self.ranges.len());
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

    /// Ranges highest first, for an ACK frame.
    pub fn ranges(&self) -> impl Iterator<Item = &RangeInclusive<u64>> {
        self.ranges.iter()
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

    proptest! {
        #[test]
        fn ranges_match_a_set(pns in proptest::collection::vec(0u64..300, 0..200)) {
            let mut r = ReceivedPackets::default();
            let mut set = std::collections::BTreeSet::new();
            for pn in pns {
                prop_assert_eq!(r.is_new(pn), !set.contains(&pn) && pn >= r.floor);
                if r.is_new(pn) {
                    r.insert(pn);
                    set.insert(pn);
                }
            }
            let ranges: Vec<_> = r.ranges().cloned().collect();
            for w in ranges.windows(2) {
                prop_assert!(*w[1].end() + 1 < *w[0].start(), "disjoint, non-adjacent, descending");
            }
            let covered: std::collections::BTreeSet<u64> = ranges.iter().flat_map(|r| r.clone()).collect();
            let kept: std::collections::BTreeSet<u64> = set.range(r.floor..).copied().collect();
            prop_assert_eq!(covered, kept);
        }
    }
}

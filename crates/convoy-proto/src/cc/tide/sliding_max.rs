//! The largest reading over a sliding window of time: the burst floor's
//! service excess over 5 s, the buffer ceiling's queue peak over 1 s.

use std::collections::VecDeque;
use std::time::Duration;

#[derive(Clone, Debug)]
pub(super) struct SlidingMax {
    window: Duration,
    /// (time, value), each value larger than every later one: the front
    /// is the largest of the last `window`.
    items: VecDeque<(Duration, u64)>,
}

impl SlidingMax {
    pub(super) fn new(window: Duration) -> SlidingMax {
        SlidingMax {
            window,
            items: VecDeque::new(),
        }
    }

    /// A reading at `now`; readings older than the window are let go.
    pub(super) fn push(&mut self, now: Duration, value: u64) {
        while self
            .items
            .front()
            .is_some_and(|&(t, _)| t + self.window < now)
        {
            self.items.pop_front();
        }
        while self.items.back().is_some_and(|&(_, v)| v <= value) {
            self.items.pop_back();
        }
        self.items.push_back((now, value));
    }

    /// The largest reading of the window (0 before any).
    pub(super) fn max(&self) -> u64 {
        self.items.front().map_or(0, |&(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_reading_of_the_window_until_it_ages_out() {
        let ms = Duration::from_millis;
        let mut m = SlidingMax::new(ms(100));
        assert_eq!(m.max(), 0);
        m.push(ms(0), 5);
        m.push(ms(10), 9);
        m.push(ms(20), 3);
        assert_eq!(m.max(), 9);
        m.push(ms(111), 1);
        assert_eq!(m.max(), 3);
        m.push(ms(121), 2);
        assert_eq!(m.max(), 2);
    }
}

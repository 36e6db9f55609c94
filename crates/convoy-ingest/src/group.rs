//! Group commit without I/O: callers each [`GroupCommit::submit`] an item
//! and wait; whoever finds no commit running takes what waits
//! ([`GroupCommit::start`], up to a bound), writes it in one transaction
//! and reports how that went ([`GroupCommit::finish`]); only then does
//! each caller of that batch get its outcome ([`GroupCommit::outcome`]).
//! So one fsync serves every upload that arrived while the previous one
//! ran, and no caller hears "done" before the commit that holds its item.
//! The driver (locking, waking) is [`crate::QueueHook`].

use std::collections::{HashMap, VecDeque};

/// A caller's place in the queue.
pub type Ticket = u64;

pub struct GroupCommit<T> {
    waiting: VecDeque<(Ticket, T)>,
    next: Ticket,
    /// Whether a batch is being committed (one at a time).
    running: bool,
    outcomes: HashMap<Ticket, Result<(), String>>,
    max: usize,
}

impl<T> GroupCommit<T> {
    /// At most `max` items in one commit.
    pub fn new(max: usize) -> GroupCommit<T> {
        GroupCommit {
            waiting: VecDeque::new(),
            next: 0,
            running: false,
            outcomes: HashMap::new(),
            max: max.max(1),
        }
    }

    pub fn submit(&mut self, item: T) -> Ticket {
        let t = self.next;
        self.next += 1;
        self.waiting.push_back((t, item));
        t
    }

    /// The next batch to commit, oldest first, when no commit runs and
    /// something waits; the caller must then [`GroupCommit::finish`] it.
    pub fn start(&mut self) -> Option<Vec<(Ticket, T)>> {
        if self.running || self.waiting.is_empty() {
            return None;
        }
        self.running = true;
        let n = self.waiting.len().min(self.max);
        Some(self.waiting.drain(..n).collect())
    }

    /// How the batch `tickets` went: each of them gets that outcome.
    pub fn finish(&mut self, tickets: &[Ticket], result: Result<(), String>) {
        self.running = false;
        for t in tickets {
            self.outcomes.insert(*t, result.clone());
        }
    }

    /// `ticket`'s outcome once its batch finished (taken: asked once).
    pub fn outcome(&mut self, ticket: Ticket) -> Option<Result<(), String>> {
        self.outcomes.remove(&ticket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_waits_goes_in_one_batch_and_is_answered_after_it() {
        let mut g = GroupCommit::new(3);
        let a = g.submit("a");
        let b = g.submit("b");
        let batch = g.start().unwrap();
        assert_eq!(batch, [(a, "a"), (b, "b")]);
        // Arrivals during the commit wait for the next one.
        let c = g.submit("c");
        assert!(g.start().is_none(), "one commit at a time");
        assert_eq!(g.outcome(a), None, "nothing is answered before its commit");
        g.finish(&[a, b], Ok(()));
        assert_eq!(g.outcome(a), Some(Ok(())));
        assert_eq!(g.outcome(b), Some(Ok(())));
        assert_eq!(g.outcome(c), None);
        // A failed commit fails each of its callers, and no other.
        let (d, e, f) = (g.submit("d"), g.submit("e"), g.submit("f"));
        let batch = g.start().unwrap();
        assert_eq!(batch.len(), 3, "at most the bound: c, d, e");
        g.finish(&[c, d, e], Err("disk full".into()));
        for t in [c, d, e] {
            assert_eq!(g.outcome(t), Some(Err("disk full".into())));
        }
        assert_eq!(g.outcome(f), None);
        assert_eq!(g.start().unwrap(), [(f, "f")]);
    }
}

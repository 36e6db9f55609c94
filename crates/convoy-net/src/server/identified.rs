//! A worker's identified connections, and how many each identity has
//! open.
//!
//! Every open connection is asked about again each `REAUTH_EVERY`, and
//! each answer is checked against the per-identity connection cap. With
//! the count kept beside the map that check is one lookup; counting by
//! scanning every connection's name made each re-check round quadratic
//! (5,000 connections a worker: 25 million name compares a second, the
//! workers' largest share of CPU in a 10,000-vehicle run).

use std::collections::HashMap;

use convoy_proto::ConnectionHandle;

use crate::auth::Identity;

#[derive(Default)]
pub struct Identified {
    /// Each identified connection (`None` without an authorizer).
    who: HashMap<ConnectionHandle, Option<Identity>>,
    /// How many of `who` carry each name.
    open: HashMap<String, usize>,
}

impl Identified {
    pub fn contains(&self, h: ConnectionHandle) -> bool {
        self.who.contains_key(&h)
    }

    pub fn get(&self, h: ConnectionHandle) -> Option<&Option<Identity>> {
        self.who.get(&h)
    }

    /// The vehicle's name, if the connection is identified as one.
    pub fn name(&self, h: ConnectionHandle) -> Option<&str> {
        self.who.get(&h)?.as_ref().map(|w| w.name.as_str())
    }

    /// How many connections are identified as `name`.
    pub fn open(&self, name: &str) -> usize {
        self.open.get(name).copied().unwrap_or(0)
    }

    pub fn handles(&self) -> impl Iterator<Item = ConnectionHandle> + '_ {
        self.who.keys().copied()
    }

    /// Names the connection (again, on a re-check: its count moves only if
    /// the name changed).
    pub fn insert(&mut self, h: ConnectionHandle, id: Option<Identity>) {
        if let Some(name) = id.as_ref().map(|w| w.name.clone()) {
            *self.open.entry(name).or_default() += 1;
        }
        if let Some(old) = self.who.insert(h, id) {
            self.forget(old);
        }
    }

    /// Marks a connection identified without a name, unless it already is.
    pub fn insert_unnamed(&mut self, h: ConnectionHandle) {
        self.who.entry(h).or_insert(None);
    }

    pub fn remove(&mut self, h: ConnectionHandle) -> Option<Option<Identity>> {
        let old = self.who.remove(&h)?;
        self.forget(old.clone());
        Some(old)
    }

    fn forget(&mut self, id: Option<Identity>) {
        let Some(id) = id else { return };
        if let Some(n) = self.open.get_mut(&id.name) {
            *n -= 1;
            if *n == 0 {
                self.open.remove(&id.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    fn vehicle(name: &str) -> Option<Identity> {
        Some(Identity {
            name: name.into(),
            role: Role::Vehicle,
        })
    }

    #[test]
    fn counts_follow_connections_named_renamed_and_gone() {
        let mut ids = Identified::default();
        let (a, b, c) = (
            ConnectionHandle(1),
            ConnectionHandle(2),
            ConnectionHandle(3),
        );
        ids.insert(a, vehicle("car-1"));
        ids.insert(b, vehicle("car-1"));
        ids.insert_unnamed(c);
        assert_eq!(ids.open("car-1"), 2);
        // A re-check with the same answer leaves the count alone.
        ids.insert(a, vehicle("car-1"));
        assert_eq!(ids.open("car-1"), 2);
        // A key re-registered to another name moves its connection.
        ids.insert(b, vehicle("car-2"));
        assert_eq!((ids.open("car-1"), ids.open("car-2")), (1, 1));
        assert_eq!(ids.remove(a), Some(vehicle("car-1")));
        assert_eq!(ids.open("car-1"), 0);
        assert!(!ids.open.contains_key("car-1"), "empty counts are dropped");
        assert_eq!(ids.remove(a), None);
        assert_eq!(ids.name(b), Some("car-2"));
        assert_eq!(ids.name(c), None);
        assert!(ids.contains(c));
        let mut left: Vec<_> = ids.handles().collect();
        left.sort();
        assert_eq!(left, vec![b, c]);
    }
}

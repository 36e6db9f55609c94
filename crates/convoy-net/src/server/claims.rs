//! Which session may write each partial file: the newest one to open it,
//! across every worker. An older session still open (a killed client's,
//! not yet timed out; a client cut off that comes back) is abandoned the
//! next time it is stepped, so two sessions never write one file.
//!
//! A session is stepped on every turn its connection has something to do,
//! and at 10,000 connections looking its path up in a shared map each
//! time (a mutex, a hash and a compare of the path) was a visible share of
//! the workers' CPU. So the map is touched only when a claim is made or
//! given back, and the newer claim marks the one it replaces: asking
//! whether a claim still holds is one atomic load.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
pub struct Claims {
    /// Each claimed partial file's newest claim, by its `superseded` flag.
    owners: Arc<Mutex<HashMap<PathBuf, Arc<AtomicBool>>>>,
    /// How many partial files are claimed: uploads in progress.
    live: Arc<AtomicUsize>,
}

/// One session's claim on one partial file.
pub struct Claim {
    path: PathBuf,
    /// Set when a newer session claims the same file.
    superseded: Arc<AtomicBool>,
}

impl Claim {
    /// Whether no newer session has claimed this file since.
    pub fn holds(&self) -> bool {
        !self.superseded.load(Ordering::Acquire)
    }
}

impl Claims {
    /// Claims `path` for a session, taking it from whoever held it.
    pub fn claim(&self, path: &Path) -> Claim {
        let superseded = Arc::new(AtomicBool::new(false));
        let mut owners = self.owners.lock().expect("claims lock");
        if let Some(older) = owners.insert(path.to_path_buf(), superseded.clone()) {
            older.store(true, Ordering::Release);
        }
        self.live.store(owners.len(), Ordering::Relaxed);
        Claim {
            path: path.to_path_buf(),
            superseded,
        }
    }

    /// Gives a claim back. A claim already taken over leaves the newer
    /// owner's entry alone.
    pub fn release(&self, claim: Claim) {
        let mut owners = self.owners.lock().expect("claims lock");
        let is_owner = owners
            .get(&claim.path)
            .is_some_and(|flag| Arc::ptr_eq(flag, &claim.superseded));
        if is_owner {
            owners.remove(&claim.path);
            self.live.store(owners.len(), Ordering::Relaxed);
        }
    }

    /// The count of claimed partial files, kept current.
    pub fn live(&self) -> Arc<AtomicUsize> {
        self.live.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_claim_holds_and_the_older_one_is_told() {
        let claims = Claims::default();
        let path = Path::new("/spool/v1/a.partial");
        let first = claims.claim(path);
        assert!(first.holds());
        let second = claims.claim(path);
        assert!(!first.holds());
        assert!(second.holds());
        // Claims made from another worker's clone share the owners.
        let third = claims.clone().claim(path);
        assert!(!second.holds());
        assert!(third.holds());
        assert_eq!(claims.live().load(Ordering::Relaxed), 1);
    }

    #[test]
    fn an_older_claim_given_back_leaves_the_newer_one() {
        let claims = Claims::default();
        let path = Path::new("/spool/v1/a.partial");
        let older = claims.claim(path);
        let newer = claims.claim(path);
        claims.release(older);
        assert!(newer.holds());
        assert_eq!(claims.live().load(Ordering::Relaxed), 1);
        claims.release(newer);
        assert_eq!(claims.live().load(Ordering::Relaxed), 0);
        // The file is free again: a new claim holds.
        assert!(claims.claim(path).holds());
    }

    #[test]
    fn claims_on_different_files_are_independent() {
        let claims = Claims::default();
        let a = claims.claim(Path::new("/spool/v1/a.partial"));
        let b = claims.claim(Path::new("/spool/v1/b.partial"));
        assert!(a.holds() && b.holds());
        assert_eq!(claims.live().load(Ordering::Relaxed), 2);
        claims.release(a);
        assert!(b.holds());
        assert_eq!(claims.live().load(Ordering::Relaxed), 1);
    }
}

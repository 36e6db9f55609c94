//! How many partial files, and how many bytes of them, each identity holds.
//!
//! A partial file is made as soon as an upload request arrives, and one
//! that is never finished stays until the age-out sweep (7 days by
//! default). Without a quota, one registered vehicle could announce
//! thousands of uploads and fill the server's disk with their beginnings.
//! The ledger counts, per owner, every partial file on disk and the bytes
//! it may grow to: the announced size while the server knows it, the
//! file's length for one found on disk at start-up. A new upload over the
//! owner's quota is refused before its file is made; resuming one already
//! counted is not a new one.
//!
//! Owners are told apart by a tag in the partial file's name (a hash of
//! the identity's name), so the ledger is rebuilt from the directory when
//! the server starts. All workers share one ledger.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::NetError;

/// Partial files one owner may hold at once, by default.
pub const DEFAULT_MAX_PARTIAL_FILES: usize = 1024;

/// Bytes one owner's partial files may grow to, by default: one largest
/// upload (`DEFAULT_MAX_UPLOAD`).
pub const DEFAULT_MAX_PARTIAL_BYTES: u64 = crate::store::DEFAULT_MAX_UPLOAD;

/// The tag in a partial file's name that names its owner: 16 hex digits of
/// BLAKE3 of the identity's name ("" on a server without identities).
pub fn owner_tag(owner: &str) -> String {
    hex(&blake3::hash(owner.as_bytes()).as_bytes()[..8])
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    pub files: usize,
    pub bytes: u64,
}

impl Default for Quota {
    fn default() -> Quota {
        Quota {
            files: DEFAULT_MAX_PARTIAL_FILES,
            bytes: DEFAULT_MAX_PARTIAL_BYTES,
        }
    }
}

#[derive(Default)]
struct Book {
    /// Each partial file: its owner's tag and the bytes it may grow to.
    files: HashMap<PathBuf, (String, u64)>,
    /// Per owner tag: files and bytes.
    owners: HashMap<String, (usize, u64)>,
}

impl Book {
    fn remove(&mut self, path: &Path) {
        if let Some((tag, bytes)) = self.files.remove(path) {
            if let Some(o) = self.owners.get_mut(&tag) {
                o.0 -= 1;
                o.1 -= bytes;
                if o.0 == 0 {
                    self.owners.remove(&tag);
                }
            }
        }
    }

    fn insert(&mut self, path: PathBuf, tag: String, bytes: u64) {
        self.remove(&path);
        let o = self.owners.entry(tag.clone()).or_default();
        o.0 += 1;
        o.1 += bytes;
        self.files.insert(path, (tag, bytes));
    }
}

/// The shared ledger of partial files.
#[derive(Clone, Default)]
pub struct PartialLedger {
    book: Arc<Mutex<Book>>,
    pub quota: Quota,
}

impl PartialLedger {
    /// Counts the partial files already in `dir` (`TAG.NAME.HASH.part`),
    /// each at its length. Files in another form are left to the sweep.
    pub fn scan(dir: &Path) -> PartialLedger {
        let ledger = PartialLedger::default();
        if let Ok(entries) = fs::read_dir(dir) {
            let mut book = ledger.book.lock().expect("ledger lock");
            for e in entries.flatten() {
                let path = e.path();
                let Some(tag) = tag_of(&path) else { continue };
                if let Ok(m) = fs::symlink_metadata(&path) {
                    if m.is_file() {
                        book.insert(path, tag, m.len());
                    }
                }
            }
        }
        ledger
    }

    /// Counts `path`, owned by `tag`, at `bytes`, unless that takes its
    /// owner over the quota. A file already counted is counted again at
    /// the new size (a resumed upload), not as one more.
    pub fn reserve(&self, path: &Path, tag: &str, bytes: u64) -> Result<(), NetError> {
        let mut book = self.book.lock().expect("ledger lock");
        let (files, held) = book.owners.get(tag).copied().unwrap_or_default();
        let (files, held) = match book.files.get(path) {
            Some((_, was)) => (files - 1, held - was),
            None => (files, held),
        };
        if files + 1 > self.quota.files {
            return Err(NetError::Remote(format!(
                "{files} uploads in progress already (at most {}): finish or drop some first",
                self.quota.files
            )));
        }
        if held.saturating_add(bytes) > self.quota.bytes {
            return Err(NetError::Remote(format!(
                "uploads in progress would hold {} bytes (at most {})",
                held.saturating_add(bytes),
                self.quota.bytes
            )));
        }
        book.insert(path.to_owned(), tag.to_owned(), bytes);
        Ok(())
    }

    /// `path` is no longer a partial file (committed, discarded, swept).
    pub fn release(&self, path: &Path) {
        self.book.lock().expect("ledger lock").remove(path);
    }

    /// Files and bytes counted for an owner.
    pub fn held(&self, tag: &str) -> (usize, u64) {
        let book = self.book.lock().expect("ledger lock");
        book.owners.get(tag).copied().unwrap_or_default()
    }
}

/// The owner tag of a partial file named `TAG.NAME.HASH.part`.
fn tag_of(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".part")?;
    let parts: Vec<&str> = stem.split('.').collect();
    let hex_of = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    match parts[..] {
        [tag, name, hash] if hex_of(tag, 16) && hex_of(name, 24) && hex_of(hash, 16) => {
            Some(tag.to_owned())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(files: usize, bytes: u64) -> PartialLedger {
        PartialLedger {
            quota: Quota { files, bytes },
            ..PartialLedger::default()
        }
    }

    #[test]
    fn an_owner_over_its_files_or_bytes_is_refused_and_others_are_not() {
        let l = ledger(2, 100);
        let (a, b) = (owner_tag("a"), owner_tag("b"));
        l.reserve(Path::new("/p/1"), &a, 40).unwrap();
        l.reserve(Path::new("/p/2"), &a, 40).unwrap();
        let e = l.reserve(Path::new("/p/3"), &a, 1).unwrap_err();
        assert!(e.to_string().contains("at most 2"), "{e}");
        l.reserve(Path::new("/p/4"), &b, 100).unwrap();
        let e = l.reserve(Path::new("/p/5"), &b, 1).unwrap_err();
        assert!(e.to_string().contains("at most 100"), "{e}");
        assert_eq!(l.held(&a), (2, 80));
    }

    #[test]
    fn a_resumed_file_is_counted_once_at_its_new_size_and_released() {
        let l = ledger(1, 100);
        let a = owner_tag("a");
        l.reserve(Path::new("/p/1"), &a, 90).unwrap();
        l.reserve(Path::new("/p/1"), &a, 100).unwrap();
        assert_eq!(l.held(&a), (1, 100));
        l.release(Path::new("/p/1"));
        assert_eq!(l.held(&a), (0, 0));
        l.reserve(Path::new("/p/2"), &a, 100).unwrap();
    }

    #[test]
    fn the_scan_counts_tagged_partials_at_their_length_and_skips_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let tag = owner_tag("truck-7");
        let name = format!("{tag}.{}.{}.part", "ab".repeat(12), "cd".repeat(8));
        fs::write(dir.path().join(&name), vec![0u8; 300]).unwrap();
        fs::write(dir.path().join("old-form.part"), b"x").unwrap();
        fs::write(dir.path().join(".probe-1"), b"").unwrap();
        let l = PartialLedger::scan(dir.path());
        assert_eq!(l.held(&tag), (1, 300));
    }
}

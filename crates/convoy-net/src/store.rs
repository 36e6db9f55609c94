//! The server's durable storage. An upload is written to a partial file
//! under `DIR/.convoy-partial/`, named after the final name and the
//! announced BLAKE3 hash so a re-run of the same upload finds it and
//! resumes. When the last byte is in, the partial file is fsynced, its
//! hash checked, renamed to `DIR/NAME` and the directory fsynced; only
//! then is the client told the upload is complete. So `DIR/NAME` is always
//! either absent, the previous version, or the whole new file.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::NetError;
use crate::partials::{hex, owner_tag, PartialLedger};

pub const PARTIAL_DIR: &str = ".convoy-partial";

/// The largest upload a server takes unless told otherwise (`max_upload`):
/// a request announcing more is refused before any file is created.
pub const DEFAULT_MAX_UPLOAD: u64 = 64 << 30;

#[derive(Clone)]
pub struct Store {
    dir: PathBuf,
    partial_dir: PathBuf,
    /// Requests announcing more bytes than this are refused.
    pub max_upload: u64,
    hashes: HashCache,
    /// Partial files per owner, shared by every clone (every worker).
    pub partials: PartialLedger,
}

/// What identifies one version of a file: size, mtime (ns), inode, device.
type FileStamp = (u64, i64, i64, u64, u64);

/// Stored files' BLAKE3, valid while their stamp is unchanged: a peer
/// looping `get` on a large file (or re-sending a stored one) made the
/// driver thread hash all of it every time.
#[derive(Clone, Default)]
struct HashCache(std::sync::Arc<std::sync::Mutex<HashMap<PathBuf, Hashed>>>);

/// A file's stamp when it was hashed, and its BLAKE3.
type Hashed = (FileStamp, [u8; 32]);

/// Files whose hash is remembered; past it the cache starts again.
const HASH_CACHE_ENTRIES: usize = 4096;

fn stamp(m: &fs::Metadata) -> FileStamp {
    use std::os::unix::fs::MetadataExt;
    (m.len(), m.mtime(), m.mtime_nsec(), m.ino(), m.dev())
}

/// A new directory: 0700, so no other local user lists or plants entries
/// in what the server writes.
fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new().mode(0o700).create(dir)
}

/// An upload in progress.
pub struct PartialUpload {
    /// Open only once data arrives. A client keeps many uploads queued on
    /// one connection (the agent: 64 per lane) and sends their data in
    /// order, so most sessions are a request waiting for its turn: holding
    /// a descriptor each, a server with a thousand vehicles draining their
    /// backlogs would need 128,000 of them (this machine allows 20,000).
    file: Option<File>,
    pub path: PathBuf,
    final_path: PathBuf,
    pub written: u64,
    pub size: u64,
    hash: [u8; 32],
    hasher: blake3::Hasher,
    /// Released when the file stops being partial.
    ledger: PartialLedger,
}

/// What `begin_put` found.
pub enum PutStart {
    /// The same content is already stored under the name (an earlier run
    /// finished but its client never heard).
    AlreadyStored {
        size: u64,
        blake3: [u8; 32],
    },
    Resume(Box<PartialUpload>),
}

fn hash_reader(mut r: impl Read, limit: u64) -> io::Result<blake3::Hasher> {
    let mut h = blake3::Hasher::new();
    // Sized to what is read: a new upload hashes nothing, and zeroing a
    // 1 MiB buffer for each of a connection's queued requests was waste.
    let mut buf = vec![0u8; limit.min(1 << 20) as usize];
    let mut left = limit;
    while left > 0 {
        let n = r.read(&mut buf[..(left.min(1 << 20)) as usize])?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(h)
}

/// BLAKE3 of a whole file.
pub fn hash_file(path: &Path) -> Result<([u8; 32], u64), NetError> {
    let f = File::open(path).map_err(|e| NetError::file(path, e))?;
    let len = f.metadata().map_err(|e| NetError::file(path, e))?.len();
    let h = hash_reader(f, u64::MAX).map_err(|e| NetError::file(path, e))?;
    Ok((*h.finalize().as_bytes(), len))
}

/// Creates `dir` and its missing parents, fsyncing each parent whose
/// entry was added, so a nested upload's directories survive a crash.
pub fn create_dirs_durably(dir: &Path) -> Result<(), NetError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs_durably(parent)?;
    }
    match create_private_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) => return Err(NetError::file(dir, e)),
    }
    match dir.parent() {
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

/// Flushes the file system that holds `dir` (`syncfs`): every file's
/// data and every name written there so far, for about the cost of one
/// fsync however many there were.
pub fn sync_file_system(dir: &Path) -> io::Result<()> {
    let d = File::open(dir)?;
    // SAFETY: `d` is an open descriptor for the call's duration.
    if unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&d)) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The same error again (`io::Error` is not `Clone`): one flush fails
/// every upload of its batch.
fn same_error(e: &io::Error) -> io::Error {
    e.raw_os_error().map_or_else(
        || io::Error::new(e.kind(), e.to_string()),
        io::Error::from_raw_os_error,
    )
}

/// Makes a rename durable: fsync the directory that holds the entry.
pub fn sync_dir(dir: &Path) -> Result<(), NetError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| NetError::file(dir, e))
}

impl Store {
    /// Opens DIR, which must exist and be writable (checked by creating a
    /// probe file, since permission bits do not bind root).
    pub fn open(dir: &Path) -> Result<Store, NetError> {
        let meta = fs::metadata(dir).map_err(|e| NetError::file(dir, e))?;
        if !meta.is_dir() {
            return Err(NetError::file(
                dir,
                io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
            ));
        }
        let partial_dir = dir.join(PARTIAL_DIR);
        match create_private_dir(&partial_dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(NetError::file(&partial_dir, e)),
        }
        // A symlink planted in its place would lead every partial file
        // elsewhere: the partial directory must be a real one.
        let m = fs::symlink_metadata(&partial_dir).map_err(|e| NetError::file(&partial_dir, e))?;
        if !m.is_dir() {
            return Err(NetError::file(
                &partial_dir,
                io::Error::new(io::ErrorKind::NotADirectory, "not a directory (a symlink?)"),
            ));
        }
        let probe = partial_dir.join(format!(".probe-{}", std::process::id()));
        File::create(&probe).map_err(|e| NetError::file(dir, e))?;
        let _ = fs::remove_file(&probe);
        Ok(Store {
            dir: dir.to_owned(),
            max_upload: DEFAULT_MAX_UPLOAD,
            hashes: HashCache::default(),
            partials: PartialLedger::scan(&partial_dir),
            partial_dir,
        })
    }

    pub fn final_path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The partial file of `owner`'s upload: flat, named after its owner
    /// (for the quota), a hash of the (possibly nested) name and the
    /// content's hash, so nested names need no directories until the
    /// commit.
    pub fn partial_path(&self, owner: &str, name: &str, hash: &[u8; 32]) -> PathBuf {
        let name_tag = hex(&blake3::hash(name.as_bytes()).as_bytes()[..12]);
        self.partial_dir.join(format!(
            "{}.{name_tag}.{}.part",
            owner_tag(owner),
            hex(&hash[..8])
        ))
    }

    /// Removes partial files not written to for `max_age` (uploads whose
    /// client never came back); returns how many. Only regular files named
    /// `*.part` directly in the partial directory are touched.
    pub fn sweep_partials(&self, max_age: std::time::Duration) -> usize {
        let Ok(entries) = fs::read_dir(&self.partial_dir) else {
            return 0;
        };
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_none_or(|x| x != "part") {
                continue;
            }
            let Ok(m) = fs::symlink_metadata(&path) else {
                continue;
            };
            let old = m
                .modified()
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > max_age);
            if m.is_file() && old && fs::remove_file(&path).is_ok() {
                self.partials.release(&path);
                removed += 1;
            }
        }
        removed
    }

    /// The directory uploads land in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts or resumes storing `name` (`size` bytes, BLAKE3 `hash`) for
    /// `owner` (the identity's name; "" on a server without identities),
    /// within the owner's quota of partial files.
    pub fn begin_put(
        &self,
        owner: &str,
        name: &str,
        size: u64,
        hash: [u8; 32],
    ) -> Result<PutStart, NetError> {
        if size > self.max_upload {
            return Err(NetError::Protocol(format!(
                "{size} bytes is more than this server takes in one upload ({})",
                self.max_upload
            )));
        }
        let final_path = self.final_path(name);
        if let Ok(m) = fs::metadata(&final_path) {
            if m.len() == size && self.hash_stored(&final_path)?.1 == hash {
                return Ok(PutStart::AlreadyStored { size, blake3: hash });
            }
        }
        let path = self.partial_path(owner, name, &hash);
        self.partials.reserve(&path, &owner_tag(owner), size)?;
        let started = self.start_partial(&path, size);
        if started.is_err() {
            self.partials.release(&path);
        }
        let (written, hasher) = started?;
        Ok(PutStart::Resume(Box::new(PartialUpload {
            file: None,
            path,
            final_path,
            written,
            size,
            hash,
            hasher,
            ledger: self.partials.clone(),
        })))
    }

    /// Opens (or makes) a partial file: what is written already, hashed.
    fn start_partial(&self, path: &Path, size: u64) -> Result<(u64, blake3::Hasher), NetError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            // A symlink planted under a (predictable) partial name is not
            // followed: `set_len(0)` below would truncate its target.
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(path)
            .map_err(|e| NetError::file(path, e))?;
        let mut written = file.metadata().map_err(|e| NetError::file(path, e))?.len();
        if written > size {
            file.set_len(0).map_err(|e| NetError::file(path, e))?;
            written = 0;
        }
        // What is already there is hashed now, so the end needs no re-read.
        file.seek(SeekFrom::Start(0))
            .map_err(|e| NetError::file(path, e))?;
        let hasher = hash_reader(&mut file, written).map_err(|e| NetError::file(path, e))?;
        drop(file);
        Ok((written, hasher))
    }

    /// A stored file to send: the open file, its size and BLAKE3.
    pub fn open_get(&self, name: &str) -> Result<(File, u64, [u8; 32]), NetError> {
        let path = self.final_path(name);
        let (f, hash) = self.hash_stored(&path)?;
        let size = f.metadata().map_err(|e| NetError::file(&path, e))?.len();
        Ok((f, size, hash))
    }

    /// Whether [`Store::begin_put`] would read a file: hash a stored file
    /// of the same size not hashed before, or a partial file's bytes to
    /// resume. The driver hands such a start to a thread of its own; a new
    /// upload (most of them) starts at once.
    pub fn put_needs_reading(&self, owner: &str, name: &str, size: u64, hash: &[u8; 32]) -> bool {
        let final_path = self.final_path(name);
        let unhashed_twin = fs::metadata(&final_path)
            .is_ok_and(|m| m.len() == size && self.cached_hash(&final_path, &m).is_none());
        let resumable = fs::symlink_metadata(self.partial_path(owner, name, hash))
            .is_ok_and(|m| m.is_file() && m.len() > 0 && m.len() <= size);
        unhashed_twin || resumable
    }

    /// Whether [`Store::open_get`] would hash the file (not hashed since it
    /// last changed).
    pub fn get_needs_reading(&self, name: &str) -> bool {
        let path = self.final_path(name);
        fs::metadata(&path).is_ok_and(|m| self.cached_hash(&path, &m).is_none())
    }

    fn cached_hash(&self, path: &Path, m: &fs::Metadata) -> Option<[u8; 32]> {
        let st = stamp(m);
        self.hashes
            .0
            .lock()
            .ok()
            .and_then(|c| c.get(path).filter(|(s, _)| *s == st).map(|&(_, h)| h))
    }

    /// A stored file, open at its start, and its BLAKE3: from the cache
    /// while the file is the version hashed, else hashed now.
    fn hash_stored(&self, path: &Path) -> Result<(File, [u8; 32]), NetError> {
        let err = |e| NetError::file(path, e);
        let mut f = File::open(path).map_err(err)?;
        let meta = f.metadata().map_err(err)?;
        let st = stamp(&meta);
        if let Some(h) = self.cached_hash(path, &meta) {
            return Ok((f, h));
        }
        let h = *hash_reader(&mut f, u64::MAX)
            .map_err(err)?
            .finalize()
            .as_bytes();
        f.seek(SeekFrom::Start(0)).map_err(err)?;
        if let Ok(mut c) = self.hashes.0.lock() {
            if c.len() >= HASH_CACHE_ENTRIES {
                c.clear();
            }
            c.insert(path.to_owned(), (st, h));
        }
        Ok((f, h))
    }
}

impl PartialUpload {
    pub fn write(&mut self, data: &[u8]) -> Result<(), NetError> {
        if self.written + data.len() as u64 > self.size {
            return Err(NetError::Protocol(format!(
                "more data than the announced {} bytes",
                self.size
            )));
        }
        self.open()?
            .write_all(data)
            .map_err(|e| NetError::file(&self.path, e))?;
        self.hasher.update(data);
        self.written += data.len() as u64;
        Ok(())
    }

    pub fn is_complete(&self) -> bool {
        self.written == self.size
    }

    /// The partial file, opened at the end of what is written.
    fn open(&mut self) -> Result<&mut File, NetError> {
        if self.file.is_none() {
            let mut f = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&self.path)
                .map_err(|e| NetError::file(&self.path, e))?;
            f.seek(SeekFrom::Start(self.written))
                .map_err(|e| NetError::file(&self.path, e))?;
            self.file = Some(f);
        }
        Ok(self.file.as_mut().expect("just opened"))
    }

    /// fsync, check the hash, rename into place, fsync the directory.
    pub fn commit(mut self) -> Result<[u8; 32], NetError> {
        self.open()?;
        let file = self.file.take().expect("just opened");
        file.sync_all().map_err(|e| NetError::file(&self.path, e))?;
        drop(file);
        let got = self.check_hash()?;
        let parent = self.final_path.parent().map(Path::to_owned);
        self.rename_into_place()?;
        if let Some(parent) = parent {
            sync_dir(&parent)?;
        }
        Ok(got)
    }

    /// The BLAKE3 of what was written if it is the announced one; if not,
    /// the partial file is deleted and released.
    fn check_hash(&self) -> Result<[u8; 32], NetError> {
        let got = *self.hasher.finalize().as_bytes();
        if got != self.hash {
            let _ = fs::remove_file(&self.path);
            self.ledger.release(&self.path);
            return Err(NetError::Integrity(
                "stored bytes do not match the announced BLAKE3 hash".into(),
            ));
        }
        Ok(got)
    }

    /// Several uploads made durable together, with the guarantee of
    /// [`PartialUpload::commit`] for each: every hash checked, one flush
    /// of the file system for all their data, the renames into place, and
    /// one more flush for the renames; two flushes for the batch instead
    /// of an fsync of each file and of each directory. A file is renamed
    /// only once its data is on disk, so a crash leaves each upload either
    /// partial (it resumes) or whole under its name. One upload alone
    /// takes `commit`'s way. Results in the uploads' order.
    pub fn commit_all(uploads: Vec<PartialUpload>) -> Vec<Result<[u8; 32], NetError>> {
        if uploads.len() == 1 {
            return uploads.into_iter().map(PartialUpload::commit).collect();
        }
        let mut results = Vec::with_capacity(uploads.len());
        let mut checked = Vec::with_capacity(uploads.len());
        for mut u in uploads {
            // Written with plain writes: closing loses nothing.
            u.file = None;
            let got = u.check_hash();
            checked.push(got.is_ok().then_some(u));
            results.push(got);
        }
        let Some(first) = checked.iter().flatten().next() else {
            return results;
        };
        let fs_dir = first.path.parent().unwrap_or(Path::new("/")).to_owned();
        let flushed = sync_file_system(&fs_dir);
        for (result, u) in results.iter_mut().zip(checked) {
            let Some(u) = u else { continue };
            let done = match &flushed {
                Ok(()) => u.rename_into_place(),
                Err(e) => Err(NetError::file(&fs_dir, same_error(e))),
            };
            if let Err(e) = done {
                *result = Err(e);
            }
        }
        if flushed.is_ok() {
            if let Err(e) = sync_file_system(&fs_dir) {
                for r in results.iter_mut().filter(|r| r.is_ok()) {
                    *r = Err(NetError::file(&fs_dir, same_error(&e)));
                }
            }
        }
        results
    }

    /// The rename of a checked, flushed upload; its directories are made
    /// (durably) if need be.
    fn rename_into_place(self) -> Result<(), NetError> {
        if let Some(parent) = self.final_path.parent() {
            create_dirs_durably(parent)?;
        }
        fs::rename(&self.path, &self.final_path)
            .map_err(|e| NetError::file(&self.final_path, e))?;
        self.ledger.release(&self.path);
        Ok(())
    }

    /// Gives up on the upload and deletes what was written (used when it
    /// cannot finish, e.g. the disk is full).
    pub fn discard(self) {
        let _ = fs::remove_file(&self.path);
        self.ledger.release(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_descriptors() -> usize {
        fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
    }

    fn start(store: &Store, name: &str, data: &[u8]) -> Box<PartialUpload> {
        let hash = *blake3::hash(data).as_bytes();
        match store.begin_put("", name, data.len() as u64, hash).unwrap() {
            PutStart::Resume(p) => p,
            PutStart::AlreadyStored { .. } => panic!("{name} already stored"),
        }
    }

    #[test]
    fn a_stored_files_hash_is_remembered_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        fs::write(dir.path().join("a.bin"), b"first").unwrap();
        let (_, _, h1) = store.open_get("a.bin").unwrap();
        assert_eq!(h1, *blake3::hash(b"first").as_bytes());
        assert_eq!(store.hashes.0.lock().unwrap().len(), 1);
        assert_eq!(store.open_get("a.bin").unwrap().2, h1, "from the cache");
        // Replaced (a new inode), same size: hashed again.
        let tmp = dir.path().join("a.tmp");
        fs::write(&tmp, b"again").unwrap();
        fs::rename(&tmp, dir.path().join("a.bin")).unwrap();
        assert_eq!(
            store.open_get("a.bin").unwrap().2,
            *blake3::hash(b"again").as_bytes()
        );
    }

    #[test]
    fn a_symlink_under_a_partial_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let hash = *blake3::hash(b"x").as_bytes();
        std::os::unix::fs::symlink(&victim, store.partial_path("", "a.bin", &hash)).unwrap();
        assert!(store.begin_put("", "a.bin", 1, hash).is_err());
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert!(store
            .begin_put("", "big.bin", DEFAULT_MAX_UPLOAD + 1, hash)
            .is_err());
    }

    #[test]
    fn queued_uploads_hold_no_file_descriptor_until_their_data_comes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let before = open_descriptors();
        // Other tests of this binary run beside this one and open files
        // too, hence the margin: one descriptor each would be +300.
        let waiting: Vec<_> = (0..300)
            .map(|i| start(&store, &format!("day/seg{i}.bin"), b"some bytes"))
            .collect();
        let held = open_descriptors().saturating_sub(before);
        assert!(held < 100, "{held} descriptors for 300 queued uploads");
        drop(waiting);
    }

    #[test]
    fn an_upload_written_in_two_sessions_resumes_and_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let mut first = start(&store, "a/b.bin", &data);
        first.write(&data[..4000]).unwrap();
        drop(first); // the connection died
        let mut again = start(&store, "a/b.bin", &data);
        assert_eq!(again.written, 4000);
        again.write(&data[4000..]).unwrap();
        assert!(again.is_complete());
        again.commit().unwrap();
        assert_eq!(fs::read(dir.path().join("a/b.bin")).unwrap(), data);
        // An empty upload has no data to open its file with.
        start(&store, "empty", b"").commit().unwrap();
        assert_eq!(fs::read(dir.path().join("empty")).unwrap(), b"");
    }

    #[test]
    fn a_wrong_hash_is_refused_at_commit_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut p = match store.begin_put("", "x", 3, [7; 32]).unwrap() {
            PutStart::Resume(p) => p,
            PutStart::AlreadyStored { .. } => unreachable!(),
        };
        p.write(b"abc").unwrap();
        let partial = p.path.clone();
        assert!(matches!(p.commit(), Err(NetError::Integrity(_))));
        assert!(!partial.exists() && !dir.path().join("x").exists());
    }

    #[test]
    fn each_owner_has_a_quota_of_partial_files_released_by_commit_and_sweep() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        store.partials.quota = crate::partials::Quota {
            files: 2,
            bytes: 1000,
        };
        let put = |owner: &str, name: &str, size: u64| {
            store.begin_put(owner, name, size, *blake3::hash(name.as_bytes()).as_bytes())
        };
        let Ok(PutStart::Resume(mut first)) = put("v1", "v1/a", 1) else {
            panic!("a")
        };
        assert!(put("v1", "v1/b", 10).is_ok());
        let refused = put("v1", "v1/c", 10)
            .err()
            .expect("a third file")
            .to_string();
        assert!(refused.contains("at most 2"), "{refused}");
        assert!(!store
            .partial_path("v1", "v1/c", blake3::hash(b"v1/c").as_bytes())
            .exists());
        // Another vehicle has its own quota, in bytes too.
        assert!(put("v2", "v2/a", 1000).is_ok());
        assert!(put("v2", "v2/b", 1)
            .err()
            .unwrap()
            .to_string()
            .contains("at most 1000"));
        // Resuming a counted file is not one more.
        assert!(put("v1", "v1/b", 10).is_ok());
        // A committed upload is no longer partial.
        first.write(b"v").unwrap();
        let _ = first.commit();
        assert_eq!(store.partials.held(&owner_tag("v1")), (1, 10));
        assert!(put("v1", "v1/c", 10).is_ok());
        // Counted again from the directory by a restarted server, and
        // released by the age-out sweep.
        let again = Store::open(dir.path()).unwrap();
        assert_eq!(again.partials.held(&owner_tag("v1")).0, 2);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(again.sweep_partials(std::time::Duration::from_millis(1)), 3);
        assert_eq!(again.partials.held(&owner_tag("v1")), (0, 0));
    }

    #[test]
    fn uploads_committed_together_each_land_whole_and_a_bad_one_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut uploads: Vec<PartialUpload> = ["v1/a", "v1/sub/b", "v1/c"]
            .iter()
            .map(|name| {
                let mut u = *start(&store, name, name.as_bytes());
                u.write(name.as_bytes()).unwrap();
                u
            })
            .collect();
        // One whose bytes are not what it announced.
        let mut bad = match store.begin_put("", "v1/bad", 3, [7; 32]).unwrap() {
            PutStart::Resume(p) => *p,
            PutStart::AlreadyStored { .. } => unreachable!(),
        };
        bad.write(b"abc").unwrap();
        let bad_partial = bad.path.clone();
        uploads.insert(1, bad);
        let results = PartialUpload::commit_all(uploads);
        assert!(matches!(results[1], Err(NetError::Integrity(_))));
        for (r, name) in [
            (&results[0], "v1/a"),
            (&results[2], "v1/sub/b"),
            (&results[3], "v1/c"),
        ] {
            assert_eq!(
                r.as_ref().unwrap(),
                blake3::hash(name.as_bytes()).as_bytes()
            );
            assert_eq!(fs::read(dir.path().join(name)).unwrap(), name.as_bytes());
        }
        assert!(!bad_partial.exists() && !dir.path().join("v1/bad").exists());
        assert_eq!(
            store.partials.held(&owner_tag("")),
            (0, 0),
            "none is partial now"
        );
    }
}

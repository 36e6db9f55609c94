//! The spool: segment files waiting for the server, and a SQLite catalog
//! of what waits, what is being sent, what was acknowledged and what the
//! quota made the agent drop.
//!
//! Layout: `SPOOL/segments/CLASS/NAME` (NAME is the upload's nested name),
//! `SPOOL/tmp/` for files being written (renamed in when complete, so the
//! spool only ever holds whole segments), `SPOOL/agent.db`.
//!
//! **Overflow rule.** The spool holds at most `quota` bytes. To admit a
//! new segment, the agent drops waiting segments, lowest priority class
//! first and oldest first within a class, but never an event: events are
//! kept until acknowledged even past the quota. If no droppable segment
//! is left, a new segment that is not an event is refused (and counted).
//! Acknowledged segments are deleted at once; their rows stay.
//!
//! **Full disk.** The catalog lives on the spool's disk too, so its writes
//! may fail when the segments fill it: a write that fails for want of
//! space empties SQLite's write-ahead log into the database and tries once
//! more, and the overflow rule deletes a segment's file before it records
//! the drop, so that the record finds room.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use crate::policy::{day_of, Class, LinkRule};

/// Segments created within this long count as live: a lane of their own
/// sends them before the backlog, so live telemetry stays fresh while an
/// old backlog drains.
pub const LIVE_WINDOW_NS: i64 = 30_000_000_000;

/// For this long after it is made, an event or telemetry segment is the
/// live lane's alone; only then may the backlog lane take it too (a live
/// lane that is reconnecting, or stuck behind a large event). Without it,
/// the backlog lane, asking for its next file whenever its window has
/// room, took half the fresh samples and sent them behind its log files:
/// on a vehicle's share of a slow cell that is seconds per sample.
pub const LIVE_HANDOFF_NS: i64 = 5_000_000_000;

#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub id: i64,
    pub name: String,
    pub class: Class,
    pub bytes: u64,
    pub created_ns: i64,
    pub path: PathBuf,
    /// A campaign window's upload conditions (`None` and `false` for any
    /// other segment): the links it may use, as `,a,b,`, and whether
    /// never a metered one. The lane's link watcher checks them on the
    /// link in use mid-upload (campaign::spool_ops::link_meets).
    pub only_links: Option<String>,
    pub unmetered: bool,
}

/// A segment the server confirmed durable, waiting to be recorded.
#[derive(Clone, Debug)]
pub struct Acked {
    pub item: Item,
    /// When the confirmation arrived (the catalog's `done_ns`).
    pub at_ns: i64,
    /// The UTC day its bytes count against the link's budget.
    pub day: i64,
}

/// Which uploads a lane takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Events and telemetry younger than [`LIVE_WINDOW_NS`], by class,
    /// newest first: after an outage, what the vehicle makes now goes
    /// ahead of what it made while offline (the backlog lane takes those,
    /// oldest first, from the other end). Oldest first, the ~150 segments
    /// of a 30 s outage held the first new samples 5 s late.
    Live,
    /// Everything, by class then age, except events and telemetry in
    /// their first [`LIVE_HANDOFF_NS`].
    Backlog,
}

/// The most segments one drop on a full disk deletes while the catalog
/// still cannot record any of them.
const MAX_UNRECORDED_DROPS: i64 = 64;

/// Whether an error means the disk (or the user's quota on it) is full.
pub fn is_full_io(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

pub fn is_full_db(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
}

/// Bytes still free for this process on the filesystem holding `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs reads a NUL-terminated path and fills the struct we
    // own; all-zero bytes are a valid statvfs.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// Why [`Spool::add`] failed; the file is back at its temporary path.
#[derive(Debug)]
pub struct AddError {
    /// The disk is full: dropping a segment may make room.
    pub disk_full: bool,
    pub message: String,
}

impl From<AddError> for String {
    fn from(e: AddError) -> String {
        e.message
    }
}

/// Why a segment was not admitted.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    pub needed: u64,
    pub used: u64,
    pub quota: u64,
}

#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct ClassStatus {
    pub class: &'static str,
    pub queued: u64,
    pub queued_bytes: u64,
    pub acked: u64,
    pub acked_bytes: u64,
    pub dropped: u64,
    pub dropped_bytes: u64,
    pub refused: u64,
}

pub struct Spool {
    dir: PathBuf,
    pub(crate) db: Connection,
    quota: u64,
    /// Segments taken for upload on a link with a budget and not yet
    /// recorded acknowledged or given back, by item id: their bytes count
    /// as spent on that link from the moment they are taken. Kept here,
    /// under the one lock every lane and connection takes the spool by,
    /// so that no two lanes can both see room for "one more segment".
    reserved: HashMap<i64, Reservation>,
}

/// Bytes of one taken segment held against a link's budget.
#[derive(Debug)]
struct Reservation {
    link: String,
    bytes: u64,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    class INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    created_ns INTEGER NOT NULL,
    state TEXT NOT NULL,
    done_ns INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT
);
CREATE INDEX IF NOT EXISTS items_state ON items (state, class, id);
CREATE TABLE IF NOT EXISTS link_bytes (
    link TEXT NOT NULL, day INTEGER NOT NULL, bytes INTEGER NOT NULL,
    PRIMARY KEY (link, day)
);
CREATE TABLE IF NOT EXISTS refused (class INTEGER PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS seq (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
";

impl Spool {
    /// Opens the spool, putting back what a crash left half-done: uploads
    /// in flight are queued again (the server resumes them), temporary
    /// files are deleted, and segment files without a row are queued.
    pub fn open(dir: &Path, quota: u64) -> Result<Spool, String> {
        let err = |e: &dyn std::fmt::Display| format!("spool {}: {e}", dir.display());
        for sub in ["segments", "tmp"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(|e| err(&e))?;
        }
        if let Ok(rd) = std::fs::read_dir(dir.join("tmp")) {
            for e in rd.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let db = Connection::open(dir.join("agent.db")).map_err(|e| err(&e))?;
        db.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| err(&e))?;
        db.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| err(&e))?;
        db.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| err(&e))?;
        // The WAL shares the spool's disk: checkpoint it every 128 pages
        // (512 KiB) rather than SQLite's 1,000 (4 MiB), which on a small
        // disk was most of what filled it.
        db.pragma_update(None, "wal_autocheckpoint", 128)
            .map_err(|e| err(&e))?;
        db.execute_batch(SCHEMA).map_err(|e| err(&e))?;
        crate::requests::spool_ops::migrate(&db).map_err(|e| err(&e))?;
        crate::campaign::spool_ops::migrate(&db).map_err(|e| err(&e))?;
        db.execute(
            "UPDATE items SET state = 'queued' WHERE state = 'uploading'",
            [],
        )
        .map_err(|e| err(&e))?;
        let mut s = Spool {
            dir: dir.to_owned(),
            db,
            quota,
            reserved: HashMap::new(),
        };
        s.adopt_orphans().map_err(|e| err(&e))?;
        Ok(s)
    }

    /// Opens the catalog read-only, for `convoy agent status`.
    pub fn open_readonly(dir: &Path) -> Result<Spool, String> {
        let db = Connection::open_with_flags(
            dir.join("agent.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .map_err(|e| format!("spool {}: {e}", dir.display()))?;
        // The agent may hold the write lock (a checkpoint on a busy or
        // full disk): wait for it as the agent itself does.
        db.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| format!("spool {}: {e}", dir.display()))?;
        Ok(Spool {
            dir: dir.to_owned(),
            db,
            quota: 0,
            reserved: HashMap::new(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn tmp_path(&self, file: &str) -> PathBuf {
        self.dir.join("tmp").join(file)
    }

    fn final_path(&self, class: Class, name: &str) -> PathBuf {
        self.dir.join("segments").join(class.as_str()).join(name)
    }

    /// Runs a catalog write; if it fails for want of space, checkpoints
    /// the write-ahead log into the database and truncates it (which frees
    /// more than it takes unless the database itself must grow a lot), then
    /// tries once more. SQLite has rolled the failed attempt back, so `f`
    /// may run again.
    fn write<T>(
        &mut self,
        f: impl Fn(&mut Connection) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        match f(&mut self.db) {
            Err(e) if is_full_db(&e) => {
                let _ = self
                    .db
                    .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
                f(&mut self.db)
            }
            r => r,
        }
    }

    /// [`Spool::write`] for a row whose loss in a power cut is harmless:
    /// committed without an fsync (WAL with `synchronous=NORMAL`), so
    /// still visible at once to every reader; the next full commit makes
    /// it durable with everything before it.
    fn write_unsynced<T>(
        &mut self,
        f: impl Fn(&mut Connection) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        self.db.pragma_update(None, "synchronous", "NORMAL")?;
        let r = self.write(f);
        let back = self.db.pragma_update(None, "synchronous", "FULL");
        let r = r?;
        back?;
        Ok(r)
    }

    /// A number that grows across restarts (segment names).
    pub fn next_seq(&mut self) -> rusqlite::Result<i64> {
        self.write(|db| {
            db.execute(
                "INSERT INTO seq (k, v) VALUES ('segment', 1)
                 ON CONFLICT (k) DO UPDATE SET v = v + 1",
                [],
            )
        })?;
        self.db
            .query_row("SELECT v FROM seq WHERE k = 'segment'", [], |r| r.get(0))
    }

    fn adopt_orphans(&mut self) -> rusqlite::Result<()> {
        for class in Class::ALL {
            let root = self.dir.join("segments").join(class.as_str());
            let mut stack = vec![root.clone()];
            while let Some(d) = stack.pop() {
                let Ok(rd) = std::fs::read_dir(&d) else {
                    continue;
                };
                for e in rd.flatten() {
                    let p = e.path();
                    if p.is_dir() {
                        stack.push(p);
                        continue;
                    }
                    let Ok(rel) = p.strip_prefix(&root) else {
                        continue;
                    };
                    let name = rel.to_string_lossy().into_owned();
                    let bytes = e.metadata().map(|m| m.len()).unwrap_or(0);
                    self.db.execute(
                        "INSERT INTO items (name, class, bytes, created_ns, state)
                         VALUES (?1, ?2, ?3, ?4, 'queued') ON CONFLICT (name) DO NOTHING",
                        params![name, class as i64, bytes as i64, convoy_telemetry::now_ns()],
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Bytes of segments not yet acknowledged.
    pub fn used(&self) -> rusqlite::Result<u64> {
        self.db
            .query_row(
                "SELECT COALESCE(SUM(bytes), 0) FROM items WHERE state IN ('queued', 'uploading')",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|b| b as u64)
    }

    /// When the oldest segment not yet acknowledged was made (ns since
    /// the epoch), if one waits: what `--metrics` ages.
    pub fn oldest_waiting_ns(&self) -> rusqlite::Result<Option<i64>> {
        self.db.query_row(
            "SELECT MIN(created_ns) FROM items WHERE state IN ('queued', 'uploading')",
            [],
            |r| r.get(0),
        )
    }

    /// Makes room for `bytes` of `class` under the quota by the overflow
    /// rule; returns what was dropped (name, class, bytes).
    pub fn make_room(
        &mut self,
        class: Class,
        bytes: u64,
    ) -> Result<Vec<(String, Class, u64)>, Refused> {
        let mut dropped = Vec::new();
        let used = self.used().unwrap_or(u64::MAX);
        if class != Class::Events && used.saturating_add(bytes) > self.quota {
            // Refuse before dropping anything when even every droppable
            // segment would not make room: nothing is lost for nothing.
            let droppable: i64 = self
                .db
                .query_row(
                    "SELECT COALESCE(SUM(bytes), 0) FROM items
                     WHERE state = 'queued' AND class > 0 AND class >= ?1 AND prio IS NULL",
                    [class as i64],
                    |r| r.get(0),
                )
                .unwrap_or(0);
            if used.saturating_add(bytes) > self.quota.saturating_add(droppable.max(0) as u64) {
                self.count_refused(class);
                return Err(Refused {
                    needed: bytes,
                    used,
                    quota: self.quota,
                });
            }
        }
        loop {
            let used = self.used().unwrap_or(u64::MAX);
            if used.saturating_add(bytes) <= self.quota || class == Class::Events {
                return Ok(dropped);
            }
            match self.drop_oldest(class) {
                Some(d) => dropped.push(d),
                None => {
                    self.count_refused(class);
                    return Err(Refused {
                        needed: bytes,
                        used,
                        quota: self.quota,
                    });
                }
            }
        }
    }

    /// Drops the waiting segment the overflow rule gives up first for a
    /// newcomer of `class`: lowest priority first, oldest first; never an
    /// event, never a class above `class`, never what is being sent right
    /// now. `None` if none may go, or if no drop could be recorded.
    fn drop_oldest(&mut self, class: Class) -> Option<(String, Class, u64)> {
        // The file first: on a full disk, recording the drop may need the
        // room its deletion frees. If the record fails all the same, the
        // next victim's file goes too, until one record is written: a
        // deletion that freed too little (a writer took the room back)
        // must not leave the catalog full for ever, retrying the same
        // victim whose file is already gone. Victims not recorded stay
        // queued, so the n-th pick skips the n before it; `take` marks a
        // row whose file is gone as dropped when the catalog can be
        // written again.
        let now = convoy_telemetry::now_ns();
        for skip in 0..MAX_UNRECORDED_DROPS {
            let (id, name, c, b): (i64, String, i64, i64) = self
                .db
                .query_row(
                    "SELECT id, name, class, bytes FROM items
                     WHERE state = 'queued' AND class > 0 AND class >= ?1 AND prio IS NULL
                     ORDER BY class DESC, id ASC LIMIT 1 OFFSET ?2",
                    params![class as i64, skip],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .optional()
                .ok()
                .flatten()?;
            let c = Class::from_index(c);
            let _ = std::fs::remove_file(self.final_path(c, &name));
            let recorded = self.write(|db| {
                db.execute(
                    "UPDATE items SET state = 'dropped', done_ns = ?2 WHERE id = ?1",
                    params![id, now],
                )
            });
            match recorded {
                Ok(_) => return Some((name, c, b as u64)),
                // Only a full disk is helped by deleting more.
                Err(e) if is_full_db(&e) => continue,
                Err(_) => return None,
            }
        }
        None
    }

    /// A catalog write that found the disk full makes room by the overflow
    /// rule, and the caller picks again (`Ok(None)`); `Err` if nothing may
    /// go. Otherwise a disk left full once the writers stopped would keep
    /// every lane from sending, and so from ever freeing room by
    /// acknowledgements.
    fn shed_if_full<T>(&mut self, written: rusqlite::Result<T>) -> rusqlite::Result<Option<T>> {
        match written {
            Err(e) if is_full_db(&e) => {
                self.shed_one(Class::Telemetry).ok_or(e)?;
                Ok(None)
            }
            r => r.map(Some),
        }
    }

    fn count_refused(&mut self, class: Class) {
        let _ = self.write(|db| {
            db.execute(
                "INSERT INTO refused (class, n) VALUES (?1, 1)
                 ON CONFLICT (class) DO UPDATE SET n = n + 1",
                [class as i64],
            )
        });
    }

    /// Drops the one segment the overflow rule gives up first, for a full
    /// disk (where the quota was not reached): what it dropped, or `None`
    /// if nothing may go. Not counted as a refusal: no segment was refused.
    pub fn shed_one(&mut self, for_class: Class) -> Option<(String, Class, u64)> {
        let as_class = if for_class <= Class::Telemetry {
            Class::Telemetry
        } else {
            for_class
        };
        self.drop_oldest(as_class)
    }

    /// Moves a complete file from `tmp/` into the spool and queues it.
    pub fn add(
        &mut self,
        tmp: &Path,
        name: &str,
        class: Class,
        bytes: u64,
    ) -> Result<(), AddError> {
        let dest = self.final_path(class, name);
        let io_err = |p: &Path, e: std::io::Error| AddError {
            disk_full: is_full_io(&e),
            message: format!("{}: {e}", p.display()),
        };
        if dest.exists() {
            // rename would replace it, and lose a segment still queued.
            return Err(AddError {
                disk_full: false,
                message: format!("{}: already in the spool", dest.display()),
            });
        }
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
        }
        std::fs::rename(tmp, &dest).map_err(|e| io_err(&dest, e))?;
        if let Some(parent) = dest.parent() {
            let _ = std::fs::File::open(parent).and_then(|d| d.sync_all());
        }
        let now = convoy_telemetry::now_ns();
        let queued = self.write(|db| {
            db.execute(
                "INSERT INTO items (name, class, bytes, created_ns, state)
                 VALUES (?1, ?2, ?3, ?4, 'queued')",
                params![name, class as i64, bytes as i64, now],
            )
        });
        if let Err(e) = queued {
            // Put the file back: left in place without its row, it would
            // be adopted at the next start while the caller, told that
            // this failed, queues the same data again (a duplicate).
            let _ = std::fs::rename(&dest, tmp);
            return Err(AddError {
                disk_full: is_full_db(&e),
                message: format!("spool catalog: {e}"),
            });
        }
        Ok(())
    }

    /// The next upload for `lane` that `link`'s rules allow now, marked as
    /// being sent and its bytes reserved against the link's budget until
    /// [`Spool::acked_all`] records it or [`Spool::failed`] gives it back.
    ///
    /// A class is allowed while the bytes acknowledged today plus every
    /// reservation on the link (all lanes, all connections) are under the
    /// budget, so the budget is overrun by at most the one segment taken
    /// at its edge, whatever the timing of the lanes.
    pub fn take_for_link(
        &mut self,
        lane: Lane,
        link: &LinkRule,
        now_ns: i64,
    ) -> rusqlite::Result<Option<Item>> {
        let now_s = now_ns.div_euclid(1_000_000_000);
        let committed = self.spent(&link.name, day_of(now_s)) + self.reserved_on(&link.name);
        let allowed: Vec<Class> = Class::ALL
            .into_iter()
            .filter(|c| link.allows(*c, now_s, committed).is_ok())
            .collect();
        let item = self.take_on(lane, &allowed, now_ns, Some(link))?;
        if let Some(item) = &item {
            self.reserved.insert(
                item.id,
                Reservation {
                    link: link.name.clone(),
                    bytes: item.bytes,
                },
            );
        }
        Ok(item)
    }

    /// Bytes taken for upload on `link` and not yet acknowledged or given back.
    pub fn reserved_on(&self, link: &str) -> u64 {
        self.reserved
            .values()
            .filter(|r| r.link == link)
            .map(|r| r.bytes)
            .sum()
    }

    /// The next upload for `lane` among the classes `allowed`, marked as
    /// being sent.
    pub fn take(
        &mut self,
        lane: Lane,
        allowed: &[Class],
        now_ns: i64,
    ) -> rusqlite::Result<Option<Item>> {
        self.take_on(lane, allowed, now_ns, None)
    }

    /// [`Spool::take`] for `link` (`None`: any), leaving out campaign
    /// windows whose upload conditions it does not meet.
    fn take_on(
        &mut self,
        lane: Lane,
        allowed: &[Class],
        now_ns: i64,
        link: Option<&LinkRule>,
    ) -> rusqlite::Result<Option<Item>> {
        let on_link = crate::campaign::spool_ops::link_filter(link);
        let classes: Vec<String> = allowed.iter().map(|c| (*c as i64).to_string()).collect();
        if classes.is_empty() {
            return Ok(None);
        }
        let list = classes.join(",");
        let sql = match lane {
            Lane::Live => format!(
                "SELECT id, name, class, bytes, created_ns, only_links, unmetered FROM items
                 WHERE state = 'queued' AND class IN ({list})
                   AND ((class <= 1 AND created_ns >= ?1) OR prio <= 1){on_link}
                 ORDER BY COALESCE(prio, class) ASC, id DESC LIMIT 1"
            ),
            Lane::Backlog => format!(
                "SELECT id, name, class, bytes, created_ns, only_links, unmetered FROM items
                 WHERE state = 'queued' AND class IN ({list})
                   AND NOT (class <= 1 AND prio IS NULL AND created_ns > ?1){on_link}
                 ORDER BY COALESCE(prio, class) ASC, id ASC LIMIT 1"
            ),
        };
        let since = match lane {
            Lane::Live => now_ns - LIVE_WINDOW_NS,
            Lane::Backlog => now_ns - LIVE_HANDOFF_NS,
        };
        loop {
            let row = self
                .db
                .query_row(&sql, [since], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get(2)?,
                        r.get::<_, i64>(3)?,
                        r.get(4)?,
                        r.get::<_, Option<String>>(5)?,
                        r.get::<_, i64>(6)? != 0,
                    ))
                })
                .optional()?;
            let Some((id, name, class, bytes, created_ns, only_links, unmetered)) = row else {
                return Ok(None);
            };
            let class = Class::from_index(class);
            let path = self.final_path(class, &name);
            if !path.exists() {
                // Its drop was not recorded (a full disk): record it now
                // rather than retry, for ever, an upload that cannot be.
                let recorded = self.write(|db| {
                    db.execute(
                        "UPDATE items SET state = 'dropped', done_ns = ?2,
                         last_error = 'segment file missing' WHERE id = ?1",
                        params![id, now_ns],
                    )
                });
                // Still no room to record it: shed, or this row is picked
                // for ever.
                self.shed_if_full(recorded)?;
                continue;
            }
            // The mark keeps the other lane from taking this segment too;
            // `open` re-queues every 'uploading' row, so it need not
            // survive a power cut, and its fsync (1-3 ms) stalled the
            // lane's protocol thread, which asks for each next segment.
            let marked = self.write_unsynced(|db| {
                db.execute(
                    "UPDATE items SET state = 'uploading', attempts = attempts + 1 WHERE id = ?1",
                    [id],
                )
            });
            // Still no room for the catalog: the overflow rule makes some
            // (it may drop this very segment, so pick again).
            if self.shed_if_full(marked)?.is_none() {
                continue;
            }
            return Ok(Some(Item {
                path,
                id,
                name,
                class,
                bytes: bytes as u64,
                created_ns,
                only_links,
                unmetered,
            }));
        }
    }

    /// The server has it durably: record, count it against the link, and
    /// delete the file.
    pub fn acked(&mut self, item: &Item, link: &str, day: i64) -> rusqlite::Result<()> {
        let done = Acked {
            item: item.clone(),
            at_ns: convoy_telemetry::now_ns(),
            day,
        };
        self.acked_all(std::slice::from_ref(&done), link)
    }

    /// [`Spool::acked`] for several segments the server confirmed, in one
    /// transaction: one fsync, however many confirmations came at once.
    pub fn acked_all(&mut self, done: &[Acked], link: &str) -> rusqlite::Result<()> {
        if done.is_empty() {
            return Ok(());
        }
        self.write(|db| {
            let tx = db.transaction()?;
            for d in done {
                tx.execute(
                    "UPDATE items SET state = 'acked', done_ns = ?2, last_error = NULL WHERE id = ?1",
                    params![d.item.id, d.at_ns],
                )?;
                tx.execute(
                    "INSERT INTO link_bytes (link, day, bytes) VALUES (?1, ?2, ?3)
                     ON CONFLICT (link, day) DO UPDATE SET bytes = bytes + excluded.bytes",
                    params![link, d.day, d.item.bytes as i64],
                )?;
            }
            tx.commit()
        })?;
        for d in done {
            // Now counted in `link_bytes`: the reservation's work is done.
            self.reserved.remove(&d.item.id);
            let _ = std::fs::remove_file(&d.item.path);
        }
        Ok(())
    }

    /// Sending failed; the segment waits for the next try.
    pub fn failed(&mut self, item: &Item, error: &str) -> rusqlite::Result<()> {
        // Given back: its bytes were not spent. Released even if the
        // catalog write fails, since the segment is no longer in flight.
        self.reserved.remove(&item.id);
        loop {
            // Only from 'uploading': the overflow rule below may have
            // dropped this very segment, which must stay dropped.
            let given_back = self.write(|db| {
                db.execute(
                    "UPDATE items SET state = 'queued', last_error = ?2
                     WHERE id = ?1 AND state = 'uploading'",
                    params![item.id, error],
                )
            });
            match given_back {
                // No room even for this: without it the segment stayed
                // 'uploading', which no lane takes, until a restart.
                Err(e) if is_full_db(&e) => {
                    self.shed_one(Class::Telemetry).ok_or(e)?;
                }
                r => return r.map(|_| ()),
            }
        }
    }

    /// Bytes sent on `link` on UTC day `day`.
    pub fn spent(&self, link: &str, day: i64) -> u64 {
        self.db
            .query_row(
                "SELECT bytes FROM link_bytes WHERE link = ?1 AND day = ?2",
                params![link, day],
                |r| r.get::<_, i64>(0),
            )
            .optional()
            .ok()
            .flatten()
            .unwrap_or(0) as u64
    }

    /// Per-class counts for `convoy agent status`.
    pub fn status(&self) -> rusqlite::Result<Vec<ClassStatus>> {
        let mut out: Vec<ClassStatus> = Class::ALL
            .iter()
            .map(|c| ClassStatus {
                class: c.as_str(),
                ..ClassStatus::default()
            })
            .collect();
        let mut st = self.db.prepare(
            "SELECT class, state, COUNT(*), COALESCE(SUM(bytes), 0) FROM items GROUP BY class, state",
        )?;
        let rows = st.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })?;
        for row in rows {
            let (class, state, n, b) = row?;
            let s = &mut out[Class::from_index(class) as usize];
            let (n, b) = (n as u64, b as u64);
            match state.as_str() {
                "queued" | "uploading" => {
                    s.queued += n;
                    s.queued_bytes += b;
                }
                "acked" => {
                    s.acked += n;
                    s.acked_bytes += b;
                }
                _ => {
                    s.dropped += n;
                    s.dropped_bytes += b;
                }
            }
        }
        let mut st = self.db.prepare("SELECT class, n FROM refused")?;
        for row in st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))? {
            let (c, n) = row?;
            out[Class::from_index(c) as usize].refused = n as u64;
        }
        Ok(out)
    }

    /// Names of acknowledged segments (tests, benchmark).
    pub fn acked_names(&self) -> rusqlite::Result<Vec<String>> {
        let mut st = self
            .db
            .prepare("SELECT name FROM items WHERE state = 'acked' ORDER BY id")?;
        let rows = st.query_map([], |r| r.get(0))?;
        rows.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(s: &mut Spool, name: &str, class: Class, bytes: usize) {
        let tmp = s.tmp_path("x");
        std::fs::write(&tmp, vec![0u8; bytes]).unwrap();
        s.add(&tmp, name, class, bytes as u64).unwrap();
    }

    /// A metered link with a 1,000-byte budget and 400-byte segments.
    fn budgeted() -> LinkRule {
        LinkRule {
            metered: true,
            daily_budget: Some(1000),
            ..LinkRule::unmetered("lte")
        }
    }

    /// What `lane` takes on `link` once the segments are past their
    /// hand-off, so that either lane may take any of them.
    fn taken(s: &mut Spool, lane: Lane, link: &LinkRule) -> Option<Item> {
        s.take_for_link(lane, link, handed_off()).unwrap()
    }

    /// A time at which every segment made so far is past its hand-off to
    /// the backlog lane, and still in the live lane's window.
    fn handed_off() -> i64 {
        convoy_telemetry::now_ns() + LIVE_HANDOFF_NS
    }

    /// What the backlog lane takes next, any class, past every hand-off.
    fn take_backlog(s: &mut Spool) -> Option<Item> {
        s.take(Lane::Backlog, &Class::ALL, handed_off()).unwrap()
    }

    #[test]
    fn two_lanes_interleaved_at_the_budget_edge_overrun_it_by_at_most_one_segment() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        for i in 0..8 {
            put(&mut s, &format!("t{i}"), Class::Telemetry, 400);
        }
        let link = budgeted();
        // Live and backlog take in turn, nothing acknowledged yet: each
        // sees the other's segments in flight.
        let mut out = Vec::new();
        for lane in [Lane::Live, Lane::Backlog].into_iter().cycle().take(8) {
            if let Some(item) = taken(&mut s, lane, &link) {
                out.push(item);
            }
        }
        // 0, 400 and 800 are under 1,000; 1,200 is not.
        assert_eq!(out.len(), 3, "{out:?}");
        assert_eq!(s.reserved_on("lte"), 1200);
        assert_eq!(s.reserved_on("wifi"), 0);
        // A segment given back frees its bytes for another...
        s.failed(&out.pop().unwrap(), "link lost").unwrap();
        assert_eq!(s.reserved_on("lte"), 800);
        out.push(taken(&mut s, Lane::Backlog, &link).expect("room again"));
        assert!(taken(&mut s, Lane::Live, &link).is_none());
        // ...and acknowledged ones count once, as spent, not twice.
        let day = day_of(convoy_telemetry::now_ns() / 1_000_000_000);
        let acks: Vec<Acked> = out
            .drain(..2)
            .map(|item| Acked {
                item,
                at_ns: convoy_telemetry::now_ns(),
                day,
            })
            .collect();
        s.acked_all(&acks, "lte").unwrap();
        assert_eq!(s.spent("lte", day), 800);
        assert_eq!(s.reserved_on("lte"), 400);
        assert!(taken(&mut s, Lane::Live, &link).is_none());
        // An unmetered link is not held back by the metered one's spending.
        let wifi = LinkRule::unmetered("wifi");
        assert!(taken(&mut s, Lane::Backlog, &wifi).is_some());
    }

    #[test]
    fn the_overflow_rule_drops_oldest_lowest_priority_and_never_events() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1000).unwrap();
        put(&mut s, "e1", Class::Events, 300);
        put(&mut s, "b1", Class::Bulk, 200);
        put(&mut s, "t1", Class::Telemetry, 200);
        put(&mut s, "b2", Class::Bulk, 200);
        // 900 used; 300 more of telemetry: the oldest bulk goes.
        let dropped = s.make_room(Class::Telemetry, 300).unwrap();
        assert_eq!(dropped, vec![("b1".to_string(), Class::Bulk, 200)]);
        put(&mut s, "t2", Class::Telemetry, 300);
        // 1000 used. Bulk cannot displace telemetry: 300 of bulk would
        // need more than b2 frees, so it is refused and nothing is dropped.
        assert!(s.make_room(Class::Bulk, 300).is_err());
        // Within its class the oldest goes: 100 of bulk displaces b2...
        let dropped = s.make_room(Class::Bulk, 100).unwrap();
        assert_eq!(dropped, vec![("b2".to_string(), Class::Bulk, 200)]);
        put(&mut s, "b3", Class::Bulk, 100);
        // ...and telemetry displaces the last bulk, then the oldest telemetry.
        let dropped = s.make_room(Class::Telemetry, 350).unwrap();
        let names: Vec<_> = dropped.iter().map(|d| d.0.as_str()).collect();
        assert_eq!(names, ["b3", "t1"]);
        // Events are always admitted and never dropped.
        assert!(s.make_room(Class::Events, 10_000).unwrap().is_empty());
        let st = s.status().unwrap();
        assert_eq!(st[0].queued, 1);
        assert_eq!(st[3].dropped, 3);
        assert_eq!(st[3].refused, 1);
        assert!(!dir.path().join("segments/bulk/b1").exists());
    }

    #[test]
    fn a_restart_requeues_uploads_in_flight_and_adopts_orphan_files() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
            put(&mut s, "2026-11-24/t/1.jsonl.zst", Class::Telemetry, 10);
            let it = take_backlog(&mut s).unwrap();
            assert_eq!(it.name, "2026-11-24/t/1.jsonl.zst");
            assert!(take_backlog(&mut s).is_none());
            // A file renamed in but never recorded (killed in between).
            std::fs::create_dir_all(dir.path().join("segments/bulk/d")).unwrap();
            std::fs::write(dir.path().join("segments/bulk/d/cam.mcap"), b"x").unwrap();
            std::fs::write(dir.path().join("tmp/half"), b"x").unwrap();
        }
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        assert!(!dir.path().join("tmp/half").exists());
        let a = take_backlog(&mut s).unwrap();
        let b = take_backlog(&mut s).unwrap();
        assert_eq!(
            (a.name.as_str(), b.name.as_str()),
            ("2026-11-24/t/1.jsonl.zst", "d/cam.mcap")
        );
        s.acked(&a, "wifi", 7).unwrap();
        assert_eq!(s.spent("wifi", 7), 10);
        assert!(!a.path.exists());
    }

    #[test]
    fn a_burst_of_confirmations_is_recorded_in_one_call_with_its_times() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        put(&mut s, "a", Class::Telemetry, 10);
        put(&mut s, "b", Class::Bulk, 30);
        let a = take_backlog(&mut s).unwrap();
        let b = take_backlog(&mut s).unwrap();
        let done = [(a, 111, 7), (b, 222, 8)].map(|(item, at_ns, day)| Acked { item, at_ns, day });
        s.acked_all(&done, "lte").unwrap();
        assert_eq!((s.spent("lte", 7), s.spent("lte", 8)), (10, 30));
        assert_eq!(s.acked_names().unwrap(), ["a", "b"]);
        let times: Vec<i64> =
            s.db.prepare("SELECT done_ns FROM items ORDER BY id")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
        assert_eq!(times, [111, 222]);
        assert!(done.iter().all(|d| !d.item.path.exists()));
        // Taking left the catalog fully synchronous for what follows.
        let sync: i64 =
            s.db.query_row("PRAGMA synchronous", [], |r| r.get(0))
                .unwrap();
        assert_eq!(sync, 2, "synchronous=FULL");
    }

    #[test]
    fn a_row_whose_file_is_gone_is_dropped_not_retried_for_ever() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        put(&mut s, "gone", Class::Telemetry, 10);
        put(&mut s, "here", Class::Telemetry, 10);
        // What a full disk leaves when the drop's record fails.
        std::fs::remove_file(dir.path().join("segments/telemetry/gone")).unwrap();
        let it = take_backlog(&mut s).unwrap();
        assert_eq!(it.name, "here");
        assert!(take_backlog(&mut s).is_none());
        assert_eq!(s.status().unwrap()[1].dropped, 1);
    }

    #[test]
    fn a_segment_the_catalog_did_not_take_goes_back_to_tmp() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        put(&mut s, "a", Class::Telemetry, 10);
        // A name already queued is not overwritten.
        let tmp = s.tmp_path("y");
        std::fs::write(&tmp, b"again").unwrap();
        let e = s.add(&tmp, "a", Class::Telemetry, 5).unwrap_err();
        assert!(!e.disk_full, "{}", e.message);
        assert_eq!(std::fs::read(&tmp).unwrap(), b"again");
        let a = dir.path().join("segments/telemetry/a");
        assert_eq!(std::fs::read(&a).unwrap(), vec![0u8; 10]);
        // The catalog refuses the row (here: the name was acknowledged
        // before; on a full disk, SQLITE_FULL). The file must not stay in
        // segments/, where the next start would adopt it while the caller
        // queues the same data again.
        let it = take_backlog(&mut s).unwrap();
        s.acked(&it, "wifi", 0).unwrap();
        let e = s.add(&tmp, "a", Class::Telemetry, 5).unwrap_err();
        assert!(e.message.starts_with("spool catalog:"), "{}", e.message);
        assert_eq!(std::fs::read(&tmp).unwrap(), b"again");
        assert!(!a.exists());
    }

    #[test]
    fn shedding_for_a_full_disk_drops_one_segment_and_refuses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        put(&mut s, "e", Class::Events, 10);
        put(&mut s, "t1", Class::Telemetry, 10);
        put(&mut s, "b1", Class::Bulk, 10);
        let d = s.shed_one(Class::Telemetry).unwrap();
        assert_eq!(d, ("b1".to_string(), Class::Bulk, 10));
        assert_eq!(s.shed_one(Class::Events).unwrap().0, "t1");
        assert_eq!(s.shed_one(Class::Telemetry), None, "never an event");
        let st = s.status().unwrap();
        assert_eq!((st[0].queued, st[1].dropped, st[3].dropped), (1, 1, 1));
        assert!(st.iter().all(|c| c.refused == 0));
    }

    #[test]
    fn after_an_outage_the_live_lane_takes_the_newest_and_the_backlog_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        // Segments made while offline, then the first one back online.
        for i in 0..5 {
            put(&mut s, &format!("t{i}"), Class::Telemetry, 1);
        }
        let now = handed_off();
        let name = |item: Option<Item>| item.map(|i| i.name);
        assert_eq!(
            name(s.take(Lane::Live, &Class::ALL, now).unwrap()).as_deref(),
            Some("t4")
        );
        assert_eq!(
            name(s.take(Lane::Backlog, &Class::ALL, now).unwrap()).as_deref(),
            Some("t0")
        );
        put(&mut s, "t5", Class::Telemetry, 1);
        assert_eq!(
            name(s.take(Lane::Live, &Class::ALL, now).unwrap()).as_deref(),
            Some("t5")
        );
        // An event still goes before any telemetry.
        put(&mut s, "e0", Class::Events, 1);
        assert_eq!(
            name(s.take(Lane::Live, &Class::ALL, now).unwrap()).as_deref(),
            Some("e0")
        );
        assert_eq!(
            name(s.take(Lane::Live, &Class::ALL, now).unwrap()).as_deref(),
            Some("t3")
        );
    }

    #[test]
    fn the_backlog_lane_leaves_new_events_and_telemetry_to_the_live_lane_until_their_hand_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        put(&mut s, "event", Class::Events, 1);
        put(&mut s, "tele", Class::Telemetry, 1);
        put(&mut s, "bulk", Class::Bulk, 1);
        let now = convoy_telemetry::now_ns();
        let name = |item: Option<Item>| item.map(|i| i.name);
        // New: the backlog lane goes on with its bulk, not the samples.
        assert_eq!(
            name(s.take(Lane::Backlog, &Class::ALL, now).unwrap()).as_deref(),
            Some("bulk")
        );
        assert_eq!(name(s.take(Lane::Backlog, &Class::ALL, now).unwrap()), None);
        // Just before the hand-off, still not...
        let edge = now + LIVE_HANDOFF_NS - 1_000_000_000;
        assert_eq!(
            name(s.take(Lane::Backlog, &Class::ALL, edge).unwrap()),
            None
        );
        // ...after it (a live lane that did not take them), oldest first.
        let later = now + LIVE_HANDOFF_NS + 1;
        assert_eq!(
            name(s.take(Lane::Backlog, &Class::ALL, later).unwrap()).as_deref(),
            Some("event")
        );
        assert_eq!(
            name(s.take(Lane::Backlog, &Class::ALL, later).unwrap()).as_deref(),
            Some("tele")
        );
    }

    #[test]
    fn the_live_lane_takes_only_recent_events_and_telemetry() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        put(&mut s, "bulk", Class::Bulk, 1);
        put(&mut s, "tele", Class::Telemetry, 1);
        let now = convoy_telemetry::now_ns();
        assert_eq!(
            s.take(Lane::Live, &Class::ALL, now).unwrap().unwrap().name,
            "tele"
        );
        assert!(s.take(Lane::Live, &Class::ALL, now).unwrap().is_none());
        assert!(s
            .take(Lane::Live, &Class::ALL, now + 2 * LIVE_WINDOW_NS)
            .unwrap()
            .is_none());
        assert_eq!(
            s.take(Lane::Backlog, &[Class::Bulk], now)
                .unwrap()
                .unwrap()
                .name,
            "bulk"
        );
    }
}

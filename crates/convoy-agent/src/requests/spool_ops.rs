//! What upload requests do to the spool: put named segments, or those
//! made in a time range, ahead of every lower priority, and tell which of
//! them the vehicle no longer has and why. A requested segment is also
//! **preserved**: like an event, the overflow rule never drops it before
//! it is uploaded (`prio IS NOT NULL` is left out of what may be dropped).

use rusqlite::{params, Connection, OptionalExtension};

use crate::policy::Class;
use crate::spool::Spool;

/// Adds the `prio` column to a spool made before requests existed.
pub(crate) fn migrate(db: &Connection) -> rusqlite::Result<()> {
    let has: bool = db
        .prepare("SELECT 1 FROM pragma_table_info('items') WHERE name = 'prio'")?
        .exists([])?;
    if !has {
        // NULL: the segment goes by its class, as before.
        db.execute("ALTER TABLE items ADD COLUMN prio INTEGER", [])?;
    }
    Ok(())
}

/// What an upload request found in the spool.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Boosted {
    /// Spool rows now sent at the request's priority.
    pub ids: Vec<i64>,
    pub bytes: u64,
    /// Names asked for that the vehicle no longer has, each with why.
    pub missing: Vec<String>,
}

/// Where a boosted segment stands.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct BoostProgress {
    pub waiting: u64,
    pub uploaded: u64,
    pub uploaded_bytes: u64,
    /// Dropped since (by the overflow rule or a missing file).
    pub dropped: u64,
}

impl Spool {
    /// Puts the waiting segments named in `files`, or made (closed) in
    /// `[from_ns, to_ns)`, at `class`'s priority (never lower than their
    /// own). `Err` when nothing asked for is still waiting: the reason
    /// names what happened to it.
    pub fn boost(
        &mut self,
        files: &[String],
        range: Option<(i64, i64)>,
        class: Class,
    ) -> Result<Boosted, String> {
        let mut out = Boosted::default();
        let db = &self.db;
        let e = |e: rusqlite::Error| format!("spool catalog: {e}");
        let mark = |id: i64, bytes: i64, out: &mut Boosted| -> Result<(), String> {
            db.execute(
                "UPDATE items SET prio = MIN(COALESCE(prio, class), ?2) WHERE id = ?1",
                params![id, class as i64],
            )
            .map_err(e)?;
            out.ids.push(id);
            out.bytes += bytes as u64;
            Ok(())
        };
        for name in files {
            let row: Option<(i64, i64, String, Option<i64>)> = db
                .query_row(
                    "SELECT id, bytes, state, done_ns FROM items WHERE name = ?1",
                    [name],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .optional()
                .map_err(e)?;
            match row {
                Some((id, bytes, state, _)) if state == "queued" || state == "uploading" => {
                    mark(id, bytes, &mut out)?
                }
                Some((_, _, state, done)) if state == "acked" => out.missing.push(format!(
                    "{name}: already uploaded (acknowledged by the server at {} ns) and deleted here",
                    done.unwrap_or(0)
                )),
                Some((_, _, state, _)) => out.missing.push(format!(
                    "{name}: {state} by the overflow rule before it was uploaded"
                )),
                None => out.missing.push(format!("{name}: not in this vehicle's spool")),
            }
        }
        if let Some((from, to)) = range {
            let mut st = db
                .prepare(
                    "SELECT id, bytes FROM items WHERE state IN ('queued', 'uploading')
                     AND created_ns >= ?1 AND created_ns < ?2 ORDER BY id",
                )
                .map_err(e)?;
            let rows: Vec<(i64, i64)> = st
                .query_map(params![from, to], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(e)?
                .collect::<rusqlite::Result<_>>()
                .map_err(e)?;
            drop(st);
            if rows.is_empty() {
                let (gone, dropped): (i64, i64) = db
                    .query_row(
                        "SELECT COALESCE(SUM(state = 'acked'), 0), COALESCE(SUM(state = 'dropped'), 0)
                         FROM items WHERE created_ns >= ?1 AND created_ns < ?2",
                        params![from, to],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .map_err(e)?;
                out.missing.push(format!(
                    "nothing waiting from {from} to {to} ns: {gone} segments of that span \
                     already uploaded and deleted here, {dropped} dropped by the overflow rule"
                ));
            }
            for (id, bytes) in rows {
                if !out.ids.contains(&id) {
                    mark(id, bytes, &mut out)?;
                }
            }
        }
        if out.ids.is_empty() {
            return Err(format!(
                "the vehicle no longer has the data asked for: {}",
                out.missing.join("; ")
            ));
        }
        Ok(out)
    }

    /// Segments preserved by a request and not yet uploaded: how many,
    /// and their bytes (0 for a spool made before requests existed).
    pub fn preserved(&self) -> (u64, u64) {
        self.db
            .query_row(
                "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM items
                 WHERE state IN ('queued', 'uploading') AND prio IS NOT NULL",
                [],
                |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
            )
            .unwrap_or((0, 0))
    }

    /// Where the segments `ids` stand now.
    pub fn boost_progress(&self, ids: &[i64]) -> rusqlite::Result<BoostProgress> {
        let mut p = BoostProgress::default();
        let mut st = self
            .db
            .prepare_cached("SELECT state, bytes FROM items WHERE id = ?1")?;
        for id in ids {
            let row: Option<(String, i64)> = st
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            match row.as_ref().map(|(s, b)| (s.as_str(), *b)) {
                Some(("acked", b)) => {
                    p.uploaded += 1;
                    p.uploaded_bytes += b as u64;
                }
                Some(("queued" | "uploading", _)) => p.waiting += 1,
                _ => p.dropped += 1,
            }
        }
        Ok(p)
    }
}

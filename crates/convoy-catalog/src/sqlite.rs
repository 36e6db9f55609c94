//! The catalog in one SQLite file (WAL, `synchronous=FULL`, so a
//! committed row survives power loss as the uploads it describes do).

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::{
    campaign_row, merge_values, request_transition, CampaignRow, Catalog, CatalogError, Finished,
    IndexOutcome, LastState, NewSegment, RequestEvent, RequestRow, Result, SegmentRow, TrackPoint,
    VehicleRow, BUMP_VERSION, CAMPAIGN_COLUMNS, CLAIM_TIMEOUT_NS, REQUEST_COLUMNS, SEGMENT_COLUMNS,
    TRACK_BUCKET_NS,
};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS vehicles (
    name TEXT PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL,
    added_ns INTEGER NOT NULL,
    revoked_ns INTEGER
);
CREATE TABLE IF NOT EXISTS segments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    vehicle TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    blake3 TEXT NOT NULL,
    stored_ns INTEGER NOT NULL,
    state TEXT NOT NULL,
    error TEXT,
    samples INTEGER NOT NULL DEFAULT 0,
    t_first INTEGER,
    t_last INTEGER,
    object TEXT NOT NULL,
    parquet TEXT,
    claimed_ns INTEGER,
    indexed_ns INTEGER,
    UNIQUE (vehicle, name)
);
CREATE INDEX IF NOT EXISTS segments_state ON segments (state, id);
CREATE INDEX IF NOT EXISTS segments_stored ON segments (stored_ns);
CREATE TABLE IF NOT EXISTS last_state (
    vehicle TEXT PRIMARY KEY,
    t_ns INTEGER NOT NULL,
    lat REAL NOT NULL,
    lon REAL NOT NULL,
    speed REAL,
    vals TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS track (
    vehicle TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    t_ns INTEGER NOT NULL,
    lat REAL NOT NULL,
    lon REAL NOT NULL,
    speed REAL,
    PRIMARY KEY (vehicle, bucket)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    vehicle TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    issuer TEXT NOT NULL,
    state TEXT NOT NULL,
    created_ns INTEGER NOT NULL,
    acked_ns INTEGER,
    finished_ns INTEGER,
    progress TEXT,
    result TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS requests_open ON requests (vehicle, state);
CREATE TABLE IF NOT EXISTS campaigns (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    body TEXT NOT NULL,
    vehicles TEXT NOT NULL,
    issuer TEXT NOT NULL,
    created_ns INTEGER NOT NULL,
    requests TEXT NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE TABLE IF NOT EXISTS vehicle_signals (
    vehicle TEXT PRIMARY KEY,
    signals TEXT NOT NULL,
    reported_ns INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS catalog_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    v INTEGER NOT NULL
);
INSERT OR IGNORE INTO catalog_version (id, v) VALUES (1, 0);
";

pub struct SqliteCatalog {
    db: Connection,
}

fn vehicle_row(r: &Row<'_>) -> rusqlite::Result<VehicleRow> {
    Ok(VehicleRow {
        name: r.get(0)?,
        key: r.get(1)?,
        role: r.get(2)?,
        added_ns: r.get(3)?,
        revoked_ns: r.get(4)?,
    })
}

fn request_row(r: &Row<'_>) -> rusqlite::Result<RequestRow> {
    Ok(RequestRow {
        id: r.get(0)?,
        vehicle: r.get(1)?,
        kind: r.get(2)?,
        body: r.get(3)?,
        issuer: r.get(4)?,
        state: r.get(5)?,
        created_ns: r.get(6)?,
        acked_ns: r.get(7)?,
        finished_ns: r.get(8)?,
        progress: r.get(9)?,
        result: r.get(10)?,
        error: r.get(11)?,
    })
}

fn segment_row(r: &Row<'_>) -> rusqlite::Result<SegmentRow> {
    Ok(SegmentRow {
        id: r.get(0)?,
        vehicle: r.get(1)?,
        name: r.get(2)?,
        kind: r.get(3)?,
        bytes: r.get(4)?,
        blake3: r.get(5)?,
        stored_ns: r.get(6)?,
        state: r.get(7)?,
        error: r.get(8)?,
        samples: r.get(9)?,
        t_first: r.get(10)?,
        t_last: r.get(11)?,
        object: r.get(12)?,
        parquet: r.get(13)?,
        indexed_ns: r.get(14)?,
    })
}

impl SqliteCatalog {
    /// Opens (creating if needed) the catalog file.
    pub fn open(path: &Path) -> Result<SqliteCatalog> {
        let db = Connection::open(path)?;
        db.busy_timeout(std::time::Duration::from_secs(10))?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "FULL")?;
        db.execute_batch(SCHEMA)?;
        // Catalogs made before withdrawals existed lack the column.
        let has: bool = db
            .prepare("SELECT 1 FROM pragma_table_info('campaigns') WHERE name = 'withdrawn'")?
            .exists([])?;
        if !has {
            db.execute_batch(
                "ALTER TABLE campaigns ADD COLUMN withdrawn INTEGER NOT NULL DEFAULT 0",
            )?;
        }
        Ok(SqliteCatalog { db })
    }

    /// A transaction that reads, then writes. Taking the write lock at
    /// BEGIN (IMMEDIATE) makes it wait out other writers (the commit
    /// hook's connection) under the busy timeout: a deferred one that
    /// read first fails at once with "database is locked" when another
    /// connection wrote in between, which left the indexer's claim to
    /// time out (60 s) before the segment was indexed.
    ///
    /// Every writing transaction raises the catalog's version first
    /// ([`Catalog::version`]); one that ends in an error is rolled back
    /// when dropped, its raise with it.
    fn write_tx(&mut self) -> rusqlite::Result<rusqlite::Transaction<'_>> {
        let tx = self
            .db
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(BUMP_VERSION, [])?;
        Ok(tx)
    }
}

/// Applies one indexed segment inside the batch's transaction.
fn apply_indexed(tx: &Connection, id: i64, out: &IndexOutcome, now_ns: i64) -> Result<()> {
    let vehicle: String =
        tx.query_row("SELECT vehicle FROM segments WHERE id = ?1", [id], |r| {
            r.get(0)
        })?;
    tx.prepare_cached(
        "UPDATE segments SET state = 'indexed', error = NULL, samples = ?2, t_first = ?3,
           t_last = ?4, object = ?5, parquet = ?6, indexed_ns = ?7 WHERE id = ?1",
    )?
    .execute(params![
        id,
        out.samples,
        out.t_first,
        out.t_last,
        out.object,
        out.parquet,
        now_ns
    ])?;
    if let Some(last) = &out.last {
        let old: Option<(i64, String)> = tx
            .prepare_cached("SELECT t_ns, vals FROM last_state WHERE vehicle = ?1")?
            .query_row([&vehicle], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let newer = old.as_ref().is_none_or(|(t, _)| last.t_ns >= *t);
        if newer {
            let vals = match &old {
                Some((_, v)) => merge_values(v, &last.values),
                None => last.values.clone(),
            };
            tx.prepare_cached(
                "INSERT INTO last_state (vehicle, t_ns, lat, lon, speed, vals)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (vehicle) DO UPDATE SET t_ns = excluded.t_ns, lat = excluded.lat,
                   lon = excluded.lon, speed = excluded.speed, vals = excluded.vals",
            )?
            .execute(params![
                vehicle, last.t_ns, last.lat, last.lon, last.speed, vals
            ])?;
        }
    }
    let mut st = tx.prepare_cached(
        "INSERT INTO track (vehicle, bucket, t_ns, lat, lon, speed)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
    )?;
    for p in &out.track {
        st.execute(params![
            vehicle,
            p.t_ns.div_euclid(TRACK_BUCKET_NS),
            p.t_ns,
            p.lat,
            p.lon,
            p.speed
        ])?;
    }
    Ok(())
}

impl Catalog for SqliteCatalog {
    fn add_vehicle(&mut self, name: &str, key: &str, role: &str, now_ns: i64) -> Result<()> {
        let tx = self.write_tx()?;
        let taken: Option<String> = tx
            .query_row(
                "SELECT name FROM vehicles WHERE name = ?1 OR key = ?2",
                params![name, key],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(other) = taken {
            return Err(CatalogError::Conflict(if other == name {
                format!("a vehicle named {name:?} is already registered")
            } else {
                format!("this key is already registered as {other:?}")
            }));
        }
        tx.execute(
            "INSERT INTO vehicles (name, key, role, added_ns) VALUES (?1, ?2, ?3, ?4)",
            params![name, key, role, now_ns],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn revoke_vehicle(&mut self, name: &str, now_ns: i64) -> Result<()> {
        let tx = self.write_tx()?;
        let n = tx.execute(
            "UPDATE vehicles SET revoked_ns = COALESCE(revoked_ns, ?2) WHERE name = ?1",
            params![name, now_ns],
        )?;
        if n == 0 {
            return Err(CatalogError::NotFound(format!(
                "no vehicle named {name:?} in the registry"
            )));
        }
        tx.commit()?;
        Ok(())
    }

    fn vehicles(&mut self) -> Result<Vec<VehicleRow>> {
        let mut st = self.db.prepare_cached(
            "SELECT name, key, role, added_ns, revoked_ns FROM vehicles ORDER BY name",
        )?;
        let rows = st.query_map([], vehicle_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn vehicle_by_key(&mut self, key: &str) -> Result<Option<VehicleRow>> {
        let mut st = self.db.prepare_cached(
            "SELECT name, key, role, added_ns, revoked_ns FROM vehicles WHERE key = ?1",
        )?;
        Ok(st.query_row([key], vehicle_row).optional()?)
    }

    fn vehicle_by_name(&mut self, name: &str) -> Result<Option<VehicleRow>> {
        let mut st = self.db.prepare_cached(
            "SELECT name, key, role, added_ns, revoked_ns FROM vehicles WHERE name = ?1",
        )?;
        Ok(st.query_row([name], vehicle_row).optional()?)
    }

    fn queue_segments(&mut self, segs: &[NewSegment<'_>]) -> Result<()> {
        if segs.is_empty() {
            return Ok(());
        }
        let tx = self.write_tx()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT INTO segments (vehicle, name, kind, bytes, blake3, stored_ns, state, object)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7)
                 ON CONFLICT (vehicle, name) DO UPDATE SET
                   kind = excluded.kind, bytes = excluded.bytes, stored_ns = excluded.stored_ns,
                   object = excluded.object, state = 'pending', error = NULL, claimed_ns = NULL,
                   blake3 = excluded.blake3
                 WHERE segments.blake3 <> excluded.blake3 OR segments.state = 'failed'",
            )?;
            for s in segs {
                st.execute(params![
                    s.vehicle,
                    s.name,
                    s.kind,
                    s.bytes,
                    s.blake3,
                    s.stored_ns,
                    s.object
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn claim_pending(&mut self, limit: usize, now_ns: i64) -> Result<Vec<SegmentRow>> {
        let tx = self.write_tx()?;
        let rows = {
            let mut st = tx.prepare_cached(&format!(
                "SELECT {SEGMENT_COLUMNS} FROM segments
                 WHERE state = 'pending' OR (state = 'indexing' AND claimed_ns < ?1)
                 ORDER BY id LIMIT ?2"
            ))?;
            let rows = st.query_map(
                params![now_ns - CLAIM_TIMEOUT_NS, limit as i64],
                segment_row,
            )?;
            rows.collect::<rusqlite::Result<Vec<_>>>()?
        };
        for r in &rows {
            tx.execute(
                "UPDATE segments SET state = 'indexing', claimed_ns = ?2 WHERE id = ?1",
                params![r.id, now_ns],
            )?;
        }
        // Nothing claimed changes nothing, the version included (an idle
        // indexer polls).
        if rows.is_empty() {
            tx.rollback()?;
        } else {
            tx.commit()?;
        }
        Ok(rows
            .into_iter()
            .map(|mut r| {
                r.state = "indexing".into();
                r
            })
            .collect())
    }

    fn release_claims(&mut self) -> Result<u64> {
        let tx = self.write_tx()?;
        let n = tx.execute(
            "UPDATE segments SET state = 'pending', claimed_ns = NULL WHERE state = 'indexing'",
            [],
        )?;
        tx.commit()?;
        Ok(n as u64)
    }

    fn finish_batch(&mut self, done: &[(i64, Finished)], now_ns: i64) -> Result<()> {
        if done.is_empty() {
            return Ok(());
        }
        let tx = self.write_tx()?;
        for (id, how) in done {
            match how {
                Finished::Indexed(out) => apply_indexed(&tx, *id, out, now_ns)?,
                Finished::Failed(error) => {
                    tx.prepare_cached(
                        "UPDATE segments SET state = 'failed', error = ?2, indexed_ns = ?3
                         WHERE id = ?1",
                    )?
                    .execute(params![id, error, now_ns])?;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn segments(&mut self, vehicle: Option<&str>, limit: usize) -> Result<Vec<SegmentRow>> {
        let mut st = self.db.prepare_cached(&format!(
            "SELECT {SEGMENT_COLUMNS} FROM segments WHERE ?1 IS NULL OR vehicle = ?1
             ORDER BY stored_ns DESC, id DESC LIMIT ?2"
        ))?;
        let rows = st.query_map(params![vehicle, limit as i64], segment_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn segment(&mut self, vehicle: &str, name: &str) -> Result<Option<SegmentRow>> {
        let mut st = self.db.prepare_cached(&format!(
            "SELECT {SEGMENT_COLUMNS} FROM segments WHERE vehicle = ?1 AND name = ?2"
        ))?;
        Ok(st
            .query_row(params![vehicle, name], segment_row)
            .optional()?)
    }

    fn pending_count(&mut self) -> Result<i64> {
        Ok(self.db.query_row(
            "SELECT COUNT(*) FROM segments WHERE state IN ('pending', 'indexing')",
            [],
            |r| r.get(0),
        )?)
    }

    fn oldest_pending_ns(&mut self) -> Result<Option<i64>> {
        Ok(self.db.query_row(
            "SELECT MIN(stored_ns) FROM segments WHERE state IN ('pending', 'indexing')",
            [],
            |r| r.get(0),
        )?)
    }

    fn last_states(&mut self) -> Result<Vec<LastState>> {
        let mut st = self.db.prepare_cached(
            "SELECT vehicle, t_ns, lat, lon, speed, vals FROM last_state ORDER BY vehicle",
        )?;
        let rows = st.query_map([], |r| {
            Ok(LastState {
                vehicle: r.get(0)?,
                t_ns: r.get(1)?,
                lat: r.get(2)?,
                lon: r.get(3)?,
                speed: r.get(4)?,
                values: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn track(&mut self, vehicle: &str, from_ns: i64, to_ns: i64) -> Result<Vec<TrackPoint>> {
        let mut st = self.db.prepare_cached(
            "SELECT t_ns, lat, lon, speed FROM track
             WHERE vehicle = ?1 AND bucket >= ?2 AND bucket <= ?3 ORDER BY bucket",
        )?;
        let rows = st.query_map(
            params![
                vehicle,
                from_ns.div_euclid(TRACK_BUCKET_NS),
                to_ns.div_euclid(TRACK_BUCKET_NS)
            ],
            |r| {
                Ok(TrackPoint {
                    t_ns: r.get(0)?,
                    lat: r.get(1)?,
                    lon: r.get(2)?,
                    speed: r.get(3)?,
                })
            },
        )?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn version(&mut self) -> Result<i64> {
        Ok(self
            .db
            .prepare_cached("SELECT v FROM catalog_version WHERE id = 1")?
            .query_row([], |r| r.get(0))?)
    }

    fn add_request(
        &mut self,
        vehicle: &str,
        kind: &str,
        body: &str,
        issuer: &str,
        now_ns: i64,
    ) -> Result<RequestRow> {
        let tx = self.write_tx()?;
        let ok: Option<i64> = tx
            .query_row(
                "SELECT 1 FROM vehicles WHERE name = ?1 AND role = 'vehicle' AND revoked_ns IS NULL",
                [vehicle],
                |r| r.get(0),
            )
            .optional()?;
        if ok.is_none() {
            return Err(CatalogError::NotFound(format!(
                "no vehicle named {vehicle:?} in the registry (or it is revoked)"
            )));
        }
        tx.execute(
            "INSERT INTO requests (vehicle, kind, body, issuer, state, created_ns)
             VALUES (?1, ?2, ?3, ?4, 'queued', ?5)",
            params![vehicle, kind, body, issuer, now_ns],
        )?;
        let id = tx.last_insert_rowid();
        let row = tx.query_row(
            &format!("SELECT {REQUEST_COLUMNS} FROM requests WHERE id = ?1"),
            [id],
            request_row,
        )?;
        tx.commit()?;
        Ok(row)
    }

    fn add_campaign(
        &mut self,
        name: &str,
        body: &str,
        withdrawn: bool,
        vehicles: &[String],
        issuer: &str,
        now_ns: i64,
        request: &dyn Fn(i64) -> String,
    ) -> Result<CampaignRow> {
        let kind = if withdrawn { "withdraw" } else { "campaign" };
        let tx = self.write_tx()?;
        let version: i64 = tx.query_row(
            "SELECT COALESCE(MAX(version), 0) + 1 FROM campaigns WHERE name = ?1",
            [name],
            |r| r.get(0),
        )?;
        let req = request(version);
        let mut ids = Vec::new();
        for v in vehicles {
            let ok: Option<i64> = tx
                .query_row(
                    "SELECT 1 FROM vehicles WHERE name = ?1 AND role = 'vehicle' AND revoked_ns IS NULL",
                    [v],
                    |r| r.get(0),
                )
                .optional()?;
            if ok.is_none() {
                return Err(CatalogError::NotFound(format!(
                    "no vehicle named {v:?} in the registry (or it is revoked)"
                )));
            }
            tx.execute(
                "INSERT INTO requests (vehicle, kind, body, issuer, state, created_ns)
                 VALUES (?1, ?5, ?2, ?3, 'queued', ?4)",
                params![v, req, issuer, now_ns, kind],
            )?;
            ids.push(tx.last_insert_rowid());
        }
        let (vs, is) = (
            serde_json::to_string(vehicles).unwrap_or_default(),
            serde_json::to_string(&ids).unwrap_or_default(),
        );
        tx.execute(
            "INSERT INTO campaigns (name, version, body, vehicles, issuer, created_ns, requests, withdrawn)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![name, version, body, vs, issuer, now_ns, is, withdrawn],
        )?;
        tx.commit()?;
        Ok(campaign_row(
            name.into(),
            version,
            body.into(),
            &vs,
            issuer.into(),
            now_ns,
            &is,
            withdrawn,
        ))
    }

    fn campaigns(&mut self, name: Option<&str>, limit: usize) -> Result<Vec<CampaignRow>> {
        let mut st = self.db.prepare_cached(&format!(
            "SELECT {CAMPAIGN_COLUMNS} FROM campaigns
             WHERE ?1 IS NULL OR name = ?1 ORDER BY created_ns DESC, name, version DESC LIMIT ?2"
        ))?;
        let rows = st.query_map(params![name, limit as i64], |r| {
            Ok(campaign_row(
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                &r.get::<_, String>(3)?,
                r.get(4)?,
                r.get(5)?,
                &r.get::<_, String>(6)?,
                r.get(7)?,
            ))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn set_vehicle_signals(
        &mut self,
        vehicle: &str,
        signals: &[String],
        now_ns: i64,
    ) -> Result<()> {
        let list = serde_json::to_string(signals).unwrap_or_default();
        self.db.execute(
            "INSERT INTO vehicle_signals (vehicle, signals, reported_ns) VALUES (?1, ?2, ?3)
             ON CONFLICT (vehicle) DO UPDATE SET signals = ?2, reported_ns = ?3",
            params![vehicle, list, now_ns],
        )?;
        Ok(())
    }

    fn vehicle_signals(&mut self, vehicle: &str) -> Result<Vec<String>> {
        let list: Option<String> = self
            .db
            .query_row(
                "SELECT signals FROM vehicle_signals WHERE vehicle = ?1",
                [vehicle],
                |r| r.get(0),
            )
            .optional()?;
        Ok(list
            .and_then(|l| serde_json::from_str(&l).ok())
            .unwrap_or_default())
    }

    fn open_requests(&mut self, vehicle: &str) -> Result<Vec<RequestRow>> {
        let mut st = self.db.prepare_cached(&format!(
            "SELECT {REQUEST_COLUMNS} FROM requests
             WHERE vehicle = ?1 AND state IN ('queued', 'acked', 'running') ORDER BY id"
        ))?;
        let rows = st.query_map([vehicle], request_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn request_event(
        &mut self,
        vehicle: &str,
        id: i64,
        ev: &RequestEvent,
        now_ns: i64,
    ) -> Result<bool> {
        let tx = self.write_tx()?;
        let state: Option<String> = tx
            .query_row(
                "SELECT state FROM requests WHERE id = ?1 AND vehicle = ?2",
                params![id, vehicle],
                |r| r.get(0),
            )
            .optional()?;
        let Some(state) = state else {
            return Ok(false);
        };
        if let Some(next) = request_transition(&state, ev) {
            let (progress, result, error) = match ev {
                RequestEvent::Ack => (None, None, None),
                RequestEvent::Progress(p) => (Some(p.as_str()), None, None),
                RequestEvent::Done(r) => (None, Some(r.as_str()), None),
                RequestEvent::Failed(e) => (None, None, Some(e.as_str())),
            };
            let finished = matches!(ev, RequestEvent::Done(_) | RequestEvent::Failed(_));
            tx.execute(
                "UPDATE requests SET state = ?2,
                    acked_ns = COALESCE(acked_ns, ?3),
                    finished_ns = CASE WHEN ?4 THEN ?3 ELSE finished_ns END,
                    progress = COALESCE(?5, progress),
                    result = COALESCE(?6, result),
                    error = COALESCE(?7, error)
                 WHERE id = ?1",
                params![id, next, now_ns, finished, progress, result, error],
            )?;
            tx.commit()?;
        }
        // Otherwise nothing changed: the transaction, and the version's
        // raise, are rolled back as it is dropped.
        Ok(true)
    }

    fn requests(&mut self, vehicle: Option<&str>, limit: usize) -> Result<Vec<RequestRow>> {
        let mut st = self.db.prepare_cached(&format!(
            "SELECT {REQUEST_COLUMNS} FROM requests
             WHERE ?1 IS NULL OR vehicle = ?1 ORDER BY id DESC LIMIT ?2"
        ))?;
        let rows = st.query_map(params![vehicle, limit as i64], request_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn queued_after(&mut self, after: i64, limit: usize) -> Result<Vec<RequestRow>> {
        let mut st = self.db.prepare_cached(&format!(
            "SELECT {REQUEST_COLUMNS} FROM requests
             WHERE id > ?1 AND state = 'queued' ORDER BY id LIMIT ?2"
        ))?;
        let rows = st.query_map(params![after, limit as i64], request_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

//! The catalog in PostgreSQL, shared by several servers: the same tables
//! as SQLite; segments are claimed with `FOR UPDATE SKIP LOCKED`, so two
//! indexers never take the same one, and a claim whose indexer died is
//! taken again after [`CLAIM_TIMEOUT_NS`].

use ::postgres::{Client, NoTls, Row};

use crate::{
    campaign_row, merge_values, request_transition, CampaignRow, Catalog, CatalogError, Finished,
    IndexOutcome, LastState, NewSegment, RequestEvent, RequestRow, Result, SegmentRow, TrackPoint,
    VehicleRow, BUMP_VERSION, CAMPAIGN_COLUMNS, CLAIM_TIMEOUT_NS, REQUEST_COLUMNS, SEGMENT_COLUMNS,
    TRACK_BUCKET_NS,
};
use ::postgres::Transaction;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS vehicles (
    name TEXT PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL,
    added_ns BIGINT NOT NULL,
    revoked_ns BIGINT
);
CREATE TABLE IF NOT EXISTS segments (
    id BIGSERIAL PRIMARY KEY,
    vehicle TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    blake3 TEXT NOT NULL,
    stored_ns BIGINT NOT NULL,
    state TEXT NOT NULL,
    error TEXT,
    samples BIGINT NOT NULL DEFAULT 0,
    t_first BIGINT,
    t_last BIGINT,
    object TEXT NOT NULL,
    parquet TEXT,
    claimed_ns BIGINT,
    indexed_ns BIGINT,
    UNIQUE (vehicle, name)
);
CREATE INDEX IF NOT EXISTS segments_state ON segments (state, id);
CREATE INDEX IF NOT EXISTS segments_stored ON segments (stored_ns);
CREATE TABLE IF NOT EXISTS last_state (
    vehicle TEXT PRIMARY KEY,
    t_ns BIGINT NOT NULL,
    lat DOUBLE PRECISION NOT NULL,
    lon DOUBLE PRECISION NOT NULL,
    speed DOUBLE PRECISION,
    vals TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS track (
    vehicle TEXT NOT NULL,
    bucket BIGINT NOT NULL,
    t_ns BIGINT NOT NULL,
    lat DOUBLE PRECISION NOT NULL,
    lon DOUBLE PRECISION NOT NULL,
    speed DOUBLE PRECISION,
    PRIMARY KEY (vehicle, bucket)
);
CREATE TABLE IF NOT EXISTS requests (
    id BIGSERIAL PRIMARY KEY,
    vehicle TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    issuer TEXT NOT NULL,
    state TEXT NOT NULL,
    created_ns BIGINT NOT NULL,
    acked_ns BIGINT,
    finished_ns BIGINT,
    progress TEXT,
    result TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS requests_open ON requests (vehicle, state);
CREATE TABLE IF NOT EXISTS campaigns (
    name TEXT NOT NULL,
    version BIGINT NOT NULL,
    body TEXT NOT NULL,
    vehicles TEXT NOT NULL,
    issuer TEXT NOT NULL,
    created_ns BIGINT NOT NULL,
    requests TEXT NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE TABLE IF NOT EXISTS vehicle_signals (
    vehicle TEXT PRIMARY KEY,
    signals TEXT NOT NULL,
    reported_ns BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS catalog_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    v BIGINT NOT NULL
);
INSERT INTO catalog_version (id, v) VALUES (1, 0) ON CONFLICT DO NOTHING;
";

/// The tables and indexes `SCHEMA` creates, by name.
fn schema_objects() -> impl Iterator<Item = &'static str> {
    SCHEMA.lines().filter_map(|l| {
        let rest = l
            .strip_prefix("CREATE TABLE IF NOT EXISTS ")
            .or_else(|| l.strip_prefix("CREATE INDEX IF NOT EXISTS "))?;
        rest.split_whitespace().next()
    })
}

/// Whether every table, index and column the schema makes is there, read
/// without taking a lock. The schema's statements lock the tables they
/// name even when there is nothing to create (an index's table in share
/// mode, an altered table exclusively), and inside one transaction a
/// server starting beside busy ones deadlocked: it held `segments` while
/// waiting for the version row a writer had raised, and the writer waited
/// for `segments` (PostgreSQL aborted one, and `convoy fleet add` or the
/// server failed).
fn schema_current(db: &mut Client) -> Result<bool> {
    for name in schema_objects() {
        let found: bool = db
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&name])?
            .get(0);
        if !found {
            return Ok(false);
        }
    }
    let column = db.query_opt(
        "SELECT 1 FROM information_schema.columns \
         WHERE table_name = 'campaigns' AND column_name = 'withdrawn'",
        &[],
    )?;
    let version = db.query_opt("SELECT 1 FROM catalog_version WHERE id = 1", &[])?;
    Ok(column.is_some() && version.is_some())
}

/// Creates what is missing. Several servers may start at once: one
/// creates the schema, the others wait for it (and, should a writer
/// already be at work, PostgreSQL may still pick this transaction to
/// abort as a deadlock: it is tried again).
fn create_schema(db: &mut Client) -> Result<()> {
    let mut attempt = 0;
    loop {
        let result = (|| {
            let mut tx = db.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock(7315)", &[])?;
            tx.batch_execute(SCHEMA)?;
            // Catalogs made before withdrawals existed lack the column.
            tx.batch_execute(
                "ALTER TABLE campaigns ADD COLUMN IF NOT EXISTS withdrawn BOOLEAN NOT NULL DEFAULT FALSE",
            )?;
            tx.commit()
        })();
        match result {
            Err(e)
                if attempt < 3
                    && e.code() == Some(&::postgres::error::SqlState::T_R_DEADLOCK_DETECTED) =>
            {
                attempt += 1;
            }
            other => return Ok(other?),
        }
    }
}

pub struct PgCatalog {
    db: Client,
}

fn vehicle_row(r: &Row) -> VehicleRow {
    VehicleRow {
        name: r.get(0),
        key: r.get(1),
        role: r.get(2),
        added_ns: r.get(3),
        revoked_ns: r.get(4),
    }
}

fn request_row(r: &Row) -> RequestRow {
    RequestRow {
        id: r.get(0),
        vehicle: r.get(1),
        kind: r.get(2),
        body: r.get(3),
        issuer: r.get(4),
        state: r.get(5),
        created_ns: r.get(6),
        acked_ns: r.get(7),
        finished_ns: r.get(8),
        progress: r.get(9),
        result: r.get(10),
        error: r.get(11),
    }
}

fn segment_row(r: &Row) -> SegmentRow {
    SegmentRow {
        id: r.get(0),
        vehicle: r.get(1),
        name: r.get(2),
        kind: r.get(3),
        bytes: r.get(4),
        blake3: r.get(5),
        stored_ns: r.get(6),
        state: r.get(7),
        error: r.get(8),
        samples: r.get(9),
        t_first: r.get(10),
        t_last: r.get(11),
        object: r.get(12),
        parquet: r.get(13),
        indexed_ns: r.get(14),
    }
}

impl PgCatalog {
    /// Connects (no TLS: run it on a private network or a local socket)
    /// and creates the tables if they are missing.
    pub fn connect(url: &str) -> Result<PgCatalog> {
        let mut db = Client::connect(url, NoTls)?;
        if !schema_current(&mut db)? {
            create_schema(&mut db)?;
        }
        Ok(PgCatalog { db })
    }

    /// A writing transaction: it raises the catalog's version first
    /// ([`Catalog::version`]), which also queues it behind every other
    /// writer of the catalog until they commit, so versions are taken in
    /// commit order. One that ends in an error is rolled back when
    /// dropped, its raise with it.
    fn write_tx(&mut self) -> Result<Transaction<'_>> {
        let mut tx = self.db.transaction()?;
        tx.execute(BUMP_VERSION, &[])?;
        Ok(tx)
    }
}

/// Applies one indexed segment inside the batch's transaction.
fn apply_indexed(tx: &mut Transaction<'_>, id: i64, out: &IndexOutcome, now_ns: i64) -> Result<()> {
    let vehicle: String = tx
        .query_one("SELECT vehicle FROM segments WHERE id = $1", &[&id])?
        .get(0);
    tx.execute(
        "UPDATE segments SET state = 'indexed', error = NULL, samples = $2, t_first = $3,
           t_last = $4, object = $5, parquet = $6, indexed_ns = $7 WHERE id = $1",
        &[
            &id,
            &out.samples,
            &out.t_first,
            &out.t_last,
            &out.object,
            &out.parquet,
            &now_ns,
        ],
    )?;
    if let Some(last) = &out.last {
        let old = tx.query_opt(
            "SELECT t_ns, vals FROM last_state WHERE vehicle = $1 FOR UPDATE",
            &[&vehicle],
        )?;
        let old: Option<(i64, String)> = old.map(|r| (r.get(0), r.get(1)));
        if old.as_ref().is_none_or(|(t, _)| last.t_ns >= *t) {
            let vals = match &old {
                Some((_, v)) => merge_values(v, &last.values),
                None => last.values.clone(),
            };
            tx.execute(
                "INSERT INTO last_state (vehicle, t_ns, lat, lon, speed, vals)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (vehicle) DO UPDATE SET t_ns = excluded.t_ns, lat = excluded.lat,
                   lon = excluded.lon, speed = excluded.speed, vals = excluded.vals",
                &[
                    &vehicle,
                    &last.t_ns,
                    &last.lat,
                    &last.lon,
                    &last.speed,
                    &vals,
                ],
            )?;
        }
    }
    if !out.track.is_empty() {
        let st = tx.prepare(
            "INSERT INTO track (vehicle, bucket, t_ns, lat, lon, speed)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )?;
        for p in &out.track {
            let bucket = p.t_ns.div_euclid(TRACK_BUCKET_NS);
            tx.execute(&st, &[&vehicle, &bucket, &p.t_ns, &p.lat, &p.lon, &p.speed])?;
        }
    }
    Ok(())
}

impl Catalog for PgCatalog {
    fn add_vehicle(&mut self, name: &str, key: &str, role: &str, now_ns: i64) -> Result<()> {
        let mut tx = self.write_tx()?;
        let taken = tx.query_opt(
            "SELECT name FROM vehicles WHERE name = $1 OR key = $2",
            &[&name, &key],
        )?;
        if let Some(row) = taken {
            let other: String = row.get(0);
            return Err(CatalogError::Conflict(if other == name {
                format!("a vehicle named {name:?} is already registered")
            } else {
                format!("this key is already registered as {other:?}")
            }));
        }
        tx.execute(
            "INSERT INTO vehicles (name, key, role, added_ns) VALUES ($1, $2, $3, $4)",
            &[&name, &key, &role, &now_ns],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn revoke_vehicle(&mut self, name: &str, now_ns: i64) -> Result<()> {
        let mut tx = self.write_tx()?;
        let n = tx.execute(
            "UPDATE vehicles SET revoked_ns = COALESCE(revoked_ns, $2) WHERE name = $1",
            &[&name, &now_ns],
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
        let rows = self.db.query(
            "SELECT name, key, role, added_ns, revoked_ns FROM vehicles ORDER BY name",
            &[],
        )?;
        Ok(rows.iter().map(vehicle_row).collect())
    }

    fn vehicle_by_key(&mut self, key: &str) -> Result<Option<VehicleRow>> {
        let row = self.db.query_opt(
            "SELECT name, key, role, added_ns, revoked_ns FROM vehicles WHERE key = $1",
            &[&key],
        )?;
        Ok(row.as_ref().map(vehicle_row))
    }

    fn vehicle_by_name(&mut self, name: &str) -> Result<Option<VehicleRow>> {
        let row = self.db.query_opt(
            "SELECT name, key, role, added_ns, revoked_ns FROM vehicles WHERE name = $1",
            &[&name],
        )?;
        Ok(row.as_ref().map(vehicle_row))
    }

    fn queue_segments(&mut self, segs: &[NewSegment<'_>]) -> Result<()> {
        if segs.is_empty() {
            return Ok(());
        }
        let mut tx = self.write_tx()?;
        let st = tx.prepare(
            "INSERT INTO segments (vehicle, name, kind, bytes, blake3, stored_ns, state, object)
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7)
             ON CONFLICT (vehicle, name) DO UPDATE SET
               kind = excluded.kind, bytes = excluded.bytes, stored_ns = excluded.stored_ns,
               object = excluded.object, state = 'pending', error = NULL, claimed_ns = NULL,
               blake3 = excluded.blake3
             WHERE segments.blake3 <> excluded.blake3 OR segments.state = 'failed'",
        )?;
        for s in segs {
            tx.execute(
                &st,
                &[
                    &s.vehicle,
                    &s.name,
                    &s.kind,
                    &s.bytes,
                    &s.blake3,
                    &s.stored_ns,
                    &s.object,
                ],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn claim_pending(&mut self, limit: usize, now_ns: i64) -> Result<Vec<SegmentRow>> {
        let stale = now_ns - CLAIM_TIMEOUT_NS;
        let mut tx = self.write_tx()?;
        let rows = tx.query(
            &format!(
                "UPDATE segments SET state = 'indexing', claimed_ns = $1 WHERE id IN (
                   SELECT id FROM segments
                   WHERE state = 'pending' OR (state = 'indexing' AND claimed_ns < $2)
                   ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
                 RETURNING {SEGMENT_COLUMNS}"
            ),
            &[&now_ns, &stale, &(limit as i64)],
        )?;
        // Nothing claimed changes nothing, the version included (an idle
        // indexer polls).
        if rows.is_empty() {
            tx.rollback()?;
        } else {
            tx.commit()?;
        }
        let mut out: Vec<SegmentRow> = rows.iter().map(segment_row).collect();
        out.sort_by_key(|r| r.id);
        Ok(out)
    }

    fn release_claims(&mut self) -> Result<u64> {
        let mut tx = self.write_tx()?;
        let n = tx.execute(
            "UPDATE segments SET state = 'pending', claimed_ns = NULL WHERE state = 'indexing'",
            &[],
        )?;
        tx.commit()?;
        Ok(n)
    }

    fn finish_batch(&mut self, done: &[(i64, Finished)], now_ns: i64) -> Result<()> {
        if done.is_empty() {
            return Ok(());
        }
        let mut tx = self.write_tx()?;
        for (id, how) in done {
            match how {
                Finished::Indexed(out) => apply_indexed(&mut tx, *id, out, now_ns)?,
                Finished::Failed(error) => {
                    tx.execute(
                        "UPDATE segments SET state = 'failed', error = $2, indexed_ns = $3
                         WHERE id = $1",
                        &[id, error, &now_ns],
                    )?;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn segments(&mut self, vehicle: Option<&str>, limit: usize) -> Result<Vec<SegmentRow>> {
        let rows = self.db.query(
            &format!(
                "SELECT {SEGMENT_COLUMNS} FROM segments WHERE $1::TEXT IS NULL OR vehicle = $1
                 ORDER BY stored_ns DESC, id DESC LIMIT $2"
            ),
            &[&vehicle, &(limit as i64)],
        )?;
        Ok(rows.iter().map(segment_row).collect())
    }

    fn segment(&mut self, vehicle: &str, name: &str) -> Result<Option<SegmentRow>> {
        let row = self.db.query_opt(
            &format!("SELECT {SEGMENT_COLUMNS} FROM segments WHERE vehicle = $1 AND name = $2"),
            &[&vehicle, &name],
        )?;
        Ok(row.as_ref().map(segment_row))
    }

    fn pending_count(&mut self) -> Result<i64> {
        Ok(self
            .db
            .query_one(
                "SELECT COUNT(*) FROM segments WHERE state IN ('pending', 'indexing')",
                &[],
            )?
            .get(0))
    }

    fn oldest_pending_ns(&mut self) -> Result<Option<i64>> {
        Ok(self
            .db
            .query_one(
                "SELECT MIN(stored_ns) FROM segments WHERE state IN ('pending', 'indexing')",
                &[],
            )?
            .get(0))
    }

    fn last_states(&mut self) -> Result<Vec<LastState>> {
        let rows = self.db.query(
            "SELECT vehicle, t_ns, lat, lon, speed, vals FROM last_state ORDER BY vehicle",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|r| LastState {
                vehicle: r.get(0),
                t_ns: r.get(1),
                lat: r.get(2),
                lon: r.get(3),
                speed: r.get(4),
                values: r.get(5),
            })
            .collect())
    }

    fn track(&mut self, vehicle: &str, from_ns: i64, to_ns: i64) -> Result<Vec<TrackPoint>> {
        let (a, b) = (
            from_ns.div_euclid(TRACK_BUCKET_NS),
            to_ns.div_euclid(TRACK_BUCKET_NS),
        );
        let rows = self.db.query(
            "SELECT t_ns, lat, lon, speed FROM track
             WHERE vehicle = $1 AND bucket >= $2 AND bucket <= $3 ORDER BY bucket",
            &[&vehicle, &a, &b],
        )?;
        Ok(rows
            .iter()
            .map(|r| TrackPoint {
                t_ns: r.get(0),
                lat: r.get(1),
                lon: r.get(2),
                speed: r.get(3),
            })
            .collect())
    }

    fn version(&mut self) -> Result<i64> {
        Ok(self
            .db
            .query_one("SELECT v FROM catalog_version WHERE id = 1", &[])?
            .get(0))
    }

    fn add_request(
        &mut self,
        vehicle: &str,
        kind: &str,
        body: &str,
        issuer: &str,
        now_ns: i64,
    ) -> Result<RequestRow> {
        let mut tx = self.write_tx()?;
        let ok = tx.query_opt(
            "SELECT 1 FROM vehicles WHERE name = $1 AND role = 'vehicle' AND revoked_ns IS NULL",
            &[&vehicle],
        )?;
        if ok.is_none() {
            return Err(CatalogError::NotFound(format!(
                "no vehicle named {vehicle:?} in the registry (or it is revoked)"
            )));
        }
        let row = tx.query_one(
            &format!(
                "INSERT INTO requests (vehicle, kind, body, issuer, state, created_ns)
                 VALUES ($1, $2, $3, $4, 'queued', $5) RETURNING {REQUEST_COLUMNS}"
            ),
            &[&vehicle, &kind, &body, &issuer, &now_ns],
        )?;
        tx.commit()?;
        Ok(request_row(&row))
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
        let mut tx = self.write_tx()?;
        // Two servers deploying the same name at once take turns, so
        // each gets its own version.
        tx.execute("LOCK TABLE campaigns IN SHARE ROW EXCLUSIVE MODE", &[])?;
        let version: i64 = tx
            .query_one(
                "SELECT COALESCE(MAX(version), 0)::BIGINT + 1 FROM campaigns WHERE name = $1",
                &[&name],
            )?
            .get(0);
        let req = request(version);
        let mut ids: Vec<i64> = Vec::new();
        for v in vehicles {
            let ok = tx.query_opt(
                "SELECT 1 FROM vehicles WHERE name = $1 AND role = 'vehicle' AND revoked_ns IS NULL",
                &[v],
            )?;
            if ok.is_none() {
                return Err(CatalogError::NotFound(format!(
                    "no vehicle named {v:?} in the registry (or it is revoked)"
                )));
            }
            let row = tx.query_one(
                "INSERT INTO requests (vehicle, kind, body, issuer, state, created_ns)
                 VALUES ($1, $5, $2, $3, 'queued', $4) RETURNING id",
                &[v, &req, &issuer, &now_ns, &kind],
            )?;
            ids.push(row.get(0));
        }
        let (vs, is) = (
            serde_json::to_string(vehicles).unwrap_or_default(),
            serde_json::to_string(&ids).unwrap_or_default(),
        );
        tx.execute(
            "INSERT INTO campaigns (name, version, body, vehicles, issuer, created_ns, requests, withdrawn)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[&name, &version, &body, &vs, &issuer, &now_ns, &is, &withdrawn],
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
        let rows = self.db.query(
            &format!(
                "SELECT {CAMPAIGN_COLUMNS} FROM campaigns
                 WHERE $1::TEXT IS NULL OR name = $1
                 ORDER BY created_ns DESC, name, version DESC LIMIT $2"
            ),
            &[&name, &(limit as i64)],
        )?;
        Ok(rows
            .iter()
            .map(|r| {
                campaign_row(
                    r.get(0),
                    r.get(1),
                    r.get(2),
                    r.get::<_, &str>(3),
                    r.get(4),
                    r.get(5),
                    r.get::<_, &str>(6),
                    r.get(7),
                )
            })
            .collect())
    }

    fn set_vehicle_signals(
        &mut self,
        vehicle: &str,
        signals: &[String],
        now_ns: i64,
    ) -> Result<()> {
        let list = serde_json::to_string(signals).unwrap_or_default();
        self.db.execute(
            "INSERT INTO vehicle_signals (vehicle, signals, reported_ns) VALUES ($1, $2, $3)
             ON CONFLICT (vehicle) DO UPDATE SET signals = $2, reported_ns = $3",
            &[&vehicle, &list, &now_ns],
        )?;
        Ok(())
    }

    fn vehicle_signals(&mut self, vehicle: &str) -> Result<Vec<String>> {
        let row = self.db.query_opt(
            "SELECT signals FROM vehicle_signals WHERE vehicle = $1",
            &[&vehicle],
        )?;
        Ok(row
            .and_then(|r| serde_json::from_str(r.get::<_, &str>(0)).ok())
            .unwrap_or_default())
    }

    fn open_requests(&mut self, vehicle: &str) -> Result<Vec<RequestRow>> {
        let rows = self.db.query(
            &format!(
                "SELECT {REQUEST_COLUMNS} FROM requests
                 WHERE vehicle = $1 AND state IN ('queued', 'acked', 'running') ORDER BY id"
            ),
            &[&vehicle],
        )?;
        Ok(rows.iter().map(request_row).collect())
    }

    fn request_event(
        &mut self,
        vehicle: &str,
        id: i64,
        ev: &RequestEvent,
        now_ns: i64,
    ) -> Result<bool> {
        let mut tx = self.write_tx()?;
        let Some(row) = tx.query_opt(
            "SELECT state FROM requests WHERE id = $1 AND vehicle = $2 FOR UPDATE",
            &[&id, &vehicle],
        )?
        else {
            return Ok(false);
        };
        let state: String = row.get(0);
        if let Some(next) = request_transition(&state, ev) {
            let (progress, result, error) = match ev {
                RequestEvent::Ack => (None, None, None),
                RequestEvent::Progress(p) => (Some(p.as_str()), None, None),
                RequestEvent::Done(r) => (None, Some(r.as_str()), None),
                RequestEvent::Failed(e) => (None, None, Some(e.as_str())),
            };
            let finished = matches!(ev, RequestEvent::Done(_) | RequestEvent::Failed(_));
            tx.execute(
                "UPDATE requests SET state = $2,
                    acked_ns = COALESCE(acked_ns, $3),
                    finished_ns = CASE WHEN $4 THEN $3 ELSE finished_ns END,
                    progress = COALESCE($5, progress),
                    result = COALESCE($6, result),
                    error = COALESCE($7, error)
                 WHERE id = $1",
                &[&id, &next, &now_ns, &finished, &progress, &result, &error],
            )?;
            tx.commit()?;
        }
        // Otherwise nothing changed: the transaction, and the version's
        // raise, are rolled back as it is dropped.
        Ok(true)
    }

    fn requests(&mut self, vehicle: Option<&str>, limit: usize) -> Result<Vec<RequestRow>> {
        let rows = self.db.query(
            &format!(
                "SELECT {REQUEST_COLUMNS} FROM requests
                 WHERE $1::TEXT IS NULL OR vehicle = $1 ORDER BY id DESC LIMIT $2"
            ),
            &[&vehicle, &(limit as i64)],
        )?;
        Ok(rows.iter().map(request_row).collect())
    }

    fn queued_after(&mut self, after: i64, limit: usize) -> Result<Vec<RequestRow>> {
        let rows = self.db.query(
            &format!(
                "SELECT {REQUEST_COLUMNS} FROM requests
                 WHERE id > $1 AND state = 'queued' ORDER BY id LIMIT $2"
            ),
            &[&after, &(limit as i64)],
        )?;
        Ok(rows.iter().map(request_row).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_check_names_every_table_and_index_the_schema_creates() {
        let names: Vec<&str> = schema_objects().collect();
        let creates =
            SCHEMA.matches("CREATE TABLE").count() + SCHEMA.matches("CREATE INDEX").count();
        assert_eq!(names.len(), creates, "{names:?}");
        for n in [
            "vehicles",
            "segments_state",
            "requests_open",
            "catalog_version",
        ] {
            assert!(names.contains(&n), "{n} in {names:?}");
        }
    }
}

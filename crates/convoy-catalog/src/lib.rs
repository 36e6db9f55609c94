//! The fleet catalog: what the data service knows, as rows.
//!
//! * the **registry** of vehicles and operators (name, public key, role,
//!   revoked or not), which the server consults at every handshake;
//! * **segments**: every stored upload, its state in the indexing queue
//!   (`pending` → `indexing` → `indexed` or `failed`), what the indexer
//!   found in it (samples, time range) and where its bytes are;
//! * **last state** per vehicle (position, speed, latest signal values)
//!   and a **downsampled track**: at most one point per vehicle per
//!   [`TRACK_BUCKET_NS`], so a day's track is at most 8,640 points.
//!
//! Raw samples never go in here, only into Parquet (convoy-ingest): the
//! catalog stays small enough to answer the map's queries in
//! milliseconds. Two backends with the same behaviour: SQLite (one
//! machine, [`SqliteCatalog`]) and PostgreSQL (shared by several servers,
//! [`PgCatalog`]); [`open`] picks by URL.

mod postgres;
mod sqlite;

pub use crate::postgres::PgCatalog;
pub use crate::sqlite::SqliteCatalog;

/// Track points are kept one per vehicle per this much time (10 s).
pub const TRACK_BUCKET_NS: i64 = 10_000_000_000;

/// A claimed segment not finished for this long is claimed again (its
/// indexer died).
pub const CLAIM_TIMEOUT_NS: i64 = 60_000_000_000;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("catalog database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("catalog database: {}", postgres_reason(.0))]
    Postgres(#[from] ::postgres::Error),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    NotFound(String),
    #[error("catalog: {0}")]
    Invalid(String),
}

pub type Result<T> = std::result::Result<T, CatalogError>;

/// What PostgreSQL said: the client library's own text for an error the
/// server reported is only "db error", its reason is in the source.
fn postgres_reason(e: &::postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{} ({})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                s.push_str(": ");
                s.push_str(detail);
            }
            s
        }
        None => match std::error::Error::source(e) {
            Some(src) => format!("{e}: {src}"),
            None => e.to_string(),
        },
    }
}

/// A registered vehicle or operator.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct VehicleRow {
    pub name: String,
    /// The public key, 64 hex digits.
    pub key: String,
    /// `vehicle` or `operator`.
    pub role: String,
    pub added_ns: i64,
    pub revoked_ns: Option<i64>,
}

/// A stored upload to record and queue.
#[derive(Clone, Debug)]
pub struct NewSegment<'a> {
    pub vehicle: &'a str,
    /// The name inside the vehicle's namespace.
    pub name: &'a str,
    /// `telemetry` (indexed into Parquet) or `file` (catalogued only).
    pub kind: &'a str,
    pub bytes: i64,
    pub blake3: &'a str,
    pub stored_ns: i64,
    /// Where the bytes are: a path under the landing directory.
    pub object: &'a str,
}

/// A segment as the catalog holds it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SegmentRow {
    pub id: i64,
    pub vehicle: String,
    pub name: String,
    pub kind: String,
    pub bytes: i64,
    pub blake3: String,
    pub stored_ns: i64,
    /// `pending`, `indexing`, `indexed` or `failed`.
    pub state: String,
    pub error: Option<String>,
    pub samples: i64,
    pub t_first: Option<i64>,
    pub t_last: Option<i64>,
    /// Where the bytes are now (landing path, or object key once moved).
    pub object: String,
    /// The Parquet object holding its samples, if any.
    pub parquet: Option<String>,
    pub indexed_ns: Option<i64>,
}

/// A vehicle's latest known state.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LastState {
    pub vehicle: String,
    pub t_ns: i64,
    pub lat: f64,
    pub lon: f64,
    pub speed: Option<f64>,
    /// Latest value of every signal seen, as a JSON object.
    pub values: String,
}

/// One point of a downsampled track.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct TrackPoint {
    pub t_ns: i64,
    pub lat: f64,
    pub lon: f64,
    pub speed: Option<f64>,
}

/// What indexing one segment found.
#[derive(Clone, Debug, Default)]
pub struct IndexOutcome {
    pub samples: i64,
    pub t_first: Option<i64>,
    pub t_last: Option<i64>,
    /// The newest position in the segment (with its other values).
    pub last: Option<LastState>,
    /// Points already one per bucket ([`TRACK_BUCKET_NS`]).
    pub track: Vec<TrackPoint>,
    /// Where the bytes are now.
    pub object: String,
    pub parquet: Option<String>,
}

/// How the indexer finished with one claimed segment, for
/// [`Catalog::finish_batch`].
#[derive(Clone, Debug)]
pub enum Finished {
    /// Indexed: mark it so and apply its last state and track.
    Indexed(IndexOutcome),
    /// Kept, with the reason, for a re-index.
    Failed(String),
}

/// A request from the cloud to a vehicle (docs/SERVICE.md, "Requests"):
/// `queued` until the vehicle acknowledges it, then `acked`, `running`
/// while it reports progress, and `done` or `failed` for good.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RequestRow {
    pub id: i64,
    pub vehicle: String,
    /// `upload`, `collect`, `link` or `status`.
    pub kind: String,
    /// The request as JSON.
    pub body: String,
    /// The operator who issued it.
    pub issuer: String,
    pub state: String,
    pub created_ns: i64,
    pub acked_ns: Option<i64>,
    pub finished_ns: Option<i64>,
    /// The last progress report (JSON), the result (JSON) or the error.
    pub progress: Option<String>,
    pub result: Option<String>,
    pub error: Option<String>,
}

/// A campaign version (docs/SERVICE.md, "Campaigns"): the file as
/// deployed, to which vehicles, by whom. Each deployment of a name is the
/// next version, and so is each withdrawal; the vehicles' `campaign` (or
/// `withdraw`) requests carry it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CampaignRow {
    pub name: String,
    pub version: i64,
    /// The campaign file (TOML); empty for a withdrawal.
    pub body: String,
    /// This version withdraws the campaign from its vehicles.
    pub withdrawn: bool,
    pub vehicles: Vec<String>,
    pub issuer: String,
    pub created_ns: i64,
    /// The `campaign` request queued for each vehicle, in `vehicles` order.
    pub requests: Vec<i64>,
}

/// What a vehicle said about one of its requests.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestEvent {
    Ack,
    /// A progress report, JSON.
    Progress(String),
    /// The result, JSON.
    Done(String),
    Failed(String),
}

/// Request states that are not final.
pub const OPEN_REQUEST_STATES: [&str; 3] = ["queued", "acked", "running"];

/// The catalog's operations; both backends behave the same, and the
/// shared tests (tests/contract.rs) run against both.
pub trait Catalog: Send {
    /// Registers `name` with `key` (hex) and `role`; a taken name or key
    /// is a [`CatalogError::Conflict`].
    fn add_vehicle(&mut self, name: &str, key: &str, role: &str, now_ns: i64) -> Result<()>;
    /// Revokes `name`; its key is refused from now on.
    fn revoke_vehicle(&mut self, name: &str, now_ns: i64) -> Result<()>;
    fn vehicles(&mut self) -> Result<Vec<VehicleRow>>;
    fn vehicle_by_key(&mut self, key: &str) -> Result<Option<VehicleRow>>;
    /// One name's row: every HTTP request looks its caller up, so this is
    /// an indexed lookup, not a scan of the registry.
    fn vehicle_by_name(&mut self, name: &str) -> Result<Option<VehicleRow>>;

    /// Records a stored upload and queues it (idempotent: a re-upload of
    /// the same name requeues it with its new hash and size).
    fn queue_segment(&mut self, s: &NewSegment<'_>) -> Result<()> {
        self.queue_segments(std::slice::from_ref(s))
    }
    /// [`Catalog::queue_segment`] for several uploads in one transaction
    /// (one fsync): all are queued or none.
    fn queue_segments(&mut self, segs: &[NewSegment<'_>]) -> Result<()>;
    /// Claims up to `limit` queued segments (and ones whose claim timed
    /// out), oldest first, marking them `indexing`.
    fn claim_pending(&mut self, limit: usize, now_ns: i64) -> Result<Vec<SegmentRow>>;
    /// Puts every claimed segment back in the queue: a single server's
    /// indexer calls this at start-up, since any claim left is its own
    /// from before a crash (shared catalogs wait for the claim timeout).
    fn release_claims(&mut self) -> Result<u64>;
    /// Marks a segment indexed and applies what it held to the last state
    /// and the track, in one transaction.
    fn finish_indexed(&mut self, id: i64, out: &IndexOutcome, now_ns: i64) -> Result<()> {
        self.finish_batch(&[(id, Finished::Indexed(out.clone()))], now_ns)
    }
    /// Marks a segment failed (kept, with the reason, for a re-index).
    fn fail_segment(&mut self, id: i64, error: &str, now_ns: i64) -> Result<()> {
        self.finish_batch(&[(id, Finished::Failed(error.to_owned()))], now_ns)
    }
    /// Records how each of several claimed segments finished, in order,
    /// in one transaction: the indexer's group commit, one fsync for a
    /// whole batch instead of one per segment. All or nothing: after an
    /// error none of them is recorded.
    fn finish_batch(&mut self, done: &[(i64, Finished)], now_ns: i64) -> Result<()>;
    /// Newest first; `vehicle` filters.
    fn segments(&mut self, vehicle: Option<&str>, limit: usize) -> Result<Vec<SegmentRow>>;
    fn segment(&mut self, vehicle: &str, name: &str) -> Result<Option<SegmentRow>>;
    fn pending_count(&mut self) -> Result<i64>;
    /// When the oldest segment still waiting for the indexer (pending or
    /// being indexed) was stored; `None` when none waits. Its age is how
    /// far the indexer is behind.
    fn oldest_pending_ns(&mut self) -> Result<Option<i64>>;

    fn last_states(&mut self) -> Result<Vec<LastState>>;
    fn track(&mut self, vehicle: &str, from_ns: i64, to_ns: i64) -> Result<Vec<TrackPoint>>;
    /// A counter kept in the database and raised by one in the same
    /// transaction as every change: the registry, segments queued,
    /// claimed, indexed or failed, last states and tracks, requests and
    /// campaigns. So it only grows, two commits in one clock tick give
    /// two versions, and a reader that sees version `v` sees every change
    /// up to `v` (the live feed and the web view's caches rely on this).
    fn version(&mut self) -> Result<i64>;

    /// Queues a request for `vehicle` (which must be a registered,
    /// unrevoked vehicle: [`CatalogError::NotFound`] otherwise).
    fn add_request(
        &mut self,
        vehicle: &str,
        kind: &str,
        body: &str,
        issuer: &str,
        now_ns: i64,
    ) -> Result<RequestRow>;
    /// A vehicle's requests that are not finished, oldest first.
    fn open_requests(&mut self, vehicle: &str) -> Result<Vec<RequestRow>>;
    /// Records what `vehicle` said about its request `id`: `false` if it
    /// has no such request. A finished request stays as it finished.
    fn request_event(
        &mut self,
        vehicle: &str,
        id: i64,
        ev: &RequestEvent,
        now_ns: i64,
    ) -> Result<bool>;
    /// Newest first; `vehicle` filters.
    fn requests(&mut self, vehicle: Option<&str>, limit: usize) -> Result<Vec<RequestRow>>;
    /// Requests still `queued` with an id above `after`, oldest first:
    /// what servers sharing the catalog issued since they last looked.
    fn queued_after(&mut self, after: i64, limit: usize) -> Result<Vec<RequestRow>>;

    /// Records the next version of campaign `name` and queues, in the
    /// same transaction, a `campaign` request (a `withdraw` request when
    /// `withdrawn`) for each vehicle, its body made by
    /// `request(version)`. An unknown or revoked vehicle is
    /// [`CatalogError::NotFound`], and nothing is recorded.
    #[allow(clippy::too_many_arguments)]
    fn add_campaign(
        &mut self,
        name: &str,
        body: &str,
        withdrawn: bool,
        vehicles: &[String],
        issuer: &str,
        now_ns: i64,
        request: &dyn Fn(i64) -> String,
    ) -> Result<CampaignRow>;
    /// Campaign versions, newest first; `name` filters.
    fn campaigns(&mut self, name: Option<&str>, limit: usize) -> Result<Vec<CampaignRow>>;

    /// Records the signal names `vehicle` declares beyond the VSS list
    /// (its configuration's `extra_signals`, reported on each control
    /// stream), replacing what it declared before.
    fn set_vehicle_signals(&mut self, vehicle: &str, signals: &[String], now_ns: i64)
        -> Result<()>;
    /// What `vehicle` last declared (empty if it never did).
    fn vehicle_signals(&mut self, vehicle: &str) -> Result<Vec<String>>;
}

/// The columns of a campaign row, in the order both backends select them.
pub(crate) const CAMPAIGN_COLUMNS: &str =
    "name, version, body, vehicles, issuer, created_ns, requests, withdrawn";

/// A campaign row from its columns (`vehicles` and `requests` are JSON
/// lists in both backends: the rows are small and read whole).
#[allow(clippy::too_many_arguments)]
pub(crate) fn campaign_row(
    name: String,
    version: i64,
    body: String,
    vehicles: &str,
    issuer: String,
    created_ns: i64,
    requests: &str,
    withdrawn: bool,
) -> CampaignRow {
    CampaignRow {
        name,
        version,
        body,
        withdrawn,
        vehicles: serde_json::from_str(vehicles).unwrap_or_default(),
        issuer,
        created_ns,
        requests: serde_json::from_str(requests).unwrap_or_default(),
    }
}

/// The columns of a request row, in the order both backends select them.
pub(crate) const REQUEST_COLUMNS: &str = "id, vehicle, kind, body, issuer, state, created_ns, \
     acked_ns, finished_ns, progress, result, error";

/// The new state, and which columns change, for an event on a request in
/// `state` (`None`: nothing changes).
pub(crate) fn request_transition(state: &str, ev: &RequestEvent) -> Option<&'static str> {
    if !OPEN_REQUEST_STATES.contains(&state) {
        return None;
    }
    Some(match ev {
        RequestEvent::Ack if state == "queued" => "acked",
        RequestEvent::Ack => return None,
        RequestEvent::Progress(_) => "running",
        RequestEvent::Done(_) => "done",
        RequestEvent::Failed(_) => "failed",
    })
}

/// Opens a catalog: `postgres://…` (or `postgresql://…`) for PostgreSQL,
/// anything else is a SQLite file path.
pub fn open(url: &str) -> Result<Box<dyn Catalog>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Box::new(PgCatalog::connect(url)?))
    } else {
        Ok(Box::new(SqliteCatalog::open(std::path::Path::new(url))?))
    }
}

/// Raises the catalog's version ([`Catalog::version`]): the first
/// statement of every writing transaction in both backends, so in
/// PostgreSQL every writer takes this one row's lock first (one lock
/// order: writers queue, they never deadlock on it).
pub(crate) const BUMP_VERSION: &str = "UPDATE catalog_version SET v = v + 1 WHERE id = 1";

/// The columns of a segment row, in the order both backends select them.
pub(crate) const SEGMENT_COLUMNS: &str = "id, vehicle, name, kind, bytes, blake3, stored_ns, \
     state, error, samples, t_first, t_last, object, parquet, indexed_ns";

/// Merges `new` values (a JSON object) into `old`, keeping the newer.
pub(crate) fn merge_values(old: &str, new: &str) -> String {
    let mut o: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(old).unwrap_or_default();
    let n: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(new).unwrap_or_default();
    o.extend(n);
    serde_json::Value::Object(o).to_string()
}

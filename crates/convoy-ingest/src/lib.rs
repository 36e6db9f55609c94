//! convoy-ingest: the server side of convoy's data service, around the
//! transport's durable store.
//!
//! * [`RegistryAuthorizer`]: the fleet registry (in the catalog) as the
//!   server's [`convoy_net::Authorizer`]: unknown and revoked keys are
//!   refused, vehicles and operators are named in every event.
//! * [`QueueHook`]: the server's [`convoy_net::CommitHook`]: once an
//!   upload is fsynced and renamed, and before the vehicle is told, it is
//!   recorded in the catalog's indexing queue, so nothing acknowledged is
//!   ever missed by the indexer. Uploads committed at once share one
//!   catalog transaction ([`group::GroupCommit`]).
//! * [`Indexer`]: queue → Parquet + last state + track (+ object store).
//! * [`Store`]: the landing directory (fsync) or an S3-compatible bucket.

pub mod extract;
pub mod group;
pub mod indexer;
pub mod parquet_out;
pub mod requests;
pub mod store;

use std::collections::HashMap;
use std::sync::mpsc::SyncSender;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use convoy_catalog::{Catalog, NewSegment};
use convoy_net::{Authorizer, CommitHook, Committed, Identity, Role};
use convoy_proto::crypto::hex;

pub use indexer::{is_telemetry, IndexEvent, Indexer};
pub use store::{Store, StoreError};

/// How long a registry answer is reused for a new connection or a commit:
/// a revoked key is refused new connections and acknowledgements within
/// this.
pub const REGISTRY_TTL: Duration = Duration::from_millis(500);

/// How long it is reused for the server's re-check of open connections
/// (every 1 s): longer than the re-check period, so an open connection
/// costs a catalog query every other re-check rather than every one. A
/// revocation closes open connections within this plus the period: 3 s.
pub const REGISTRY_RECHECK_TTL: Duration = Duration::from_secs(2);

/// Registry answers kept at most (a fleet's vehicles, with room).
pub const REGISTRY_CACHE_ENTRIES: usize = 16_384;

/// A registry answer and when it was fetched.
type Cached = (Instant, Result<Identity, String>);

/// The fleet registry as an [`Authorizer`].
pub struct RegistryAuthorizer {
    catalog: Mutex<Box<dyn Catalog>>,
    cache: Mutex<HashMap<[u8; 32], Cached>>,
}

impl RegistryAuthorizer {
    pub fn new(catalog: Box<dyn Catalog>) -> RegistryAuthorizer {
        RegistryAuthorizer {
            catalog: Mutex::new(catalog),
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn lookup(&self, key: &[u8; 32]) -> Result<Identity, String> {
        let row = self
            .catalog
            .lock()
            .map_err(|_| "registry unavailable".to_string())?
            .vehicle_by_key(&hex(key))
            .map_err(|e| format!("registry unavailable: {e}"))?;
        match row {
            None => {
                Err("this key is not in the fleet registry (convoy fleet add NAME KEY.pub)".into())
            }
            Some(v) if v.revoked_ns.is_some() => Err(format!("{} is revoked", v.name)),
            Some(v) => Ok(Identity {
                role: v.role.parse::<Role>()?,
                name: v.name,
            }),
        }
    }
}

impl Authorizer for RegistryAuthorizer {
    fn identify(&self, key: &[u8; 32]) -> Result<Identity, String> {
        self.answer(key, REGISTRY_TTL)
    }

    fn recheck(&self, key: &[u8; 32]) -> Result<Identity, String> {
        self.answer(key, REGISTRY_RECHECK_TTL)
    }
}

impl RegistryAuthorizer {
    /// Forgets every cached answer (SIGHUP): the next handshake, commit
    /// and re-check of each key asks the catalog, so a revocation or a
    /// new vehicle counts at once. Returns the registry's names and how
    /// many of them are revoked.
    pub fn reload(&self) -> Result<(usize, usize), String> {
        if let Ok(mut cache) = self.cache.lock() {
            cache.clear();
        }
        let all = self
            .catalog
            .lock()
            .map_err(|_| "registry unavailable".to_string())?
            .vehicles()
            .map_err(|e| format!("registry unavailable: {e}"))?;
        let revoked = all.iter().filter(|v| v.revoked_ns.is_some()).count();
        Ok((all.len(), revoked))
    }

    /// The cached answer if younger than `ttl`, else the catalog's.
    fn answer(&self, key: &[u8; 32], ttl: Duration) -> Result<Identity, String> {
        if let Ok(cache) = self.cache.lock() {
            if let Some((at, answer)) = cache.get(key) {
                if at.elapsed() < ttl {
                    return answer.clone();
                }
            }
        }
        let answer = self.lookup(key);
        if let Ok(mut cache) = self.cache.lock() {
            // Bounded: fresh random keys (each refused) would otherwise
            // grow it for ever. Stale answers go first; a cache full of
            // fresh ones takes no more until they age.
            if cache.len() >= REGISTRY_CACHE_ENTRIES {
                cache.retain(|_, (at, _)| at.elapsed() < REGISTRY_RECHECK_TTL);
            }
            if cache.len() < REGISTRY_CACHE_ENTRIES {
                cache.insert(*key, (Instant::now(), answer.clone()));
            }
        }
        answer
    }
}

/// Uploads whose catalog rows one transaction writes at most.
pub const QUEUE_BATCH: usize = 64;

/// A stored upload waiting for its queue row.
struct Queued {
    vehicle: String,
    name: String,
    kind: &'static str,
    bytes: i64,
    blake3: String,
    stored_ns: i64,
    object: String,
}

impl Queued {
    fn row(&self) -> NewSegment<'_> {
        NewSegment {
            vehicle: &self.vehicle,
            name: &self.name,
            kind: self.kind,
            bytes: self.bytes,
            blake3: &self.blake3,
            stored_ns: self.stored_ns,
            object: &self.object,
        }
    }
}

/// Records each durable upload in the catalog's queue and wakes the
/// indexer. The server's commit threads call it at once for different
/// uploads: what arrives while a transaction runs is written by the next
/// one, together, and each caller returns (and its vehicle hears
/// "stored") only after the transaction holding its row committed.
pub struct QueueHook {
    catalog: Mutex<Box<dyn Catalog>>,
    group: Mutex<group::GroupCommit<Queued>>,
    /// Signalled when a batch finished.
    finished: Condvar,
    wake: SyncSender<()>,
}

impl QueueHook {
    pub fn new(catalog: Box<dyn Catalog>, wake: SyncSender<()>) -> QueueHook {
        QueueHook {
            catalog: Mutex::new(catalog),
            group: Mutex::new(group::GroupCommit::new(QUEUE_BATCH)),
            finished: Condvar::new(),
            wake,
        }
    }

    /// Writes one batch's rows in one transaction.
    fn write(&self, batch: &[Queued]) -> Result<(), String> {
        let rows: Vec<NewSegment<'_>> = batch.iter().map(Queued::row).collect();
        self.catalog
            .lock()
            .map_err(|_| "catalog unavailable".to_string())?
            .queue_segments(&rows)
            .map_err(|e| e.to_string())
    }

    /// Queues `items` and returns once the commits holding them finished,
    /// with each one's outcome.
    fn queue(&self, items: Vec<Queued>) -> Vec<Result<(), String>> {
        let gone = |_| "catalog unavailable".to_string();
        let n = items.len();
        let Ok(mut g) = self.group.lock() else {
            return vec![Err("catalog unavailable".into()); n];
        };
        let tickets: Vec<_> = items.into_iter().map(|item| g.submit(item)).collect();
        let mut outcomes: Vec<Option<Result<(), String>>> = vec![None; n];
        loop {
            for (o, &t) in outcomes.iter_mut().zip(&tickets) {
                if o.is_none() {
                    *o = g.outcome(t);
                }
            }
            if outcomes.iter().all(Option::is_some) {
                return outcomes.into_iter().flatten().collect();
            }
            let next = match g.start() {
                // No commit runs: this caller writes what waits, its own
                // rows among it or a batch ahead of them.
                Some(batch) => {
                    drop(g);
                    let (tickets, items): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
                    let result = self.write(&items);
                    self.group.lock().map(|mut g| {
                        g.finish(&tickets, result);
                        self.finished.notify_all();
                        g
                    })
                }
                None => self.finished.wait(g),
            };
            match next.map_err(gone) {
                Ok(next) => g = next,
                Err(e) => {
                    return outcomes
                        .into_iter()
                        .map(|o| o.unwrap_or_else(|| Err(e.clone())))
                        .collect()
                }
            }
        }
    }

    /// The queue row of an upload (`None`: not a vehicle's, nothing to
    /// index).
    fn queued(c: &Committed<'_>) -> Option<Queued> {
        let who = c.who?;
        let name = c
            .stored_name
            .strip_prefix(&format!("{}/", who.name))
            .unwrap_or(c.stored_name);
        Some(Queued {
            vehicle: who.name.clone(),
            name: name.to_owned(),
            kind: if is_telemetry(name) {
                "telemetry"
            } else {
                "file"
            },
            bytes: c.bytes as i64,
            blake3: hex(&c.blake3),
            stored_ns: convoy_telemetry::now_ns(),
            object: c.stored_name.to_owned(),
        })
    }
}

impl CommitHook for QueueHook {
    fn committed(&self, c: &Committed<'_>) -> Result<(), String> {
        self.committed_all(std::slice::from_ref(c))
            .pop()
            .unwrap_or(Ok(()))
    }

    /// One commit thread's batch goes into the group commit at once, so
    /// its rows share a transaction with each other and with whatever the
    /// other threads queued meanwhile.
    fn committed_all(&self, all: &[Committed<'_>]) -> Vec<Result<(), String>> {
        let rows: Vec<(usize, Queued)> = all
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((i, Self::queued(c)?)))
            .collect();
        let mut outcomes = vec![Ok(()); all.len()];
        if rows.is_empty() {
            return outcomes;
        }
        let (at, items): (Vec<usize>, Vec<Queued>) = rows.into_iter().unzip();
        for (i, outcome) in at.into_iter().zip(self.queue(items)) {
            outcomes[i] = outcome;
        }
        if outcomes.iter().any(Result::is_ok) {
            let _ = self.wake.try_send(());
        }
        outcomes
    }
}

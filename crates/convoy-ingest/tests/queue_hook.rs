//! The commit hook under concurrent uploads: each caller returns (and its
//! vehicle would hear "stored") only once its row is committed, seen here
//! through another connection, and uploads that arrive together share
//! transactions.

use std::sync::{Arc, Barrier};

use convoy_catalog::{Catalog, SqliteCatalog};
use convoy_ingest::QueueHook;
use convoy_net::{CommitHook, Committed, Identity, Role};

#[test]
fn every_upload_is_queued_before_its_caller_returns() {
    const UPLOADS: usize = 24;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    let mut c = SqliteCatalog::open(&db).unwrap();
    let before = c.version().unwrap();
    let (wake, woken) = std::sync::mpsc::sync_channel(1);
    let hook = Arc::new(QueueHook::new(
        Box::new(SqliteCatalog::open(&db).unwrap()),
        wake,
    ));
    let start = Arc::new(Barrier::new(UPLOADS));
    let threads: Vec<_> = (0..UPLOADS)
        .map(|i| {
            let (hook, start, db) = (hook.clone(), start.clone(), db.clone());
            std::thread::spawn(move || {
                let who = Identity {
                    name: format!("v{i}"),
                    role: Role::Vehicle,
                };
                let stored = format!("v{i}/d/{i}.jsonl.zst");
                let mut look = SqliteCatalog::open(&db).unwrap();
                start.wait();
                hook.committed(&Committed {
                    who: Some(&who),
                    stored_name: &stored,
                    path: std::path::Path::new(&stored),
                    bytes: 10,
                    blake3: [i as u8; 32],
                })
                .unwrap();
                let row = look.segment(&who.name, &format!("d/{i}.jsonl.zst"));
                let row = row.unwrap().expect("returned before its row was committed");
                assert_eq!(
                    (row.state.as_str(), row.kind.as_str()),
                    ("pending", "telemetry")
                );
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(c.pending_count().unwrap(), UPLOADS as i64);
    let commits = c.version().unwrap() - before;
    assert!(
        (1..=UPLOADS as i64).contains(&commits),
        "{commits} transactions"
    );
    assert!(woken.try_recv().is_ok(), "the indexer was woken");
    eprintln!("{UPLOADS} uploads queued in {commits} transactions");
}

#[test]
fn a_commit_threads_batch_is_queued_in_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    let mut c = SqliteCatalog::open(&db).unwrap();
    let before = c.version().unwrap();
    let (wake, woken) = std::sync::mpsc::sync_channel(1);
    let hook = QueueHook::new(Box::new(SqliteCatalog::open(&db).unwrap()), wake);
    let who: Vec<Identity> = (0..10)
        .map(|i| Identity {
            name: format!("v{i}"),
            role: Role::Vehicle,
        })
        .collect();
    let stored: Vec<String> = (0..10).map(|i| format!("v{i}/d/{i}.jsonl.zst")).collect();
    let mut batch: Vec<Committed<'_>> = (0..10)
        .map(|i| Committed {
            who: Some(&who[i]),
            stored_name: &stored[i],
            path: std::path::Path::new(&stored[i]),
            bytes: 10,
            blake3: [i as u8; 32],
        })
        .collect();
    // A server without identities has nothing to queue for this one.
    batch[3].who = None;
    let outcomes = hook.committed_all(&batch);
    assert_eq!(outcomes.len(), 10);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(c.pending_count().unwrap(), 9);
    assert_eq!(c.version().unwrap() - before, 1, "one transaction");
    assert!(woken.try_recv().is_ok(), "the indexer was woken");
}

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

//! A server killed in the middle of indexing: the segment it had claimed
//! is indexed by the next start, once, with nothing lost.

use std::io::Write;
use std::sync::Arc;

use convoy_catalog::{Catalog, NewSegment, SqliteCatalog};
use convoy_ingest::{Indexer, Store};

#[test]
fn a_segment_claimed_by_a_killed_indexer_is_indexed_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let land = dir.path();
    std::fs::create_dir_all(land.join("v1/d")).unwrap();
    let mut enc = zstd::Encoder::new(Vec::new(), 3).unwrap();
    for i in 0..50 {
        let t = 1_764_000_000_000_000_000i64 + i * 1_000_000_000;
        writeln!(
            enc,
            "{{\"t_ns\":{t},\"path\":\"Vehicle.CurrentLocation.Latitude\",\"value\":45.0}}"
        )
        .unwrap();
        writeln!(
            enc,
            "{{\"t_ns\":{t},\"path\":\"Vehicle.CurrentLocation.Longitude\",\"value\":7.0}}"
        )
        .unwrap();
    }
    std::fs::write(land.join("v1/d/1.jsonl.zst"), enc.finish().unwrap()).unwrap();
    let db = land.join("catalog.db");
    let mut c = SqliteCatalog::open(&db).unwrap();
    c.queue_segment(&NewSegment {
        vehicle: "v1",
        name: "d/1.jsonl.zst",
        kind: "telemetry",
        bytes: 1,
        blake3: "00112233445566778899aabbccddeeff",
        stored_ns: 1,
        object: "v1/d/1.jsonl.zst",
    })
    .unwrap();
    // The first server claims it and dies before finishing.
    assert_eq!(
        c.claim_pending(10, convoy_telemetry::now_ns())
            .unwrap()
            .len(),
        1
    );
    assert!(c
        .claim_pending(10, convoy_telemetry::now_ns())
        .unwrap()
        .is_empty());
    // The next start takes its own claims back and indexes.
    let store = Arc::new(Store::open(None, land).unwrap());
    let mut ix = Indexer::new(
        Box::new(SqliteCatalog::open(&db).unwrap()),
        store.clone(),
        land,
        |_| {},
    );
    assert_eq!(ix.run_once().unwrap(), 0, "the claim still holds");
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let t = std::thread::spawn(move || ix.run(stop2, rx, true));
    let start = std::time::Instant::now();
    loop {
        let s = c.segment("v1", "d/1.jsonl.zst").unwrap().unwrap();
        if s.state == "indexed" {
            assert_eq!(s.samples, 100);
            assert_eq!(store.list(".telemetry").unwrap().len(), 1);
            break;
        }
        assert!(start.elapsed().as_secs() < 20, "never indexed: {s:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drop(tx);
    t.join().unwrap();
    assert_eq!(c.last_states().unwrap().len(), 1);
}

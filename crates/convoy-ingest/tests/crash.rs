//! A server killed in the middle of indexing: the segment it had claimed
//! is indexed by the next start, once, with nothing lost.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use convoy_catalog::{Catalog, NewSegment, SqliteCatalog};
use convoy_ingest::{IndexEvent, Indexer, Store};

/// Writes a telemetry segment of 50 fixes at `lat` to `land/object`.
fn write_segment(land: &Path, object: &str, lat: f64) {
    let path = land.join(object);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut enc = zstd::Encoder::new(Vec::new(), 3).unwrap();
    for i in 0..50 {
        let t = 1_764_000_000_000_000_000i64 + i * 1_000_000_000;
        writeln!(
            enc,
            "{{\"t_ns\":{t},\"path\":\"Vehicle.CurrentLocation.Latitude\",\"value\":{lat}}}"
        )
        .unwrap();
        writeln!(
            enc,
            "{{\"t_ns\":{t},\"path\":\"Vehicle.CurrentLocation.Longitude\",\"value\":7.0}}"
        )
        .unwrap();
    }
    std::fs::write(path, enc.finish().unwrap()).unwrap();
}

#[test]
fn a_segment_claimed_by_a_killed_indexer_is_indexed_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let land = dir.path();
    write_segment(land, "v1/d/1.jsonl.zst", 45.0);
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

/// Group commit: what one claim took is recorded in one transaction
/// (the catalog's version moves by two: the claim and the commit), and no
/// segment is reported, nor its landing copy touched, before that commit:
/// each event finds its segment already finished through another
/// connection.
#[test]
fn a_batch_is_one_commit_and_nothing_is_reported_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let land = dir.path();
    let db = land.join("catalog.db");
    let mut c = SqliteCatalog::open(&db).unwrap();
    let names: Vec<(String, String)> = (0..6)
        .map(|i| (format!("v{i}"), format!("v{i}/d/{i}.jsonl.zst")))
        .collect();
    for (i, (_, object)) in names.iter().enumerate() {
        write_segment(land, object, 45.0 + i as f64);
    }
    // And one that is not telemetry after all: failed in the same batch.
    std::fs::create_dir_all(land.join("bad/d")).unwrap();
    std::fs::write(land.join("bad/d/x.jsonl.zst"), b"not zstd").unwrap();
    let mut segs: Vec<NewSegment<'_>> = names
        .iter()
        .map(|(v, object)| NewSegment {
            vehicle: v,
            name: object.split_once('/').unwrap().1,
            kind: "telemetry",
            bytes: 1,
            blake3: "00112233445566778899aabbccddeeff",
            stored_ns: 1,
            object,
        })
        .collect();
    segs.push(NewSegment {
        vehicle: "bad",
        name: "d/x.jsonl.zst",
        kind: "telemetry",
        bytes: 8,
        blake3: "ffeeddccbbaa99887766554433221100",
        stored_ns: 1,
        object: "bad/d/x.jsonl.zst",
    });
    c.queue_segments(&segs).unwrap();
    let before = c.version().unwrap();

    // The event handler looks at the catalog through its own connection.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut look = SqliteCatalog::open(&db).unwrap();
    let log = seen.clone();
    let store = Arc::new(Store::open(None, land).unwrap());
    let mut ix = Indexer::new(
        Box::new(SqliteCatalog::open(&db).unwrap()),
        store,
        land,
        move |e| {
            let (vehicle, name) = match e {
                IndexEvent::Indexed { vehicle, name, .. }
                | IndexEvent::IndexFailed { vehicle, name, .. } => (vehicle, name),
                IndexEvent::IndexRetry { error } => panic!("retry: {error}"),
            };
            let row = look.segment(vehicle, name).unwrap().unwrap();
            log.lock().unwrap().push((vehicle.clone(), row.state));
        },
    );
    assert_eq!(ix.run_once().unwrap(), 7);
    assert_eq!(
        c.version().unwrap(),
        before + 2,
        "one claim and one commit for seven segments"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 7, "{seen:?}");
    for (vehicle, state) in &seen {
        let want = if vehicle == "bad" {
            "failed"
        } else {
            "indexed"
        };
        assert_eq!(state, want, "{vehicle} reported before its commit");
    }
    let last = c.last_states().unwrap();
    assert_eq!(last.len(), 6);
    assert_eq!(last.iter().find(|l| l.vehicle == "v5").unwrap().lat, 50.0);
}

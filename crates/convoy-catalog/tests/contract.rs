//! One behaviour, two backends: every test runs against SQLite and
//! against a real PostgreSQL cluster started for the test.

use convoy_catalog::{
    Catalog, CatalogError, Finished, IndexOutcome, LastState, NewSegment, PgCatalog, RequestEvent,
    SqliteCatalog, TrackPoint, CLAIM_TIMEOUT_NS, TRACK_BUCKET_NS,
};
use convoy_testkit::Postgres;

const KEY_A: &str = "aa00000000000000000000000000000000000000000000000000000000000000";
const KEY_B: &str = "bb00000000000000000000000000000000000000000000000000000000000000";

fn segment<'a>(vehicle: &'a str, name: &'a str, blake3: &'a str) -> NewSegment<'a> {
    NewSegment {
        vehicle,
        name,
        kind: "telemetry",
        bytes: 100,
        blake3,
        stored_ns: 5,
        object: name,
    }
}

fn registry(c: &mut dyn Catalog) {
    c.add_vehicle("truck-1", KEY_A, "vehicle", 1).unwrap();
    assert!(matches!(
        c.add_vehicle("truck-1", KEY_B, "vehicle", 2),
        Err(CatalogError::Conflict(_))
    ));
    assert!(matches!(
        c.add_vehicle("truck-2", KEY_A, "vehicle", 2),
        Err(CatalogError::Conflict(_))
    ));
    c.add_vehicle("ops", KEY_B, "operator", 3).unwrap();
    let v = c.vehicle_by_key(KEY_A).unwrap().unwrap();
    assert_eq!((v.name.as_str(), v.revoked_ns), ("truck-1", None));
    c.revoke_vehicle("truck-1", 9).unwrap();
    c.revoke_vehicle("truck-1", 10).unwrap();
    assert_eq!(
        c.vehicle_by_key(KEY_A).unwrap().unwrap().revoked_ns,
        Some(9)
    );
    let by_name = c.vehicle_by_name("truck-1").unwrap().unwrap();
    assert_eq!((by_name.key.as_str(), by_name.revoked_ns), (KEY_A, Some(9)));
    assert_eq!(c.vehicle_by_name("ops").unwrap().unwrap().role, "operator");
    assert!(c.vehicle_by_name("nobody").unwrap().is_none());
    assert!(matches!(
        c.revoke_vehicle("nobody", 9),
        Err(CatalogError::NotFound(_))
    ));
    let names: Vec<_> = c.vehicles().unwrap().into_iter().map(|v| v.name).collect();
    assert_eq!(names, ["ops", "truck-1"]);
}

fn queue_and_index(c: &mut dyn Catalog) {
    assert_eq!(c.oldest_pending_ns().unwrap(), None, "nothing queued yet");
    c.queue_segment(&segment("v1", "a.jsonl.zst", "h1"))
        .unwrap();
    c.queue_segment(&segment("v1", "b.jsonl.zst", "h2"))
        .unwrap();
    // The same upload again (a client that never heard "stored"): no change.
    c.queue_segment(&segment("v1", "a.jsonl.zst", "h1"))
        .unwrap();
    assert_eq!(c.pending_count().unwrap(), 2);
    assert_eq!(c.oldest_pending_ns().unwrap(), Some(5));
    let claimed = c.claim_pending(10, 1_000).unwrap();
    assert_eq!(claimed.len(), 2);
    // Being indexed is still waiting, for the lag.
    assert_eq!(c.oldest_pending_ns().unwrap(), Some(5));
    assert!(
        c.claim_pending(10, 1_000).unwrap().is_empty(),
        "claimed twice"
    );
    // An indexer that died: its claim times out and the segment comes back.
    let again = c.claim_pending(10, 1_000 + CLAIM_TIMEOUT_NS + 1).unwrap();
    assert_eq!(again.len(), 2);
    let t0 = 1_764_000_000 * 1_000_000_000;
    let out = IndexOutcome {
        samples: 3,
        t_first: Some(t0),
        t_last: Some(t0 + 20_000_000_000),
        last: Some(LastState {
            vehicle: "v1".into(),
            t_ns: t0 + 20_000_000_000,
            lat: 45.0,
            lon: 7.0,
            speed: Some(12.0),
            values: r#"{"Vehicle.Speed":12.0}"#.into(),
        }),
        track: vec![
            TrackPoint {
                t_ns: t0,
                lat: 44.9,
                lon: 7.0,
                speed: None,
            },
            TrackPoint {
                t_ns: t0 + TRACK_BUCKET_NS,
                lat: 44.95,
                lon: 7.0,
                speed: None,
            },
        ],
        object: "v1/a.jsonl.zst".into(),
        parquet: Some("p".into()),
    };
    c.finish_indexed(again[0].id, &out, 2_000).unwrap();
    // Indexing the same segment again (a crash after the commit) changes nothing.
    c.finish_indexed(again[0].id, &out, 2_000).unwrap();
    assert_eq!(
        c.track("v1", t0, t0 + 3 * TRACK_BUCKET_NS).unwrap().len(),
        2
    );
    // An older segment indexed later does not move the last state back.
    let mut older = out.clone();
    older.last.as_mut().unwrap().t_ns = t0;
    older.last.as_mut().unwrap().lat = 1.0;
    older.last.as_mut().unwrap().values = r#"{"Vehicle.Exterior.AirTemperature":3.0}"#.into();
    c.finish_indexed(again[1].id, &older, 2_001).unwrap();
    let last = c.last_states().unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].lat, 45.0);
    c.fail_segment(again[1].id, "corrupt: line 2", 3_000)
        .unwrap();
    let seg = c.segment("v1", "b.jsonl.zst").unwrap().unwrap();
    assert_eq!(
        (seg.state.as_str(), seg.error.as_deref()),
        ("failed", Some("corrupt: line 2"))
    );
    assert_eq!(
        c.oldest_pending_ns().unwrap(),
        None,
        "indexed or failed: none waits"
    );
    // Re-uploading a failed segment queues it again.
    c.queue_segment(&segment("v1", "b.jsonl.zst", "h2"))
        .unwrap();
    assert_eq!(c.pending_count().unwrap(), 1);
    let listed = c.segments(Some("v1"), 10).unwrap();
    assert_eq!(listed.len(), 2);
    assert!(c.segments(Some("v2"), 10).unwrap().is_empty());
    let v1 = c.version().unwrap();
    c.queue_segment(&segment("v1", "c.jsonl.zst", "h3"))
        .unwrap();
    assert_ne!(c.version().unwrap(), v1);
}

/// Runs after `registry`: truck-1 is revoked, ops is an operator.
fn requests(c: &mut dyn Catalog) {
    const KEY_C: &str = "cc00000000000000000000000000000000000000000000000000000000000000";
    c.add_vehicle("truck-3", KEY_C, "vehicle", 20).unwrap();
    for (who, why) in [
        ("truck-1", "revoked"),
        ("ops", "registry"),
        ("nobody", "registry"),
    ] {
        match c.add_request(who, "status", "{}", "ops", 21) {
            Err(CatalogError::NotFound(e)) => assert!(e.contains(why), "{e}"),
            other => panic!("{who}: {other:?}"),
        }
    }
    let v0 = c.version().unwrap();
    let a = c
        .add_request("truck-3", "status", r#"{"type":"status"}"#, "ops", 30)
        .unwrap();
    assert_ne!(c.version().unwrap(), v0, "the page learns of a new request");
    let b = c
        .add_request("truck-3", "status", r#"{"type":"status"}"#, "ops", 31)
        .unwrap();
    assert_eq!((a.state.as_str(), a.acked_ns), ("queued", None));
    let open: Vec<i64> = c
        .open_requests("truck-3")
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(open, [a.id, b.id]);
    let after: Vec<i64> = c
        .queued_after(a.id, 10)
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(after, [b.id]);
    // Another vehicle cannot touch it.
    assert!(!c
        .request_event("truck-1", a.id, &RequestEvent::Ack, 32)
        .unwrap());
    let v1 = c.version().unwrap();
    assert!(c
        .request_event("truck-3", a.id, &RequestEvent::Ack, 33)
        .unwrap());
    assert_ne!(c.version().unwrap(), v1, "and of its acknowledgement");
    c.request_event("truck-3", a.id, &RequestEvent::Ack, 34)
        .unwrap();
    c.request_event(
        "truck-3",
        a.id,
        &RequestEvent::Progress("{\"done\":1}".into()),
        35,
    )
    .unwrap();
    c.request_event(
        "truck-3",
        a.id,
        &RequestEvent::Done("{\"ok\":1}".into()),
        36,
    )
    .unwrap();
    // Final: a late failure changes nothing.
    c.request_event("truck-3", a.id, &RequestEvent::Failed("late".into()), 37)
        .unwrap();
    c.request_event(
        "truck-3",
        b.id,
        &RequestEvent::Failed("no such data".into()),
        38,
    )
    .unwrap();
    let rows = c.requests(Some("truck-3"), 10).unwrap();
    assert_eq!(rows.len(), 2);
    let (rb, ra) = (&rows[0], &rows[1]);
    assert_eq!(
        (ra.state.as_str(), ra.acked_ns, ra.finished_ns),
        ("done", Some(33), Some(36))
    );
    assert_eq!(ra.progress.as_deref(), Some("{\"done\":1}"));
    assert_eq!(
        (ra.result.as_deref(), ra.error.as_deref()),
        (Some("{\"ok\":1}"), None)
    );
    assert_eq!((rb.state.as_str(), rb.acked_ns), ("failed", Some(38)));
    assert_eq!(rb.error.as_deref(), Some("no such data"));
    assert!(c.open_requests("truck-3").unwrap().is_empty());
    assert_eq!(c.requests(None, 1).unwrap().len(), 1);
}

/// Runs after `requests` (truck-3 registered, truck-1 revoked).
fn campaigns(c: &mut dyn Catalog) {
    let req = |v: i64| format!("{{\"type\":\"campaign\",\"version\":{v}}}");
    let trucks = ["truck-3".to_string()];
    let a = c
        .add_campaign("brake", "A", false, &trucks, "ops", 40, &req)
        .unwrap();
    let b = c
        .add_campaign("brake", "B", false, &trucks, "ops", 41, &req)
        .unwrap();
    let other = c
        .add_campaign("other", "C", false, &[], "ops", 42, &req)
        .unwrap();
    assert_eq!((a.version, b.version, other.version), (1, 2, 1));
    // An unknown or revoked vehicle refuses the whole deployment.
    let bad = ["truck-3".to_string(), "truck-1".to_string()];
    assert!(matches!(
        c.add_campaign("brake", "D", false, &bad, "ops", 43, &req),
        Err(CatalogError::NotFound(_))
    ));
    let rows = c.campaigns(Some("brake"), 10).unwrap();
    assert_eq!(rows.len(), 2, "nothing of the refused deployment");
    assert_eq!((rows[0].version, rows[0].body.as_str()), (2, "B"));
    assert_eq!(rows[0].vehicles, trucks);
    let open = c.open_requests("truck-3").unwrap();
    let ids: Vec<i64> = open.iter().map(|r| r.id).collect();
    assert_eq!(ids, [a.requests[0], b.requests[0]]);
    assert_eq!(open[1].kind, "campaign");
    assert_eq!(open[1].body, req(2));
    assert_eq!(c.campaigns(None, 10).unwrap().len(), 3);

    // A withdrawal is the next version, with a `withdraw` request queued
    // after the deployments it ends (so they arrive in that order).
    let w = c
        .add_campaign("brake", "", true, &trucks, "ops", 44, &req)
        .unwrap();
    assert_eq!((w.version, w.withdrawn), (3, true));
    let rows = c.campaigns(Some("brake"), 10).unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| (r.version, r.withdrawn))
            .collect::<Vec<_>>(),
        [(3, true), (2, false), (1, false)]
    );
    let open = c.open_requests("truck-3").unwrap();
    assert_eq!(
        open.last().map(|r| (r.id, r.kind.as_str())),
        Some((w.requests[0], "withdraw"))
    );
}

/// A vehicle's declared signals: replaced by each report, empty before any.
fn vehicle_signals(c: &mut dyn Catalog) {
    assert!(c.vehicle_signals("truck-3").unwrap().is_empty());
    let a = [
        "Vehicle.Acme.Boost".to_string(),
        "Vehicle.Acme.Fan".to_string(),
    ];
    c.set_vehicle_signals("truck-3", &a, 50).unwrap();
    assert_eq!(c.vehicle_signals("truck-3").unwrap(), a);
    c.set_vehicle_signals("truck-3", &a[1..], 51).unwrap();
    assert_eq!(c.vehicle_signals("truck-3").unwrap(), a[1..]);
    assert!(c.vehicle_signals("truck-9").unwrap().is_empty());
}

fn at(vehicle: &str, t_ns: i64, lat: f64) -> IndexOutcome {
    IndexOutcome {
        samples: 1,
        last: Some(LastState {
            vehicle: vehicle.into(),
            t_ns,
            lat,
            lon: 7.0,
            speed: None,
            values: "{}".into(),
        }),
        object: "o".into(),
        ..IndexOutcome::default()
    }
}

/// The version is a counter, not a clock: two index commits stamped with
/// the same time (one clock tick) still give two versions, and a batch is
/// one commit, all or nothing. Runs after `campaigns`.
fn version_counts_commits(c: &mut dyn Catalog) {
    // What earlier steps left queued is claimed out of the way.
    c.claim_pending(100, 6_000).unwrap();
    let v0 = c.version().unwrap();
    c.queue_segments(&[
        segment("v9", "1.jsonl.zst", "x1"),
        segment("v9", "2.jsonl.zst", "x2"),
        segment("v9", "3.jsonl.zst", "x3"),
        segment("v9", "4.jsonl.zst", "x4"),
    ])
    .unwrap();
    let v1 = c.version().unwrap();
    assert_eq!(v1, v0 + 1, "four uploads queued in one transaction");
    let rows = c.claim_pending(2, 7_000).unwrap();
    assert_eq!(rows.len(), 2);
    let v2 = c.version().unwrap();
    assert!(v2 > v1, "a claim shows in the uploads table");
    let tick = 8_000;
    c.finish_indexed(rows[0].id, &at("v9", 100, 45.0), tick)
        .unwrap();
    let v3 = c.version().unwrap();
    c.finish_indexed(rows[1].id, &at("v9", 101, 46.0), tick)
        .unwrap();
    let v4 = c.version().unwrap();
    assert!(v2 < v3 && v3 < v4, "same tick, two commits: {v2} {v3} {v4}");
    // Nothing to claim: nothing changes, so the feed stays quiet.
    let rest: Vec<_> = c
        .claim_pending(10, 9_000)
        .unwrap()
        .into_iter()
        .filter(|r| r.vehicle == "v9")
        .collect();
    assert_eq!(rest.len(), 2);
    let v5 = c.version().unwrap();
    assert!(c.claim_pending(10, 9_000).unwrap().is_empty());
    assert_eq!(c.version().unwrap(), v5);
    // A batch naming a segment that does not exist fails whole.
    let bad = [
        (rest[0].id, Finished::Indexed(at("v9", 200, 47.0))),
        (i64::MAX, Finished::Indexed(at("v9", 300, 48.0))),
    ];
    assert!(c.finish_batch(&bad, 9_500).is_err());
    assert_eq!(c.version().unwrap(), v5, "a failed batch raises nothing");
    assert_eq!(
        c.segment("v9", "3.jsonl.zst").unwrap().unwrap().state,
        "indexing",
        "and records nothing"
    );
    // Two segments finished in one commit: one version.
    let good = [
        (rest[0].id, Finished::Indexed(at("v9", 200, 47.0))),
        (rest[1].id, Finished::Failed("corrupt".into())),
    ];
    c.finish_batch(&good, 9_500).unwrap();
    assert_eq!(c.version().unwrap(), v5 + 1);
    let last = c.last_states().unwrap();
    let v9 = last.iter().find(|l| l.vehicle == "v9").unwrap();
    assert_eq!((v9.t_ns, v9.lat), (200, 47.0));
    assert_eq!(
        c.segment("v9", "4.jsonl.zst").unwrap().unwrap().state,
        "failed"
    );
    // The registry's changes show in the vehicles view.
    const KEY_D: &str = "dd00000000000000000000000000000000000000000000000000000000000000";
    c.add_vehicle("truck-9", KEY_D, "vehicle", 50).unwrap();
    let v6 = c.version().unwrap();
    assert_eq!(v6, v5 + 2);
    c.revoke_vehicle("truck-9", 51).unwrap();
    assert_eq!(c.version().unwrap(), v6 + 1);
    // A refused change raises nothing.
    assert!(c.add_vehicle("truck-9", KEY_D, "vehicle", 52).is_err());
    assert_eq!(c.version().unwrap(), v6 + 1);
}

#[test]
fn sqlite_registry_and_queue() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = SqliteCatalog::open(&dir.path().join("catalog.db")).unwrap();
    registry(&mut c);
    queue_and_index(&mut c);
    requests(&mut c);
    campaigns(&mut c);
    vehicle_signals(&mut c);
    version_counts_commits(&mut c);
}

#[test]
fn postgres_registry_and_queue() {
    let pg = Postgres::start();
    let mut c = PgCatalog::connect(&pg.url()).unwrap();
    registry(&mut c);
    queue_and_index(&mut c);
    requests(&mut c);
    campaigns(&mut c);
    vehicle_signals(&mut c);
    version_counts_commits(&mut c);
    // A second server on the same database sees the same registry.
    let mut other = convoy_catalog::open(&pg.url()).unwrap();
    assert_eq!(other.vehicles().unwrap().len(), 4);
    // ... and the same version, which its writes raise for both.
    let v = c.version().unwrap();
    assert_eq!(other.version().unwrap(), v);
    other.revoke_vehicle("ops", 60).unwrap();
    assert_eq!(c.version().unwrap(), v + 1);
}

/// A catalog made before withdrawals (no `withdrawn` column) opens, and
/// its campaign versions read as deployments.
#[test]
fn sqlite_catalog_from_before_withdrawals_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.db");
    let old = rusqlite::Connection::open(&path).unwrap();
    old.execute_batch(
        "CREATE TABLE campaigns (name TEXT NOT NULL, version INTEGER NOT NULL,
            body TEXT NOT NULL, vehicles TEXT NOT NULL, issuer TEXT NOT NULL,
            created_ns INTEGER NOT NULL, requests TEXT NOT NULL,
            PRIMARY KEY (name, version));
         INSERT INTO campaigns VALUES ('brake', 1, 'A', '[\"truck-3\"]', 'ops', 40, '[7]');",
    )
    .unwrap();
    drop(old);
    let mut c = SqliteCatalog::open(&path).unwrap();
    let rows = c.campaigns(None, 10).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].version, rows[0].withdrawn), (1, false));
    assert_eq!(rows[0].vehicles, ["truck-3"]);
    // Opening it again (the column now there) changes nothing.
    drop(c);
    let mut c = SqliteCatalog::open(&path).unwrap();
    assert_eq!(c.campaigns(None, 10).unwrap().len(), 1);
}

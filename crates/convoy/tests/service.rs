//! The fleet data service end to end, with real processes: identity and
//! namespaces, the agent into the indexer and the API, bad input, crashes,
//! and the shared backends (a real PostgreSQL and a real S3 server).

mod net_support;
mod service_support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use net_support::{bin, make_file, server_log_with, wait_partial};
use service_support::{convoy, drive_lines, now_s, ok, stored_sample_times, stored_samples, Fleet};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn unknown_and_revoked_keys_are_refused_with_their_reason() {
    let f = Fleet::start("refuse", &["v1", "v2"], &[]);
    let file = f.dir.path().join("a.log");
    make_file(&file, 1000, 1);
    ok(&convoy(&[
        "keygen",
        "--out",
        f.dir.path().join("stranger.key").to_str().unwrap(),
    ]));
    let out = f.send("stranger", &file, None);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not in the fleet registry"),
        "{}",
        stderr(&out)
    );
    ok(&f.send("v2", &file, None));
    let mut args = vec!["fleet", "revoke", "v2"];
    let cat = f.catalog_args();
    args.extend(cat.iter().map(String::as_str));
    ok(&convoy(&args));
    std::thread::sleep(Duration::from_millis(600));
    let out = f.send("v2", &file, None);
    assert!(stderr(&out).contains("v2 is revoked"), "{}", stderr(&out));
    let log = server_log_with(&f.store, "reason=\"v2 is revoked", Duration::from_secs(10));
    assert!(log.contains(" refused peer="), "{log}");
    assert!(
        log.contains("vehicle=\"v2\" peer=127.0.0.1"),
        "events name the vehicle: {log}"
    );
    // A revoked vehicle's HTTP token stops working too.
    let (status, _, _) = f.http_get("v2", "/api/vehicles", None);
    assert_eq!(status, 403);
}

#[test]
fn vehicles_stay_in_their_namespace_and_operators_read_all() {
    let f = Fleet::start("ns", &["v1", "v2"], &[]);
    let file = f.dir.path().join("000123.mcap");
    make_file(&file, 5000, 2);
    ok(&f.send("v1", &file, Some("2026-11-24/cam0")));
    let stored = f.store.join("v1/2026-11-24/cam0/000123.mcap");
    assert_eq!(
        std::fs::read(&stored).unwrap(),
        std::fs::read(&file).unwrap()
    );
    let name = "2026-11-24/cam0/000123.mcap";
    let out = f.get("v2", name, &f.dir.path().join("x"));
    assert!(stderr(&out).contains("no file named"), "{}", stderr(&out));
    for escape in [
        "../v1/2026-11-24/cam0/000123.mcap",
        "v1/../../etc/passwd",
        "/etc/passwd",
    ] {
        let out = f.get("v2", escape, &f.dir.path().join("x"));
        assert!(!out.status.success(), "{escape}");
    }
    // v2 writing "v1/..." lands inside v2's own namespace.
    ok(&f.send("v2", &file, Some("v1/2026-11-24/cam0")));
    assert!(f.store.join("v2/v1/2026-11-24/cam0/000123.mcap").exists());
    assert_eq!(
        std::fs::read(&stored).unwrap(),
        std::fs::read(&file).unwrap()
    );
    // The vehicle reads its own; the operator reads it by namespace.
    let mine = f.dir.path().join("mine");
    ok(&f.get("v1", name, &mine));
    let theirs = f.dir.path().join("theirs");
    ok(&f.get("ops", &format!("v1/{name}"), &theirs));
    assert_eq!(std::fs::read(mine).unwrap(), std::fs::read(theirs).unwrap());
    // Over HTTP: v2 cannot see v1's file or vehicle; a Range read works.
    let path = format!("/files/v1/{name}");
    assert_eq!(f.http_get("v2", &path, None).0, 403);
    let (status, body, head) = f.http_get("ops", &path, Some("bytes=100-199"));
    assert_eq!(status, 206, "{head}");
    assert_eq!(body, std::fs::read(&file).unwrap()[100..200].to_vec());
    assert!(
        head.to_lowercase()
            .contains("content-range: bytes 100-199/5000"),
        "{head}"
    );
    let v = f.api("v2", "/api/vehicles");
    let names: Vec<_> = v["vehicles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].clone())
        .collect();
    assert_eq!(names, ["v2"]);
    assert_eq!(f.http_get("v1", "/api/vehicles", None).0, 200);
    let (status, _, _) = {
        let url = format!("http://127.0.0.1:{}/api/vehicles", f.http);
        let out = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", &url])
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stdout).parse::<u16>().unwrap(),
            (),
            (),
        )
    };
    assert_eq!(status, 401, "no token, no data");
}

#[test]
fn a_key_revoked_mid_upload_gets_no_acknowledgement() {
    let f = Fleet::start("midrevoke", &["v1"], &[]);
    let file = f.dir.path().join("big.bin");
    make_file(&file, 400 << 20, 3);
    let mut c = Command::new(bin());
    c.arg("send").arg(&file).arg(f.addr());
    c.args(["--server-key", f.pubkey.to_str().unwrap()]);
    c.arg("--identity").arg(f.key_of("v1"));
    let mut child = net_support::Proc(Some(
        c.stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    wait_partial(&f.store, 8 << 20, Duration::from_secs(30));
    // The server reuses a registry answer for up to REGISTRY_TTL, so a
    // commit within that of the handshake may still pass: on loopback at
    // 6.8 Gbit/s the whole file was stored 0.49 s after it began. The
    // client is held while the revocation is made and until every answer
    // fetched before it has expired, so the commit's check reads it.
    let pid = child.0.as_ref().expect("running").id() as libc::pid_t;
    // SAFETY: signals our own child, which is still running (not reaped).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let mut args = vec!["fleet", "revoke", "v1"];
    let cat = f.catalog_args();
    args.extend(cat.iter().map(String::as_str));
    ok(&convoy(&args));
    std::thread::sleep(convoy_ingest::REGISTRY_TTL + Duration::from_millis(200));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let out = child.wait_output(Duration::from_secs(30));
    assert!(
        !out.status.success(),
        "the upload was acknowledged after the revocation"
    );
    assert!(stderr(&out).contains("revoked"), "{}", stderr(&out));
    assert!(!f.store.join("v1/big.bin").exists());
}

#[test]
fn the_agent_uploads_telemetry_the_indexer_and_api_show_and_rejects_bad_lines() {
    let f = Fleet::start("agent", &["v1"], &[]);
    let spool = f.dir.path().join("spool");
    let cfg = f.agent_config("v1", &spool, "[[source]]\nkind = \"stdin\"\n");
    let now_s = now_s();
    let mut input = drive_lines(120, now_s - 120, 45.0);
    input += "this is not json\n{\"path\":\"Vehicle.Sped\",\"value\":3}\n{\"path\":\"Vehicle.Speed\",\"value\":[1]}\n";
    let out = Fleet::agent_until_idle(&cfg, &[], &input);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = stderr(&out);
    assert!(log.contains("stdin:361: not a JSON object"), "{log}");
    assert!(
        log.contains("stdin:362: unknown VSS signal \"Vehicle.Sped\""),
        "{log}"
    );
    let rows = f.wait_uploads("indexed", |r| {
        r.iter().all(|x| x["state"] == "indexed") && !r.is_empty()
    });
    let samples: i64 = rows.iter().map(|r| r["samples"].as_i64().unwrap()).sum();
    assert_eq!(samples, 360);
    let v = f.api("ops", "/api/vehicles");
    let last = &v["vehicles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "v1")
        .unwrap()["last"];
    assert!(
        (last["lat"].as_f64().unwrap() - (45.0 + 119.0 * 1e-4)).abs() < 1e-9,
        "{last}"
    );
    let track = f.api("v1", "/api/track?vehicle=v1");
    let n = track["geometry"]["coordinates"].as_array().unwrap().len();
    assert!(
        (12..=14).contains(&n),
        "120 s downsampled to 10 s buckets: {n}"
    );
    let status = ok(&Command::new(bin())
        .args(["agent", "status", "--json", "--config"])
        .arg(&cfg)
        .output()
        .unwrap());
    let s: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(s["agent"]["lines_rejected"], 3);
    assert_eq!(
        s["classes"][1]["acked"].as_u64().unwrap() as usize,
        rows.len()
    );
    assert_eq!(s["spool_bytes"], 0);
}

#[test]
fn a_corrupt_segment_is_kept_and_reported_not_indexed() {
    let f = Fleet::start("corrupt", &["v1"], &[]);
    let bad = f.dir.path().join("000001.jsonl.zst");
    std::fs::write(&bad, b"this is not zstd at all").unwrap();
    ok(&f.send("v1", &bad, Some("2026-11-24/telemetry")));
    let rows = f.wait_uploads("failed", |r| r.iter().any(|x| x["state"] == "failed"));
    let err = rows[0]["error"].as_str().unwrap();
    assert!(err.contains("corrupt segment"), "{err}");
    assert!(f
        .store
        .join("v1/2026-11-24/telemetry/000001.jsonl.zst")
        .exists());
    let log = server_log_with(&f.store, "kept but not indexed", Duration::from_secs(10));
    assert!(log.contains("kept but not indexed"), "{log}");
    // The service goes on: a good segment after it is indexed.
    let mut w = zstd::Encoder::new(Vec::new(), 3).unwrap();
    w.write_all(drive_lines(5, now_s(), 45.0).as_bytes())
        .unwrap();
    let good = f.dir.path().join("000002.jsonl.zst");
    std::fs::write(&good, w.finish().unwrap()).unwrap();
    ok(&f.send("v1", &good, Some("2026-11-24/telemetry")));
    f.wait_uploads("good one indexed", |r| {
        r.iter().any(|x| x["state"] == "indexed")
    });
}

#[test]
fn kill_9_of_agent_and_server_loses_and_duplicates_nothing_acknowledged() {
    let mut f = Fleet::start("kill9", &["v1"], &[]);
    let spool = f.dir.path().join("spool");
    let sock = f.dir.path().join("tele.sock");
    let cfg = f.agent_config(
        "v1",
        &spool,
        &format!("[segments]\nmax_seconds = 0.2\n[[source]]\nkind = \"socket\"\npath = {sock:?}\n"),
    );
    let start_agent = || {
        let mut c = Command::new(bin());
        c.args(["agent", "--config"])
            .arg(&cfg)
            .stderr(Stdio::null());
        let p = net_support::Proc(Some(c.spawn().unwrap()));
        let t = std::time::Instant::now();
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(t.elapsed() < Duration::from_secs(10), "agent socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        p
    };
    let t0 = now_s() - 10_000;
    let mut written = 0usize;
    let mut feed = |n: usize| {
        let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        for _ in 0..n {
            s.write_all(drive_lines(1, t0 + written as i64, 45.0).as_bytes())
                .unwrap();
            written += 1;
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    let status = || -> serde_json::Value {
        let out = Command::new(bin())
            .args(["agent", "status", "--json", "--config"])
            .arg(&cfg)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    };
    let mut agent = start_agent();
    feed(300);
    // Lines still in the socket when the agent dies were never taken in
    // (nor acknowledged to the writer), so SIGKILL only once the agent has
    // read all 300 (three samples each): a loaded machine can leave it
    // hundreds of milliseconds behind the writer.
    let t = std::time::Instant::now();
    while status()["agent"]["samples_in"].as_u64().unwrap_or(0) < 900 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "agent took in: {}",
            status()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    agent.0.as_mut().unwrap().kill().unwrap(); // SIGKILL
    agent.kill();
    let mut agent = start_agent();
    feed(300);
    f.server.kill(); // SIGKILL, mid-stream
    feed(200);
    f.restart();
    feed(200);
    // Wait until the spool is empty, then compare.
    let t = std::time::Instant::now();
    loop {
        let s = status();
        // An empty spool alone is not the end: the last lines may still be
        // in the socket or the open segment (a loaded machine shows that
        // moment), so also wait for the server to hold them.
        if s["spool_bytes"] == 0
            && s["agent"]["samples_in"].as_u64().is_some()
            && stored_sample_times(&f.store, "v1").len() >= written - 5
        {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "not everything reached the server in 120 s: {} of {written} stored, agent {s}",
            stored_sample_times(&f.store, "v1").len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    agent.kill();
    let times = stored_sample_times(&f.store, "v1");
    let mut dedup = times.clone();
    dedup.dedup();
    assert_eq!(dedup.len(), times.len(), "a sample was stored twice");
    // Every sample that reached the agent is on the server: the agent
    // writes each line through to its open segment, so even SIGKILL
    // loses none that it had read.
    assert!(
        times.len() >= written - 5,
        "stored {} of {written}",
        times.len()
    );
    let rows = f.wait_uploads("all indexed", |r| r.iter().all(|x| x["state"] == "indexed"));
    let indexed: i64 = rows.iter().map(|r| r["samples"].as_i64().unwrap()).sum();
    assert_eq!(indexed as usize, times.len() * 3);
}

/// Several servers' deployment: the catalog in a real PostgreSQL cluster
/// and the objects in a real S3-compatible server (versitygw), both
/// started for this test.
#[test]
fn postgres_catalog_and_s3_store_serve_the_same_service() {
    let pg = convoy_testkit::Postgres::start();
    let s3 = convoy_testkit::S3::start();
    for (k, v) in s3.env() {
        // SAFETY: set before any thread of this test reads the environment.
        unsafe { std::env::set_var(k, v) };
    }
    let url = pg.url();
    let store = format!("s3://{}/fleet-a", s3.bucket);
    let f = Fleet::start("pg-s3", &["v1"], &["--catalog", &url, "--store", &store]);
    let mut w = zstd::Encoder::new(Vec::new(), 3).unwrap();
    w.write_all(drive_lines(30, now_s() - 30, 44.5).as_bytes())
        .unwrap();
    let seg = f.dir.path().join("000001.jsonl.zst");
    std::fs::write(&seg, w.finish().unwrap()).unwrap();
    ok(&f.send("v1", &seg, Some("2026-11-24/telemetry")));
    let cam = f.dir.path().join("cam0.mcap");
    make_file(&cam, 20 << 20, 9);
    ok(&f.send("v1", &cam, Some("2026-11-24/cam0")));
    let rows = f.wait_uploads("both indexed", |r| {
        r.len() == 2 && r.iter().all(|x| x["state"] == "indexed")
    });
    let tele = rows.iter().find(|r| r["kind"] == "telemetry").unwrap();
    assert_eq!(tele["samples"], 90);
    // The bytes moved to the bucket; the landing copies are gone.
    let raw = s3.object_path("fleet-a/v1/2026-11-24/cam0/cam0.mcap");
    assert_eq!(std::fs::read(&raw).unwrap(), std::fs::read(&cam).unwrap());
    assert!(!f.store.join("v1/2026-11-24/cam0/cam0.mcap").exists());
    let pq = tele["parquet"].as_str().unwrap();
    assert!(s3.object_path(&format!("fleet-a/{pq}")).exists(), "{pq}");
    // HTTP Range reads come from S3.
    let (status, body, _) = f.http_get(
        "ops",
        "/files/v1/2026-11-24/cam0/cam0.mcap",
        Some("bytes=-1000"),
    );
    assert_eq!(status, 206);
    assert_eq!(
        body,
        std::fs::read(&cam).unwrap()[(20 << 20) - 1000..].to_vec()
    );
    // The registry is in PostgreSQL: a second catalog client sees it.
    let list = ok(&convoy(&["fleet", "list", "--json", "--catalog", &url]));
    assert!(list.contains("\"v1\""), "{list}");
    // The last state is in PostgreSQL too.
    let v = f.api("ops", "/api/vehicles");
    assert!(v["vehicles"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["name"] == "v1" && !x["last"].is_null()));
}

#[test]
fn can_frames_from_a_candump_log_arrive_indexed_under_their_vss_names() {
    let f = Fleet::start("can", &["v1"], &[]);
    let spool = f.dir.path().join("spool");
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../convoy-agent/tests/data/can"
    );
    let cfg = f.agent_config(
        "v1",
        &spool,
        &format!(
            "[[source]]\nkind = \"can\"\ndbc = \"{data}/vehicle.dbc\"\nlog = \"{data}/drive.log\"\nunmapped = \"private\"\n[source.signals]\nVehicleSpeed = \"Vehicle.Speed\"\n"
        ),
    );
    let out = Command::new(bin())
        .args(["agent", "--until-idle", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // cantools' decoding of the same log says how many signals it holds.
    let expected = std::fs::read_to_string(format!("{data}/expected.jsonl")).unwrap();
    let signals: usize = expected
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["signals"].as_object().unwrap().len()
        })
        .sum();
    let rows = f.wait_uploads("indexed", |r| {
        !r.is_empty()
            && r.iter().all(|x| x["state"] == "indexed")
            && r.iter()
                .map(|x| x["samples"].as_u64().unwrap())
                .sum::<u64>() as usize
                == signals
    });
    assert!(!rows.is_empty());
    // The stored segments carry the VSS names: the mapped one, and the
    // others under Vehicle.Private.CAN.
    let speeds = expected
        .lines()
        .filter(|l| l.contains("\"VehicleSpeed\""))
        .count();
    let mut paths: std::collections::BTreeMap<String, usize> = Default::default();
    for v in stored_samples(&f.store, "v1") {
        *paths
            .entry(v["path"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(paths.get("Vehicle.Speed"), Some(&speeds), "{paths:?}");
    assert!(
        paths.contains_key("Vehicle.Private.CAN.Engine.EngineSpeed"),
        "{paths:?}"
    );
    assert_eq!(paths.values().sum::<usize>(), signals);
    let status = ok(&Command::new(bin())
        .args(["agent", "status", "--json", "--config"])
        .arg(&cfg)
        .output()
        .unwrap());
    let s: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(s["agent"]["can_frames_decoded"], 400, "{s}");
    assert_eq!(s["agent"]["lines_rejected"], 0, "{s}");
}

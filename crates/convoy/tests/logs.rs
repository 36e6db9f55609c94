//! `--log-format json` on `convoy serve` and `convoy agent`: every line
//! either writes on stderr is one JSON object, and the events carry their
//! facts as fields (vehicle, peer, upload name, bytes, durations), so a log
//! pipeline can filter on them without parsing a sentence.

mod net_support;
mod service_support;

use std::process::Command;
use std::time::Duration;

use net_support::{bin, make_file, server_log};
use serde_json::Value;
use service_support::{convoy, drive_lines, now_s, ok, Fleet};

/// Each line of `text` as a JSON object with the fields every event has.
fn json_lines(text: &str) -> Vec<serde_json::Map<String, Value>> {
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}\nwhole log:\n{text}"));
            let o = v
                .as_object()
                .unwrap_or_else(|| panic!("not an object: {l}"))
                .clone();
            for k in ["ts", "level", "target", "message"] {
                assert!(o.get(k).is_some_and(Value::is_string), "no {k}: {l}");
            }
            o
        })
        .collect()
}

fn find<'a>(
    lines: &'a [serde_json::Map<String, Value>],
    message: &str,
) -> &'a serde_json::Map<String, Value> {
    lines
        .iter()
        .find(|o| o["message"] == message)
        .unwrap_or_else(|| panic!("no {message:?} event in {lines:#?}"))
}

#[test]
fn serve_and_agent_log_one_json_object_per_line_with_fields() {
    let f = Fleet::start("logjson", &["v1"], &["--log-format", "json"]);

    // An upload as v1, then a key the registry does not know.
    let file = f.dir.path().join("a.bin");
    make_file(&file, 20_000, 3);
    ok(&f.send("v1", &file, None));
    ok(&convoy(&[
        "keygen",
        "--out",
        f.dir.path().join("stranger.key").to_str().unwrap(),
    ]));
    assert!(!f.send("stranger", &file, None).status.success());

    // The agent, as v1, with a bad line among its telemetry.
    let spool = f.dir.path().join("spool");
    let cfg = f.agent_config("v1", &spool, "[[source]]\nkind = \"stdin\"\n");
    let input = drive_lines(20, now_s() - 20, 45.0) + "this is not json\n";
    let bad_line = format!("stdin:{}:", input.lines().count());
    let out = Fleet::agent_until_idle(&cfg, &["--log-format", "json"], &input);
    let agent_log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{agent_log}");
    let agent_lines = json_lines(&agent_log);
    // Every agent event names its vehicle, from whichever thread it came.
    for o in &agent_lines {
        assert_eq!(o.get("vehicle"), Some(&Value::from("v1")), "{o:?}");
    }
    let rejected = find(&agent_lines, "rejected input");
    assert_eq!(rejected["rejected"], 1);
    assert!(
        rejected["input"].as_str().unwrap().starts_with(&bad_line),
        "{rejected:?}"
    );
    let running = find(&agent_lines, "running");
    assert_eq!(running["sources"], 1);

    // The server's side, once the agent's telemetry segment is indexed
    // (a.bin is indexed too, with no samples).
    let start = std::time::Instant::now();
    let (log, lines) = loop {
        let log = server_log(&f.store);
        // The last line may be half written: judge whole lines only.
        let whole = &log[..log.rfind('\n').map_or(0, |i| i + 1)];
        let lines = json_lines(whole);
        let telemetry = |o: &&serde_json::Map<String, Value>| {
            o["message"] == "indexed" && o["samples"].as_i64().is_some_and(|n| n > 0)
        };
        if lines.iter().any(|o| telemetry(&o)) || start.elapsed() > Duration::from_secs(15) {
            break (whole.to_owned(), lines);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stored = lines
        .iter()
        .find(|o| o["message"] == "stored" && o["name"] == "a.bin")
        .unwrap_or_else(|| panic!("no stored a.bin: {log}"));
    assert_eq!(stored["vehicle"], "v1");
    assert_eq!(stored["bytes"], 20_000);
    assert_eq!(stored["level"], "INFO");
    assert!(stored["peer"].as_str().unwrap().starts_with("127.0.0.1:"));
    assert_eq!(stored["blake3"].as_str().unwrap().len(), 64);
    // Every accepted vehicle is logged as connected, named (the registry
    // answers after the handshake); the refused key never is.
    let connected: Vec<_> = lines
        .iter()
        .filter(|o| o["message"] == "connected")
        .collect();
    assert!(!connected.is_empty(), "no connected line: {log}");
    assert!(
        connected.iter().all(|o| o["vehicle"] == "v1"),
        "{connected:?}"
    );
    let refused = find(&lines, "refused");
    assert_eq!(refused["level"], "WARN");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("not in the fleet registry"),
        "{refused:?}"
    );
    let indexed = lines
        .iter()
        .find(|o| o["message"] == "indexed" && o["samples"].as_i64().is_some_and(|n| n > 0))
        .unwrap_or_else(|| panic!("no telemetry indexed: {log}"));
    assert_eq!(indexed["vehicle"], "v1");
    assert!(indexed["millis"].as_f64().unwrap() >= 0.0);
    let listening = find(&lines, "listening");
    assert_eq!(listening["target"], "convoy::server");

    // Nothing but JSON up to the end, the drain's lines included.
    let mut server = f.server;
    let pid = server.0.as_ref().unwrap().id() as i32;
    // SAFETY: kill only sends a signal to our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert!(server.wait_output(Duration::from_secs(15)).status.success());
    let lines = json_lines(&server_log(&f.store));
    let drained = find(&lines, "every commit answered; closing the connections");
    assert!(drained["millis"].is_number());
}

#[test]
fn log_level_filters_and_a_bad_filter_is_refused() {
    // --log-level warn: the info events (listening, stored) are left out.
    let f = Fleet::start("loglevel", &["v1"], &["--log-level", "warn"]);
    let file = f.dir.path().join("a.bin");
    make_file(&file, 1000, 4);
    ok(&f.send("v1", &file, None));
    std::thread::sleep(Duration::from_millis(300));
    let log = server_log(&f.store);
    assert!(
        !log.contains("listening") && !log.contains("stored"),
        "{log}"
    );

    let out = Command::new(bin())
        .args(["serve", "--open", "--dir", ".", "--key", "nokey"])
        .args(["--log-level", "convoy=loud"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--log-level"),
        "{err}"
    );
}

//! The web view's HTTP side with real clients: curl for keep-alive,
//! HTTP/2, gzip, Server-Sent Events and TLS (a certificate made here by
//! the openssl command), and raw sockets for what a client should not do
//! (malformed requests, oversized heads, a slowloris).

mod net_support;
mod service_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use net_support::{make_file, TempDir};
use service_support::{make_certificate, ok, Fleet};

/// curl's `-w` figures for one request with `who`'s token.
fn curl_w(f: &Fleet, who: &str, args: &[&str], path: &str, format: &str) -> String {
    let out = f
        .curl()
        .args(["-s", "-o", "/dev/null", "-w", format])
        .args(["-H", &format!("Authorization: Bearer {}", f.token(who))])
        .args(args)
        .arg(format!("{}{path}", f.base_url()))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn keep_alive_http2_and_gzip_for_json_but_not_downloads() {
    let f = Fleet::start("web-http", &["v1", "v2"], &[]);
    // Two requests, one connection.
    let url = format!("{}/api/vehicles", f.base_url());
    let connects = curl_w(
        &f,
        "ops",
        &[&url, "-o", "/dev/null"],
        "/api/me",
        "%{num_connects} ",
    );
    assert_eq!(
        connects.trim(),
        "1 0",
        "the second request reused the first's connection"
    );
    // HTTP/2 in the clear, by prior knowledge.
    let version = curl_w(
        &f,
        "ops",
        &["--http2-prior-knowledge"],
        "/api/vehicles",
        "%{http_version}",
    );
    assert_eq!(version, "2");
    // JSON is gzipped for a client that accepts it.
    let (_, _, head) = {
        let out = f
            .curl()
            .args(["-s", "-D", "-", "-o", "/dev/null", "--compressed"])
            .args(["-H", &format!("Authorization: Bearer {}", f.token("ops"))])
            .arg(format!("{}/api/vehicles", f.base_url()))
            .output()
            .unwrap();
        ((), (), String::from_utf8_lossy(&out.stdout).to_lowercase())
    };
    assert!(head.contains("content-encoding: gzip"), "{head}");
    // A download keeps its byte ranges: never gzipped.
    let file = f.dir.path().join("big.json");
    make_file(&file, 100_000, 4);
    ok(&f.send("v1", &file, None));
    let out = f
        .curl()
        .args(["-s", "-D", "-", "-o", "/dev/null", "--compressed"])
        .args(["-H", &format!("Authorization: Bearer {}", f.token("v1"))])
        .arg(format!("{}/files/v1/big.json", f.base_url()))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(!head.contains("content-encoding"), "{head}");
    assert!(head.contains("accept-ranges: bytes"), "{head}");
    assert!(head.contains("content-length: 100000"), "{head}");
    // HEAD: the same headers, no body.
    let (status, body, head) = {
        let out = f
            .curl()
            .args(["-s", "-I"])
            .args(["-H", &format!("Authorization: Bearer {}", f.token("v1"))])
            .arg(format!("{}/files/v1/big.json", f.base_url()))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_lowercase();
        (text.starts_with("http/1.1 200"), out.stdout.len(), text)
    };
    assert!(status && head.contains("content-length: 100000"), "{head}");
    assert!(body < 1000, "HEAD sent a body");
}

#[test]
fn the_live_feed_delivers_an_event_while_the_stream_stays_open() {
    let f = Fleet::start("web-sse", &["v1"], &[]);
    let mut curl = f
        .curl()
        .args(["-s", "-N", "--max-time", "120"])
        .args(["-H", &format!("Authorization: Bearer {}", f.token("ops"))])
        .arg(format!("{}/api/events", f.base_url()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(curl.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert_eq!(first, "event: change");
    let data = lines.next().unwrap().unwrap();
    assert!(data.starts_with("data: {\"version\":"), "{data}");
    // The event came out while the response is still going.
    assert!(curl.try_wait().unwrap().is_none(), "the stream ended");
    let _ = curl.kill();
    let _ = curl.wait();
}

#[test]
fn tls_with_a_made_certificate_speaks_http2_to_curl() {
    let certs = TempDir::new("web-cert");
    let (cert, key) = make_certificate(certs.path());
    let f = Fleet::start(
        "web-tls",
        &["v1"],
        &["--http-tls", cert.to_str().unwrap(), key.to_str().unwrap()],
    );
    assert!(f.base_url().starts_with("https://"));
    let v = f.api("v1", "/api/vehicles");
    assert_eq!(v["vehicles"][0]["name"], "v1");
    let version = curl_w(&f, "v1", &[], "/api/me", "%{http_version}");
    assert_eq!(version, "2", "HTTP/2 by ALPN");
    let version = curl_w(&f, "v1", &["--http1.1"], "/api/me", "%{http_version}");
    assert_eq!(version, "1.1");
    // Plain HTTP to the TLS port gets no answer in HTTP.
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "30",
        ])
        .arg(format!("http://127.0.0.1:{}/api/me", f.http))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "000");
    // An unknown certificate is refused by curl, as it should be.
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "--max-time", "30"])
        .arg(format!("{}/api/me", f.base_url()))
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// Writes `request` on a new connection and reads until the server closes
/// it (or 60 s pass): what came back, and how long that took.
fn raw(port: u16, request: &[u8]) -> (String, Duration) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let start = Instant::now();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    (String::from_utf8_lossy(&out).into_owned(), start.elapsed())
}

#[test]
fn bad_requests_get_a_clear_status_and_silent_clients_are_cut() {
    let f = Fleet::start("web-bad", &["v1", "v2"], &[]);
    let (reply, _) = raw(f.http, b"GARBAGE\r\n\r\n");
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    let (reply, _) = raw(
        f.http,
        b"GET / HTTP/1.1\r\nHost: x\r\nBad Header Without Colon\r\n\r\n",
    );
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    let big = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(40_000)
    );
    let (reply, _) = raw(f.http, big.as_bytes());
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply}");
    let (reply, _) = raw(
        f.http,
        b"DELETE /api/me HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(reply.starts_with("HTTP/1.1 405"), "{reply}");
    // A slowloris: half a head, then nothing. The server cuts it (after
    // its 10 s head timeout; 60 s is what we wait before calling it held).
    let (reply, took) = raw(f.http, b"GET /api/me HTTP/1.1\r\nHost: x\r\n");
    assert!(reply.is_empty(), "{reply}");
    assert!(took < Duration::from_secs(55), "held open {took:?}");
    // A connection that never sends a byte is cut too.
    let (reply, took) = raw(f.http, b"");
    assert!(
        reply.is_empty() && took < Duration::from_secs(55),
        "{took:?}"
    );
    // Paths that try to leave their namespace, a range past the end.
    let file = f.dir.path().join("a.mcap");
    make_file(&file, 1000, 5);
    ok(&f.send("v1", &file, None));
    for escape in [
        "/files/v1/../v2/a.mcap",
        "/files/v2/../v1/a.mcap",
        "/files/v1/%2e%2e/v2/a.mcap",
    ] {
        let (status, _, _) = f.http_get("v2", escape, None);
        assert!([400, 403, 404].contains(&status), "{escape}: {status}");
    }
    let (status, _, head) = f.http_get("v1", "/files/v1/a.mcap", Some("bytes=5000-"));
    assert_eq!(status, 416, "{head}");
    assert!(
        head.to_lowercase().contains("content-range: bytes */1000"),
        "{head}"
    );
    // The server is still up and answering.
    assert_eq!(f.http_get("v1", "/api/me", None).0, 200);
}

/// `convoy fleet token NAME ARGS…`.
fn token_with(f: &Fleet, who: &str, args: &[&str]) -> String {
    let key = f.key.to_str().unwrap().to_owned();
    let mut all = vec!["fleet", "token", who, "--key", &key];
    let catalog = f.catalog_args();
    all.extend(catalog.iter().map(String::as_str));
    all.extend(args);
    ok(&service_support::convoy(&all)).trim().to_owned()
}

/// GET with a token of our choosing (or none): (status, body).
fn get_with(f: &Fleet, token: Option<&str>, path: &str) -> (u16, String) {
    let mut c = f.curl();
    c.args(["-s", "-w", "\n%{http_code}"]);
    if let Some(t) = token {
        c.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    let out = c.arg(format!("{}{path}", f.base_url())).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.parse().unwrap(), body.to_owned())
}

#[test]
fn tokens_are_scoped_expire_and_never_come_from_the_url() {
    let f = Fleet::start("web-tokens", &["v1", "v2"], &[]);
    let file = f.dir.path().join("a.mcap");
    make_file(&file, 1000, 6);
    ok(&f.send("v1", &file, None));
    ok(&f.send("v2", &file, None));
    // An operator's token confined to v1.
    let only_v1 = token_with(&f, "ops", &["--vehicle", "v1"]);
    assert_eq!(get_with(&f, Some(&only_v1), "/files/v1/a.mcap").0, 200);
    let (status, body) = get_with(&f, Some(&only_v1), "/files/v2/a.mcap");
    assert_eq!(status, 403, "{body}");
    assert_eq!(get_with(&f, Some(&only_v1), "/api/track?vehicle=v2").0, 403);
    assert_eq!(
        get_with(&f, Some(&only_v1), "/api/uploads?vehicle=v2").0,
        200
    );
    let (_, body) = get_with(&f, Some(&only_v1), "/api/uploads?limit=10");
    assert!(
        body.contains("\"v1\"") && !body.contains("\"v2\""),
        "{body}"
    );
    let (_, body) = get_with(&f, Some(&only_v1), "/api/vehicles");
    assert!(
        body.contains("\"v1\"") && !body.contains("\"v2\""),
        "{body}"
    );
    // Forged: a changed MAC, a widened scope, a longer life, the old form.
    let mut forged = only_v1.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == '0' { '1' } else { '0' });
    let widened = only_v1.replace("~v1~", "~*~");
    let exp: u64 = only_v1.split('~').nth(1).unwrap().parse().unwrap();
    let longer = only_v1.replace(&format!("~{exp}~"), &format!("~{}~", exp + 1));
    for bad in [forged, widened, longer, "ops.0123456789abcdef".to_owned()] {
        let (status, body) = get_with(&f, Some(&bad), "/api/me");
        assert_eq!(status, 401, "{bad}: {body}");
        assert!(body.contains("invalid token"), "{body}");
    }
    // A token in the URL is not a token.
    let good = f.token("ops");
    let (status, _) = get_with(&f, None, &format!("/api/me?token={good}"));
    assert_eq!(status, 401);
    // An expired token is refused as expired (it lives one second).
    let brief = token_with(&f, "ops", &["--expires", "1s"]);
    let start = Instant::now();
    loop {
        let (status, body) = get_with(&f, Some(&brief), "/api/me");
        if status == 401 {
            assert!(body.contains("token expired"), "{body}");
            break;
        }
        assert_eq!(status, 200, "{body}");
        assert!(start.elapsed() < Duration::from_secs(60), "never expired");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Revoked by name: its tokens stop working.
    let v2 = f.token("v2");
    assert_eq!(get_with(&f, Some(&v2), "/api/me").0, 200);
    let mut args = vec!["fleet", "revoke", "v2"];
    let cat = f.catalog_args();
    args.extend(cat.iter().map(String::as_str));
    ok(&service_support::convoy(&args));
    assert_eq!(get_with(&f, Some(&v2), "/api/me").0, 403);
}

#[test]
fn login_sets_a_secure_http_only_cookie_over_tls() {
    let certs = TempDir::new("web-cert2");
    let (cert, key) = make_certificate(certs.path());
    let f = Fleet::start(
        "web-login",
        &["v1"],
        &["--http-tls", cert.to_str().unwrap(), key.to_str().unwrap()],
    );
    let jar = f.dir.path().join("cookies.txt");
    let out = f
        .curl()
        .args(["-s", "-D", "-", "-o", "/dev/null", "-X", "POST", "-c"])
        .arg(&jar)
        .args(["-H", &format!("Authorization: Bearer {}", f.token("v1"))])
        .arg(format!("{}/api/login", f.base_url()))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(head.starts_with("http/2 200"), "{head}");
    let cookie = head
        .lines()
        .find(|l| l.starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("no cookie: {head}"));
    for attr in [
        "httponly",
        "secure",
        "samesite=strict",
        "path=/",
        "max-age=",
    ] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    // The cookie alone is enough, for the API and for the live feed.
    let me = f
        .curl()
        .args(["-s", "-b"])
        .arg(&jar)
        .arg(format!("{}/api/me", f.base_url()))
        .output()
        .unwrap();
    let me = String::from_utf8_lossy(&me.stdout);
    assert!(me.contains("\"name\":\"v1\""), "{me}");
    // Logging in needs the token itself, not a cookie.
    let out = f
        .curl()
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "POST",
            "-b",
        ])
        .arg(&jar)
        .arg(format!("{}/api/login", f.base_url()))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "401");
}

#[test]
fn downloads_carry_what_foxglove_needs() {
    let f = Fleet::start("web-foxglove", &["v1"], &[]);
    let file = f.dir.path().join("drive.mcap");
    make_file(&file, 3000, 7);
    ok(&f.send("v1", &file, None));
    let (status, _, head) = f.http_get("v1", "/files/v1/drive.mcap", None);
    assert_eq!(status, 200);
    let head = head.to_lowercase();
    for h in [
        "accept-ranges: bytes",
        "content-length: 3000",
        "etag: \"",
        "last-modified: ",
    ] {
        assert!(head.contains(h), "{h}: {head}");
    }
    let etag = head
        .lines()
        .find_map(|l| l.strip_prefix("etag: "))
        .unwrap()
        .trim()
        .to_owned();
    // A cross-origin reader may see them (CORS), and ask again cheaply.
    let out = f
        .curl()
        .args(["-s", "-D", "-", "-o", "/dev/null", "-X", "OPTIONS"])
        .args(["-H", "Origin: https://app.foxglove.dev"])
        .arg(format!("{}/files/v1/drive.mcap", f.base_url()))
        .output()
        .unwrap();
    let pre = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(pre.starts_with("http/1.1 204"), "{pre}");
    for exposed in [
        "etag",
        "last-modified",
        "content-range",
        "accept-ranges",
        "content-length",
    ] {
        let line = pre
            .lines()
            .find(|l| l.starts_with("access-control-expose-headers:"))
            .unwrap_or_default();
        assert!(line.contains(exposed), "{exposed}: {pre}");
    }
    let code = curl_w(
        &f,
        "v1",
        &["-H", &format!("If-None-Match: {etag}")],
        "/files/v1/drive.mcap",
        "%{http_code}",
    );
    assert_eq!(code, "304");
}

#[test]
fn health_readiness_and_metrics_that_promtool_accepts() {
    let f = Fleet::start("web-metrics", &["v1"], &[]);
    let plain = |path: &str| {
        let out = f
            .curl()
            .args(["-s", "-w", "\n%{http_code}"])
            .arg(format!("{}{path}", f.base_url()))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap();
        (code.to_owned(), body.to_owned())
    };
    assert_eq!(plain("/healthz"), ("200".into(), "ok\n".into()));
    assert_eq!(plain("/readyz"), ("200".into(), "ready\n".into()));
    // Something to count: an upload, a stranger's key, a refused request
    // and an answered one.
    let file = f.dir.path().join("m.bin");
    make_file(&file, 2000, 8);
    ok(&f.send("v1", &file, None));
    ok(&service_support::convoy(&[
        "keygen",
        "--out",
        f.dir.path().join("stranger.key").to_str().unwrap(),
    ]));
    assert!(!f.send("stranger", &file, None).status.success());
    assert_eq!(plain("/api/me").0, "401");
    assert_eq!(f.http_get("v1", "/api/me", None).0, 200);
    // The server counts its events as its event loop reports them: wait
    // for the upload and the refusal to be counted.
    let start = Instant::now();
    let (code, text) = loop {
        let (code, text) = plain("/metrics");
        let counted = text.contains("convoy_uploads_stored_total 1\n")
            && text.contains("{reason=\"unknown_key\"} 1\n")
            && text.contains("convoy_index_delay_seconds_count 1\n");
        if counted || start.elapsed() > Duration::from_secs(60) {
            break (code, text);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(code, "200");
    for line in [
        "convoy_http_responses_total{code=\"401\"} ",
        "convoy_http_responses_total{code=\"200\"} ",
        "convoy_catalog_up 1\n",
        "convoy_vehicles_registered 2\n",
        "convoy_vehicles_revoked 0\n",
        "convoy_index_queue_segments ",
        "convoy_http_connections_open ",
        "convoy_uploads_stored_total 1\n",
        "convoy_upload_bytes_total 2000\n",
        "convoy_handshakes_refused_total{reason=\"unknown_key\"} 1\n",
        "convoy_handshakes_refused_total{reason=\"revoked\"} 0\n",
        "convoy_uploads_in_progress 0\n",
        "convoy_upload_fsync_seconds_count 1\n",
        "convoy_upload_commit_seconds_bucket{le=\"+Inf\"} 1\n",
        "convoy_segments_indexed_total 1\n",
        "convoy_index_delay_seconds_bucket{le=\"+Inf\"} 1\n",
        "convoy_index_queue_segments 0\n",
        "convoy_index_lag_seconds 0\n",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    service_support::promtool_check(&text);
}

/// The indexer's lag on /metrics: a queued segment whose bytes cannot be
/// read (its landing file is gone) waits, and the gauge shows the age of
/// the oldest waiting upload, from the catalog row the commit wrote.
#[test]
fn the_index_lag_is_the_age_of_the_oldest_waiting_upload() {
    let f = Fleet::start("web-lag", &["v1"], &[]);
    let stored_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
        - 100_000_000_000;
    let mut catalog =
        convoy_catalog::open(f.store.join(".convoy-catalog.db").to_str().unwrap()).unwrap();
    catalog
        .queue_segment(&convoy_catalog::NewSegment {
            vehicle: "v1",
            name: "gone.jsonl.zst",
            kind: "telemetry",
            bytes: 10,
            blake3: "00",
            stored_ns,
            object: "v1/gone.jsonl.zst",
        })
        .unwrap();
    let out = f
        .curl()
        .args(["-s", &format!("{}/metrics", f.base_url())])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("convoy_index_queue_segments 1\n"), "{text}");
    let lag: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("convoy_index_lag_seconds "))
        .unwrap_or_else(|| panic!("no lag gauge: {text}"))
        .parse()
        .unwrap();
    assert!((100.0..160.0).contains(&lag), "lag {lag} s: {text}");
    service_support::promtool_check(&text);
}

#[test]
fn positions_are_geojson_points_each_caller_sees_what_it_may() {
    let f = Fleet::start("web-positions", &["v1", "v2"], &[]);
    let now = service_support::now_s();
    for (v, lat) in [("v1", 45.0), ("v2", 46.0)] {
        let spool = f.dir.path().join(format!("spool-{v}"));
        let cfg = f.agent_config(v, &spool, "[[source]]\nkind = \"stdin\"\n");
        let out =
            Fleet::agent_until_idle(&cfg, &[], &service_support::drive_lines(5, now - 5, lat));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Both vehicles' telemetry indexed: the operator sees both points.
    let start = Instant::now();
    let all = loop {
        let doc = f.api("ops", "/api/positions");
        if doc["features"].as_array().unwrap().len() == 2 {
            break doc;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "not indexed: {doc}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(all["type"], "FeatureCollection");
    let v1 = all["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["properties"]["vehicle"] == "v1")
        .expect("v1's point");
    assert_eq!(v1["type"], "Feature");
    assert_eq!(v1["geometry"]["type"], "Point");
    // GeoJSON order: longitude, then latitude (the last of five fixes).
    let c = v1["geometry"]["coordinates"].as_array().unwrap();
    assert_eq!(c[0].as_f64(), Some(7.68));
    assert!((c[1].as_f64().unwrap() - 45.0004).abs() < 1e-9, "{c:?}");
    assert!(v1["properties"]["speed"].as_f64().is_some(), "{v1}");
    assert!(v1["properties"]["t_ns"].as_i64().unwrap() > 0);
    // A vehicle sees itself only; so does a token confined to v1.
    let names = |doc: &serde_json::Value| -> Vec<String> {
        doc["features"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["properties"]["vehicle"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&f.api("v2", "/api/positions")), ["v2"]);
    let only_v1 = token_with(&f, "ops", &["--vehicle", "v1"]);
    let (status, body) = get_with(&f, Some(&only_v1), "/api/positions");
    assert_eq!(status, 200, "{body}");
    assert_eq!(names(&serde_json::from_str(&body).unwrap()), ["v1"]);
}

//! The web view against a real SQLite catalog that changes under it: the
//! live feed reports every commit, even two in one clock tick, and the
//! cached `/api/positions` document follows each new last state while
//! each caller still sees only what it may.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use convoy_catalog::{Catalog, IndexOutcome, LastState, NewSegment};
use convoy_testkit::Postgres;
use convoy_web::token::{issue, Claims};
use convoy_web::{Web, WebConfig};

const KEY: [u8; 32] = [7; 32];

struct Service {
    _dir: tempfile::TempDir,
    catalog: Box<dyn Catalog>,
    web: Web,
    next: usize,
}

impl Service {
    /// The web view on a SQLite catalog file, or on `url`.
    fn start(url: Option<String>) -> Service {
        let dir = tempfile::tempdir().unwrap();
        let url =
            url.unwrap_or_else(|| dir.path().join("catalog.db").to_string_lossy().into_owned());
        let mut catalog = convoy_catalog::open(&url).unwrap();
        catalog
            .add_vehicle("ops", &"0f".repeat(32), "operator", 1)
            .unwrap();
        for (i, v) in ["v1", "v2"].iter().enumerate() {
            catalog
                .add_vehicle(v, &format!("{:064x}", i + 1), "vehicle", 1)
                .unwrap();
        }
        let store = Arc::new(convoy_ingest::Store::open(None, dir.path()).unwrap());
        let web = Web::start(WebConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            catalog_url: url,
            store,
            server_private: KEY,
            overlay: None,
            tls: None,
            extra_metrics: None,
            on_request: None,
            changes: None,
        })
        .unwrap();
        Service {
            _dir: dir,
            catalog,
            web,
            next: 0,
        }
    }

    /// Queues and claims a segment of `vehicle`, as an upload and the
    /// indexer's claim would; returns its id.
    fn claim(&mut self, vehicle: &str, now_ns: i64) -> i64 {
        self.next += 1;
        let name = format!("{}.jsonl.zst", self.next);
        self.catalog
            .queue_segment(&NewSegment {
                vehicle,
                name: &name,
                kind: "telemetry",
                bytes: 1,
                blake3: "00",
                stored_ns: now_ns,
                object: &name,
            })
            .unwrap();
        self.catalog.claim_pending(1, now_ns).unwrap().remove(0).id
    }

    /// Records segment `id` indexed, its newest fix at `lat`, stamped
    /// `now_ns`: a commit that adds no segment.
    fn finish(&mut self, id: i64, vehicle: &str, lat: f64, now_ns: i64) {
        let out = IndexOutcome {
            samples: 1,
            last: Some(LastState {
                vehicle: vehicle.into(),
                t_ns: id,
                lat,
                lon: 7.0,
                speed: None,
                values: "{}".into(),
            }),
            object: "o".into(),
            ..IndexOutcome::default()
        };
        self.catalog.finish_indexed(id, &out, now_ns).unwrap();
    }

    fn index(&mut self, vehicle: &str, lat: f64, now_ns: i64) {
        let id = self.claim(vehicle, now_ns);
        self.finish(id, vehicle, lat, now_ns);
    }
}

fn token(name: &str, vehicle: Option<&str>) -> String {
    issue(
        &KEY,
        &Claims {
            name: name.into(),
            expires: u64::MAX / 2,
            vehicle: vehicle.map(str::to_owned),
        },
    )
}

fn get(addr: SocketAddr, path: &str, token: &str) -> serde_json::Value {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    let text = String::from_utf8(got).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    serde_json::from_str(body).unwrap()
}

/// (vehicle, latitude) of each point.
fn points(doc: &serde_json::Value) -> Vec<(String, f64)> {
    doc["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["properties"]["vehicle"].as_str().unwrap().to_owned(),
                f["geometry"]["coordinates"][1].as_f64().unwrap(),
            )
        })
        .collect()
}

/// An open live feed, read as the versions of its `change` events.
struct Feed {
    s: TcpStream,
    text: String,
}

impl Feed {
    fn open(addr: SocketAddr, token: &str) -> Feed {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        write!(
            s,
            "GET /api/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
        )
        .unwrap();
        Feed {
            s,
            text: String::new(),
        }
    }

    /// The next event's version, within 10 s.
    fn next_version(&mut self) -> i64 {
        const MARK: &str = "data: {\"version\":";
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(at) = self.text.find(MARK) {
                let rest = &self.text[at + MARK.len()..];
                if let Some(end) = rest.find('}') {
                    let v = rest[..end].parse().unwrap();
                    self.text = rest[end..].to_owned();
                    return v;
                }
            }
            assert!(Instant::now() < deadline, "no event: {:?}", self.text);
            let mut buf = [0u8; 4096];
            match self.s.read(&mut buf) {
                Ok(0) => panic!("the feed ended"),
                Ok(n) => self.text.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => panic!("{e}"),
            }
        }
    }
}

/// Two index commits stamped with the same clock reading: the version
/// used to be the newest index time plus a count of segments, which two
/// such commits left where it was, and the page missed the second.
#[test]
fn the_live_feed_reports_two_commits_of_one_clock_tick() {
    two_commits_of_one_tick(Service::start(None));
}

#[test]
fn the_live_feed_reports_two_commits_of_one_clock_tick_on_postgres() {
    let pg = Postgres::start();
    two_commits_of_one_tick(Service::start(Some(pg.url())));
}

fn two_commits_of_one_tick(mut svc: Service) {
    let tick = 1_764_000_000_000_000_000;
    let (a, b) = (svc.claim("v1", tick), svc.claim("v1", tick));
    let mut feed = Feed::open(svc.web.addr(), &token("ops", None));
    let v0 = feed.next_version();
    svc.finish(a, "v1", 45.0, tick);
    let v1 = feed.next_version();
    assert!(v1 > v0, "{v0} then {v1}");
    // Another commit with the same timestamp, after the page saw the first.
    svc.finish(b, "v1", 45.1, tick);
    let v2 = feed.next_version();
    assert!(v2 > v1, "{v1} then {v2}");
}

#[test]
fn cached_positions_follow_each_new_last_state_and_each_scope() {
    let mut svc = Service::start(None);
    let addr = svc.web.addr();
    let (ops, v1, ops_v2) = (
        token("ops", None),
        token("v1", None),
        token("ops", Some("v2")),
    );
    let tick = 1_764_000_000_000_000_000;
    svc.index("v1", 45.0, tick);
    svc.index("v2", 46.0, tick);
    let next = svc.claim("v1", tick);
    let want = [("v1".to_string(), 45.0), ("v2".to_string(), 46.0)];
    assert_eq!(points(&get(addr, "/api/positions", &ops)), want);
    // Served from the cache now; each caller still sees what it may.
    assert_eq!(points(&get(addr, "/api/positions", &ops)), want);
    assert_eq!(
        points(&get(addr, "/api/positions", &v1)),
        [("v1".to_string(), 45.0)]
    );
    assert_eq!(
        points(&get(addr, "/api/positions", &ops_v2)),
        [("v2".to_string(), 46.0)]
    );
    // A new last state in the same clock tick, and no new segment: the
    // next GET has it, for every scope.
    svc.finish(next, "v1", 45.5, tick);
    assert_eq!(
        points(&get(addr, "/api/positions", &ops)),
        [("v1".to_string(), 45.5), ("v2".to_string(), 46.0)]
    );
    assert_eq!(
        points(&get(addr, "/api/positions", &v1)),
        [("v1".to_string(), 45.5)]
    );
    assert_eq!(
        points(&get(addr, "/api/positions", &ops_v2)),
        [("v2".to_string(), 46.0)]
    );
}

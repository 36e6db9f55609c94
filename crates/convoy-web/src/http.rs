//! The HTTP server: one thread accepts, one thread per request answers
//! (Server-Sent Events hold theirs for as long as the page is open).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::http1::{finish, Request};
use convoy_catalog::Catalog;
use convoy_ingest::Store;

use crate::api::{self, Caller, Reply};
use crate::{assets, token};

/// What the web view serves, and from where.
pub struct WebConfig {
    pub listen: SocketAddr,
    /// The catalog (`postgres://…` or a SQLite path).
    pub catalog_url: String,
    pub store: Arc<Store>,
    /// The server's private key: tokens are derived from it.
    pub server_private: [u8; 32],
    /// An extra GeoJSON layer drawn under the vehicles (roads of a SUMO
    /// network, a depot's outline); served at `/static/overlay.json`.
    pub overlay: Option<PathBuf>,
}

/// A running web view; stops when dropped.
pub struct Web {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Catalog connections reused across requests.
pub(crate) struct Pool {
    url: String,
    idle: Mutex<Vec<Box<dyn Catalog>>>,
}

impl Pool {
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut dyn Catalog) -> convoy_catalog::Result<T>,
    ) -> Result<T, String> {
        let got = self.idle.lock().ok().and_then(|mut v| v.pop());
        let mut c = match got {
            Some(c) => c,
            None => convoy_catalog::open(&self.url).map_err(|e| e.to_string())?,
        };
        let r = f(c.as_mut()).map_err(|e| e.to_string());
        // A connection that failed may be broken: open a new one next time.
        if r.is_ok() {
            if let Ok(mut v) = self.idle.lock() {
                v.push(c);
            }
        }
        r
    }
}

pub(crate) struct Shared {
    pub pool: Pool,
    pub store: Arc<Store>,
    pub key: [u8; 32],
    pub overlay: Option<Vec<u8>>,
    pub stop: Arc<AtomicBool>,
}

impl Web {
    pub fn start(cfg: WebConfig) -> Result<Web, String> {
        let overlay = match &cfg.overlay {
            Some(p) => Some(std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?),
            None => None,
        };
        let listener = std::net::TcpListener::bind(cfg.listen)
            .map_err(|e| format!("cannot listen on {} (HTTP): {e}", cfg.listen))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            pool: Pool {
                url: cfg.catalog_url,
                idle: Mutex::new(Vec::new()),
            },
            store: cfg.store,
            key: cfg.server_private,
            overlay,
            stop: stop.clone(),
        });
        // Check the catalog now, so a bad URL fails at start, not per request.
        shared.pool.with(|c| c.version())?;
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("convoy-web".into())
            .spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let _ = stream.set_nonblocking(false);
                            let shared = shared.clone();
                            let _ = std::thread::Builder::new()
                                .name("convoy-web-req".into())
                                .spawn(move || {
                                    if let Some(req) = Request::read(stream) {
                                        handle(shared, req);
                                    }
                                });
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20))
                        }
                        // A client's failed connection is no reason to stop.
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Web {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

type Headers = Vec<(String, String)>;

fn cors(headers: &mut Headers) {
    for (k, v) in [
        ("Access-Control-Allow-Origin", "*"),
        ("Access-Control-Allow-Headers", "Authorization, Range"),
        (
            "Access-Control-Expose-Headers",
            "Content-Range, Content-Length, Accept-Ranges",
        ),
    ] {
        headers.push((k.into(), v.into()));
    }
}

/// Splits `/path?a=b&c=d` and percent-decodes the query values.
pub(crate) fn split_url(url: &str) -> (String, Vec<(String, String)>) {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let params = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    (percent_decode(path), params)
}

pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn caller(shared: &Shared, req: &Request, params: &[(String, String)]) -> Result<Caller, Reply> {
    let from_header = req
        .header("Authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let from_query = params
        .iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.clone());
    let Some(tok) = from_header.or(from_query) else {
        return Err(Reply::error(
            401,
            "a token is needed: convoy fleet token NAME",
        ));
    };
    let Some(name) = token::verify(&shared.key, &tok) else {
        return Err(Reply::error(401, "invalid token"));
    };
    let row = shared
        .pool
        .with(|c| c.vehicles())
        .map_err(|e| Reply::error(503, &e))?
        .into_iter()
        .find(|v| v.name == name);
    match row {
        Some(v) if v.revoked_ns.is_none() => Ok(Caller {
            operator: v.role == "operator",
            name,
        }),
        Some(_) => Err(Reply::error(403, &format!("{name} is revoked"))),
        None => Err(Reply::error(403, &format!("{name} is not in the registry"))),
    }
}

fn handle(shared: Arc<Shared>, req: Request) {
    let (path, params) = split_url(&req.url);
    let mut headers = Vec::new();
    cors(&mut headers);
    let head_only = req.method == "HEAD";
    if req.method == "OPTIONS" {
        let _ = req.respond(204, &headers, std::io::empty(), 0, true);
        return;
    }
    if req.method != "GET" && !head_only {
        let _ = respond(req, Reply::error(405, "only GET"), headers);
        return;
    }
    if let Some(a) = assets::find(&path) {
        headers.push(("Content-Type".into(), a.content_type.into()));
        headers.push(("Cache-Control".into(), "no-cache".into()));
        let _ = req.respond(200, &headers, a.body, a.body.len() as u64, head_only);
        return;
    }
    if path == "/static/overlay.json" {
        let reply = match &shared.overlay {
            Some(b) => Reply::Json(b.clone()),
            None => Reply::Json(br#"{"type":"FeatureCollection","features":[]}"#.to_vec()),
        };
        let _ = respond(req, reply, headers);
        return;
    }
    if !path.starts_with("/api/") && !path.starts_with("/files/") {
        let _ = respond(req, Reply::error(404, "not found"), headers);
        return;
    }
    let who = match caller(&shared, &req, &params) {
        Ok(c) => c,
        Err(r) => {
            let _ = respond(req, r, headers);
            return;
        }
    };
    if path == "/api/events" {
        api::events(shared, req, headers);
        return;
    }
    if let Some(rest) = path.strip_prefix("/files/") {
        let range = req.header("Range").map(str::to_owned);
        match api::file(&shared, &who, rest, range.as_deref()) {
            Ok(f) => {
                headers.extend(f.headers.iter().cloned());
                let _ = req.respond(f.status, &headers, f.body, f.len, head_only);
            }
            Err(r) => {
                let _ = respond(req, r, headers);
            }
        }
        return;
    }
    let reply = api::route(&shared, &who, &path, &params);
    let _ = respond(req, reply, headers);
}

fn respond(req: Request, reply: Reply, mut headers: Headers) -> std::io::Result<()> {
    let (status, body) = match reply {
        Reply::Json(b) => (200, b),
        Reply::Error(code, msg) => (
            code,
            serde_json::json!({ "error": msg }).to_string().into_bytes(),
        ),
    };
    headers.push(("Content-Type".into(), "application/json".into()));
    headers.push(("Cache-Control".into(), "no-store".into()));
    let len = body.len() as u64;
    req.respond(status, &headers, &body[..], len, false)
}

pub(crate) fn end(s: std::net::TcpStream) {
    finish(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_and_decode() {
        let (p, q) = split_url("/files/v1/2026-11-24/cam%200.mcap?token=a.b&x=%2F");
        assert_eq!(p, "/files/v1/2026-11-24/cam 0.mcap");
        assert_eq!(
            q,
            vec![("token".into(), "a.b".into()), ("x".into(), "/".into())]
        );
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("%4"), "%4");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%C3%A9"), "é");
    }
}

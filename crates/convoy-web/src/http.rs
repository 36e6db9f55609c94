//! The HTTP server: one thread accepts, one thread per request answers
//! (Server-Sent Events hold theirs for as long as the page is open).

use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use convoy_catalog::Catalog;
use convoy_ingest::Store;
use tiny_http::{Header, Method, Request, Response, StatusCode};

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
    server: Arc<tiny_http::Server>,
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
        let server = Arc::new(
            tiny_http::Server::http(cfg.listen)
                .map_err(|e| format!("cannot listen on {} (HTTP): {e}", cfg.listen))?,
        );
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or("HTTP server has no IP address")?;
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
        let srv = server.clone();
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("convoy-web".into())
            .spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    match srv.recv_timeout(Duration::from_millis(200)) {
                        Ok(Some(req)) => {
                            let shared = shared.clone();
                            let _ = std::thread::Builder::new()
                                .name("convoy-web-req".into())
                                .spawn(move || handle(shared, req));
                        }
                        Ok(None) => {}
                        Err(_) => break,
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Web {
            addr,
            stop,
            server,
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
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("valid header")
}

fn cors(headers: &mut Vec<Header>) {
    headers.push(header("Access-Control-Allow-Origin", "*"));
    headers.push(header(
        "Access-Control-Allow-Headers",
        "Authorization, Range",
    ));
    headers.push(header(
        "Access-Control-Expose-Headers",
        "Content-Range, Content-Length, Accept-Ranges",
    ));
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
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .and_then(|h| h.value.as_str().strip_prefix("Bearer ").map(str::to_owned));
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
    let (path, params) = split_url(req.url());
    let mut headers = Vec::new();
    cors(&mut headers);
    if *req.method() == Method::Options {
        let _ = req.respond(Response::empty(StatusCode(204)).with_headers_vec(headers));
        return;
    }
    if *req.method() != Method::Get && *req.method() != Method::Head {
        let _ = respond(req, Reply::error(405, "only GET"), headers);
        return;
    }
    if let Some(a) = assets::find(&path) {
        headers.push(header("Content-Type", a.content_type));
        headers.push(header("Cache-Control", "no-cache"));
        let _ = req.respond(Response::from_data(a.body).with_headers_vec(headers));
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
    let who = match caller(&shared, &req, &params) {
        Ok(c) => c,
        Err(r) => {
            let _ = respond(req, r, headers);
            return;
        }
    };
    if path == "/api/events" {
        let _ = who;
        api::events(shared, req, headers);
        return;
    }
    if let Some(rest) = path.strip_prefix("/files/") {
        let range = req
            .headers()
            .iter()
            .find(|h| h.field.equiv("Range"))
            .map(|h| h.value.as_str().to_owned());
        match api::file(&shared, &who, rest, range.as_deref()) {
            Ok(f) => {
                let status = f.status;
                headers.extend(f.headers.iter().map(|(k, v)| header(k, v)));
                let len = f.len as usize;
                let body: Box<dyn Read + Send> = if *req.method() == Method::Head {
                    Box::new(std::io::empty())
                } else {
                    f.body
                };
                let _ = req.respond(Response::new(
                    StatusCode(status),
                    headers,
                    body,
                    Some(len),
                    None,
                ));
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

fn respond(req: Request, reply: Reply, mut headers: Vec<Header>) -> std::io::Result<()> {
    let (status, body) = match reply {
        Reply::Json(b) => (200, b),
        Reply::Error(code, msg) => (
            code,
            serde_json::json!({ "error": msg }).to_string().into_bytes(),
        ),
    };
    headers.push(header("Content-Type", "application/json"));
    headers.push(header("Cache-Control", "no-store"));
    req.respond(
        Response::from_data(body)
            .with_status_code(StatusCode(status))
            .with_headers_vec(headers),
    )
}

trait WithHeaders {
    fn with_headers_vec(self, h: Vec<Header>) -> Self;
}

impl<R: Read> WithHeaders for Response<R> {
    fn with_headers_vec(mut self, h: Vec<Header>) -> Self {
        for x in h {
            self.add_header(x);
        }
        self
    }
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
    }
}

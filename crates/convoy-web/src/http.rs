//! The web view's lifecycle and request routing: [`Web::start`] binds,
//! starts a runtime on a thread of its own and serves until dropped;
//! [`service`] is what each connection runs (gzip for JSON and the
//! page's text assets, around [`handle`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use convoy_catalog::Catalog;
use convoy_ingest::Store;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Extensions, Method, Request, Response, StatusCode, Version};
use tokio::sync::watch;
use tower_http::compression::predicate::{And, Predicate as _, SizeAbove};

use crate::api::{self, Caller, Reply};
use crate::body::{self, Body};
use crate::{assets, server, token};

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
    /// PEM certificate chain and private key: serve HTTPS instead of HTTP.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// More families for `/metrics` (the transport's, the indexer's).
    pub extra_metrics: Option<crate::metrics::ExtraMetrics>,
    /// Called after `POST /api/requests` queued a request (the request
    /// dispatcher sends it at once instead of at its next poll).
    pub on_request: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Rung by the process's own indexer after each segment it commits:
    /// the live feed reads the catalog's version at once instead of at its
    /// next poll.
    pub changes: Option<ChangeSignal>,
}

/// A handle the indexer rings when it has committed: the live feed then
/// tells the pages within [`MIN_VERSION_GAP`] rather than within
/// [`VERSION_POLL`]. Rings while the feed is busy fold into one.
#[derive(Clone, Default)]
pub struct ChangeSignal(Arc<tokio::sync::Notify>);

impl ChangeSignal {
    pub fn new() -> ChangeSignal {
        ChangeSignal::default()
    }

    /// The catalog changed; cheap, and never blocks.
    pub fn ring(&self) {
        self.0.notify_one();
    }

    /// Waits for a ring (one made while nobody waited counts).
    async fn rung(&self) {
        self.0.notified().await;
    }
}

/// A running web view; stops when dropped.
pub struct Web {
    addr: SocketAddr,
    tls: bool,
    identity: Option<Arc<crate::tls::Certificate>>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Catalog connections reused across requests.
pub(crate) struct Pool {
    url: String,
    idle: Mutex<Vec<Box<dyn Catalog>>>,
    /// Queries that failed, for `/metrics`.
    pub errors: std::sync::atomic::AtomicU64,
}

impl Pool {
    /// Runs `f` on a pooled connection. Blocking: call it from a blocking
    /// thread (`spawn_blocking`), never from a runtime worker.
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut dyn Catalog) -> convoy_catalog::Result<T>,
    ) -> Result<T, String> {
        let got = self.idle.lock().ok().and_then(|mut v| v.pop());
        let mut c = match got {
            Some(c) => c,
            None => convoy_catalog::open(&self.url).map_err(|e| {
                self.errors
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                e.to_string()
            })?,
        };
        let r = f(c.as_mut()).map_err(|e| e.to_string());
        if r.is_err() {
            self.errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
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
    /// The catalog's version, polled by one task for every live page.
    pub version: watch::Receiver<Option<i64>>,
    pub stop: watch::Receiver<bool>,
    pub counters: crate::metrics::HttpCounters,
    pub extra_metrics: Option<crate::metrics::ExtraMetrics>,
    pub on_request: Option<Arc<dyn Fn() + Send + Sync>>,
    /// `/api/positions` documents of the catalog's current version.
    pub positions: crate::positions::Cache,
}

/// How often the catalog's version is polled for the live feed: what
/// other processes sharing the catalog and the upload commits change.
const VERSION_POLL: Duration = Duration::from_millis(250);
/// The fewest milliseconds between two reads of the version however often
/// the indexer rings: at most 20 queries and live events a second.
const MIN_VERSION_GAP: Duration = Duration::from_millis(50);

impl Web {
    pub fn start(cfg: WebConfig) -> Result<Web, String> {
        let overlay = match &cfg.overlay {
            Some(p) => Some(std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?),
            None => None,
        };
        let identity = match &cfg.tls {
            Some((cert, key)) => Some(crate::tls::Certificate::load(cert, key)?),
            None => None,
        };
        let tls = match &identity {
            Some(id) => Some(crate::tls::server_config(id.clone())?),
            None => None,
        };
        let listener = std::net::TcpListener::bind(cfg.listen)
            .map_err(|e| format!("cannot listen on {} (HTTP): {e}", cfg.listen))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let pool = Pool {
            url: cfg.catalog_url,
            idle: Mutex::new(Vec::new()),
            errors: Default::default(),
        };
        // Check the catalog now, so a bad URL fails at start, not per request.
        let first = pool.with(|c| c.version())?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let (version_tx, version_rx) = watch::channel(Some(first));
        let shared = Arc::new(Shared {
            pool,
            store: cfg.store,
            key: cfg.server_private,
            overlay,
            version: version_rx,
            stop: stop_rx.clone(),
            counters: Default::default(),
            extra_metrics: cfg.extra_metrics,
            on_request: cfg.on_request,
            positions: Default::default(),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("convoy-web")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
        let is_tls = tls.is_some();
        let changes = cfg.changes.unwrap_or_default();
        let thread = std::thread::Builder::new()
            .name("convoy-web".into())
            .spawn(move || {
                // The last reference is dropped here, off the runtime: the
                // store owns a runtime of its own, which tokio refuses to
                // drop from inside an asynchronous task.
                let last = shared.clone();
                runtime.spawn(poll_version(shared.clone(), version_tx, changes));
                runtime.block_on(server::accept_loop(listener, shared, tls, stop_rx));
                // Live feeds see `stop` and end; what is still running
                // after this is cut.
                runtime.shutdown_timeout(Duration::from_secs(2));
                drop(last);
            })
            .map_err(|e| e.to_string())?;
        Ok(Web {
            addr,
            tls: is_tls,
            identity,
            stop: stop_tx,
            thread: Some(thread),
        })
    }

    /// The TLS identity, to [`crate::tls::Certificate::reload`] on SIGHUP
    /// (`None` without `--http-tls`).
    pub fn certificate(&self) -> Option<Arc<crate::tls::Certificate>> {
        self.identity.clone()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL: `https://ADDR` with TLS, `http://ADDR` without.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Publishes the catalog's version every [`VERSION_POLL`], and soon after
/// each ring of `changes`: one query for all live pages rather than one
/// per page.
async fn poll_version(shared: Arc<Shared>, tx: watch::Sender<Option<i64>>, changes: ChangeSignal) {
    let mut stop = shared.stop.clone();
    loop {
        let read_at = tokio::time::Instant::now();
        let s = shared.clone();
        let v = tokio::task::spawn_blocking(move || s.pool.with(|c| c.version()).ok())
            .await
            .ok()
            .flatten();
        // A failed poll keeps the last version: the page keeps what it has.
        if let Some(v) = v {
            tx.send_if_modified(|old| {
                let changed = *old != Some(v);
                *old = Some(v);
                changed
            });
        }
        tokio::select! {
            _ = tokio::time::sleep(VERSION_POLL) => {}
            // At most MIN_VERSION_GAP late to see `stop` after a ring.
            _ = changes.rung() => tokio::time::sleep_until(read_at + MIN_VERSION_GAP).await,
            _ = stop.changed() => return,
        }
    }
}

/// Compress JSON and the page's text, never a download (gzip would drop
/// its byte ranges) nor the live feed (gzip would hold events back).
fn compressible(_: StatusCode, _: Version, headers: &HeaderMap, _: &Extensions) -> bool {
    let kind = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let text = kind.starts_with("application/json")
        || kind.starts_with("text/javascript")
        || kind.starts_with("text/css")
        || kind.starts_with("text/html");
    text && !headers.contains_key(http::header::ACCEPT_RANGES)
}

/// Bodies under this stay as they are: gzip would make them no smaller.
const GZIP_ABOVE: u16 = 128;

type Predicate = And<SizeAbove, fn(StatusCode, Version, &HeaderMap, &Extensions) -> bool>;

/// What one connection runs: [`handle`] under gzip.
pub(crate) fn service(
    shared: Arc<Shared>,
    peer: SocketAddr,
) -> tower_http::compression::Compression<
    impl tower::Service<
            Request<hyper::body::Incoming>,
            Response = Response<Body>,
            Error = Infallible,
            Future = impl Send,
        > + Clone
        + Send,
    Predicate,
> {
    let inner = tower::service_fn(move |req: Request<hyper::body::Incoming>| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(handle(shared, req, peer).await) }
    });
    // The fastest level: at the default one, deflating the 1,000-vehicle
    // positions document took more CPU than writing it.
    let gzip = tower_http::compression::CompressionLayer::new()
        .gzip(true)
        .quality(tower_http::CompressionLevel::Fastest)
        .compress_when(SizeAbove::new(GZIP_ABOVE).and(compressible as _));
    tower::Layer::layer(&gzip, inner)
}

fn cors(headers: &mut HeaderMap) {
    for (k, v) in [
        ("access-control-allow-origin", "*"),
        (
            "access-control-allow-headers",
            "Authorization, Range, If-None-Match",
        ),
        (
            "access-control-expose-headers",
            "Content-Range, Content-Length, Accept-Ranges, ETag, Last-Modified",
        ),
    ] {
        headers.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
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

/// The request as the blocking handlers see it: no body (GET and HEAD).
pub(crate) struct Asked {
    pub path: String,
    pub params: Vec<(String, String)>,
    pub headers: HeaderMap,
}

/// The cookie `/api/login` sets; the page authenticates with it alone.
pub(crate) const COOKIE: &str = "convoy_token";

/// The token a request carries: `Authorization: Bearer T`, else the
/// login cookie. Never the URL: proxies and logs keep URLs.
fn presented_token(headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|v| v.trim().to_owned());
    bearer.or_else(|| {
        headers
            .get_all(http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .find_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
            .map(str::to_owned)
    })
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Who is asking, from a genuine, unexpired token whose name is still in
/// the registry and not revoked.
fn caller(shared: &Shared, headers: &HeaderMap) -> Result<(Caller, token::Claims), Reply> {
    let Some(tok) = presented_token(headers) else {
        return Err(Reply::error(
            401,
            "a token is needed: convoy fleet token NAME",
        ));
    };
    let claims = token::verify(&shared.key, &tok, now_s())
        .map_err(|refusal| Reply::error(401, &refusal.to_string()))?;
    let name = claims.name.clone();
    let row = shared
        .pool
        .with(|c| c.vehicle_by_name(&name))
        .map_err(|e| Reply::error(503, &e))?;
    match row {
        Some(v) if v.revoked_ns.is_none() => Ok((
            Caller {
                operator: v.role == "operator",
                name,
                only: claims.vehicle.clone(),
            },
            claims,
        )),
        Some(_) => Err(Reply::error(403, &format!("{name} is revoked"))),
        None => Err(Reply::error(403, &format!("{name} is not in the registry"))),
    }
}

/// `POST /api/login` with `Authorization: Bearer T`: the same token back
/// as an HttpOnly, Secure, SameSite=Strict cookie that lives as long as
/// the token. A cross-site form cannot set the header, so it cannot log
/// a browser in as someone else.
fn login(claims: &token::Claims, headers: &HeaderMap) -> Response<Body> {
    // The token itself, not a cookie from an earlier login.
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let Some(tok) = bearer.map(str::trim) else {
        return json_reply(Reply::error(401, "log in with Authorization: Bearer TOKEN"));
    };
    let mut r = json_reply(Reply::Json(
        serde_json::json!({"name": claims.name, "expires": claims.expires})
            .to_string()
            .into_bytes(),
    ));
    let max_age = claims.expires.saturating_sub(now_s());
    let cookie =
        format!("{COOKIE}={tok}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age={max_age}");
    if let Ok(v) = HeaderValue::try_from(cookie) {
        r.headers_mut().insert(http::header::SET_COOKIE, v);
    }
    r
}

/// `POST /api/logout`: the cookie, expired.
fn logout() -> Response<Body> {
    let mut r = json_reply(Reply::Json(b"{}".to_vec()));
    let cookie = format!("{COOKIE}=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0");
    if let Ok(v) = HeaderValue::try_from(cookie) {
        r.headers_mut().insert(http::header::SET_COOKIE, v);
    }
    r
}

async fn handle(
    shared: Arc<Shared>,
    req: Request<hyper::body::Incoming>,
    _peer: SocketAddr,
) -> Response<Body> {
    let url = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    let (path, params) = split_url(&url);
    let method = req.method().clone();
    let mut resp = match method {
        Method::OPTIONS => status_only(StatusCode::NO_CONTENT),
        Method::POST if path == "/api/logout" => logout(),
        Method::POST if path == "/api/login" => {
            let headers = req.headers().clone();
            let s = shared.clone();
            let who =
                tokio::task::spawn_blocking(move || caller(&s, &headers).map(|w| (w, headers)))
                    .await;
            match who {
                Ok(Ok(((_, claims), headers))) => login(&claims, &headers),
                Ok(Err(r)) => json_reply(r),
                Err(_) => json_reply(Reply::error(500, "internal error")),
            }
        }
        Method::POST if path == "/api/requests" => {
            issue_request(shared.clone(), req, crate::requests::issue).await
        }
        Method::POST if path == "/api/campaigns" => {
            issue_request(shared.clone(), req, crate::campaigns::issue).await
        }
        Method::POST if path == "/api/campaigns/withdraw" => {
            issue_request(shared.clone(), req, crate::campaigns::issue_withdraw).await
        }
        Method::GET | Method::HEAD => {
            let asked = Asked {
                path,
                params,
                headers: req.headers().clone(),
            };
            answer(shared.clone(), asked).await
        }
        _ => json_reply(Reply::error(
            405,
            "only GET and HEAD (POST for /api/login, /api/logout, /api/requests, /api/campaigns, /api/campaigns/withdraw)",
        )),
    };
    cors(resp.headers_mut());
    shared.counters.response(resp.status().as_u16());
    if method == Method::HEAD {
        // The headers (Content-Length included) stay; the body goes.
        *resp.body_mut() = body::empty();
    }
    resp
}

/// `POST /api/requests` and `/api/campaigns`: the token must come in the `Authorization`
/// header (a cookie alone is refused, so another site's form cannot send
/// requests with a logged-in browser's cookie), the body at most
/// [`crate::requests::MAX_BODY`].
async fn issue_request(
    shared: Arc<Shared>,
    req: Request<hyper::body::Incoming>,
    handle: fn(&Shared, &crate::api::Caller, &[u8]) -> Reply,
) -> Response<Body> {
    use http_body_util::BodyExt;
    let headers = req.headers().clone();
    if !headers.contains_key(http::header::AUTHORIZATION) {
        return json_reply(Reply::error(
            401,
            "requests need Authorization: Bearer TOKEN (an operator's)",
        ));
    }
    let limited = http_body_util::Limited::new(req.into_body(), crate::requests::MAX_BODY);
    let body = match limited.collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return json_reply(Reply::error(
                413,
                &format!(
                    "a request body is at most {} bytes",
                    crate::requests::MAX_BODY
                ),
            ))
        }
    };
    let work = tokio::task::spawn_blocking(move || {
        let (who, _) = caller(&shared, &headers)?;
        Ok::<_, Reply>(handle(&shared, &who, &body))
    })
    .await;
    match work {
        Ok(Ok(r)) | Ok(Err(r)) => json_reply(r),
        Err(_) => json_reply(Reply::error(500, "internal error")),
    }
}

async fn answer(shared: Arc<Shared>, asked: Asked) -> Response<Body> {
    match asked.path.as_str() {
        "/healthz" => return text_reply(StatusCode::OK, "ok\n".into(), TEXT),
        "/readyz" => return readyz(shared).await,
        "/metrics" => return metrics(shared).await,
        _ => {}
    }
    if let Some(a) = assets::find(&asked.path) {
        return Response::builder()
            .header("content-type", a.content_type)
            .header("cache-control", "no-cache")
            .body(body::full(a.body))
            .unwrap_or_else(|_| status_only(StatusCode::INTERNAL_SERVER_ERROR));
    }
    if asked.path == "/static/overlay.json" {
        return json_reply(match &shared.overlay {
            Some(b) => Reply::Json(b.clone()),
            None => Reply::Json(br#"{"type":"FeatureCollection","features":[]}"#.to_vec()),
        });
    }
    if !asked.path.starts_with("/api/") && !asked.path.starts_with("/files/") {
        return json_reply(Reply::error(404, "not found"));
    }
    if asked.path == "/api/events" {
        // Authenticate on a blocking thread, then stream on the runtime.
        let s = shared.clone();
        let who = tokio::task::spawn_blocking(move || caller(&s, &asked.headers)).await;
        return match who {
            Ok(Ok(_)) => api::events(shared),
            Ok(Err(r)) => json_reply(r),
            Err(_) => json_reply(Reply::error(500, "internal error")),
        };
    }
    let s = shared.clone();
    let work = tokio::task::spawn_blocking(move || {
        let (who, _) = caller(&s, &asked.headers)?;
        if let Some(rest) = asked.path.strip_prefix("/files/") {
            return api::file(&s, &who, rest, &asked.headers).map(Answer::File);
        }
        Ok(Answer::Reply(api::route(
            &s,
            &who,
            &asked.path,
            &asked.params,
        )))
    })
    .await;
    match work {
        Ok(Ok(Answer::Reply(r))) => json_reply(r),
        Ok(Ok(Answer::File(f))) => api::file_response(f),
        Ok(Err(r)) => json_reply(r),
        Err(_) => json_reply(Reply::error(500, "internal error")),
    }
}

const TEXT: &str = "text/plain; charset=utf-8";
/// The Prometheus text exposition format's content type.
pub(crate) const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

fn text_reply(status: StatusCode, text: String, kind: &'static str) -> Response<Body> {
    let mut r = Response::new(body::full(text));
    *r.status_mut() = status;
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static(kind));
    r.headers_mut()
        .insert("cache-control", HeaderValue::from_static("no-store"));
    r
}

/// Ready when the catalog answers: a load balancer sends no request to a
/// server whose every API call would fail.
async fn readyz(shared: Arc<Shared>) -> Response<Body> {
    let asked = tokio::task::spawn_blocking(move || shared.pool.with(|c| c.version())).await;
    match asked {
        Ok(Ok(_)) => text_reply(StatusCode::OK, "ready\n".into(), TEXT),
        Ok(Err(e)) => text_reply(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("catalog: {e}\n"),
            TEXT,
        ),
        Err(_) => status_only(StatusCode::INTERNAL_SERVER_ERROR),
    }
}

async fn metrics(shared: Arc<Shared>) -> Response<Body> {
    let s = shared.clone();
    let figures = tokio::task::spawn_blocking(move || {
        let now_ns = (now_s() as i64).saturating_mul(1_000_000_000);
        s.pool
            .with(|c| {
                let vehicles = c.vehicles()?;
                let fresh = c
                    .last_states()?
                    .iter()
                    .filter(|l| l.t_ns >= now_ns - 60_000_000_000)
                    .count();
                Ok(crate::metrics::CatalogFigures {
                    registered: vehicles.len(),
                    revoked: vehicles.iter().filter(|v| v.revoked_ns.is_some()).count(),
                    reporting_last_minute: fresh,
                    index_queue: c.pending_count()?,
                    index_lag_seconds: c.oldest_pending_ns()?.map_or(0.0, |t| {
                        (crate::api::convoy_telemetry_now() - t).max(0) as f64 / 1e9
                    }),
                })
            })
            .ok()
    })
    .await
    .ok()
    .flatten();
    let errors = shared
        .pool
        .errors
        .load(std::sync::atomic::Ordering::Relaxed);
    let text = crate::metrics::render(
        &shared.counters,
        errors,
        figures.as_ref(),
        shared.extra_metrics.as_ref(),
    );
    text_reply(StatusCode::OK, text, PROMETHEUS_TEXT)
}

enum Answer {
    Reply(Reply),
    File(api::FileReply),
}

pub(crate) fn status_only(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(body::empty());
    *r.status_mut() = status;
    r
}

pub(crate) fn json_reply(reply: Reply) -> Response<Body> {
    let (status, bytes) = match reply {
        Reply::Json(b) => (200, bytes::Bytes::from(b)),
        Reply::Shared(b) => (200, b),
        Reply::Error(code, msg) => (
            code,
            bytes::Bytes::from(serde_json::json!({ "error": msg }).to_string()),
        ),
    };
    let mut r = Response::new(body::full(bytes));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_and_decode() {
        let (p, q) = split_url("/files/v1/2026-11-24/cam%200.mcap?limit=5&x=%2F");
        assert_eq!(p, "/files/v1/2026-11-24/cam 0.mcap");
        assert_eq!(
            q,
            vec![("limit".into(), "5".into()), ("x".into(), "/".into())]
        );
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("%4"), "%4");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%C3%A9"), "é");
    }

    #[test]
    fn tokens_come_from_the_header_or_the_cookie_only() {
        let mut h = HeaderMap::new();
        assert_eq!(presented_token(&h), None);
        h.insert(
            "cookie",
            HeaderValue::from_static("a=b; convoy_token=T1; c=d"),
        );
        assert_eq!(presented_token(&h).as_deref(), Some("T1"));
        h.insert("authorization", HeaderValue::from_static("Bearer T2"));
        assert_eq!(presented_token(&h).as_deref(), Some("T2"));
        let mut h = HeaderMap::new();
        h.insert("cookie", HeaderValue::from_static("convoy_tokenX=T3"));
        assert_eq!(presented_token(&h), None);
    }
}

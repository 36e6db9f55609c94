//! The JSON API and file downloads, as functions of the caller and the
//! catalog.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use convoy_ingest::Store;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{json, Value};

use crate::body::{Body, ChannelBody};
use crate::http::Shared;
use crate::range::{self, RangeAsk};

/// Who is asking.
pub struct Caller {
    pub name: String,
    pub operator: bool,
    /// The token's scope: only this vehicle (`None`: all the name may see).
    pub only: Option<String>,
}

impl Caller {
    pub(crate) fn may_see(&self, vehicle: &str) -> bool {
        let by_role = self.operator || self.name == vehicle;
        let by_scope = self.only.as_deref().is_none_or(|v| v == vehicle);
        by_role && by_scope
    }
}

pub enum Reply {
    Json(Vec<u8>),
    /// A JSON document shared with a cache: sent without a copy.
    Shared(Bytes),
    Error(u16, String),
}

impl Reply {
    pub fn error(code: u16, msg: &str) -> Reply {
        Reply::Error(code, msg.to_owned())
    }
    pub(crate) fn json(v: Value) -> Reply {
        Reply::Json(v.to_string().into_bytes())
    }
}

/// A day, the default span of a track.
const DAY_NS: i64 = 86_400_000_000_000;

pub(crate) fn param<'a>(params: &'a [(String, String)], key: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

pub fn route(shared: &Shared, who: &Caller, path: &str, params: &[(String, String)]) -> Reply {
    let r = match path {
        "/api/me" => Ok(Reply::json(
            json!({"name": who.name, "operator": who.operator, "only": who.only}),
        )),
        "/api/vehicles" => vehicles(shared, who),
        "/api/positions" => crate::positions::positions(shared, who),
        "/api/track" => track(shared, who, params),
        "/api/uploads" => uploads(shared, who, params),
        "/api/requests" => crate::requests::list(shared, who, params),
        "/api/campaigns" => crate::campaigns::list(shared, who, params),
        _ => return Reply::error(404, "no such API"),
    };
    r.unwrap_or_else(|e| Reply::error(503, &e))
}

fn vehicles(shared: &Shared, who: &Caller) -> Result<Reply, String> {
    let (registry, last, version) = shared
        .pool
        .with(|c| Ok((c.vehicles()?, c.last_states()?, c.version()?)))?;
    let mut by_name: std::collections::HashMap<_, _> =
        last.into_iter().map(|l| (l.vehicle.clone(), l)).collect();
    let list: Vec<Value> = registry
        .into_iter()
        .filter(|v| who.may_see(&v.name))
        .map(|v| {
            let last = by_name.remove(&v.name).map(|l| {
                let values: Value = serde_json::from_str(&l.values).unwrap_or(json!({}));
                json!({"t_ns": l.t_ns, "lat": l.lat, "lon": l.lon, "speed": l.speed, "values": values})
            });
            json!({
                "name": v.name, "role": v.role, "revoked": v.revoked_ns.is_some(), "last": last
            })
        })
        .collect();
    Ok(Reply::json(json!({
        "vehicles": list,
        "version": version,
        "now_ns": convoy_telemetry_now(),
    })))
}

pub(crate) fn convoy_telemetry_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn track(shared: &Shared, who: &Caller, params: &[(String, String)]) -> Result<Reply, String> {
    let Some(vehicle) = param(params, "vehicle") else {
        return Ok(Reply::error(400, "track needs ?vehicle=NAME"));
    };
    if !who.may_see(vehicle) {
        return Ok(Reply::error(403, "not your vehicle"));
    }
    let num = |k: &str| param(params, k).and_then(|v| v.parse::<i64>().ok());
    let to = num("to_ns").unwrap_or_else(convoy_telemetry_now);
    let from = num("from_ns").unwrap_or(to - DAY_NS);
    let pts = shared.pool.with(|c| c.track(vehicle, from, to))?;
    let coords: Vec<Value> = pts.iter().map(|p| json!([p.lon, p.lat])).collect();
    let times: Vec<i64> = pts.iter().map(|p| p.t_ns).collect();
    Ok(Reply::json(json!({
        "type": "Feature",
        "geometry": {"type": "LineString", "coordinates": coords},
        "properties": {"vehicle": vehicle, "from_ns": from, "to_ns": to, "t_ns": times},
    })))
}

/// What a listing (`?vehicle=`, `?limit=`) covers for `who`: the vehicle
/// it is narrowed to (an operator may ask for all, a vehicle sees only
/// itself), and how many rows; or the refusal to send.
pub(crate) fn listing_scope(
    who: &Caller,
    params: &[(String, String)],
) -> Result<(Option<String>, usize), Reply> {
    let limit = param(params, "limit")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(100)
        .min(5000);
    let filter = match (param(params, "vehicle"), who.operator, &who.only) {
        (_, _, Some(only)) => Some(only.clone()),
        (Some(v), true, None) => Some(v.to_owned()),
        (None, true, None) => None,
        (_, false, None) => Some(who.name.clone()),
    };
    if filter.as_deref().is_some_and(|v| !who.may_see(v)) {
        return Err(Reply::error(403, "not your vehicle"));
    }
    Ok((filter, limit))
}

fn uploads(shared: &Shared, who: &Caller, params: &[(String, String)]) -> Result<Reply, String> {
    let (filter, limit) = match listing_scope(who, params) {
        Ok(scope) => scope,
        Err(refused) => return Ok(refused),
    };
    let rows = shared.pool.with(|c| c.segments(filter.as_deref(), limit))?;
    Ok(Reply::json(json!({ "uploads": rows })))
}

/// Server-Sent Events: `change` whenever the catalog's version moves
/// (one poller for all pages, `Shared::version`), a comment every 15 s to
/// keep proxies open, until the page goes away or the server stops.
pub fn events(shared: Arc<Shared>) -> Response<Body> {
    let (tx, body) = ChannelBody::channel(4, None);
    let mut version = shared.version.clone();
    let mut stop = shared.stop.clone();
    tokio::spawn(async move {
        // The first event carries the version the page starts from.
        version.mark_changed();
        loop {
            let out = tokio::select! {
                r = version.changed() => match (r, *version.borrow_and_update()) {
                    (Ok(()), Some(v)) => format!("event: change\ndata: {{\"version\":{v}}}\n\n"),
                    (Ok(()), None) => continue,
                    (Err(_), _) => return,
                },
                _ = tokio::time::sleep(PING_EVERY) => ": ping\n\n".to_owned(),
                _ = stop.changed() => return,
                // The page went away.
                _ = tx.closed() => return,
            };
            if tx.send(Ok(Bytes::from(out))).await.is_err() {
                return;
            }
        }
    });
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    r
}

/// How often an idle live feed sends a comment, so proxies keep it open.
const PING_EVERY: Duration = Duration::from_secs(15);

/// A stored file's answer: status, headers and the byte range to send.
pub struct FileReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The object and the range `start..end` of it that is the body.
    pub object: Option<(Arc<Store>, String)>,
    pub start: u64,
    pub end: u64,
}

impl FileReply {
    fn unsatisfiable(len: u64) -> FileReply {
        FileReply {
            status: 416,
            headers: vec![("Content-Range".into(), format!("bytes */{len}"))],
            object: None,
            start: 0,
            end: 0,
        }
    }
}

pub fn file(
    shared: &Shared,
    who: &Caller,
    rest: &str,
    asked: &http::HeaderMap,
) -> Result<FileReply, Reply> {
    let header = |name| asked.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    let Some((vehicle, name)) = rest.split_once('/') else {
        return Err(Reply::error(404, "use /files/VEHICLE/NAME"));
    };
    convoy_net::request::validate_name(name).map_err(|e| Reply::error(400, &e))?;
    if !who.may_see(vehicle) {
        return Err(Reply::error(403, "not your vehicle"));
    }
    let seg = shared
        .pool
        .with(|c| c.segment(vehicle, name))
        .map_err(|e| Reply::error(503, &e))?
        .ok_or_else(|| Reply::error(404, "no such file"))?;
    let len = shared
        .store
        .size(&seg.object)
        .map_err(|e| Reply::error(503, &e.to_string()))?
        .ok_or_else(|| Reply::error(404, "file not in the store"))?;
    let kind = if name.ends_with(".json") {
        "application/json"
    } else {
        "application/octet-stream"
    };
    // The stored bytes never change under a name (an upload is renamed
    // into place once), so their hash is a strong ETag and the time they
    // were stored is their Last-Modified.
    let etag = format!("\"{}\"", seg.blake3);
    let stored = std::time::UNIX_EPOCH + Duration::from_nanos(seg.stored_ns.max(0) as u64);
    let mut headers = vec![
        ("Accept-Ranges".to_string(), "bytes".to_string()),
        ("Content-Type".into(), kind.into()),
        ("ETag".into(), etag.clone()),
        ("Last-Modified".into(), httpdate::fmt_http_date(stored)),
    ];
    if header(http::header::IF_NONE_MATCH).is_some_and(|v| v.split(',').any(|t| t.trim() == etag)) {
        return Ok(FileReply {
            status: 304,
            headers,
            object: None,
            start: 0,
            end: 0,
        });
    }
    let (status, start, end) = match range::parse(header(http::header::RANGE), len) {
        RangeAsk::Whole => (200, 0, len),
        RangeAsk::Part { start, end } => {
            headers.push((
                "Content-Range".into(),
                format!("bytes {start}-{}/{len}", end - 1),
            ));
            (206, start, end)
        }
        RangeAsk::Unsatisfiable => return Ok(FileReply::unsatisfiable(len)),
    };
    Ok(FileReply {
        status,
        headers,
        object: Some((shared.store.clone(), seg.object)),
        start,
        end,
    })
}

/// Streams a file's range from the store: read on a blocking thread in
/// pieces, a piece or two ahead of the socket.
pub fn file_response(f: FileReply) -> Response<Body> {
    let len = f.end - f.start;
    let (tx, body) = ChannelBody::channel(2, Some(len));
    if let Some((store, key)) = f.object {
        let (start, end) = (f.start, f.end);
        tokio::task::spawn_blocking(move || {
            let mut reader = StoreReader {
                store,
                key,
                pos: start,
                end,
            };
            // Stops at the end, on a store error (hyper then cuts the
            // response short of its Content-Length), or when the client
            // has gone (the body, and so the receiver, was dropped).
            while !tx.is_closed() {
                match reader.next_piece() {
                    Ok(Some(piece)) => {
                        if tx.blocking_send(Ok(piece)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(e) => {
                        let _ = tx.blocking_send(Err(e));
                        return;
                    }
                }
            }
        });
    }
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::from_u16(f.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    for (k, v) in &f.headers {
        if let (Ok(k), Ok(v)) = (
            http::header::HeaderName::try_from(k.as_str()),
            HeaderValue::try_from(v.as_str()),
        ) {
            h.insert(k, v);
        }
    }
    if f.status != 304 {
        h.insert(http::header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    r
}

/// Reads an object's range from the store in 4 MiB pieces.
struct StoreReader {
    store: Arc<Store>,
    key: String,
    pos: u64,
    end: u64,
}

impl StoreReader {
    fn next_piece(&mut self) -> std::io::Result<Option<Bytes>> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let to = (self.pos + (4 << 20)).min(self.end);
        let piece = self
            .store
            .get_range(&self.key, self.pos, to)
            .map_err(std::io::Error::other)?;
        if piece.is_empty() {
            return Err(std::io::Error::other(
                "the stored object is shorter than its size",
            ));
        }
        self.pos += piece.len() as u64;
        Ok(Some(Bytes::from(piece)))
    }
}

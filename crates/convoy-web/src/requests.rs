//! `POST /api/requests` (issue a request to a vehicle) and `GET
//! /api/requests` (requests and their progress), docs/SERVICE.md,
//! "Requests".

use convoy_net::control::RequestBody;
use serde_json::{json, Value};

use crate::api::{Caller, Reply};
use crate::http::Shared;

/// The largest request body taken (a request names files and signals).
pub const MAX_BODY: usize = 64 * 1024;

/// Issues `{"vehicle": V, "request": {...}}` for an operator: checked,
/// queued in the catalog (durable before the answer), and handed to the
/// dispatcher. A vehicle's token is refused: vehicles do not command
/// vehicles.
pub fn issue(shared: &Shared, who: &Caller, body: &[u8]) -> Reply {
    if !who.operator {
        return Reply::error(
            403,
            &format!(
                "requests need an operator's token: {} is a vehicle",
                who.name
            ),
        );
    }
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Reply::error(400, &format!("malformed request: not JSON: {e}")),
    };
    let Some(vehicle) = v.get("vehicle").and_then(Value::as_str) else {
        return Reply::error(400, "malformed request: no \"vehicle\"");
    };
    if who.only.as_deref().is_some_and(|o| o != vehicle) {
        return Reply::error(403, "this token is for another vehicle");
    }
    let Some(request) = v.get("request") else {
        return Reply::error(400, "malformed request: no \"request\"");
    };
    let text = request.to_string();
    let parsed = match RequestBody::parse(&text) {
        Ok(b) => b,
        Err(e) => return Reply::error(400, &e),
    };
    // Stored as parsed, so defaults are explicit in the catalog.
    let stored = serde_json::to_string(&parsed).unwrap_or(text);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    let row = shared
        .pool
        .with(|c| c.add_request(vehicle, parsed.kind(), &stored, &who.name, now));
    match row {
        Ok(row) => {
            if let Some(f) = &shared.on_request {
                f();
            }
            Reply::Json(json!({ "request": row }).to_string().into_bytes())
        }
        Err(e) if e.contains("registry") => Reply::error(404, &e),
        Err(e) => Reply::error(503, &e),
    }
}

/// The requests a caller may see, newest first.
pub fn list(shared: &Shared, who: &Caller, params: &[(String, String)]) -> Result<Reply, String> {
    let (filter, limit) = match crate::api::listing_scope(who, params) {
        Ok(scope) => scope,
        Err(refused) => return Ok(refused),
    };
    let rows = shared.pool.with(|c| c.requests(filter.as_deref(), limit))?;
    Ok(Reply::json(json!({ "requests": rows })))
}

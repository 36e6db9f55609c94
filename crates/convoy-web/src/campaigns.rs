//! `POST /api/campaigns` (deploy a campaign to vehicles) and `GET
//! /api/campaigns` (its versions, and where each vehicle's copy stands),
//! docs/SERVICE.md, "Campaigns". `convoy fleet campaign deploy` calls
//! [`deploy`] on the catalog directly.

use convoy_catalog::{CampaignRow, Catalog, CatalogError};
use convoy_net::control::RequestBody;
use convoy_telemetry::campaign::Campaign;
use convoy_telemetry::SignalCatalog;
use serde_json::{json, Value};

use crate::api::{Caller, Reply};
use crate::http::Shared;

/// Checks a campaign file and records its next version, queueing a
/// `campaign` request for each vehicle (delivered on the control stream
/// at once, or when the vehicle reconnects). Signals are checked against
/// the built-in VSS list and `Vehicle.Private.*` (a vehicle's
/// `extra_signals` are unknown here). `Err`: the HTTP status and why;
/// nothing is recorded then.
pub fn deploy(
    c: &mut dyn Catalog,
    origin: &str,
    text: &str,
    vehicles: &[String],
    issuer: &str,
    now_ns: i64,
) -> Result<CampaignRow, (u16, String)> {
    let parsed = Campaign::parse(origin, text, &SignalCatalog::default()).map_err(|e| (400, e))?;
    if vehicles.is_empty() {
        return Err((400, "a deployment names at least one vehicle".into()));
    }
    let name = parsed.name.clone();
    let request = |version: i64| {
        serde_json::to_string(&RequestBody::Campaign {
            name: name.clone(),
            version,
            toml: text.to_string(),
        })
        .unwrap_or_default()
    };
    c.add_campaign(&name, text, vehicles, issuer, now_ns, &request)
        .map_err(|e| match e {
            CatalogError::NotFound(m) => (404, m),
            other => (503, other.to_string()),
        })
}

/// `{"campaign": "TOML", "vehicles": ["truck-7", …]}`, an operator's.
pub(crate) fn issue(shared: &Shared, who: &Caller, body: &[u8]) -> Reply {
    if !who.operator {
        return Reply::error(
            403,
            &format!(
                "campaigns need an operator's token: {} is a vehicle",
                who.name
            ),
        );
    }
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Reply::error(400, &format!("malformed deployment: not JSON: {e}")),
    };
    let Some(text) = v.get("campaign").and_then(Value::as_str) else {
        return Reply::error(
            400,
            "malformed deployment: no \"campaign\" (the file's text)",
        );
    };
    let vehicles: Vec<String> = match v.get("vehicles").map(|x| serde_json::from_value(x.clone())) {
        Some(Ok(list)) => list,
        _ => return Reply::error(400, "malformed deployment: \"vehicles\" is a list of names"),
    };
    if let Some(only) = &who.only {
        if vehicles.iter().any(|v| v != only) {
            return Reply::error(403, "this token is for another vehicle");
        }
    }
    let now = convoy_telemetry::now_ns();
    let mut refused = None;
    let row = shared.pool.with(
        |c| match deploy(c, "campaign", text, &vehicles, &who.name, now) {
            Ok(r) => Ok(Some(r)),
            Err(e) => {
                refused = Some(e);
                Ok(None)
            }
        },
    );
    match (row, refused) {
        (Ok(Some(row)), _) => {
            if let Some(f) = &shared.on_request {
                f();
            }
            Reply::Json(json!({ "campaign": row }).to_string().into_bytes())
        }
        (_, Some((code, e))) => Reply::error(code, &e),
        (Err(e), None) => Reply::error(503, &e),
        (Ok(None), None) => Reply::error(503, "catalog unavailable"),
    }
}

/// Versions, newest first, each with its vehicles' request states
/// (`queued` until the vehicle acknowledges, `done` once it runs it,
/// `failed` with the agent's reason). Operators only.
pub(crate) fn list(
    shared: &Shared,
    who: &Caller,
    params: &[(String, String)],
) -> Result<Reply, String> {
    if !who.operator {
        return Ok(Reply::error(403, "campaigns are for operators"));
    }
    let name = crate::api::param(params, "name");
    let limit = crate::api::param(params, "limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(50)
        .min(1000);
    let out = shared.pool.with(|c| {
        let rows = c.campaigns(name, limit)?;
        let mut out = Vec::new();
        for r in rows {
            if who.only.as_deref().is_some_and(|o| !r.vehicles.iter().any(|v| v == o)) {
                continue;
            }
            let mut per = Vec::new();
            for (v, id) in r.vehicles.iter().zip(&r.requests) {
                if !who.may_see(v) {
                    continue;
                }
                let req = c.requests(Some(v), 1000)?.into_iter().find(|q| q.id == *id);
                per.push(json!({
                    "vehicle": v, "request": id,
                    "state": req.as_ref().map(|q| q.state.clone()),
                    "error": req.as_ref().and_then(|q| q.error.clone()),
                    "result": req.as_ref().and_then(|q| q.result.as_deref().and_then(|s| serde_json::from_str::<Value>(s).ok())),
                }));
            }
            out.push(json!({
                "name": r.name, "version": r.version, "issuer": r.issuer,
                "created_ns": r.created_ns, "campaign": r.body, "vehicles": per,
            }));
        }
        Ok(out)
    })?;
    Ok(Reply::json(json!({ "campaigns": out })))
}

//! `POST /api/campaigns` (deploy a campaign to vehicles), `POST
//! /api/campaigns/withdraw` (stop it on them) and `GET /api/campaigns`
//! (its versions, and where each vehicle's copy stands), docs/SERVICE.md,
//! "Campaigns". `convoy fleet campaign deploy|withdraw` call [`deploy`]
//! and [`withdraw`] on the catalog directly.

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
/// the built-in VSS list, `Vehicle.Private.*`, and the `extra_signals`
/// that every targeted vehicle declared when it last connected (a name
/// only some of them declared would fail on the others). `Err`: the HTTP
/// status and why; nothing is recorded then.
pub fn deploy(
    c: &mut dyn Catalog,
    origin: &str,
    text: &str,
    vehicles: &[String],
    issuer: &str,
    now_ns: i64,
) -> Result<CampaignRow, (u16, String)> {
    let extra = declared_by_all(c, vehicles).map_err(|e| (503, e.to_string()))?;
    let parsed = Campaign::parse(origin, text, &SignalCatalog::new(extra)).map_err(|e| (400, e))?;
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
    c.add_campaign(&name, text, false, vehicles, issuer, now_ns, &request)
        .map_err(catalog_error)
}

/// The extra signal names every one of `vehicles` declared.
fn declared_by_all(
    c: &mut dyn Catalog,
    vehicles: &[String],
) -> convoy_catalog::Result<Vec<String>> {
    let mut common: Option<Vec<String>> = None;
    for v in vehicles {
        let mine = c.vehicle_signals(v)?;
        common = Some(match common {
            None => mine,
            Some(so_far) => so_far.into_iter().filter(|s| mine.contains(s)).collect(),
        });
    }
    Ok(common.unwrap_or_default())
}

fn catalog_error(e: CatalogError) -> (u16, String) {
    match e {
        CatalogError::NotFound(m) => (404, m),
        other => (503, other.to_string()),
    }
}

/// Records a withdrawal of campaign `name` as its next version and
/// queues a `withdraw` request for each vehicle: `vehicles`, or when
/// empty every vehicle any version of it was deployed to. A vehicle it
/// was never deployed to is refused (a typo would otherwise withdraw
/// nothing and say done).
pub fn withdraw(
    c: &mut dyn Catalog,
    name: &str,
    vehicles: &[String],
    issuer: &str,
    now_ns: i64,
) -> Result<CampaignRow, (u16, String)> {
    let rows = c
        .campaigns(Some(name), usize::MAX >> 1)
        .map_err(catalog_error)?;
    let mut deployed_to: Vec<String> = Vec::new();
    // Oldest first, so the default list keeps the order vehicles came in.
    for r in rows.iter().rev().filter(|r| !r.withdrawn) {
        for v in &r.vehicles {
            if !deployed_to.contains(v) {
                deployed_to.push(v.clone());
            }
        }
    }
    if deployed_to.is_empty() {
        return Err((404, format!("no campaign named {name:?} was deployed")));
    }
    let targets = if vehicles.is_empty() {
        deployed_to
    } else {
        if let Some(v) = vehicles.iter().find(|v| !deployed_to.contains(v)) {
            return Err((
                400,
                format!("campaign {name:?} was never deployed to {v:?}"),
            ));
        }
        vehicles.to_vec()
    };
    let request = |version: i64| {
        serde_json::to_string(&RequestBody::Withdraw {
            name: name.to_string(),
            version,
        })
        .unwrap_or_default()
    };
    c.add_campaign(name, "", true, &targets, issuer, now_ns, &request)
        .map_err(catalog_error)
}

/// Deploying and withdrawing take an operator's token.
fn operator_only(who: &Caller) -> Result<(), Reply> {
    if who.operator {
        return Ok(());
    }
    Err(Reply::error(
        403,
        &format!(
            "campaigns need an operator's token: {} is a vehicle",
            who.name
        ),
    ))
}

/// A token scoped to one vehicle names only that one.
fn in_scope(who: &Caller, vehicles: &[String]) -> Result<(), Reply> {
    if let Some(only) = &who.only {
        if vehicles.is_empty() || vehicles.iter().any(|v| v != only) {
            return Err(Reply::error(403, "this token is for another vehicle"));
        }
    }
    Ok(())
}

/// Runs a deployment or withdrawal on a pooled catalog connection and
/// rings the request senders when it was recorded.
fn record(
    shared: &Shared,
    f: impl FnOnce(&mut dyn Catalog) -> Result<CampaignRow, (u16, String)>,
) -> Reply {
    let mut refused = None;
    let row = shared.pool.with(|c| match f(c) {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            refused = Some(e);
            Ok(None)
        }
    });
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

/// `{"campaign": "TOML", "vehicles": ["truck-7", …]}`, an operator's.
pub(crate) fn issue(shared: &Shared, who: &Caller, body: &[u8]) -> Reply {
    if let Err(r) = operator_only(who) {
        return r;
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
    if let Err(r) = in_scope(who, &vehicles) {
        return r;
    }
    let now = convoy_telemetry::now_ns();
    record(shared, |c| {
        deploy(c, "campaign", text, &vehicles, &who.name, now)
    })
}

/// `POST /api/campaigns/withdraw`: `{"name": "brake", "vehicles": […]}`
/// (`vehicles` optional: every vehicle it was deployed to), an operator's.
pub(crate) fn issue_withdraw(shared: &Shared, who: &Caller, body: &[u8]) -> Reply {
    if let Err(r) = operator_only(who) {
        return r;
    }
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Reply::error(400, &format!("malformed withdrawal: not JSON: {e}")),
    };
    let Some(name) = v.get("name").and_then(Value::as_str) else {
        return Reply::error(400, "malformed withdrawal: no \"name\" (the campaign's)");
    };
    let mut vehicles: Vec<String> =
        match v.get("vehicles").map(|x| serde_json::from_value(x.clone())) {
            None => Vec::new(),
            Some(Ok(list)) => list,
            Some(Err(_)) => {
                return Reply::error(400, "malformed withdrawal: \"vehicles\" is a list of names")
            }
        };
    // A token scoped to one vehicle withdraws from that one only.
    if vehicles.is_empty() {
        if let Some(only) = &who.only {
            vehicles.push(only.clone());
        }
    }
    if let Err(r) = in_scope(who, &vehicles) {
        return r;
    }
    let now = convoy_telemetry::now_ns();
    record(shared, |c| withdraw(c, name, &vehicles, &who.name, now))
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
                "name": r.name, "version": r.version, "withdrawn": r.withdrawn, "issuer": r.issuer,
                "created_ns": r.created_ns, "campaign": r.body, "vehicles": per,
            }));
        }
        Ok(out)
    })?;
    Ok(Reply::json(json!({ "campaigns": out })))
}

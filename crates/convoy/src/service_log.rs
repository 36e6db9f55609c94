//! The server's and the indexer's events as `tracing` events: a short
//! message and the event's facts as fields (vehicle, peer, upload name,
//! bytes, durations), so a JSON log line can be filtered by any of them.
//! Targets: `convoy::server` (connections and transfers), `convoy::indexer`.
//! A refusal or a failure is a warning; the rest is info.

use convoy_ingest::IndexEvent;
use convoy_net::ServerEvent;
use tracing::{info, warn};

pub fn server_event(e: &ServerEvent) {
    use ServerEvent::*;
    match e {
        Connected { peer, vehicle } => {
            info!(target: "convoy::server", vehicle = vehicle.as_deref(), peer = %peer, "connected")
        }
        Refused { peer, key, reason } => warn!(
            target: "convoy::server",
            peer = %peer, key = key.as_str(), reason = reason.as_str(),
            "refused"
        ),
        Stored {
            peer,
            vehicle,
            name,
            bytes,
            resumed_from,
            blake3,
        } => info!(
            target: "convoy::server",
            vehicle = vehicle.as_deref(), peer = %peer, name = name.as_str(), bytes,
            resumed_from, blake3 = blake3.as_str(),
            "stored"
        ),
        Sent {
            peer,
            vehicle,
            name,
            bytes,
        } => info!(
            target: "convoy::server",
            vehicle = vehicle.as_deref(), peer = %peer, name = name.as_str(), bytes,
            "sent"
        ),
        PerfDone {
            peer,
            vehicle,
            bytes,
            seconds,
            cpu_seconds,
            goodput_bps,
            ..
        } => info!(
            target: "convoy::server",
            vehicle = vehicle.as_deref(), peer = %peer, bytes, seconds, cpu_seconds, goodput_bps,
            "perf done"
        ),
        Failed {
            peer,
            vehicle,
            error,
        } => warn!(
            target: "convoy::server",
            vehicle = vehicle.as_deref(), peer = %peer, error = error.as_str(),
            "transfer failed"
        ),
        Closed {
            peer,
            vehicle,
            reason,
        } => info!(
            target: "convoy::server",
            vehicle = vehicle.as_deref(), peer = %peer, reason = reason.as_str(),
            "closed"
        ),
        Draining {
            connections,
            commits,
        } => info!(
            target: "convoy::server",
            connections, commits,
            "stopping: no new connections or uploads; finishing the commits in flight"
        ),
        Drained {
            millis,
            complete: true,
            connections,
            ..
        } => info!(
            target: "convoy::server",
            millis, connections,
            "every commit answered; closing the connections"
        ),
        Drained {
            millis,
            complete: false,
            connections,
            commits,
            undelivered,
        } => warn!(
            target: "convoy::server",
            millis, connections, commits, undelivered,
            "drain limit reached: closing the connections (their clients ask again and resume)"
        ),
    }
}

pub fn index_event(e: &IndexEvent) {
    match e {
        IndexEvent::Indexed {
            vehicle,
            name,
            samples,
            millis,
            lag_seconds,
        } => info!(
            target: "convoy::indexer",
            vehicle = vehicle.as_str(), name = name.as_str(), samples, millis, lag_seconds,
            "indexed"
        ),
        IndexEvent::IndexFailed {
            vehicle,
            name,
            error,
        } => warn!(
            target: "convoy::indexer",
            vehicle = vehicle.as_str(), name = name.as_str(), error = error.as_str(),
            "kept but not indexed"
        ),
        IndexEvent::IndexRetry { error } => warn!(
            target: "convoy::indexer",
            error = error.as_str(),
            "indexer will retry"
        ),
    }
}

//! Who a client is, and what it may touch.
//!
//! Every convoy client proves its static key in the Noise handshake. A
//! server given an [`Authorizer`] maps that key to an [`Identity`] (a
//! vehicle or an operator, from the fleet registry) right after the
//! handshake, before it accepts any stream, and again every
//! [`REAUTH_EVERY`] and before each upload is acknowledged, so a key
//! revoked mid-upload is never acknowledged again once the authorizer says
//! so. The server asks on threads of its own, never on the protocol
//! thread. Unknown and revoked keys are refused with a close reason the
//! client prints.
//!
//! Names are confined to namespaces: a vehicle's `2026-11-24/cam0/1.mcap`
//! is stored as `VEHICLE/2026-11-24/cam0/1.mcap`, and it reads only under
//! `VEHICLE/`; an operator reads every namespace by naming it
//! (`VEHICLE/...`) and writes under its own. Name components can never be
//! `..`, `.`-prefixed or empty ([`validate_name`]), so no name leads out.

use std::path::Path;
use std::time::Duration;

use crate::request::validate_name;

/// How often the server asks its [`Authorizer`] again about each open
/// connection, so a revocation takes effect on live connections.
pub const REAUTH_EVERY: Duration = Duration::from_secs(1);

/// The close code of a connection refused by the registry.
pub const REFUSED_CODE: u64 = 0x4E4F;

/// How the server's refusals of a key begin (the close reason, or the
/// error of an upload whose key was revoked mid-way).
pub const REFUSED_PREFIX: &str = "refused: ";

/// What a key may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Writes and reads only its own namespace.
    Vehicle,
    /// Reads every namespace; writes its own.
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Vehicle => "vehicle",
            Role::Operator => "operator",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Role, String> {
        match s {
            "vehicle" => Ok(Role::Vehicle),
            "operator" => Ok(Role::Operator),
            other => Err(format!("unknown role {other:?} (vehicle or operator)")),
        }
    }
}

/// A registered client: its name (also its namespace) and role.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Identity {
    pub name: String,
    pub role: Role,
}

/// Maps an authenticated static key to an identity, or refuses it with
/// a reason the client sees ("unknown key", "revoked").
pub trait Authorizer: Send + Sync {
    /// Asked right after a handshake and before each commit: the answer
    /// should be current.
    fn identify(&self, key: &[u8; 32]) -> Result<Identity, String>;

    /// Asked every [`REAUTH_EVERY`] about each open connection: an answer
    /// a little older is fine (a registry caches it for longer than the
    /// re-check period, so a thousand vehicles are not a thousand queries
    /// a second).
    fn recheck(&self, key: &[u8; 32]) -> Result<Identity, String> {
        self.identify(key)
    }
}

/// What the server just made durable.
#[derive(Clone, Debug)]
pub struct Committed<'a> {
    /// Who uploaded it (`None` on a server without an authorizer).
    pub who: Option<&'a Identity>,
    /// The name inside the store, namespace included.
    pub stored_name: &'a str,
    pub path: &'a Path,
    pub bytes: u64,
    pub blake3: [u8; 32],
}

/// Runs after an upload is durable and before the client is told: the
/// ingest queues the file for indexing here, so an acknowledged upload is
/// never missed by the indexer. An error is reported to the client, whose
/// retry finds the file stored and runs the hook again, so the hook must
/// be idempotent.
pub trait CommitHook: Send + Sync {
    fn committed(&self, c: &Committed<'_>) -> Result<(), String>;

    /// Several uploads made durable together (a commit thread's batch),
    /// one outcome each in order; a hook that writes to a database can
    /// write them in one transaction. By default, one by one.
    fn committed_all(&self, all: &[Committed<'_>]) -> Vec<Result<(), String>> {
        all.iter().map(|c| self.committed(c)).collect()
    }
}

/// Checks a vehicle or operator name: it is one path component of the
/// store, so letters, digits, `-`, `_` and `.` (not first), 1 to 64 bytes.
pub fn validate_identity_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid name {name:?}: 1-64 of A-Z a-z 0-9 - _ . (not starting with '.')"
        ))
    }
}

/// The name in the store for an upload by `who` of `name`.
pub fn write_name(who: Option<&Identity>, name: &str) -> Result<String, String> {
    validate_name(name)?;
    Ok(match who {
        None => name.to_owned(),
        Some(id) => format!("{}/{name}", id.name),
    })
}

/// The name in the store for a download by `who` of `name`: a vehicle's
/// names are inside its namespace, an operator's name one.
pub fn read_name(who: Option<&Identity>, name: &str) -> Result<String, String> {
    validate_name(name)?;
    Ok(match who {
        None => name.to_owned(),
        Some(id) if id.role == Role::Operator => name.to_owned(),
        Some(id) => format!("{}/{name}", id.name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vehicle(name: &str) -> Identity {
        Identity {
            name: name.into(),
            role: Role::Vehicle,
        }
    }

    #[test]
    fn vehicles_write_and_read_only_their_namespace() {
        let v = vehicle("truck-7");
        assert_eq!(
            write_name(Some(&v), "2026-11-24/cam0/000123.mcap").unwrap(),
            "truck-7/2026-11-24/cam0/000123.mcap"
        );
        assert_eq!(read_name(Some(&v), "a.log").unwrap(), "truck-7/a.log");
        // Naming another vehicle only nests inside its own namespace.
        assert_eq!(
            read_name(Some(&v), "bus-1/a.log").unwrap(),
            "truck-7/bus-1/a.log"
        );
        for bad in [
            "../bus-1/a.log",
            "x/../../a",
            "/etc/passwd",
            "a//b",
            "a/.b",
            "",
        ] {
            assert!(write_name(Some(&v), bad).is_err(), "{bad}");
            assert!(read_name(Some(&v), bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn operators_read_every_namespace_and_write_their_own() {
        let op = Identity {
            name: "ops".into(),
            role: Role::Operator,
        };
        assert_eq!(read_name(Some(&op), "bus-1/a.log").unwrap(), "bus-1/a.log");
        assert_eq!(write_name(Some(&op), "note.txt").unwrap(), "ops/note.txt");
    }

    #[test]
    fn identity_names_are_one_safe_component() {
        for good in ["truck-7", "bus_1", "v.2", "A"] {
            validate_identity_name(good).unwrap();
        }
        for bad in ["", ".hidden", "a/b", "..", "a b", &"x".repeat(65)] {
            assert!(validate_identity_name(bad).is_err(), "{bad:?}");
        }
    }
}

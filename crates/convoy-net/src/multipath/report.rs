//! Per-path figures for reports (`--json`) and progress lines.

use std::net::SocketAddr;

use convoy_proto::Connection;

/// One path at the end of (or during) a transfer.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PathReport {
    pub id: u8,
    /// The local interface the path's socket is bound to (None: the
    /// single-path socket, which the kernel routes).
    pub interface: Option<String>,
    pub local: Option<SocketAddr>,
    pub remote: SocketAddr,
    /// validating, active, standby, suspect or abandoned.
    pub state: String,
    pub backup: bool,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// The path's rate controller, bits per second.
    pub rate_bps: u64,
    pub srtt_ms: f64,
    pub packets_sent: u64,
    pub packets_lost: u64,
}

/// A path changing state.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PathEventReport {
    /// Milliseconds since the connection began.
    pub t_ms: f64,
    /// The same instant as Unix time in milliseconds (the system clock
    /// when the connection began, plus `t_ms`), to line events up with
    /// other programs' logs and the emulator's records.
    pub unix_ms: f64,
    pub path: u8,
    pub interface: Option<String>,
    pub state: String,
}

/// Bytes one path moved in one progress interval.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct PathBytes {
    pub id: u8,
    pub interface: Option<String>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// What each path moved between two reports (paths new since `before`
/// count from zero).
pub fn interval_bytes(before: &[PathReport], now: &[PathReport]) -> Vec<PathBytes> {
    now.iter()
        .map(|p| {
            let b = before.iter().find(|q| q.id == p.id);
            PathBytes {
                id: p.id,
                interface: p.interface.clone(),
                bytes_sent: p.bytes_sent - b.map_or(0, |q| q.bytes_sent.min(p.bytes_sent)),
                bytes_received: p.bytes_received
                    - b.map_or(0, |q| q.bytes_received.min(p.bytes_received)),
            }
        })
        .collect()
}

/// One path's figures in a transfer's progress (`convoy send` and `get`,
/// every [`crate::upload::PROGRESS_TICK`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PathProgress {
    pub id: u8,
    /// The interface its socket is bound to (None: the single-path
    /// socket, which the kernel routes).
    pub interface: Option<String>,
    /// validating, active, standby, suspect or abandoned.
    pub state: String,
    /// The path's rate controller, bits per second.
    pub rate_bps: u64,
    pub srtt_ms: f64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Its part, 0 to 1, of the bytes that went the transfer's way on
    /// this connection so far: sent for an upload, received for a
    /// download.
    pub share: f64,
}

/// The connection's paths as progress figures; `interface` names each
/// path's interface where known, `sending` says which way the transfer
/// goes (for `share`).
pub fn path_progress(
    c: &Connection,
    interface: impl Fn(u8) -> Option<String>,
    sending: bool,
) -> Vec<PathProgress> {
    let paths = c.paths();
    let carried = |p: &convoy_proto::PathInfo| {
        if sending {
            p.bytes_sent
        } else {
            p.bytes_received
        }
    };
    let total: u64 = paths.iter().map(carried).sum();
    paths
        .iter()
        .map(|p| PathProgress {
            id: p.id,
            interface: interface(p.id),
            state: p.state.as_str().into(),
            rate_bps: p.rate.saturating_mul(8),
            srtt_ms: p.srtt.as_secs_f64() * 1e3,
            bytes_sent: p.bytes_sent,
            bytes_received: p.bytes_received,
            share: if total == 0 {
                0.0
            } else {
                carried(p) as f64 / total as f64
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(id: u8, sent: u64, received: u64) -> PathReport {
        PathReport {
            id,
            interface: None,
            local: None,
            remote: "10.7.0.2:4433".parse().unwrap(),
            state: "active".into(),
            backup: false,
            bytes_sent: sent,
            bytes_received: received,
            rate_bps: 0,
            srtt_ms: 0.0,
            packets_sent: 0,
            packets_lost: 0,
        }
    }

    #[test]
    fn interval_bytes_are_differences_and_new_paths_start_at_zero() {
        let before = [path(0, 1000, 50)];
        let now = [path(0, 3000, 80), path(1, 700, 10)];
        let d = interval_bytes(&before, &now);
        assert_eq!((d[0].bytes_sent, d[0].bytes_received), (2000, 30));
        assert_eq!((d[1].bytes_sent, d[1].bytes_received), (700, 10));
    }
}

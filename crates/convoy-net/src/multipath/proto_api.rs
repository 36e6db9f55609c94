//! TEMPORARY: the multipath API of convoy-proto as the lead's contract
//! gives it (docs in the issue 16 notes), until it lands on main. Inherent
//! methods win over trait methods, so once `Connection::open_path` and the
//! others exist, the calls in this module's parent use them and this file
//! is deleted at the merge (with the `use` lines that name it). Until
//! then no extra path opens: `open_path` refuses.

#![allow(dead_code)] // the contract in full; only part is used until it lands

use std::net::SocketAddr;
use std::time::Duration;

use convoy_proto::Connection;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathState {
    Validating,
    Active,
    Standby,
    Suspect,
    Abandoned,
}

#[derive(Clone, Debug)]
pub struct PathInfo {
    pub id: u8,
    pub remote: SocketAddr,
    pub state: PathState,
    pub backup: bool,
    pub srtt: Duration,
    pub min_rtt: Duration,
    pub rate: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub packets_sent: u64,
    pub packets_lost: u64,
}

#[derive(Clone, Copy, Debug)]
pub struct PathEvent {
    pub at: Duration,
    pub path: u8,
    pub state: PathState,
}

#[derive(Debug)]
pub struct PathError;

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("this convoy-proto has no multipath")
    }
}

pub trait PathApi {
    fn open_path(
        &mut self,
        now: Duration,
        remote: SocketAddr,
        backup: bool,
    ) -> Result<u8, PathError>;
    fn set_path_backup(&mut self, now: Duration, id: u8, backup: bool);
    fn path_down(&mut self, now: Duration, id: u8);
    fn path_up(&mut self, now: Duration, id: u8);
    fn paths(&self) -> Vec<PathInfo>;
    fn path_events(&self) -> &[PathEvent];
}

impl PathApi for Connection {
    fn open_path(&mut self, _: Duration, _: SocketAddr, _: bool) -> Result<u8, PathError> {
        Err(PathError)
    }
    fn set_path_backup(&mut self, _: Duration, _: u8, _: bool) {}
    fn path_down(&mut self, _: Duration, _: u8) {}
    fn path_up(&mut self, _: Duration, _: u8) {}
    fn paths(&self) -> Vec<PathInfo> {
        let s = self.stats();
        vec![PathInfo {
            id: 0,
            remote: self.remote_address(),
            state: PathState::Active,
            backup: false,
            srtt: s.smoothed_rtt,
            min_rtt: s.min_rtt,
            rate: s.rate,
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            packets_sent: s.packets_sent,
            packets_lost: s.packets_lost,
        }]
    }
    fn path_events(&self) -> &[PathEvent] {
        &[]
    }
}

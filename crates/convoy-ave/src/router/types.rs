//! What the router exchanges with its driver: roles, strategies, frames,
//! loss causes and events.

use std::time::Duration;

use crate::NodeId;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Vehicle,
    Rsu,
}

/// AVE's strategies, numbered as the loop rule orders them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Strategy {
    Local = 1,
    Reactive = 2,
    Geographic = 3,
    Carry = 4,
}

impl Strategy {
    pub fn from_u8(v: u8) -> Option<Strategy> {
        match v {
            1 => Some(Strategy::Local),
            2 => Some(Strategy::Reactive),
            3 => Some(Strategy::Geographic),
            4 => Some(Strategy::Carry),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Local => "local",
            Strategy::Reactive => "reactive",
            Strategy::Geographic => "geo",
            Strategy::Carry => "carry",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    Broadcast,
    Node(NodeId),
}

/// A frame for the radio. Unicast frames are acknowledged at the link
/// layer; the driver reports the outcome with [`Router::handle_link_result`].
#[derive(Clone, Debug)]
pub struct Frame {
    pub to: Destination,
    pub bytes: Vec<u8>,
    pub token: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropCause {
    /// The carrier left the map while holding it (thesis loss cause 1).
    CarrierLeft,
    /// A hop was not acknowledged (channel, or a neighbour no longer where
    /// its beacon said: thesis loss cause 2).
    LinkFailure,
    /// No strategy the loop rule allows could move it.
    NoRoute,
    Expired,
    BufferFull,
}

impl DropCause {
    pub fn name(self) -> &'static str {
        match self {
            DropCause::CarrierLeft => "carrier-left",
            DropCause::LinkFailure => "link-failure",
            DropCause::NoRoute => "no-route",
            DropCause::Expired => "expired",
            DropCause::BufferFull => "buffer-full",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum RouterEvent {
    /// At an RSU: a bundle arrived (the first copy of it this RSU saw).
    Delivered {
        origin: NodeId,
        bundle: u32,
        created: Duration,
        hops: u8,
    },
    /// A hop of a bundle travelled (acknowledged) with this strategy.
    Hop {
        origin: NodeId,
        bundle: u32,
        strategy: Strategy,
    },
    Dropped {
        origin: NodeId,
        bundle: u32,
        cause: DropCause,
    },
}

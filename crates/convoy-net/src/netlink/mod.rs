//! The host's interfaces through NETLINK_ROUTE: what exists now, what
//! changes (links going down or up, IPv4 or IPv6 addresses added or
//! removed), and route look-ups that say whether a server is reachable
//! through a given interface. The client's path manager ([`crate::multipath`]) uses them
//! to open, abandon and revive paths as a vehicle's radios come and go.
//! netlink-packet-route encodes and decodes the messages, netlink-sys
//! carries them.

pub mod interfaces;
pub mod parse;
pub mod request;
pub mod socket;

pub use interfaces::{Choice, Interface, Interfaces, Local, Selection};
pub use parse::Message;
pub use socket::RouteSocket;

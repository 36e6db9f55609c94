//! Connection ids that carry a server id, so a fleet's load balancer (or
//! the kernel, across one server's sockets) can route every packet of a
//! connection to the process and core that holds it, whatever address it
//! comes from (a handover, a NAT rebinding).
//!
//! The layout is the plaintext algorithm of the QUIC-LB draft
//! (draft-ietf-quic-load-balancers), on our 8-byte ids of which a short
//! header carries the first 6:
//!
//! ```text
//! byte 0      : config rotation (top 3 bits) | 5 random bits
//! bytes 1..3  : server id (u16, big-endian)    <- the load balancer routes on this
//! byte 3      : worker: the index of the SO_REUSEPORT socket (core) within the server
//! bytes 4..6  : random nonce
//! bytes 6..8  : zero (not sent in short headers)
//! ```
//!
//! That leaves 21 random bits per server worker: two million ids, drawn
//! until one is not in use (the endpoint checks), where a worker holds
//! tens of thousands of connections. An id is no secret: every packet is
//! authenticated by its AEAD, so a guessed id gets a packet nowhere.
//!
//! Config rotation 0b111 marks an id that carries no routing information
//! (QUIC-LB's "unroutable"): a client's own ids and its first Initial's
//! random destination id. The load balancer and the kernel's steering
//! program (convoy-net's `steer` module) read only bytes 1..=3, so the
//! worker byte of a random id spreads new handshakes over the workers.

use crate::wire::{ConnectionId, CID_LEN, SHORT_CID_LEN};

/// The rotation value of ids that carry no server id.
pub const UNROUTABLE: u8 = 0b111;
/// Offset of the server id within a connection id.
pub const SERVER_ID_OFFSET: usize = 1;
/// Offset of the worker byte within a connection id.
pub const WORKER_OFFSET: usize = 3;

/// Which server and worker this endpoint's connection ids name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Routing {
    /// QUIC-LB config rotation, 0..=6 (lets a fleet change its id layout
    /// without breaking connections that use the old one).
    pub rotation: u8,
    /// This server's id within the fleet.
    pub server_id: u16,
    /// This endpoint's socket (core) within the server.
    pub worker: u8,
}

impl Routing {
    /// Builds an id from 3 random bytes (`random[0]`'s top bits are
    /// replaced by the rotation).
    pub fn mint(&self, random: [u8; 3]) -> ConnectionId {
        let mut id = [0u8; CID_LEN];
        id[0] = (self.rotation.min(6) << 5) | (random[0] & 0x1f);
        id[SERVER_ID_OFFSET..SERVER_ID_OFFSET + 2].copy_from_slice(&self.server_id.to_be_bytes());
        id[WORKER_OFFSET] = self.worker;
        id[WORKER_OFFSET + 1..SHORT_CID_LEN].copy_from_slice(&random[1..]);
        ConnectionId(id)
    }

    /// A client's id: random, marked unroutable (45 random bits).
    pub fn unroutable(random: [u8; SHORT_CID_LEN]) -> ConnectionId {
        let mut id = ConnectionId::from_short(random);
        id.0[0] = (UNROUTABLE << 5) | (id.0[0] & 0x1f);
        id
    }
}

/// What a load balancer reads from an id: the server id, unless the id is
/// unroutable (then it routes by address, as for a first Initial).
pub fn server_id(cid: &ConnectionId) -> Option<u16> {
    (cid.0[0] >> 5 != UNROUTABLE)
        .then(|| u16::from_be_bytes([cid.0[SERVER_ID_OFFSET], cid.0[SERVER_ID_OFFSET + 1]]))
}

/// The worker byte of an id.
pub fn worker(cid: &ConnectionId) -> u8 {
    cid.0[WORKER_OFFSET]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_server_and_worker() {
        let r = Routing {
            rotation: 2,
            server_id: 0xbeef,
            worker: 3,
        };
        let id = r.mint([0xff, 1, 2]);
        assert_eq!(id.0, [0x5f, 0xbe, 0xef, 3, 1, 2, 0, 0]);
        assert_eq!(server_id(&id), Some(0xbeef));
        assert_eq!(worker(&id), 3);
        assert!(id.fits_short_header());
        let c = Routing::unroutable([0xff; 6]);
        assert_eq!(server_id(&c), None);
        assert!(c.fits_short_header());
    }
}

//! What crosses the LTE cells and the wired core: convoy-proto datagrams
//! of the uploads, edge requests and responses, and cluster aggregates.

/// Where a packet goes in the core network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Server {
    /// The far cloud, behind the PGW and the Internet.
    Cloud,
    /// An edge server beside the PGW.
    EdgePgw,
    /// An edge server at eNodeB n.
    EdgeEnb(u16),
    /// The intersection service that relays cluster aggregates (at the PGW).
    Relay,
}

#[derive(Clone, Debug)]
pub enum Body {
    /// A convoy-proto datagram of upload `upload`, up or down.
    Proto {
        upload: u32,
        bytes: Vec<u8>,
    },
    Request {
        client: u32,
        id: u64,
        server: Server,
    },
    Response {
        client: u32,
        id: u64,
    },
    /// Awareness messages carried over LTE (`cams` of sender, seq, created).
    Cams {
        from: u32,
        cams: Vec<(u32, u32, u64)>,
    },
}

#[derive(Clone, Debug)]
pub struct Packet {
    /// Bytes on the air: payload plus 28 bytes of IPv4 and UDP headers.
    pub wire_len: usize,
    /// Up: the server it is for. Down: the UE (vehicle) it is for.
    pub to_server: Option<Server>,
    pub to_node: Option<u32>,
    pub body: Body,
}

pub const IP_UDP: usize = 28;

impl Packet {
    pub fn len(&self) -> usize {
        self.wire_len
    }

    pub fn is_empty(&self) -> bool {
        self.wire_len == 0
    }

    pub fn up(server: Server, payload: usize, body: Body) -> Packet {
        Packet {
            wire_len: payload + IP_UDP,
            to_server: Some(server),
            to_node: None,
            body,
        }
    }

    pub fn down(node: u32, payload: usize, body: Body) -> Packet {
        Packet {
            wire_len: payload + IP_UDP,
            to_server: None,
            to_node: Some(node),
            body,
        }
    }
}

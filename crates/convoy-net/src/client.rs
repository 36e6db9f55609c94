//! The blocking client: one connection to a server, on which uploads,
//! downloads and perf runs happen one after another.

use std::net::SocketAddr;
use std::time::Duration;

use convoy_proto::{
    Config, Connection, ConnectionHandle, ConnectionStats, Endpoint, Event, Keypair, Mode, StreamId,
};

use crate::driver::{Application, Driver, DriverConfig, Step};
use crate::error::NetError;
use crate::request::Reply;
use crate::socket::NetSocket;

#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub server: SocketAddr,
    /// The server's static public key (Noise IK: the server is
    /// authenticated before any data moves).
    pub server_key: [u8; 32],
    pub mode: Mode,
    /// Our identity; a fresh one per run if `None`.
    pub keypair: Option<Keypair>,
    pub idle_timeout: Duration,
    pub handshake_timeout: Duration,
    pub driver: DriverConfig,
}

impl ClientOptions {
    pub fn new(server: SocketAddr, server_key: [u8; 32]) -> ClientOptions {
        ClientOptions {
            server,
            server_key,
            mode: Mode::Rcdp,
            keypair: None,
            idle_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            driver: DriverConfig::default(),
        }
    }
}

/// How far a transfer has got, for progress bars.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
    pub elapsed: Duration,
}

pub type ProgressFn<'a> = &'a mut dyn FnMut(Progress);

pub struct Client {
    pub(crate) driver: Driver,
    pub(crate) handle: ConnectionHandle,
    pub(crate) server: SocketAddr,
}

/// The connection, or why it is gone.
pub(crate) fn live(
    ep: &mut Endpoint,
    h: ConnectionHandle,
    server: SocketAddr,
) -> Result<&mut Connection, NetError> {
    let c = ep.connection(h).ok_or_else(|| NetError::Closed {
        addr: server,
        reason: "connection lost".into(),
    })?;
    while let Some(ev) = c.poll_event() {
        if let Event::Closed(reason) = ev {
            return Err(NetError::Closed {
                addr: server,
                reason: reason.to_string(),
            });
        }
    }
    if let Some(reason) = c.close_reason() {
        return Err(NetError::Closed {
            addr: server,
            reason: reason.to_string(),
        });
    }
    Ok(c)
}

/// Reads reply records from a stream into `inbox` and parses them.
pub(crate) fn read_replies(
    c: &mut Connection,
    id: StreamId,
    inbox: &mut Vec<u8>,
    scratch: &mut [u8],
) -> Result<(Vec<Reply>, bool), NetError> {
    let mut fin = false;
    loop {
        match c.read(id, scratch) {
            Ok(0) => {
                fin = true;
                break;
            }
            Ok(n) => inbox.extend_from_slice(&scratch[..n]),
            Err(convoy_proto::StreamError::Blocked) => break,
            Err(e) => return Err(e.into()),
        }
    }
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some((r, used)) = Reply::decode(&inbox[pos..])? {
        pos += used;
        out.push(r);
    }
    inbox.drain(..pos);
    Ok((out, fin))
}

struct AwaitConnected {
    h: ConnectionHandle,
    server: SocketAddr,
}

impl Application for AwaitConnected {
    fn step(&mut self, ep: &mut Endpoint, _now: Duration) -> Result<Step, NetError> {
        let c = live(ep, self.h, self.server)?;
        Ok(if c.is_established() {
            Step::Done
        } else {
            Step::Continue
        })
    }
}

struct CloseApp {
    h: ConnectionHandle,
    deadline: Duration,
}

impl Application for CloseApp {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        let Some(c) = ep.connection(self.h) else {
            return Ok(Step::Done);
        };
        c.close(0, "done");
        // The close packet goes out in this turn's flush; waiting for the
        // peer's is not needed.
        Ok(if c.is_closed() || now >= self.deadline {
            Step::Done
        } else {
            Step::Continue
        })
    }
}

impl Client {
    /// Connects and finishes the handshake.
    pub fn connect(opts: ClientOptions) -> Result<Client, NetError> {
        let keypair = opts.keypair.clone().unwrap_or_else(Keypair::generate);
        let mut cfg = Config::for_mode(keypair, opts.mode);
        cfg.idle_timeout = opts.idle_timeout;
        cfg.handshake_timeout = opts.handshake_timeout;
        let endpoint = Endpoint::new(cfg, false).map_err(|e| NetError::Config(e.to_string()))?;
        let local: SocketAddr = if opts.server.is_ipv4() {
            "0.0.0.0:0".parse().expect("valid")
        } else {
            "[::]:0".parse().expect("valid")
        };
        let socket =
            NetSocket::bind(local, Some(opts.server)).map_err(|err| NetError::Unreachable {
                addr: opts.server,
                err,
            })?;
        let mut driver = Driver::new(endpoint, socket, opts.driver);
        let now = driver.now();
        let handle = driver
            .endpoint
            .connect(now, opts.server, Some(&opts.server_key))
            .map_err(|e| NetError::Config(e.to_string()))?;
        driver.set_peer(opts.server);
        let mut c = Client {
            driver,
            handle,
            server: opts.server,
        };
        let mut app = AwaitConnected {
            h: handle,
            server: opts.server,
        };
        c.driver.run(&mut app)?;
        Ok(c)
    }

    pub fn stats(&self) -> ConnectionStats {
        self.driver
            .endpoint
            .connection_ref(self.handle)
            .map(|c| c.stats())
            .unwrap_or_default()
    }

    pub fn driver_stats(&self) -> &crate::stats::DriverStats {
        self.driver.stats()
    }

    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// Closes the connection, telling the server.
    pub fn close(mut self) {
        let deadline = self.driver.now() + Duration::from_millis(50);
        let mut app = CloseApp {
            h: self.handle,
            deadline,
        };
        let _ = self.driver.run(&mut app);
    }
}

//! A sender that is always behind its pacing schedule must still hear its
//! peer. Here every turn of the client's application takes a millisecond
//! (as a busy or CPU-starved process's would), so the driver finds the
//! pacing deadline already passed on every turn. Before the driver read
//! the socket on such turns too, the client never saw an acknowledgment
//! or a rate report and the connection died of idle timeout.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use convoy_net::request::{Reply, Request};
use convoy_net::socket::NetSocket;
use convoy_net::{Application, Driver, DriverConfig, NetError, Server, ServerOptions, Step};
use convoy_proto::{Config, ConnectionHandle, Endpoint, Keypair, Mode, StreamError, StreamId};

const BYTES: u64 = 8_000_000;
const TURN: Duration = Duration::from_millis(1);

/// Sends BYTES as a perf request and waits for the server's count.
struct SlowPerf {
    h: ConnectionHandle,
    stream: Option<StreamId>,
    header: Vec<u8>,
    written: u64,
    finished: bool,
    inbox: Vec<u8>,
    received: Option<u64>,
}

impl Application for SlowPerf {
    fn step(&mut self, ep: &mut Endpoint, _now: Duration) -> Result<Step, NetError> {
        std::thread::sleep(TURN);
        let c = ep.connection(self.h).ok_or(NetError::Interrupted)?;
        if let Some(reason) = c.close_reason() {
            return Err(NetError::Protocol(format!("connection closed: {reason}")));
        }
        if !c.is_established() {
            return Ok(Step::Continue);
        }
        let id = match self.stream {
            Some(id) => id,
            None => *self.stream.insert(c.open_stream()?),
        };
        while !self.header.is_empty() {
            match c.write(id, &self.header) {
                Ok(n) if n > 0 => drop(self.header.drain(..n)),
                Ok(_) | Err(StreamError::Blocked) => return Ok(Step::Continue),
                Err(e) => return Err(e.into()),
            }
        }
        let filler = [0x5au8; 64 * 1024];
        while self.written < BYTES {
            let n = filler.len().min((BYTES - self.written) as usize);
            match c.write(id, &filler[..n]) {
                Ok(w) if w > 0 => self.written += w as u64,
                Ok(_) | Err(StreamError::Blocked) => break,
                Err(e) => return Err(e.into()),
            }
        }
        if self.written == BYTES && !self.finished {
            c.finish(id)?;
            self.finished = true;
        }
        let mut buf = [0u8; 4096];
        loop {
            match c.read(id, &mut buf) {
                Ok(0) => break,
                Ok(n) => self.inbox.extend_from_slice(&buf[..n]),
                Err(StreamError::Blocked) => break,
                Err(e) => return Err(e.into()),
            }
        }
        while let Some((reply, used)) = Reply::decode(&self.inbox)? {
            self.inbox.drain(..used);
            if let Reply::PerfDone { received, .. } = reply {
                self.received = Some(received);
            }
        }
        Ok(if self.received.is_some() {
            Step::Done
        } else {
            Step::Continue
        })
    }
}

#[test]
fn a_sender_late_on_every_turn_still_reads_its_peer() {
    let (tx, rx) = mpsc::channel::<(SocketAddr, [u8; 32], _)>();
    let server = std::thread::spawn(move || {
        let kp = Keypair::generate();
        let public = kp.public;
        let mut opts = ServerOptions::new("127.0.0.1:0".parse().unwrap(), kp);
        opts.open = true;
        let mut server = Server::bind(opts).unwrap();
        tx.send((server.local_addr().unwrap(), public, server.stop_flag()))
            .unwrap();
        server.run().unwrap();
    });
    let (addr, key, stop) = rx.recv().unwrap();

    let mut cfg = Config::for_mode(Keypair::generate(), Mode::Rcdp);
    // Short, so a client that hears nothing fails in seconds, not 30.
    cfg.idle_timeout = Duration::from_secs(3);
    let endpoint = Endpoint::new(cfg, false).unwrap();
    let socket = NetSocket::bind("127.0.0.1:0".parse().unwrap(), Some(addr)).unwrap();
    let mut driver = Driver::new(endpoint, socket, DriverConfig::default());
    let now = driver.now();
    let h = driver.endpoint.connect(now, addr, Some(&key)).unwrap();
    let mut app = SlowPerf {
        h,
        stream: None,
        header: Request::Perf {
            bytes: BYTES,
            millis: 0,
        }
        .encode(),
        written: 0,
        finished: false,
        inbox: Vec::new(),
        received: None,
    };
    let result = driver.run(&mut app);
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    result.unwrap();
    assert_eq!(app.received, Some(BYTES));
}

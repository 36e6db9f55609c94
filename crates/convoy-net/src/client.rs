//! The blocking client: one connection to a server, on which uploads,
//! downloads and perf runs happen one after another.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use convoy_proto::cc::Priority;
use convoy_proto::{
    AeadChoice, Config, Connection, ConnectionHandle, ConnectionStats, Endpoint, Event, Keypair,
    Mode, StreamId,
};

use crate::driver::{Application, Driver, DriverConfig, Step};
use crate::error::NetError;
use crate::interrupt::Interruptible;
use crate::multipath::{Multipath, PathEventReport, PathNames, PathReport};
use crate::netlink::{Local, Selection};
use crate::request::Reply;
use crate::socket::NetSocket;
use crate::wake::Waker;

/// The close code of a connection whose transfer was interrupted.
const INTERRUPTED_CODE: u64 = 1;

/// How to reach a server, and how to talk to it.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// The server's UDP address.
    pub server: SocketAddr,
    /// The server's static public key (Noise IK: the server is
    /// authenticated before any data moves).
    pub server_key: [u8; 32],
    /// Code and rate control of what this client sends.
    pub mode: Mode,
    /// `Background` replaces the mode's rate control with the scavenger
    /// that yields to every other flow (docs/PROTOCOL.md).
    pub priority: Priority,
    /// Our identity; a fresh one per run if `None`.
    pub keypair: Option<Keypair>,
    /// Give up after this long without hearing from the server (30 s).
    pub idle_timeout: Duration,
    /// Give up if the handshake has not finished after this long (10 s):
    /// the server is unreachable or does not hold `server_key`.
    pub handshake_timeout: Duration,
    /// Pacing, batching and timestamp settings of the driver.
    pub driver: DriverConfig,
    /// Which packet AEADs the handshake offers (AES-256-GCM where this CPU
    /// has AES instructions, by default).
    pub aead: AeadChoice,
    /// `None`: one socket, routed by the kernel (the default). `Some`:
    /// one path per chosen local address of the server's family (IPv4 or
    /// IPv6), following the host's interfaces through netlink
    /// ([`crate::multipath`]); an empty selection means every interface
    /// that reaches the server, and falls back to one socket when there
    /// is no choice to make (a server on this host, no interface with an
    /// address of the server's family, no netlink).
    pub paths: Option<Selection>,
    /// With one socket (`paths` `None`): the local address it is bound
    /// to, as a device with its own address in a shared network (a cell's
    /// UE) sends from; `None` lets the kernel's routes choose.
    pub local: Option<std::net::IpAddr>,
}

impl ClientOptions {
    /// Defaults for everything but the server's address and key:
    /// Tide, a fresh identity, 30 s idle and 10 s handshake timeouts.
    pub fn new(server: SocketAddr, server_key: [u8; 32]) -> ClientOptions {
        ClientOptions {
            server,
            server_key,
            mode: Mode::Tide,
            priority: Priority::Normal,
            keypair: None,
            idle_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            driver: DriverConfig::default(),
            aead: AeadChoice::Auto,
            paths: None,
            local: None,
        }
    }
}

/// How far a transfer has got, for progress bars.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Progress {
    /// Bytes of the file done, counting what an earlier run left: for an
    /// upload, held by the server (in blocks it reported decodable; it
    /// confirms the stored file at the end); for a download, written to the
    /// partial file.
    pub done: u64,
    /// The file's size (0 for a download until the server has said).
    pub total: u64,
    /// Time since the request was sent.
    pub elapsed: Duration,
    /// Each path's figures: interface, rate, RTT, bytes, share (empty
    /// where the caller has none, as in the async API's final report).
    pub paths: Vec<crate::multipath::PathProgress>,
}

/// A progress callback of the blocking API, called every 200 ms.
pub type ProgressFn<'a> = &'a mut dyn FnMut(Progress);

/// A blocking client: one connection to a server, on which uploads,
/// downloads and perf runs happen one after another on the calling
/// thread. It is not `Send` (its syscall batches hold raw pointers): it
/// stays on the thread that connected it, and other threads stop its
/// transfers through [`Client::interrupt_flag`]. The async client,
/// `convoy_net::tokio::Client` (feature `tokio`), runs this one on a
/// driver thread of its own.
pub struct Client {
    pub(crate) driver: Driver,
    pub(crate) handle: ConnectionHandle,
    pub(crate) server: SocketAddr,
    /// Set from elsewhere to stop the transfer in progress.
    pub(crate) interrupt: Arc<AtomicBool>,
    /// The control stream, when opened ([`Client::open_control`]).
    pub(crate) control: Option<crate::control::ClientControl>,
    /// [`Client::close`] said goodbye already; otherwise dropping does.
    closed: bool,
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
    code: u64,
    reason: &'static str,
}

impl Application for CloseApp {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        let Some(c) = ep.connection(self.h) else {
            return Ok(Step::Done);
        };
        c.close(self.code, self.reason);
        // The close packet goes out in this turn's flush; waiting for the
        // peer's is not needed.
        Ok(if c.is_closed() || now >= self.deadline {
            Step::Done
        } else {
            Step::Continue
        })
    }
}

/// Serves the connection without a transfer until `until` (set on the
/// first turn, `span` after it), after at least one pass over what arrived.
struct IdleApp {
    h: ConnectionHandle,
    server: SocketAddr,
    span: Duration,
    until: Option<Duration>,
}

impl Application for IdleApp {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        live(ep, self.h, self.server)?;
        match self.until {
            // The first turn runs the timers before anything is read; the
            // driver's wait reads the socket (at once when this deadline
            // has passed), and the next turn answers what came.
            None => {
                self.until = Some(now + self.span);
                Ok(Step::Continue)
            }
            Some(t) if now >= t => Ok(Step::Done),
            Some(_) => Ok(Step::Continue),
        }
    }

    fn wake_at(&self) -> Option<Duration> {
        self.until
    }
}

/// Serves the control stream (if any) after every turn of `app`.
struct WithControl<'a, A> {
    app: &'a mut A,
    control: Option<&'a mut crate::control::ClientControl>,
    h: ConnectionHandle,
    scratch: Vec<u8>,
}

impl<A: Application> Application for WithControl<'_, A> {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        let step = self.app.step(ep, now)?;
        if let (Some(ctl), Some(c)) = (self.control.as_deref_mut(), ep.connection(self.h)) {
            if self.scratch.is_empty() {
                self.scratch = vec![0; 16 * 1024];
            }
            ctl.serve(c, &mut self.scratch);
        }
        Ok(step)
    }

    fn wake_at(&self) -> Option<Duration> {
        self.app.wake_at()
    }
}

/// Ends `app` early once `done()` holds.
struct EndWhen<'a, A> {
    app: &'a mut A,
    done: &'a dyn Fn() -> bool,
}

impl<A: Application> Application for EndWhen<'_, A> {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        if (self.done)() {
            return Ok(Step::Done);
        }
        self.app.step(ep, now)
    }

    fn wake_at(&self) -> Option<Duration> {
        self.app.wake_at()
    }
}

impl Client {
    /// Connects and finishes the handshake.
    pub fn connect(opts: ClientOptions) -> Result<Client, NetError> {
        Client::connect_with(opts, Arc::new(AtomicBool::new(false)), None)
    }

    /// [`Client::connect`] whose handshake (and later transfers) stop when
    /// `interrupt` is set, on a driver woken by `waker`.
    pub(crate) fn connect_with(
        opts: ClientOptions,
        interrupt: Arc<AtomicBool>,
        waker: Option<Arc<Waker>>,
    ) -> Result<Client, NetError> {
        let keypair = opts.keypair.clone().unwrap_or_else(Keypair::generate);
        let mut cfg = Config::for_mode(keypair, opts.mode);
        opts.priority.apply(&mut cfg);
        cfg.idle_timeout = opts.idle_timeout;
        cfg.handshake_timeout = opts.handshake_timeout;
        cfg.aead = opts.aead;
        let endpoint = Endpoint::new(cfg, false).map_err(|e| NetError::Config(e.to_string()))?;
        let (socket, multipath) = client_socket(&opts)?;
        let mut driver = Driver::new(endpoint, socket, opts.driver);
        if let Some(w) = waker {
            driver.set_waker(w);
        }
        let now = driver.now();
        let handle = driver
            .endpoint
            .connect(now, opts.server, Some(&opts.server_key))
            .map_err(|e| NetError::Config(e.to_string()))?;
        driver.set_peer(opts.server);
        if let Some((mut mp, primary)) = multipath {
            // A fresh reading: the path events' Unix times are this
            // instant's system clock plus their time on the driver's.
            mp.attach(handle, primary, driver.now());
            driver.multipath = Some(mp);
        }
        let mut c = Client {
            driver,
            handle,
            server: opts.server,
            interrupt,
            control: None,
            closed: false,
        };
        let mut app = AwaitConnected {
            h: handle,
            server: opts.server,
        };
        c.driver.run(&mut Interruptible {
            app: &mut app,
            flag: &c.interrupt,
        })?;
        Ok(c)
    }

    /// A flag that stops the transfer in progress when set, from another
    /// thread or a signal handler: it returns [`NetError::Interrupted`]
    /// within about 100 ms, and the connection is closed (telling the
    /// server), so later transfers on this client fail: connect again.
    /// Nothing is lost: an interrupted upload stays on the server as a
    /// partial file that the next upload of the same file resumes, and an
    /// interrupted download stays in `DEST.convoy-part`.
    pub fn interrupt_flag(&self) -> Arc<AtomicBool> {
        self.interrupt.clone()
    }

    /// Runs a transfer until it is done or interrupted.
    pub(crate) fn run_transfer<A: Application>(&mut self, app: &mut A) -> Result<(), NetError> {
        let flag = self.interrupt.clone();
        let mut app = WithControl {
            app,
            control: self.control.as_mut(),
            h: self.handle,
            scratch: Vec::new(),
        };
        let r = self.driver.run(&mut Interruptible {
            app: &mut app,
            flag: &flag,
        });
        if let Err(NetError::Interrupted) = r {
            // The stream is left half-sent, holding the server's session
            // and the connection's flow-control credit; closing the whole
            // connection releases both. Resetting just the stream would
            // keep the connection, but convoy-proto does not give a reset
            // stream's unread bytes back to the connection's credit, and
            // a later transfer on it stalled in tests.
            self.shut_down(INTERRUPTED_CODE, "transfer interrupted");
        }
        r
    }

    /// Serves the connection for `d` without a transfer: reads what the
    /// server sent, acknowledges it, and sends the keep-alive ping when one
    /// is due. With `Duration::ZERO` it makes one pass and returns at once.
    ///
    /// A blocking client is driven only inside its calls. Left alone for
    /// the idle timeout between transfers, its connection is dead at both
    /// ends: the server heard nothing (no ping, no acknowledgment of its
    /// own pings) and times it out, and the client's first turn afterwards
    /// times it out too, before reading the server's pings still queued in
    /// the socket. A caller that keeps a client across idle periods (the
    /// agent's upload lanes) calls this every fraction of the idle timeout.
    /// `Err`: the connection is gone; connect again.
    pub fn idle(&mut self, d: Duration) -> Result<(), NetError> {
        let mut app = IdleApp {
            h: self.handle,
            server: self.server,
            span: d,
            until: None,
        };
        self.run_transfer(&mut app)
    }

    /// Serves the connection for up to `d`, returning early once `done()`
    /// says so (checked on every turn; ring the driver's waker, which
    /// [`Client::open_control`] returns, to have it checked at once).
    /// An idle agent lane waits here so its control stream is read as
    /// requests arrive.
    pub fn idle_until(&mut self, d: Duration, done: &dyn Fn() -> bool) -> Result<(), NetError> {
        let mut app = IdleApp {
            h: self.handle,
            server: self.server,
            span: d,
            until: None,
        };
        let mut app = EndWhen {
            app: &mut app,
            done,
        };
        self.run_transfer(&mut app)
    }

    /// Opens the control stream ([`crate::control`]): frames the server
    /// sends go to `to_app`, frames sent into `from_app` go to the server.
    /// The stream is served during every call on this client (transfers,
    /// [`Client::idle`], [`Client::idle_until`]). Returns the driver's
    /// waker: ring it after sending into `from_app` so a waiting call
    /// writes the frame at once.
    pub fn open_control(
        &mut self,
        to_app: std::sync::mpsc::Sender<Vec<u8>>,
        from_app: std::sync::mpsc::Receiver<Vec<u8>>,
    ) -> Result<Arc<Waker>, NetError> {
        let waker = match self.driver.waker() {
            Some(w) => w,
            None => {
                let w = Arc::new(Waker::new().map_err(NetError::Socket)?);
                self.driver.set_waker(w.clone());
                w
            }
        };
        let c = live(&mut self.driver.endpoint, self.handle, self.server)?;
        let stream = c.open_stream().map_err(NetError::from)?;
        self.control = Some(crate::control::ClientControl::new(
            stream,
            &crate::request::Request::Control.encode(),
            to_app,
            from_app,
        ));
        // One pass writes the header.
        self.idle(Duration::ZERO)?;
        Ok(waker)
    }

    /// Tells the server the connection is closed; waits at most 50 ms.
    fn shut_down(&mut self, code: u64, reason: &'static str) {
        let deadline = self.driver.now() + Duration::from_millis(50);
        let mut app = CloseApp {
            h: self.handle,
            deadline,
            code,
            reason,
        };
        let _ = self.driver.run(&mut app);
    }

    /// The connection's counters (packets, losses, RTT, rate).
    pub fn stats(&self) -> ConnectionStats {
        self.driver
            .endpoint
            .connection_ref(self.handle)
            .map(|c| c.stats())
            .unwrap_or_default()
    }

    /// What the driver measured about itself (syscalls, pacing error).
    pub fn driver_stats(&self) -> &crate::stats::DriverStats {
        self.driver.stats()
    }

    /// Every path's figures: with several interfaces, one per local
    /// address; otherwise path 0 alone.
    pub fn path_report(&self) -> Vec<PathReport> {
        let ep = &self.driver.endpoint;
        if let Some(mp) = &self.driver.multipath {
            return mp.report(ep, &self.driver);
        }
        let Some(c) = ep.connection_ref(self.handle) else {
            return Vec::new();
        };
        let local = self.driver.local_addr().ok();
        crate::multipath::path_reports(c, |id| (None, local.filter(|_| id == 0)))
    }

    /// Every path state change, with its time since the connection began.
    pub fn path_events(&self) -> Vec<PathEventReport> {
        self.driver
            .multipath
            .as_ref()
            .map_or_else(Vec::new, |mp| mp.events(&self.driver.endpoint))
    }

    /// Path id to interface name (empty with one kernel-routed socket).
    pub fn path_names(&self) -> PathNames {
        self.driver
            .multipath
            .as_ref()
            .map_or_else(PathNames::default, |mp| mp.names())
    }

    /// The server's address.
    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// Closes the connection, telling the server.
    pub fn close(mut self) {
        self.shut_down(0, "done");
        self.closed = true;
    }
}

/// A client dropped without [`Client::close`] (a command that ends on an
/// error) still tells the server, at most 50 ms later: otherwise the
/// server waits for acknowledgments that never come, up to its idle
/// timeout, or its whole drain limit when it is stopping.
impl Drop for Client {
    fn drop(&mut self) {
        if !self.closed {
            self.shut_down(0, "client gone");
        }
    }
}

/// Path 0's socket, and the path manager when the client uses several
/// interfaces (with the address path 0 is bound to).
fn client_socket(
    opts: &ClientOptions,
) -> Result<(NetSocket, Option<(Multipath, Local)>), NetError> {
    let Some(selection) = &opts.paths else {
        if let Some(local) = opts.local {
            let socket =
                NetSocket::bind(SocketAddr::new(local, 0), Some(opts.server)).map_err(|err| {
                    NetError::Unreachable {
                        addr: opts.server,
                        err,
                    }
                })?;
            return Ok((socket, None));
        }
        return Ok((NetSocket::connect_to(opts.server)?, None));
    };
    let explicit = selection != &Selection::default();
    if opts.server.ip().is_loopback() {
        if explicit {
            return Err(NetError::Config(format!(
                "--path/--backup: {} is on this host, reached by loopback only",
                opts.server
            )));
        }
        return Ok((NetSocket::connect_to(opts.server)?, None));
    }
    match Multipath::start(opts.server, selection.clone()) {
        Ok((mp, primary)) => {
            // Unconnected, like every path socket: a server with several
            // addresses answers from the one its route back leaves by
            // (in `convoy emu`, 10.7.1.2 for a client on Wi-Fi that
            // dialled 10.7.0.2), which a connected socket would drop.
            let socket = NetSocket::bind_path(primary.addr, Some(&primary.interface), None)
                .map_err(|err| NetError::Unreachable {
                    addr: opts.server,
                    err,
                })?;
            Ok((socket, Some((mp, primary))))
        }
        // Every usable interface, but none could be read or chosen: one
        // socket as before, whose errors say what is wrong.
        Err(_) if !explicit => Ok((NetSocket::connect_to(opts.server)?, None)),
        Err(e) => Err(e),
    }
}

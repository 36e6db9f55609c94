//! The control stream: requests from the cloud to a vehicle over the
//! vehicle's own authenticated connection (docs/SERVICE.md, "Requests").
//!
//! The agent opens one stream on its live lane's connection with a
//! [`Request::Control`](crate::request::Request::Control) header and keeps
//! it open. After the header both directions carry frames (a 4-byte
//! big-endian length, then that many bytes of JSON, at most
//! [`MAX_FRAME`]): the server pushes [`ToVehicle`] messages as they are
//! issued, the agent answers with [`FromVehicle`] acknowledgements,
//! progress and results. No new port, no polling: a request reaches a
//! vehicle as soon as the stream's bytes do, and the transport's stream
//! mechanism (ordered, reliable, flow-controlled) carries it unchanged.
//!
//! * [`frame`]: the framing, with a reader that refuses oversized frames.
//! * [`msg`]: the messages, and the checks both ends run on a request.
//! * [`book`]: the agent's sans-IO state machine for the protocol.
//! * [`ClientControl`] / [`ControlHook`]: the drivers' halves (the
//!   blocking client services the stream on every turn of every call; the
//!   server hands frames to a hook the fleet service provides).

pub mod book;
pub mod frame;
pub mod msg;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use convoy_proto::{Connection, StreamError, StreamId};

use crate::auth::Identity;
use crate::error::NetError;
use crate::session::Outbox;
use crate::wake::Waker;

pub use frame::{encode_frame, FrameReader, MAX_FRAME};
pub use msg::{FromVehicle, RequestBody, ToVehicle};

/// Rings a server worker: frames wait for one of its control streams. The
/// worker steps its control sessions on its next turn, at once when the
/// waker is set.
#[derive(Clone, Debug)]
pub struct Bell {
    flag: Arc<AtomicBool>,
    waker: Option<Arc<Waker>>,
}

impl Bell {
    pub(crate) fn new(flag: Arc<AtomicBool>, waker: Option<Arc<Waker>>) -> Bell {
        Bell { flag, waker }
    }

    pub fn ring(&self) {
        self.flag.store(true, Ordering::Release);
        if let Some(w) = &self.waker {
            w.wake();
        }
    }
}

/// The fleet service's side of control streams, given to the server
/// ([`crate::ServerOptions::control_hook`]). Called on a worker's protocol
/// thread, so both calls must return at once: database work belongs on a
/// thread of the hook's own.
pub trait ControlHook: Send + Sync {
    /// `who` opened a control stream. Frames sent into the returned
    /// channel go to it; ring `bell` after sending. A dropped sender ends
    /// the stream. `Err`: refused, with a reason the agent reads.
    fn attach(&self, who: &Identity, bell: Bell) -> Result<mpsc::Receiver<Vec<u8>>, String>;

    /// A frame from `who`'s control stream (not yet parsed: the hook owns
    /// the messages' meaning).
    fn received(&self, who: &Identity, frame: Vec<u8>);
}

/// The client's end of a control stream: frames read from the stream go
/// to `to_app`, frames from `from_app` are written to it. Serviced by the
/// client on every turn of every call ([`crate::Client::open_control`]).
pub struct ClientControl {
    pub(crate) stream: StreamId,
    reader: FrameReader,
    out: Outbox,
    to_app: mpsc::Sender<Vec<u8>>,
    from_app: mpsc::Receiver<Vec<u8>>,
    /// The stream ended (the server refused it, or broke it): the
    /// connection's transfers go on without it.
    ended: bool,
}

impl ClientControl {
    pub(crate) fn new(
        stream: StreamId,
        header: &[u8],
        to_app: mpsc::Sender<Vec<u8>>,
        from_app: mpsc::Receiver<Vec<u8>>,
    ) -> ClientControl {
        let mut out = Outbox::default();
        out.push(header);
        ClientControl {
            stream,
            reader: FrameReader::default(),
            out,
            to_app,
            from_app,
            ended: false,
        }
    }

    /// Whether the stream ended (the server's reason, if it gave one, was
    /// handed on as a frame).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Reads what arrived, hands whole frames on, writes what waits. A
    /// stream that ends or breaks is dropped ([`ClientControl::ended`]);
    /// the connection and its uploads are not disturbed by it.
    pub(crate) fn serve(&mut self, c: &mut Connection, scratch: &mut [u8]) {
        if self.ended {
            return;
        }
        if self.serve_inner(c, scratch).is_err() {
            self.ended = true;
        }
    }

    fn serve_inner(&mut self, c: &mut Connection, scratch: &mut [u8]) -> Result<(), NetError> {
        while let Ok(frame) = self.from_app.try_recv() {
            self.out.push(&encode_frame(&frame));
        }
        self.out.flush(c, self.stream)?;
        loop {
            match c.read(self.stream, scratch) {
                Ok(0) => {
                    return Err(NetError::Remote(
                        "the server ended the control stream".into(),
                    ))
                }
                Ok(n) => self.reader.push(&scratch[..n]),
                Err(StreamError::Blocked) => break,
                Err(e) => return Err(e.into()),
            }
        }
        while let Some(frame) = self.reader.next_frame()? {
            if self.to_app.send(frame).is_err() {
                return Err(NetError::Config("control stream: nobody listens".into()));
            }
        }
        Ok(())
    }
}

//! A control stream on the server: frames from the vehicle go to the
//! [`ControlHook`], frames the hook queues go to the vehicle.

use std::sync::{mpsc, Arc};

use convoy_proto::{Connection, StreamError, StreamId};

use crate::auth::{Identity, Role};
use crate::control::{encode_frame, Bell, ControlHook, FrameReader, ToVehicle};
use crate::error::NetError;
use crate::session::Outbox;

pub struct ServerControl {
    who: Option<Identity>,
    reader: FrameReader,
    out: Outbox,
    from_hook: Option<mpsc::Receiver<Vec<u8>>>,
    done: bool,
}

impl ServerControl {
    /// Attaches a control stream of `who` to the hook; a peer the hook
    /// refuses (or a server without one, or an operator's key) reads why,
    /// and the stream ends.
    pub fn start(
        who: Option<&Identity>,
        hook: Option<&Arc<dyn ControlHook>>,
        bell: Bell,
        early: Vec<u8>,
    ) -> ServerControl {
        let mut s = ServerControl {
            who: who.cloned(),
            reader: FrameReader::default(),
            out: Outbox::default(),
            from_hook: None,
            done: false,
        };
        s.reader.push(&early);
        let attached = match (who, hook) {
            (_, None) => Err("this server takes no control streams".to_string()),
            (None, _) => Err("a control stream needs a registered key".to_string()),
            (Some(w), _) if w.role != Role::Vehicle => {
                Err(format!("{} is an operator, not a vehicle", w.name))
            }
            (Some(w), Some(h)) => h.attach(w, bell),
        };
        match attached {
            Ok(rx) => s.from_hook = Some(rx),
            Err(reason) => s.refuse(reason),
        }
        s
    }

    fn refuse(&mut self, reason: String) {
        self.out
            .push(&encode_frame(&ToVehicle::Refused { reason }.to_frame()));
        self.out.finish_when_empty();
        self.from_hook = None;
        self.done = true;
    }

    pub fn is_done(&self) -> bool {
        self.done && self.out.is_empty()
    }

    pub fn step(
        &mut self,
        c: &mut Connection,
        id: StreamId,
        hook: Option<&Arc<dyn ControlHook>>,
        scratch: &mut [u8],
    ) {
        if let Err(e) = self.advance(c, id, hook, scratch) {
            self.refuse(e.to_string());
        }
        if self.out.flush(c, id).is_err() {
            self.done = true;
            self.out = Outbox::default();
        }
    }

    fn advance(
        &mut self,
        c: &mut Connection,
        id: StreamId,
        hook: Option<&Arc<dyn ControlHook>>,
        scratch: &mut [u8],
    ) -> Result<(), NetError> {
        loop {
            match c.read(id, scratch) {
                Ok(0) => {
                    // The agent closed its end: so do we.
                    self.out.finish_when_empty();
                    self.from_hook = None;
                    self.done = true;
                    break;
                }
                Ok(n) => self.reader.push(&scratch[..n]),
                Err(StreamError::Blocked) => break,
                Err(e) => return Err(e.into()),
            }
        }
        while let Some(frame) = self.reader.next_frame()? {
            if let (Some(h), Some(w), false) = (hook, &self.who, self.done) {
                h.received(w, frame);
            }
        }
        if let Some(rx) = &self.from_hook {
            loop {
                match rx.try_recv() {
                    Ok(frame) => self.out.push(&encode_frame(&frame)),
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        self.out.finish_when_empty();
                        self.from_hook = None;
                        self.done = true;
                        break;
                    }
                }
            }
        }
        Ok(())
    }
}

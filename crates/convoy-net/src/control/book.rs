//! The agent's half of the request protocol, without I/O: frames in,
//! actions and messages out. The agent's driver (convoy-agent's
//! `requests` module) runs the actions and feeds their outcomes back.
//!
//! The server sends every request that is not finished again each time
//! the vehicle connects, so the book acknowledges a request it already
//! runs without starting it twice, and answers one it already finished
//! with its outcome again. It forgets on restart: a request cut by a
//! restart arrives again, unfinished, and runs again (every request type
//! can be run twice without harm).

use std::collections::HashMap;
use std::time::Duration;

use super::msg::{FromVehicle, RequestBody, ToVehicle};

/// Progress is reported at most this often per request (and always at
/// the end), so a fast upload of many segments is not a message each.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// Finished requests remembered for duplicates (oldest forgotten first).
const REMEMBER: usize = 1024;

/// What the driver must do.
#[derive(Debug, PartialEq)]
pub enum Action {
    /// Send this to the server.
    Send(FromVehicle),
    /// Run this request (its outcome comes back through
    /// [`RequestBook::finish`]).
    Start { id: i64, body: RequestBody },
    /// The server refused the control stream; the reason, for the log.
    Refused(String),
}

enum State {
    Running { last_progress: Option<Duration> },
    Finished(FromVehicle),
}

#[derive(Default)]
pub struct RequestBook {
    known: HashMap<i64, State>,
    finished_order: std::collections::VecDeque<i64>,
}

impl RequestBook {
    /// A frame from the server.
    pub fn on_frame(&mut self, frame: &[u8]) -> Vec<Action> {
        let msg = match serde_json::from_slice::<ToVehicle>(frame) {
            Ok(m) => m,
            Err(e) => {
                // A request this agent cannot read (a newer server's
                // type, a damaged body): answered by id when there is one,
                // so the server marks it failed instead of resending it.
                let id = serde_json::from_slice::<serde_json::Value>(frame)
                    .ok()
                    .and_then(|v| v.get("id").and_then(|i| i.as_i64()));
                let error = format!("unreadable request: {e}");
                return vec![Action::Send(match id {
                    Some(id) => FromVehicle::Failed { id, error },
                    None => FromVehicle::Unreadable { error },
                })];
            }
        };
        match msg {
            ToVehicle::Refused { reason } => vec![Action::Refused(reason)],
            ToVehicle::Request { id, body } => match self.known.get(&id) {
                Some(State::Running { .. }) => vec![Action::Send(FromVehicle::Ack { id })],
                Some(State::Finished(last)) => vec![
                    Action::Send(FromVehicle::Ack { id }),
                    Action::Send(last.clone()),
                ],
                None => {
                    if let Err(error) = body.check() {
                        return self.finished(id, FromVehicle::Failed { id, error }, true);
                    }
                    self.known.insert(
                        id,
                        State::Running {
                            last_progress: None,
                        },
                    );
                    vec![
                        Action::Send(FromVehicle::Ack { id }),
                        Action::Start { id, body },
                    ]
                }
            },
        }
    }

    /// A running request's progress: a message to send, unless one was
    /// sent less than [`PROGRESS_EVERY`] ago (the last one, `done ==
    /// total`, always goes).
    pub fn progress(
        &mut self,
        id: i64,
        done: u64,
        total: u64,
        note: String,
        now: Duration,
    ) -> Option<FromVehicle> {
        let Some(State::Running { last_progress }) = self.known.get_mut(&id) else {
            return None;
        };
        let due = last_progress.is_none_or(|t| now >= t + PROGRESS_EVERY);
        if !due && done < total {
            return None;
        }
        *last_progress = Some(now);
        Some(FromVehicle::Progress {
            id,
            done,
            total,
            note,
        })
    }

    /// A request ended: its outcome, to send.
    pub fn finish(&mut self, id: i64, outcome: Result<serde_json::Value, String>) -> Vec<Action> {
        let msg = match outcome {
            Ok(result) => FromVehicle::Done { id, result },
            Err(error) => FromVehicle::Failed { id, error },
        };
        self.finished(id, msg, false)
    }

    fn finished(&mut self, id: i64, msg: FromVehicle, ack_first: bool) -> Vec<Action> {
        self.known.insert(id, State::Finished(msg.clone()));
        self.finished_order.push_back(id);
        while self.finished_order.len() > REMEMBER {
            if let Some(old) = self.finished_order.pop_front() {
                self.known.remove(&old);
            }
        }
        let mut out = Vec::new();
        if ack_first {
            out.push(Action::Send(FromVehicle::Ack { id }));
        }
        out.push(Action::Send(msg));
        out
    }

    /// Requests running now.
    pub fn running(&self) -> Vec<i64> {
        let mut v: Vec<i64> = self
            .known
            .iter()
            .filter(|(_, s)| matches!(s, State::Running { .. }))
            .map(|(id, _)| *id)
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(id: i64, body: RequestBody) -> Vec<u8> {
        ToVehicle::Request { id, body }.to_frame()
    }

    #[test]
    fn a_request_is_acknowledged_started_once_and_answered_again_when_resent() {
        let mut b = RequestBook::default();
        let a = b.on_frame(&frame(1, RequestBody::Status {}));
        assert_eq!(
            a,
            vec![
                Action::Send(FromVehicle::Ack { id: 1 }),
                Action::Start {
                    id: 1,
                    body: RequestBody::Status {}
                }
            ]
        );
        // Resent while running (a reconnection): acknowledged, not restarted.
        assert_eq!(
            b.on_frame(&frame(1, RequestBody::Status {})),
            vec![Action::Send(FromVehicle::Ack { id: 1 })]
        );
        assert_eq!(b.running(), vec![1]);
        let done = b.finish(1, Ok(serde_json::json!({"ok": true})));
        assert_eq!(done.len(), 1);
        // Resent after it finished (the answer was lost): answered again.
        let again = b.on_frame(&frame(1, RequestBody::Status {}));
        assert_eq!(again.len(), 2);
        assert_eq!(again[1], done[0]);
        assert!(b.running().is_empty());
    }

    #[test]
    fn unreadable_and_invalid_requests_fail_with_a_reason() {
        let mut b = RequestBook::default();
        match &b.on_frame(b"{\"msg\":\"request\",\"id\":9,\"body\":{\"type\":\"reboot\"}}")[..] {
            [Action::Send(FromVehicle::Failed { id: 9, error })] => {
                assert!(error.contains("unreadable request"), "{error}")
            }
            other => panic!("{other:?}"),
        }
        match &b.on_frame(b"\x00garbage")[..] {
            [Action::Send(FromVehicle::Unreadable { .. })] => {}
            other => panic!("{other:?}"),
        }
        let bad = RequestBody::Upload {
            files: vec![],
            from_ns: None,
            to_ns: None,
            priority: "events".into(),
        };
        match &b.on_frame(&frame(3, bad))[..] {
            [Action::Send(FromVehicle::Ack { id: 3 }), Action::Send(FromVehicle::Failed { id: 3, error })] =>
            {
                assert!(error.contains("names files"), "{error}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn progress_is_throttled_but_the_last_report_always_goes() {
        let mut b = RequestBook::default();
        b.on_frame(&frame(2, RequestBody::Status {}));
        let ms = Duration::from_millis;
        assert!(b.progress(2, 1, 10, String::new(), ms(0)).is_some());
        assert!(b.progress(2, 2, 10, String::new(), ms(100)).is_none());
        assert!(b.progress(2, 3, 10, String::new(), ms(300)).is_some());
        assert!(b.progress(2, 10, 10, String::new(), ms(310)).is_some());
        assert!(b.progress(99, 1, 1, String::new(), ms(400)).is_none());
    }
}

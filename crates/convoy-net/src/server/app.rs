//! One worker's application: the sessions of its connections. It looks
//! only at the connections the endpoint says something happened to (and,
//! every 100 ms, at those with sessions, for perf progress), so a turn
//! costs what happened in it, not the number of connections.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use convoy_proto::{Connection, ConnectionHandle, Endpoint, Event, StreamId};

use crate::auth::{Authorizer, CommitHook, Identity, REAUTH_EVERY, REFUSED_CODE, REFUSED_PREFIX};
use crate::control::Bell;
use crate::driver::{Application, Step};
use crate::error::NetError;
use crate::server::claims::{Claim, Claims};
use crate::server::committer::{Committer, JobKey, Outcome};
use crate::server::control::ServerControl;
use crate::server::identified::Identified;
use crate::server::offload::Offload;
use crate::session::{ServerEvent, Session, SessionCtx, PROGRESS_EVERY};
use crate::store::Store;
use crate::wake::Waker;

/// Connections one identity may hold on one worker at once: a vehicle
/// needs one (its paths share it), an agent or operator a few.
pub const MAX_CONNECTIONS_PER_IDENTITY: usize = 8;

/// Who may connect and what runs after each upload, shared by the workers.
#[derive(Clone, Default)]
pub struct Access {
    pub auth: Option<Arc<dyn Authorizer>>,
    pub hook: Option<Arc<dyn CommitHook>>,
    pub control: Option<Arc<dyn crate::control::ControlHook>>,
    pub figures: Arc<crate::server::figures::ServerFigures>,
}

/// Where a worker's events go: the callback (worker 0), or a channel to
/// worker 0 and a wake-up for its driver.
pub enum Sink {
    Local(Box<dyn FnMut(&ServerEvent)>),
    Forward(mpsc::Sender<ServerEvent>, Arc<Waker>),
}

/// A key to ask the authorizer about, and whether a re-check's answer
/// (which may be a little older) will do.
type Question = ([u8; 32], bool);

/// The authorizer's answer about a key.
type Answer = ([u8; 32], Result<Identity, String>);

struct Running {
    session: Session,
    claim: Option<Claim>,
    /// Set once the session's header asked for a control stream.
    control: Option<ServerControl>,
}

pub struct ServerApp {
    pub store: Option<Store>,
    sessions: HashMap<ConnectionHandle, Vec<(StreamId, Running)>>,
    peers: HashMap<ConnectionHandle, SocketAddr>,
    pub once: bool,
    served: bool,
    pub stop: Arc<AtomicBool>,
    pub sink: Sink,
    /// Worker 0: events forwarded by the other workers.
    pub inbox: Option<mpsc::Receiver<ServerEvent>>,
    claims: Claims,
    access: Access,
    /// Identified connections (all of them without an authorizer, as
    /// `None`); streams are accepted only from these.
    who: Identified,
    /// Connections whose handshake finished before the authorizer named
    /// them: their `Connected` event is reported once they are named, so
    /// it carries the vehicle (and a refused peer is never reported).
    unnamed_connected: HashSet<ConnectionHandle>,
    /// The authorizer, asked on a thread of its own: a registry query
    /// waits for a database (and a mutex all workers share), which on the
    /// driver thread was a pause for every connection of the worker.
    identify: Option<Offload<Question, Answer>>,
    /// Connections waiting for the answer about each key in flight.
    asked: HashMap<[u8; 32], Vec<ConnectionHandle>>,
    /// Answers come back this turn, for the connections that asked.
    answers: HashMap<ConnectionHandle, Result<Identity, String>>,
    next_reauth: Duration,
    scratch: Vec<u8>,
    events: Vec<ServerEvent>,
    touched: Vec<ConnectionHandle>,
    next_tick: Duration,
    /// Where complete uploads are made durable, off this thread.
    pub committer: Committer,
    /// Outcomes back from the committer, for sessions stepped this turn.
    outcomes: HashMap<JobKey, Outcome>,
    /// Sessions whose connection went away while their upload was being
    /// committed, with who sent it: the file is stored all the same, and
    /// its `stored` event is written when the outcome comes.
    orphans: HashMap<JobKey, (Session, Option<Identity>)>,
    /// Remove partial files older than this (worker 0 only), every
    /// `PARTIAL_SWEEP_EVERY`.
    pub partial_max_age: Option<Duration>,
    next_sweep: Duration,
    /// Set once the stop flag is seen: when the drain began and must end.
    draining: Option<(Duration, Duration)>,
    /// Rung by the control hook when frames wait for a vehicle: every
    /// connection with sessions is stepped on the next turn.
    control_bell: Arc<AtomicBool>,
    waker: Option<Arc<Waker>>,
}

/// How long a stopping server goes on answering before it closes every
/// connection: commits in flight are finished and their "stored" replies
/// delivered within this, or cut (the client resumes). With the indexer's
/// and the web view's stop it keeps a SIGTERM's exit under 10 s.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// How often worker 0 looks for abandoned partial files.
const PARTIAL_SWEEP_EVERY: Duration = Duration::from_secs(60);

impl ServerApp {
    pub fn new(
        store: Option<Store>,
        once: bool,
        stop: Arc<AtomicBool>,
        claims: Claims,
        access: Access,
    ) -> ServerApp {
        ServerApp {
            sessions: HashMap::new(),
            peers: HashMap::new(),
            once,
            served: false,
            stop,
            sink: Sink::Local(Box::new(|_| {})),
            inbox: None,
            claims,
            who: Identified::default(),
            unnamed_connected: HashSet::new(),
            next_reauth: Duration::ZERO,
            scratch: vec![0; 256 * 1024],
            events: Vec::new(),
            touched: Vec::new(),
            next_tick: Duration::ZERO,
            committer: Committer::new(
                store.clone(),
                access.hook.clone(),
                access.auth.clone(),
                access.figures.clone(),
            ),
            identify: access.auth.clone().map(|auth| {
                Offload::new("convoy-identify", move |(key, recheck): Question| {
                    let answer = if recheck {
                        auth.recheck(&key)
                    } else {
                        auth.identify(&key)
                    };
                    (key, answer)
                })
            }),
            asked: HashMap::new(),
            answers: HashMap::new(),
            outcomes: HashMap::new(),
            orphans: HashMap::new(),
            partial_max_age: None,
            next_sweep: PARTIAL_SWEEP_EVERY,
            draining: None,
            control_bell: Arc::new(AtomicBool::new(false)),
            waker: None,
            store,
            access,
        }
    }

    /// The driver's waker, rung when off-thread work finishes.
    pub fn set_waker(&mut self, waker: Arc<Waker>) {
        self.waker = Some(waker.clone());
        self.committer.set_waker(waker.clone());
        if let Some(identify) = &mut self.identify {
            identify.set_waker(waker);
        }
    }

    /// Asks the authorizer about `key` for connection `h` (once per key in
    /// flight, however many connections wait for it). The answer comes in
    /// a later turn; it is here at once only when it cannot be asked.
    fn ask(
        &mut self,
        h: ConnectionHandle,
        key: [u8; 32],
        recheck: bool,
    ) -> Option<Result<Identity, String>> {
        let identify = self.identify.as_mut()?;
        let waiting = self.asked.entry(key).or_default();
        if waiting.contains(&h) {
            return None;
        }
        waiting.push(h);
        if waiting.len() == 1 && identify.submit((key, recheck)).is_err() {
            self.asked.remove(&key);
            return Some(Err("the registry cannot be asked now".into()));
        }
        None
    }

    /// Hands each answer that came back to the connections that asked.
    fn collect_answers(&mut self, touched: &mut Vec<ConnectionHandle>) {
        let Some(identify) = &self.identify else {
            return;
        };
        for (key, answer) in identify.finished() {
            for h in self.asked.remove(&key).unwrap_or_default() {
                self.answers.insert(h, answer.clone());
                touched.push(h);
            }
        }
    }

    fn vehicle(&self, h: ConnectionHandle) -> Option<String> {
        self.who.name(h).map(str::to_owned)
    }

    /// Identifies a connection once its peer's key is known (right after
    /// the handshake), and again on every `reauth` turn: asks the
    /// authorizer, and acts on its answer in a later turn; a refused key's
    /// connection is closed with the authorizer's reason. Returns whether
    /// the connection was identified just now (its held packets may then
    /// be read).
    fn authorize(&mut self, h: ConnectionHandle, c: &mut Connection, reauth: bool) -> bool {
        if self.access.auth.is_none() {
            self.who.insert_unnamed(h);
            return false;
        }
        let first = !self.who.contains(h);
        let answer = self.answers.remove(&h);
        if c.is_closed() {
            return false;
        }
        let Some(key) = c.peer_static() else {
            return false;
        };
        let answer = match answer {
            Some(answer) => answer,
            None if first || reauth => match self.ask(h, key, !first) {
                Some(answer) => answer,
                None => return false,
            },
            None => return false,
        };
        let result = answer.and_then(|id| {
            // One identity's connections are capped on this worker, so a
            // registered key cannot multiply its per-connection budget.
            let open = self.who.open(&id.name);
            if first && open >= MAX_CONNECTIONS_PER_IDENTITY {
                Err(format!(
                    "{} already has {open} connections (at most {MAX_CONNECTIONS_PER_IDENTITY})",
                    id.name
                ))
            } else {
                Ok(id)
            }
        });
        match result {
            Ok(id) => {
                self.who.insert(h, Some(id));
                first
            }
            Err(reason) => {
                let was = self.who.remove(h).flatten();
                c.close(REFUSED_CODE, &format!("{REFUSED_PREFIX}{reason}"));
                if let Some(list) = self.sessions.remove(&h) {
                    for (_, r) in list {
                        if let Some(claim) = r.claim {
                            self.claims.release(claim);
                        }
                    }
                }
                self.events.push(ServerEvent::Refused {
                    peer: c.remote_address(),
                    key: convoy_proto::crypto::hex(&key),
                    reason: match was {
                        Some(w) => format!("{} ({reason}) while connected", w.name),
                        None => reason,
                    },
                });
                false
            }
        }
    }

    /// Drops a gone connection's sessions, releasing their claims; those
    /// committing an upload wait in `orphans` for their outcome.
    fn orphan_commits(&mut self, h: ConnectionHandle) {
        let Some(list) = self.sessions.remove(&h) else {
            return;
        };
        let who = self.who.get(h).cloned().flatten();
        for (id, r) in list {
            if let Some(claim) = r.claim {
                self.claims.release(claim);
            }
            if r.session.is_committing() {
                self.orphans.insert((h, id), (r.session, who.clone()));
            }
        }
    }

    /// Steps one connection: who it is, its events, new streams, its
    /// sessions; removes it once closed.
    fn step_connection(
        &mut self,
        ep: &mut Endpoint,
        h: ConnectionHandle,
        now: Duration,
        reauth: bool,
    ) {
        let Some(c) = ep.connection(h) else {
            self.orphan_commits(h);
            self.who.remove(h);
            self.unnamed_connected.remove(&h);
            return;
        };
        let peer = c.remote_address();
        let mut c = c;
        if self.authorize(h, c, reauth) {
            // Its packets were held unread until now (the endpoint's
            // `authorize_before_data`): read them.
            ep.authorize(h, now);
            let Some(again) = ep.connection(h) else {
                return;
            };
            c = again;
            if self.unnamed_connected.remove(&h) {
                self.events.push(ServerEvent::Connected {
                    peer,
                    vehicle: self.vehicle(h),
                });
            }
        }
        let vehicle = self.vehicle(h);
        while let Some(ev) = c.poll_event() {
            match ev {
                Event::Connected if self.who.contains(h) => {
                    self.events.push(ServerEvent::Connected {
                        peer,
                        vehicle: vehicle.clone(),
                    })
                }
                // Not named yet: reported when the authorizer names it; a
                // refused peer is logged as refused, not connected.
                Event::Connected => {
                    self.unnamed_connected.insert(h);
                }
                Event::Closed(reason) => self.events.push(ServerEvent::Closed {
                    peer,
                    vehicle: vehicle.clone(),
                    reason: reason.to_string(),
                }),
                Event::StreamOpened(_) | Event::StreamReadable(_) => {}
            }
        }
        // Not identified yet: its streams wait unaccepted.
        let who = self.who.get(h).cloned();
        if who.is_some() && self.draining.is_none() {
            while let Some(id) = c.accept_stream() {
                self.sessions.entry(h).or_default().push((
                    id,
                    Running {
                        session: Session::new(peer),
                        claim: None,
                        control: None,
                    },
                ));
            }
        }
        if c.is_closed() {
            // Sessions of a dead connection keep their partial files on
            // disk for the client's next run.
            self.orphan_commits(h);
            self.peers.remove(&h);
            self.who.remove(h);
            self.unnamed_connected.remove(&h);
            ep.remove(h);
            self.served = true;
            return;
        }
        let Some(who) = who else { return };
        let Some(mut list) = self.sessions.remove(&h) else {
            return;
        };
        let ctx = SessionCtx {
            store: self.store.as_ref(),
            who: who.as_ref(),
            key: c.peer_static(),
        };
        let control_hook = self.access.control.clone();
        list.retain_mut(|(id, r)| {
            if let Some(ctl) = &mut r.control {
                ctl.step(c, *id, control_hook.as_ref(), &mut self.scratch);
                return !ctl.is_done();
            }
            if r.claim.as_ref().is_some_and(|claim| !claim.holds()) {
                r.session.abandon();
                r.claim = None;
            }
            if let Some(outcome) = self.outcomes.remove(&(h, *id)) {
                r.session.job_done(outcome, &ctx, &mut self.events);
            }
            // Stopping: only commits already running are answered. An
            // upload still receiving keeps its partial file, which the
            // client resumes after the restart.
            if self.draining.is_some() {
                r.session.stop();
            }
            r.session
                .step(c, *id, &ctx, now, &mut self.scratch, &mut self.events);
            if let Some(job) = r.session.take_job() {
                self.committer.submit((h, *id), job);
            }
            if let Some(early) = r.session.take_control() {
                let bell = Bell::new(self.control_bell.clone(), self.waker.clone());
                let mut ctl = ServerControl::start(ctx.who, control_hook.as_ref(), bell, early);
                ctl.step(c, *id, control_hook.as_ref(), &mut self.scratch);
                let done = ctl.is_done();
                r.control = Some(ctl);
                return !done;
            }
            match (&r.claim, &r.session.partial) {
                (None, Some(p)) => r.claim = Some(self.claims.claim(p)),
                (Some(_), None) => {
                    if let Some(claim) = r.claim.take() {
                        self.claims.release(claim);
                    }
                }
                _ => {}
            }
            if r.session.is_done() {
                if let Some(claim) = r.claim.take() {
                    self.claims.release(claim);
                }
                return false;
            }
            true
        });
        if !list.is_empty() {
            self.sessions.insert(h, list);
        }
    }

    /// A stopping server may close now: no job on the commit or open
    /// thread, and every reply written is at its peer (a download still
    /// sending holds the drain up to [`DRAIN_LIMIT`]).
    fn drained(&self, ep: &Endpoint) -> bool {
        self.committer.in_flight() == 0
            && ep.handles().into_iter().all(|h| {
                ep.connection_ref(h)
                    .is_none_or(|c| c.is_closed() || c.all_delivered())
            })
    }

    fn emit(&mut self) {
        if let Some(rx) = &self.inbox {
            while let Ok(e) = rx.try_recv() {
                self.events.push(e);
            }
        }
        for e in self.events.drain(..) {
            match &mut self.sink {
                Sink::Local(f) => f(&e),
                Sink::Forward(tx, waker) => {
                    if tx.send(e).is_ok() {
                        waker.wake();
                    }
                }
            }
        }
    }
}

impl Application for ServerApp {
    fn step(&mut self, ep: &mut Endpoint, now: Duration) -> Result<Step, NetError> {
        // Stopping: no new connections or streams; what was begun is
        // answered, then every connection is closed (docs/SERVICE.md,
        // "Configuration and signals").
        let drain_begins = self.stop.load(Ordering::Relaxed) && self.draining.is_none();
        if drain_begins {
            self.draining = Some((now, now + DRAIN_LIMIT));
            self.events.push(ServerEvent::Draining {
                connections: ep.handles().len(),
                commits: self.committer.in_flight(),
            });
        }
        if let Some((began, deadline)) = self.draining {
            let drained = self.drained(ep);
            if drained || now >= deadline {
                let handles = ep.handles();
                self.events.push(ServerEvent::Drained {
                    millis: (now - began).as_secs_f64() * 1e3,
                    complete: drained,
                    connections: handles.len(),
                    commits: self.committer.in_flight(),
                    undelivered: handles
                        .iter()
                        .filter_map(|&h| ep.connection_ref(h))
                        .filter(|c| !c.is_closed() && !c.all_delivered())
                        .count(),
                });
                for &h in &handles {
                    if let Some(c) = ep.connection(h) {
                        c.close(0, "server shutting down");
                    }
                }
                self.emit();
                return Ok(Step::Done);
            }
        }
        while let Some(h) = ep.accept() {
            if let Some(c) = ep.connection(h) {
                if self.draining.is_some() {
                    c.close(0, "server shutting down");
                }
                self.peers.insert(h, c.remote_address());
            }
        }
        let mut touched = std::mem::take(&mut self.touched);
        ep.take_touched(&mut touched);
        if drain_begins {
            // Every session is stepped now, so uploads still receiving stop.
            touched.extend(self.sessions.keys().copied());
            touched.sort();
            touched.dedup();
        }
        self.collect_answers(&mut touched);
        // Sessions whose storage work finished: stepped now, to answer.
        for (key, outcome) in self.committer.finished() {
            touched.push(key.0);
            self.outcomes.insert(key, outcome);
        }
        if !self.outcomes.is_empty() || !self.answers.is_empty() {
            touched.sort();
            touched.dedup();
        }
        if let (Some(age), Some(store)) = (self.partial_max_age, &self.store) {
            if now >= self.next_sweep {
                self.next_sweep = now + PARTIAL_SWEEP_EVERY;
                store.sweep_partials(age);
            }
        }
        if self.control_bell.swap(false, Ordering::AcqRel) {
            touched.extend(self.sessions.keys().copied());
            touched.sort();
            touched.dedup();
        }
        if now >= self.next_tick {
            // Perf sessions report progress on a clock of their own.
            self.next_tick = now + PROGRESS_EVERY;
            touched.extend(self.sessions.keys().copied());
            touched.sort();
            touched.dedup();
        }
        // Keys are asked about again now and then: a revoked vehicle's
        // connection is closed within `REAUTH_EVERY`.
        let reauth = self.access.auth.is_some() && now >= self.next_reauth;
        if reauth {
            self.next_reauth = now + REAUTH_EVERY;
            touched.extend(self.who.handles());
            touched.sort();
            touched.dedup();
        }
        for &h in &touched {
            self.step_connection(ep, h, now, reauth);
        }
        // Outcomes for sessions that are gone (closed or taken over): the
        // file is stored all the same; a retry finds it, and its `stored`
        // event is written here. Answers for connections that are gone.
        for (key, outcome) in self.outcomes.drain() {
            if let Some((mut session, who)) = self.orphans.remove(&key) {
                let ctx = SessionCtx {
                    store: self.store.as_ref(),
                    who: who.as_ref(),
                    key: None,
                };
                session.job_done(outcome, &ctx, &mut self.events);
            }
        }
        self.answers.clear();
        self.touched = touched;
        self.emit();
        if self.once && self.served && ep.is_empty() {
            return Ok(Step::Done);
        }
        Ok(Step::Continue)
    }

    fn wake_at(&self) -> Option<Duration> {
        let tick = (!self.sessions.is_empty()).then_some(self.next_tick);
        match self.draining {
            // Waits for acknowledgements or the commit thread, which wake
            // the driver; the deadline needs a turn of its own.
            Some((_, deadline)) => Some(tick.map_or(deadline, |t| t.min(deadline))),
            None => tick,
        }
    }
}

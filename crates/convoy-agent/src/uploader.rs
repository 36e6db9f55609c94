//! Uploads, in two lanes with a connection each: the live lane sends
//! recent events and telemetry as soon as they are segmented; the backlog
//! lane sends everything else by class and age. A lane takes the segments
//! its link allows (metered link classes, budget, hours) as its window has
//! room, uploads them with convoy, up to 64 in flight on one connection
//! (resumable, checked with BLAKE3), and marks each acknowledged only when
//! the server says it is durable. Failures keep the segments queued and
//! reconnect with backoff; a refused key (revoked) is reported as such and
//! retried every 30 s.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use convoy_net::{Client, ClientOptions, UploadQueue, UploadReport};

use crate::policy::{day_of, LinkRule};
use crate::spool::{Acked, Item, Lane, Spool};
use crate::status::{LaneStatus, LastUpload, Shared};

pub struct Uploader {
    pub lane: Lane,
    pub client: ClientOptions,
    pub spool: Arc<Mutex<Spool>>,
    pub status: Arc<Shared>,
    /// Shared with the requests driver, which changes them on request.
    pub rules: Arc<RwLock<Vec<LinkRule>>>,
    /// The live lane's: opens the control stream on each connection.
    pub requests: Option<Arc<crate::requests::Requests>>,
    pub link_file: Option<PathBuf>,
    pub stop: Arc<AtomicBool>,
    /// Set by `stop` to interrupt a transfer in progress.
    pub interrupt: Arc<Mutex<Option<Arc<AtomicBool>>>>,
}

/// How often a lane's watcher looks at the link in use while the lane
/// uploads: an upload whose class the new link does not allow (Wi-Fi
/// turned metered) is interrupted within this and a driver turn.
const LINK_WATCH: Duration = Duration::from_millis(200);

/// Whether the link in use (`None`: no link) refuses something in flight:
/// a segment whose class it does not carry, or a campaign window whose
/// own upload conditions it does not meet (a window "only on Wi-Fi", or
/// "never metered", in flight when Wi-Fi turns metered), even when the
/// window's class may use it.
fn refused_in_flight(items: &[Item], link: Option<&LinkRule>) -> bool {
    let Some(rule) = link else {
        return !items.is_empty();
    };
    items.iter().any(|i| {
        !rule.classes.contains(&i.class)
            || !crate::campaign::spool_ops::link_meets(i.only_links.as_deref(), i.unmetered, rule)
    })
}

/// Interrupts the lane's transfer when the link in use no longer allows
/// a segment it has in flight (its class, or a window's conditions). The connection closes; the server keeps
/// each partial upload, and the segment, queued again, resumes from the
/// byte the server has when a link allows it again, so no byte the
/// server acknowledged is sent twice.
fn watch_link(
    rules: Arc<RwLock<Vec<LinkRule>>>,
    link_file: Option<PathBuf>,
    inflight: Arc<Mutex<Vec<Item>>>,
    interrupt: Arc<Mutex<Option<Arc<AtomicBool>>>>,
    done: Arc<AtomicBool>,
) {
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(LINK_WATCH);
        let items = inflight.lock().map(|c| c.clone()).unwrap_or_default();
        if items.is_empty() {
            continue;
        }
        let link = current_link(&rules, link_file.as_ref());
        if refused_in_flight(&items, link.as_ref()) {
            if let Some(flag) = interrupt.lock().ok().and_then(|s| s.clone()) {
                flag.store(true, Ordering::Release);
            }
        }
    }
}

/// The longest time from the start of one connection attempt to the start
/// of the next. Each attempt is itself a handshake retried for
/// `handshake_timeout` (Initials at 0, 0.6, 1.8, 3.0 and 4.2 s), so an
/// attempt that timed out is followed at once by the next: into a dead
/// link the agent sends an Initial at least every 1.2 s, and when a
/// vehicle comes back into coverage its backlog starts within about that
/// long. A 2 s pause after each timed-out attempt made the gap 2.8 s, and
/// the first upload came 1.9 s after a 30 s outage ended. Only fast
/// failures (nothing listening, no route) wait out the backoff. The cost
/// in dead air: one 1,200-byte Initial per 1.2 s or less, ~1 kB/s a lane.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The longest an idle lane waits for a segment before serving its
/// connection again ([`Client::idle`]): within the idle timeout (at least
/// 1 s), whose keep-alive pings are due every third of it.
const IDLE_WAIT: Duration = Duration::from_millis(500);

/// How long to wait after the server refused our key (revoked or unknown):
/// it will not change its mind soon.
const REFUSED_WAIT: Duration = Duration::from_secs(30);

/// Uploads in flight on a lane's connection at once. After a long outage
/// the backlog is thousands of one-second telemetry segments of a few
/// hundred bytes, and each upload takes two round trips (request and
/// resume offset, data and confirmation): one at a time, an hour's
/// telemetry would take minutes to send over LTE. 64 at once send ~400 a
/// second at 80 ms round trips (16 measured ~100 a second).
pub const WINDOW: usize = 64;

fn retry_wait(error: &convoy_net::NetError, backoff: Duration) -> Duration {
    // A refused key waits; a refused request (a full disk at the server)
    // or a server restarting is worth the usual backoff.
    if error.is_key_refused() {
        REFUSED_WAIT
    } else {
        backoff
    }
}

/// The link in use now: the link file's content, or the first rule.
pub fn current_link(rules: &RwLock<Vec<LinkRule>>, file: Option<&PathBuf>) -> Option<LinkRule> {
    let rules = rules.read().ok()?;
    match file {
        None => rules.first().cloned(),
        Some(f) => {
            let name = std::fs::read_to_string(f).ok()?;
            rules.iter().find(|r| r.name == name.trim()).cloned()
        }
    }
}

/// A lane's uploads on one connection: segments taken from the spool as
/// the window has room, each checked against the link's rules with what
/// every lane has in flight counted as spent ([`Spool::take_for_link`], so
/// a daily budget is overrun by at most one segment), and acknowledged in
/// the spool as each is confirmed.
struct LaneQueue<'u> {
    up: &'u Uploader,
    inflight: Arc<Mutex<Vec<Item>>>,
    rule: LinkRule,
    /// Taken from the spool and not yet confirmed, oldest first; the first
    /// `given` of them were handed to the connection.
    taken: VecDeque<Item>,
    given: usize,
    /// The upload index of each of the first `given` (the order `next`
    /// gave them, from 0): confirmations come as each arrives, in any order.
    given_index: VecDeque<usize>,
    /// How many `next` has given on this connection: the next index.
    handed: usize,
    /// Confirmed, not yet recorded in the spool: written together at the
    /// next turn that asks for a segment (one fsync for a burst of
    /// confirmations, not one each on the protocol thread).
    acks: Vec<Acked>,
    /// `next` found nothing, so no ask comes to flush the confirmations
    /// (until [`UploadQueue::refilled`] has the queue asked again): each
    /// is recorded as it comes.
    ended: bool,
    /// The uploaders' wake count ([`Shared::generation`]) read before the
    /// last ask that found nothing: once it moves (a segment closed, a
    /// file taken from an inbox), the spool is asked again while the
    /// window is still in flight.
    dry_at: u64,
    /// Bytes confirmed, for a rate cap's pause.
    bytes: u64,
    started: Instant,
}

impl<'u> LaneQueue<'u> {
    /// Tells the link watcher what is in flight now.
    fn sync_inflight(&self, inflight: &Mutex<Vec<Item>>) {
        if let Ok(mut v) = inflight.lock() {
            *v = self.taken.iter().take(self.given).cloned().collect();
        }
    }

    fn new(up: &'u Uploader, rule: LinkRule) -> LaneQueue<'u> {
        LaneQueue {
            up,
            inflight: Arc::default(),
            rule,
            taken: VecDeque::new(),
            given: 0,
            given_index: VecDeque::new(),
            handed: 0,
            acks: Vec::new(),
            ended: false,
            dry_at: 0,
            bytes: 0,
            started: Instant::now(),
        }
    }

    /// Takes the next segment the link allows now; `Ok(false)`: none. The
    /// spool reserves its bytes against the link's budget (for every lane
    /// at once) until it is recorded acknowledged or given back.
    fn take(&mut self) -> rusqlite::Result<bool> {
        let Ok(mut sp) = self.up.spool.lock() else {
            return Ok(false);
        };
        match sp.take_for_link(self.up.lane, &self.rule, convoy_telemetry::now_ns())? {
            Some(item) => {
                self.taken.push_back(item);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Records the confirmed segments as acknowledged (their files go).
    fn flush_acks(&mut self) {
        if self.acks.is_empty() {
            return;
        }
        if let Ok(mut sp) = self.up.spool.lock() {
            if let Err(e) = sp.acked_all(&self.acks, &self.rule.name) {
                self.up.status.note_error(&format!("spool catalog: {e}"));
            }
        }
        self.acks.clear();
    }

    /// Records what was confirmed, and puts back what was not.
    fn fail(&mut self, msg: &str) {
        self.flush_acks();
        if let Ok(mut v) = self.inflight.lock() {
            v.clear();
        }
        let items: Vec<Item> = self.taken.drain(..).collect();
        self.given = 0;
        self.given_index.clear();
        self.up.fail(&items, msg);
    }
}

impl LaneQueue<'_> {
    /// The next segment to hand the connection, if any.
    fn next_file(&mut self) -> Option<(PathBuf, String)> {
        if self.given == self.taken.len() {
            // A rate-capped link sends one segment, then pauses; a change
            // of link (or stopping) ends the queue so its rules are read
            // again.
            // A rule changed by a request ends the queue too.
            let same_link = current_link(&self.up.rules, self.up.link_file.as_ref())
                .is_some_and(|r| r == self.rule);
            let capped = self.rule.rate_bps.is_some() && self.given > 0;
            if capped || !same_link || self.up.stop.load(Ordering::Relaxed) {
                return None;
            }
            match self.take() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    self.up.status.note_error(&format!("spool catalog: {e}"));
                    return None;
                }
            }
        }
        let item = &self.taken[self.given];
        self.given += 1;
        self.given_index.push_back(self.handed);
        self.handed += 1;
        let state = format!("uploading {} on {}", item.name, self.rule.name);
        self.up.set(|l| l.state = state);
        Some((item.path.clone(), item.name.clone()))
    }
}

impl UploadQueue for LaneQueue<'_> {
    fn next(&mut self) -> Option<(PathBuf, String)> {
        self.flush_acks();
        // Read before the spool is asked, so a segment added meanwhile
        // moves the count past it and is asked for again.
        let generation = self.up.status.generation();
        let next = self.next_file();
        self.ended = next.is_none();
        if self.ended {
            self.dry_at = generation;
        }
        self.sync_inflight(&self.inflight);
        next
    }

    /// A segment closed or a file was queued since the spool last had
    /// nothing for this lane: the live lane sends a segment as it closes,
    /// beside the ones still in flight, rather than after all of them
    /// are confirmed.
    fn refilled(&mut self) -> bool {
        self.ended && self.up.status.generation() != self.dry_at
    }

    fn stored(&mut self, index: usize, report: UploadReport) {
        let Some(k) = self.given_index.iter().position(|&i| i == index) else {
            return;
        };
        self.given_index.remove(k);
        let Some(item) = self.taken.remove(k) else {
            return;
        };
        self.given -= 1;
        self.bytes += item.bytes;
        let at_ns = convoy_telemetry::now_ns();
        self.up
            .stored(&item, &self.rule.name, report.bytes, self.started.elapsed());
        self.acks.push(Acked {
            item,
            at_ns,
            day: day_of(at_ns / 1_000_000_000),
        });
        if self.ended {
            self.flush_acks();
        }
        self.sync_inflight(&self.inflight);
    }
}

impl Uploader {
    fn set(&self, f: impl FnOnce(&mut LaneStatus)) {
        let lane = self.lane;
        self.status.update(|s| {
            f(match lane {
                Lane::Live => &mut s.live,
                Lane::Backlog => &mut s.backlog,
            })
        });
    }

    pub fn run(self) {
        let mut client: Option<Client> = None;
        let mut backoff = Duration::from_millis(250);
        let inflight: Arc<Mutex<Vec<Item>>> = Arc::default();
        let lane_done = Arc::new(AtomicBool::new(false));
        let watcher = {
            let (r, f, i, s, d) = (
                self.rules.clone(),
                self.link_file.clone(),
                inflight.clone(),
                self.interrupt.clone(),
                lane_done.clone(),
            );
            std::thread::spawn(move || watch_link(r, f, i, s, d))
        };
        while !self.stop.load(Ordering::Relaxed) {
            let Some(rule) = current_link(&self.rules, self.link_file.as_ref()) else {
                self.set(|l| l.state = "no link".into());
                if self.lane == Lane::Live {
                    self.status.update(|s| s.link = None);
                }
                client = None;
                self.status.wait(Duration::from_millis(500));
                continue;
            };
            if self.lane == Lane::Live {
                self.status.update(|s| s.link = Some(rule.name.clone()));
            }
            let mut queue = LaneQueue::new(&self, rule);
            queue.inflight = inflight.clone();
            match queue.take() {
                Ok(false) if self.requests.is_some() => {
                    // The live lane keeps a connection while idle, so
                    // requests reach the vehicle; it waits on it, woken
                    // by a new segment or a frame to send.
                    self.set(|l| l.state = "idle".into());
                    if client.is_none() {
                        match self.connect() {
                            Ok(c) => {
                                client = Some(c);
                                backoff = Duration::from_millis(250);
                            }
                            Err((e, attempt)) => {
                                self.note_unreachable(&e);
                                let wait = retry_wait(&e, backoff).saturating_sub(attempt);
                                self.sleep_unless_stopped(wait);
                                backoff = (backoff * 2).min(MAX_BACKOFF);
                                continue;
                            }
                        }
                    }
                    self.set(|l| l.state = "idle".into());
                    let c = client.as_mut().expect("connected");
                    let gen = self.status.generation();
                    let status = self.status.clone();
                    let stop = self.stop.clone();
                    let woken = move || status.generation() != gen || stop.load(Ordering::Relaxed);
                    if c.idle_until(IDLE_WAIT, &woken).is_err() {
                        client = None;
                        self.status.set_lane_waker(None);
                    }
                    continue;
                }
                Ok(false) => {
                    self.set(|l| l.state = "idle".into());
                    // The client is driven only inside its calls: an idle
                    // lane must serve its connection (answer the server's
                    // pings, send ours), or after the idle timeout both
                    // ends drop it. The backlog lane also takes telemetry,
                    // so the live lane can idle for seconds beside a
                    // working link; its connection died of "nothing
                    // heard" then, and its next segment failed once.
                    if client
                        .as_mut()
                        .is_some_and(|c| c.idle(Duration::ZERO).is_err())
                    {
                        client = None;
                    }
                    self.status.wait(IDLE_WAIT);
                    continue;
                }
                Ok(true) => {}
                Err(e) => {
                    self.status.note_error(&format!("spool catalog: {e}"));
                    std::thread::sleep(Duration::from_secs(1));
                    continue;
                }
            }
            if client.is_none() {
                match self.connect() {
                    Ok(c) => {
                        client = Some(c);
                        backoff = Duration::from_millis(250);
                    }
                    Err((e, attempt)) => {
                        queue.fail(&e.to_string());
                        self.note_unreachable(&e);
                        let wait = retry_wait(&e, backoff).saturating_sub(attempt);
                        self.sleep_unless_stopped(wait);
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        continue;
                    }
                }
            }
            let c = client.as_mut().expect("connected");
            let sent = c.upload_queue(&mut queue, WINDOW);
            queue.flush_acks();
            match sent {
                Ok(()) => {
                    let pause = queue.rule.pause_after(queue.bytes, queue.started.elapsed());
                    if !pause.is_zero() {
                        self.set(|l| l.state = format!("rate cap on {}", queue.rule.name));
                        // Serving the connection meanwhile (see above).
                        if c.idle(pause).is_err() {
                            client = None;
                        }
                    }
                }
                Err(e) => {
                    queue.fail(&e.to_string());
                    self.note_unreachable(&e);
                    client = None;
                    self.sleep_unless_stopped(retry_wait(&e, backoff));
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        if let Some(c) = client {
            c.close();
        }
        lane_done.store(true, Ordering::Relaxed);
        let _ = watcher.join();
    }

    /// Connects; the live lane also opens its control stream. `Err`: why,
    /// and how long the attempt took.
    fn connect(&self) -> Result<Client, (convoy_net::NetError, Duration)> {
        self.set(|l| l.state = "connecting".into());
        let attempt = Instant::now();
        let mut c = Client::connect(self.client.clone()).map_err(|e| (e, attempt.elapsed()))?;
        if let Ok(mut slot) = self.interrupt.lock() {
            *slot = Some(c.interrupt_flag());
        }
        self.status.set_offline(false);
        if let Some(r) = &self.requests {
            match r.attach(&mut c) {
                Ok(w) => self.status.set_lane_waker(Some(w)),
                Err(e) => return Err((e, attempt.elapsed())),
            }
        }
        Ok(c)
    }

    /// The server confirmed `item` durable (the spool records it with
    /// the lane's next turn, [`LaneQueue::flush_acks`]).
    fn stored(&self, item: &Item, link: &str, bytes: u64, took: Duration) {
        // The server is in reach (`Shared::set_offline`): a lane whose
        // connection failed set it offline, and only a new connection
        // cleared it, so while the other lane's connection kept working
        // the segmenters went on cutting offline-length segments.
        self.status.set_offline(false);
        let age = (convoy_telemetry::now_ns() - item.created_ns) as f64 / 1e9;
        tracing::debug!(
            target: "convoy::agent",
            lane = ?self.lane, name = item.name.as_str(), class = item.class.as_str(), bytes,
            link, seconds = took.as_secs_f64(), age_seconds = age,
            "stored by the server"
        );
        self.set(|l| {
            l.uploads += 1;
            l.bytes += bytes;
            l.last_error = None;
            l.last_upload = Some(LastUpload {
                name: item.name.clone(),
                class: item.class.as_str().into(),
                bytes,
                link: link.to_owned(),
                at_ns: convoy_telemetry::now_ns(),
                seconds: took.as_secs_f64(),
                age_seconds: age,
            });
        });
    }

    /// These were not stored: they stay queued for the next try.
    fn fail(&self, items: &[Item], msg: &str) {
        if let Ok(mut sp) = self.spool.lock() {
            for item in items {
                let _ = sp.failed(item, msg);
            }
        }
        let lane = match self.lane {
            Lane::Live => "live",
            Lane::Backlog => "backlog",
        };
        if let Some(first) = items.first() {
            tracing::warn!(
                target: "convoy::agent",
                lane, name = first.name.as_str(), more = items.len() - 1, error = %msg,
                "upload not sent, will retry"
            );
        }
        self.set(|l| {
            l.state = "waiting to retry".into();
            l.last_error = Some(msg.to_owned());
        });
    }

    /// A lost or failed connection (not a refused request or key) tells
    /// the segmenters the server is out of reach.
    fn note_unreachable(&self, e: &convoy_net::NetError) {
        use convoy_net::NetError::*;
        let unreachable = matches!(
            e,
            Closed { .. } | Unreachable { .. } | Refused(_) | Socket(_)
        );
        if unreachable && !e.is_key_refused() {
            self.status.set_offline(true);
        }
    }

    fn sleep_unless_stopped(&self, d: Duration) {
        let end = Instant::now() + d;
        while Instant::now() < end && !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Class;

    fn item(class: Class, only_links: Option<&str>, unmetered: bool) -> Item {
        Item {
            id: 1,
            name: "x".into(),
            class,
            bytes: 1,
            created_ns: 0,
            path: PathBuf::new(),
            only_links: only_links.map(String::from),
            unmetered,
        }
    }

    /// Queues a telemetry segment in the spool, as the segmenter does,
    /// and wakes the uploaders.
    fn close_segment(spool: &Mutex<Spool>, status: &Shared, name: &str) {
        let mut sp = spool.lock().unwrap();
        let tmp = sp.tmp_path("segment");
        std::fs::write(&tmp, b"samples").unwrap();
        sp.add(&tmp, name, Class::Telemetry, 7).unwrap();
        drop(sp);
        status.wake_uploaders();
    }

    /// A live lane's uploader over a fresh spool in `dir`, with one
    /// unmetered link and no server (the queue is driven by hand).
    fn live_lane(dir: &std::path::Path) -> (Uploader, Arc<Mutex<Spool>>, Arc<Shared>) {
        let spool = Arc::new(Mutex::new(Spool::open(dir, 1 << 20).unwrap()));
        let status = Arc::new(Shared::default());
        let up = Uploader {
            lane: Lane::Live,
            client: ClientOptions::new("127.0.0.1:9".parse().unwrap(), [0; 32]),
            spool: spool.clone(),
            status: status.clone(),
            rules: Arc::new(RwLock::new(vec![LinkRule::unmetered("default")])),
            requests: None,
            link_file: None,
            stop: Arc::default(),
            interrupt: Arc::default(),
        };
        (up, spool, status)
    }

    #[test]
    fn a_segment_closed_while_the_window_is_in_flight_is_taken_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let (up, spool, status) = live_lane(dir.path());
        let mut queue = LaneQueue::new(&up, LinkRule::unmetered("default"));
        close_segment(&spool, &status, "d/telemetry/1");
        assert_eq!(queue.next().map(|f| f.1).as_deref(), Some("d/telemetry/1"));
        // The spool ran dry with the first segment in flight: nothing to
        // ask for until the next one closes.
        assert!(queue.next().is_none());
        assert!(!queue.refilled());
        // It closes before the first is confirmed: the queue says so, and
        // hands it over at once instead of after that confirmation.
        close_segment(&spool, &status, "d/telemetry/2");
        assert!(queue.refilled());
        assert_eq!(queue.next().map(|f| f.1).as_deref(), Some("d/telemetry/2"));
        assert!(queue.next().is_none());
        assert!(!queue.refilled());
        assert_eq!(queue.given, 2);
    }

    #[test]
    fn confirmations_in_any_order_acknowledge_the_segment_each_names() {
        let dir = tempfile::tempdir().unwrap();
        let (up, spool, status) = live_lane(dir.path());
        let mut queue = LaneQueue::new(&up, LinkRule::unmetered("default"));
        for n in 1..=3 {
            close_segment(&spool, &status, &format!("d/telemetry/{n}"));
            assert!(queue.next().is_some());
        }
        let report = |name: &str| UploadReport {
            name: name.into(),
            bytes: 7,
            resumed_from: 0,
            seconds: 0.1,
            blake3: String::new(),
        };
        // The second is confirmed first (a small file beside a large one),
        // then the third, then the first.
        queue.stored(1, report("d/telemetry/2"));
        assert_eq!(queue.given, 2);
        queue.stored(2, report("d/telemetry/3"));
        queue.stored(0, report("d/telemetry/1"));
        let acked: Vec<&str> = queue.acks.iter().map(|a| a.item.name.as_str()).collect();
        assert_eq!(acked, ["d/telemetry/2", "d/telemetry/3", "d/telemetry/1"]);
        assert_eq!((queue.given, queue.taken.len()), (0, 0));
        // An index confirmed twice, or never given, changes nothing.
        queue.stored(1, report("d/telemetry/2"));
        queue.stored(9, report("nothing"));
        assert_eq!(queue.acks.len(), 3);
    }

    #[test]
    fn a_window_in_flight_is_stopped_by_its_own_conditions_not_only_its_class() {
        let wifi = LinkRule::unmetered("wifi");
        let lte = LinkRule {
            metered: true,
            classes: vec![Class::Events, Class::Telemetry],
            ..LinkRule::unmetered("lte")
        };
        let plain = item(Class::Events, None, false);
        let never_metered = item(Class::Events, None, true);
        let only_wifi = item(Class::Events, Some(",wifi,"), false);
        // Events may use LTE: a plain event goes on; the windows, whose
        // class LTE carries, stop all the same.
        assert!(!refused_in_flight(std::slice::from_ref(&plain), Some(&lte)));
        assert!(refused_in_flight(
            std::slice::from_ref(&never_metered),
            Some(&lte)
        ));
        assert!(refused_in_flight(
            &[plain.clone(), only_wifi.clone()],
            Some(&lte)
        ));
        assert!(!refused_in_flight(
            &[plain, never_metered, only_wifi],
            Some(&wifi)
        ));
        // By class, as before: bulk on LTE; and anything with no link.
        assert!(refused_in_flight(
            &[item(Class::Bulk, None, false)],
            Some(&lte)
        ));
        assert!(refused_in_flight(&[item(Class::Events, None, false)], None));
    }
}

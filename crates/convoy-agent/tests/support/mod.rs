//! What the agent's integration tests share: a queued segment and one
//! upload lane run on its own thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use convoy_agent::policy::{Class, LinkRule};
use convoy_agent::spool::{Lane, Spool};
use convoy_agent::status::Shared;
use convoy_agent::uploader::Uploader;
use convoy_net::ClientOptions;

/// Queues a segment of a few hundred bytes. A new telemetry or event
/// segment is the live lane's alone for its first seconds; a bulk one is
/// the backlog lane's at once.
pub fn queue_segment(spool: &Mutex<Spool>, name: &str, class: Class) {
    let mut sp = spool.lock().unwrap();
    let tmp = sp.tmp_path("segment");
    std::fs::write(&tmp, vec![b'x'; 300]).unwrap();
    sp.add(&tmp, name, class, 300).unwrap();
}

/// One lane uploading from `spool` over an unmetered link.
pub struct RunningLane {
    pub status: Arc<Shared>,
    stop: Arc<AtomicBool>,
    interrupt: Arc<Mutex<Option<Arc<AtomicBool>>>>,
    thread: JoinHandle<()>,
}

impl RunningLane {
    pub fn start(lane: Lane, client: ClientOptions, spool: Arc<Mutex<Spool>>) -> RunningLane {
        let status = Arc::new(Shared::default());
        let stop = Arc::new(AtomicBool::new(false));
        let interrupt = Arc::new(Mutex::new(None));
        let uploader = Uploader {
            lane,
            client,
            spool,
            status: status.clone(),
            rules: Arc::new(std::sync::RwLock::new(vec![LinkRule::unmetered("test")])),
            requests: None,
            link_file: None,
            stop: stop.clone(),
            interrupt: interrupt.clone(),
        };
        RunningLane {
            status,
            stop,
            interrupt,
            thread: std::thread::spawn(move || uploader.run()),
        }
    }

    /// Stops the lane, interrupting a transfer in progress, and waits.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(flag) = self.interrupt.lock().unwrap().clone() {
            flag.store(true, Ordering::Relaxed);
        }
        self.status.wake_uploaders();
        self.thread.join().unwrap();
    }
}

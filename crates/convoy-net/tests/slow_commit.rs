//! A slow commit hook (a busy catalog, a slow disk) must not stop the
//! server: storage work runs on a commit thread, so while one upload's
//! hook blocks, the server goes on handshaking, serving downloads and
//! taking other uploads' data, and the blocked upload is confirmed only
//! once its hook has returned.

mod support;

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use convoy_net::{Client, ClientOptions, CommitHook, Committed, NetError};
use support::{assert_identical, make_file, partial_size, ServerThread, TempDir};

/// Holds uploads named `slow*` in the hook until released; records the
/// order in which hooks returned.
struct GateHook {
    entered: Mutex<Sender<String>>,
    release: Mutex<Receiver<()>>,
    returned: Mutex<Vec<String>>,
}

impl CommitHook for GateHook {
    fn committed(&self, c: &Committed<'_>) -> Result<(), String> {
        // The hook runs after the file is durable under its final name.
        assert!(c.path.is_file(), "{} not in place", c.path.display());
        if c.stored_name.starts_with("slow") {
            self.entered
                .lock()
                .unwrap()
                .send(c.stored_name.to_owned())
                .unwrap();
            let _ = self.release.lock().unwrap().recv();
        }
        self.returned.lock().unwrap().push(c.stored_name.to_owned());
        Ok(())
    }
}

fn gate() -> (Arc<GateHook>, Receiver<String>, Sender<()>) {
    let (entered, entered_rx) = mpsc::channel();
    let (release_tx, release) = mpsc::channel();
    let hook = Arc::new(GateHook {
        entered: Mutex::new(entered),
        release: Mutex::new(release),
        returned: Mutex::new(Vec::new()),
    });
    (hook, entered_rx, release_tx)
}

/// Runs `f` on a thread; its result, or `None` after `limit` (the thread
/// is left to finish on its own).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

#[test]
fn the_server_serves_others_while_a_commit_hook_blocks() {
    serves_others_while_a_commit_hook_blocks(1);
}

/// Each worker has its own commit thread, and its own waker for the
/// answers (the connections may land on either worker).
#[test]
fn every_worker_serves_others_while_a_commit_hook_blocks() {
    serves_others_while_a_commit_hook_blocks(2);
}

fn serves_others_while_a_commit_hook_blocks(workers: usize) {
    let dir = TempDir::new("slow-commit");
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    // A file already stored, for a download during the blocked commit.
    make_file(&store.join("old.bin"), 2_000_000, 9);
    let (hook, entered, release) = gate();
    let server = ServerThread::start(&store, |opts| {
        opts.commit_hook = Some(hook.clone());
        opts.workers = workers;
    });

    let slow_src = dir.path().join("slow.bin");
    make_file(&slow_src, 300_000, 1);
    let (addr, key) = (server.addr, server.key);
    let src = slow_src.clone();
    let slow = std::thread::spawn(move || {
        let mut c = Client::connect(ClientOptions::new(addr, key))?;
        let r = c.upload(&src, None, None);
        c.close();
        r
    });
    // The hook holds the slow upload: it is complete and durable, not yet
    // confirmed.
    assert_eq!(
        entered.recv_timeout(Duration::from_secs(60)).unwrap(),
        "slow.bin"
    );

    // Meanwhile a new client connects (a handshake) and downloads 2 MB,
    // and another sends 3 MB: each needs the server to read datagrams and
    // answer them.
    let out = dir.path().join("old.copy");
    let o = out.clone();
    let download = within(Duration::from_secs(20), move || -> Result<(), NetError> {
        let mut c = Client::connect(ClientOptions::new(addr, key))?;
        c.download("old.bin", &o, None)?;
        c.close();
        Ok(())
    });
    let fast_src = dir.path().join("fast.bin");
    make_file(&fast_src, 3_000_000, 2);
    let f = fast_src.clone();
    let fast = std::thread::spawn(move || {
        let mut c = Client::connect(ClientOptions::new(addr, key))?;
        let r = c.upload(&f, None, None);
        c.close();
        r
    });
    // All of its data reaches the partial file while the hook blocks.
    let took_data = within(Duration::from_secs(20), {
        let store = store.clone();
        move || {
            while partial_size(&store) < 3_000_000 && !store.join("fast.bin").exists() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    });
    let waiting = !slow.is_finished();
    // Whatever happened, let the hook go so the test ends.
    release.send(()).unwrap();
    assert!(waiting, "confirmed before its commit hook returned");
    let download = download.expect("no answer to a download while a commit hook blocked");
    assert!(
        download.is_ok(),
        "no download while a commit hook blocked: {download:?}"
    );
    assert_identical(&store.join("old.bin"), &out);
    assert!(
        took_data.is_some(),
        "no upload data taken while a commit hook blocked"
    );
    fast.join().unwrap().unwrap();
    assert_identical(&fast_src, &store.join("fast.bin"));

    // The slow upload is confirmed, and only after its hook returned.
    slow.join().unwrap().unwrap();
    assert!(hook
        .returned
        .lock()
        .unwrap()
        .iter()
        .any(|n| n == "slow.bin"));
    assert_identical(&slow_src, &store.join("slow.bin"));
}

/// A client that goes away while its upload is being committed: the file
/// is stored all the same, and the server still writes its `stored` event
/// (which the fleet's tools count deliveries by) once the commit ends.
#[test]
fn an_upload_committed_after_its_client_left_is_still_announced() {
    let dir = TempDir::new("orphan-commit");
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let (hook, entered, release) = gate();
    let (server, events) = ServerThread::with_events(&store, |opts| {
        opts.commit_hook = Some(hook.clone());
    });
    let src = dir.path().join("slow.bin");
    make_file(&src, 200_000, 3);
    let (addr, key) = (server.addr, server.key);
    let (flag_tx, flag_rx) = mpsc::channel();
    let s = src.clone();
    let client = std::thread::spawn(move || {
        let mut c = Client::connect(ClientOptions::new(addr, key))?;
        flag_tx.send(c.interrupt_flag()).unwrap();
        c.upload(&s, None, None)
    });
    let flag = flag_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(
        entered.recv_timeout(Duration::from_secs(60)).unwrap(),
        "slow.bin"
    );
    // The client gives up while the hook holds the commit: its connection
    // closes before the outcome.
    flag.store(true, std::sync::atomic::Ordering::Release);
    let r = client.join().unwrap();
    assert!(matches!(r, Err(NetError::Interrupted)), "{r:?}");
    std::thread::sleep(Duration::from_millis(300));
    release.send(()).unwrap();
    let stored = within(Duration::from_secs(20), move || loop {
        match events.recv() {
            Ok(convoy_net::ServerEvent::Stored { name, .. }) if name == "slow.bin" => return true,
            Ok(_) => continue,
            Err(_) => return false,
        }
    });
    assert_eq!(
        stored,
        Some(true),
        "no stored event for the orphaned upload"
    );
    assert_identical(&src, &store.join("slow.bin"));
}

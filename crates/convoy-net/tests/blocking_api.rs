//! The blocking API on loopback: a `convoy_net::Server` on its own thread
//! at 127.0.0.1 with a port the system picks, and blocking clients.

mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use convoy_net::{Client, ClientOptions, NetError};
use support::{assert_identical, held_of, make_file, partial_size, Relay, ServerThread, TempDir};

#[test]
fn interrupted_upload_resumes_on_the_next_client() {
    let dir = TempDir::new("blocking-interrupt");
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let server = ServerThread::start(&store, |_| {});
    let size = 4_000_000;
    let src = dir.path().join("drive.log");
    make_file(&src, size, 5);
    // Silent after 1.5 MB of datagrams: the upload stalls midway,
    // however fast the machine is.
    let relay = Relay::new(server.addr, 1_500_000);
    // A client stays on the thread that made it (it is not Send); its
    // interrupt flag is what other threads get.
    let (tx, rx) = std::sync::mpsc::channel();
    let (via, key, src2) = (relay.addr, server.key, src.clone());
    let uploading = std::thread::spawn(move || {
        let mut client = Client::connect(ClientOptions::new(via, key))?;
        tx.send(client.interrupt_flag()).unwrap();
        client.upload(&src2, None, None)
    });
    let flag = rx.recv().unwrap();
    let start = Instant::now();
    while !(relay.is_silent() && partial_size(&store) > 0) {
        assert!(start.elapsed() < Duration::from_secs(60), "no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    let interrupted_at = Instant::now();
    flag.store(true, Ordering::Relaxed);
    let r = uploading.join().unwrap();
    assert!(matches!(r, Err(NetError::Interrupted)), "{r:?}");
    // The driver looks at the flag at least every 100 ms.
    assert!(interrupted_at.elapsed() < Duration::from_secs(2));

    relay.restore();
    let mut again = Client::connect(ClientOptions::new(relay.addr, server.key)).unwrap();
    let report = again.upload(&src, None, None).unwrap();
    assert!(
        report.resumed_from > 0 && report.resumed_from <= 1_500_000,
        "resumed from {}",
        report.resumed_from
    );
    assert_identical(&src, &store.join("drive.log"));
    again.close();
}

/// A queue over a list of files that records the confirmations.
struct Files {
    files: Vec<(std::path::PathBuf, String)>,
    given: usize,
    confirmed: Vec<usize>,
    failed: Vec<usize>,
}

impl convoy_net::UploadQueue for Files {
    fn next(&mut self) -> Option<(std::path::PathBuf, String)> {
        let f = self.files.get(self.given).cloned();
        self.given += f.is_some() as usize;
        f
    }
    fn stored(&mut self, index: usize, report: convoy_net::UploadReport) {
        assert_eq!(report.name, self.files[index].1);
        self.confirmed.push(index);
    }
    fn failed(&mut self, index: usize, _error: &convoy_net::NetError) {
        self.failed.push(index);
    }
}

impl Files {
    fn new(files: Vec<(std::path::PathBuf, String)>) -> Files {
        Files {
            files,
            given: 0,
            confirmed: Vec::new(),
            failed: Vec::new(),
        }
    }
}

#[test]
fn a_queue_of_uploads_is_confirmed_once_each_and_stored_whole() {
    let dir = TempDir::new("blocking-queue");
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let server = ServerThread::start(&store, |_| {});
    // Small segments and a few larger files, more than one window's worth.
    let files: Vec<(std::path::PathBuf, String)> = (0..40)
        .map(|i| {
            let p = dir.path().join(format!("seg-{i}"));
            let size = if i % 10 == 3 { 700_000 } else { 300 + i * 37 };
            make_file(&p, size, i as u64);
            (p, format!("day/seg-{i:03}"))
        })
        .collect();
    let mut client = Client::connect(ClientOptions::new(server.addr, server.key)).unwrap();
    let mut q = Files::new(files.clone());
    client.upload_queue(&mut q, 8).unwrap();
    // As each arrives: a 300-byte segment given after a 700 kB file may be
    // confirmed first.
    let mut confirmed = q.confirmed.clone();
    confirmed.sort();
    assert_eq!(confirmed, (0..files.len()).collect::<Vec<_>>());
    for (p, name) in &files {
        assert_identical(p, &store.join(name));
    }
    // The connection is still good for more after a queue ends.
    let (p, name) = &files[0];
    let mut again = Files::new(vec![(p.clone(), format!("{name}-again"))]);
    client.upload_queue(&mut again, 8).unwrap();
    assert_eq!(again.confirmed, [0]);
    // A missing file ends the queue with an error; nothing after it is
    // reported stored.
    let mut broken = Files::new(vec![
        files[1].clone(),
        (dir.path().join("missing"), "missing".to_owned()),
        files[2].clone(),
    ]);
    assert!(client.upload_queue(&mut broken, 8).is_err());
    assert!(broken.confirmed.len() <= 1);
    client.close();
}

/// A commit hook that refuses one name, as an ingest whose catalog fails
/// would: the server answers that upload with an error.
struct RefusesOne(&'static str);

impl convoy_net::CommitHook for RefusesOne {
    fn committed(&self, c: &convoy_net::Committed<'_>) -> Result<(), String> {
        if c.stored_name == self.0 {
            Err("refused by the test's hook".into())
        } else {
            Ok(())
        }
    }
}

#[test]
fn one_upload_refused_ends_the_queue_after_the_others_in_flight_are_confirmed() {
    let dir = TempDir::new("blocking-one-refused");
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let server = ServerThread::start(&store, |o| {
        o.commit_hook = Some(std::sync::Arc::new(RefusesOne("b")));
    });
    let files: Vec<(std::path::PathBuf, String)> = ["a", "b", "c", "d"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let p = dir.path().join(name);
            make_file(&p, 50_000, i as u64 + 1);
            (p, name.to_string())
        })
        .collect();
    let mut client = Client::connect(ClientOptions::new(server.addr, server.key)).unwrap();
    let mut q = Files::new(files.clone());
    let err = client.upload_queue(&mut q, 8).unwrap_err();
    assert!(
        err.to_string().contains("refused by the test's hook"),
        "{err}"
    );
    // The others were in flight beside "b" and are heard of, whichever
    // way round the confirmations came; nothing is reported for "b".
    let mut confirmed = q.confirmed.clone();
    confirmed.sort();
    assert_eq!(confirmed, [0, 2, 3]);
    assert_eq!(q.failed, [1]);
    for i in [0, 2, 3] {
        assert_identical(&files[i].0, &store.join(&files[i].1));
    }
    // The connection still works: the refusal was the upload's, not its.
    let mut again = Files::new(vec![(files[0].0.clone(), "a-again".to_owned())]);
    client.upload_queue(&mut again, 8).unwrap();
    assert_eq!(again.confirmed, [0]);
    client.close();
}

#[test]
fn a_small_file_taken_after_a_large_one_is_not_held_behind_it() {
    let dir = TempDir::new("blocking-shortest-first");
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let server = ServerThread::start(&store, |_| {});
    // A camera file, then a log: the log's data goes out as soon as its
    // resume offset is known, not after the camera file's last byte.
    let camera = dir.path().join("camera.mcap");
    let log = dir.path().join("drive.log");
    make_file(&camera, 30_000_000, 1);
    make_file(&log, 200_000, 2);
    let files = vec![
        (camera.clone(), "camera".to_owned()),
        (log.clone(), "log".to_owned()),
    ];
    let (addr, key) = (server.addr, server.key);
    let uploading = std::thread::spawn(move || {
        let mut client = Client::connect(ClientOptions::new(addr, key)).unwrap();
        let mut q = Files::new(files);
        client.upload_queue(&mut q, 8).map(|()| q.confirmed)
    });
    // How much of the camera file the server held when the log's last
    // byte came. Read before each look at the log, so the figure kept is
    // never more than the truth: a test thread held up by a busy machine
    // (a stat can wait seconds behind another program's fsync) errs
    // toward passing, never toward a false failure. The log's commit is
    // not waited for: its fsync on a busy disk says nothing of the order
    // the data went out in.
    let start = Instant::now();
    let mut camera_held = 0;
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the log never arrived"
        );
        let camera_now = held_of(&store, "camera", 30_000_000);
        if held_of(&store, "log", 200_000) == 200_000 {
            break;
        }
        camera_held = camera_now;
        std::thread::sleep(Duration::from_millis(1));
    }
    // Both confirmed once each (which first is the disk's to say: the
    // log's commit may still wait on an fsync when the camera file ends).
    let mut confirmed = uploading.join().unwrap().unwrap();
    confirmed.sort();
    assert_eq!(confirmed, [0, 1]);
    assert!(
        camera_held < 15_000_000,
        "the log waited for the camera file: {camera_held} bytes of it were there first"
    );
    assert_identical(&log, &store.join("log"));
    assert_identical(&camera, &store.join("camera"));
}

/// A queue that runs dry after its first file and is refilled while that
/// file is in flight (as a spool is when a segment closes), recording
/// what the upload queue asked and was told.
struct Refilled {
    first: Option<(std::path::PathBuf, String)>,
    later: Option<(std::path::PathBuf, String)>,
    dry: bool,
    events: Vec<String>,
}

impl convoy_net::UploadQueue for Refilled {
    fn next(&mut self) -> Option<(std::path::PathBuf, String)> {
        let f = match self.first.take() {
            Some(f) => Some(f),
            // The second ask finds nothing; the file comes just after.
            None if !self.dry => None,
            None => self.later.take(),
        };
        self.events.push(format!(
            "next {}",
            f.as_ref().map_or("none", |f| f.1.as_str())
        ));
        if f.is_none() {
            self.dry = true;
        }
        f
    }
    fn refilled(&mut self) -> bool {
        self.dry && self.later.is_some()
    }
    fn stored(&mut self, _index: usize, report: convoy_net::UploadReport) {
        self.events.push(format!("stored {}", report.name));
    }
}

#[test]
fn a_file_queued_while_the_window_is_in_flight_goes_beside_it() {
    let dir = TempDir::new("blocking-refilled");
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let server = ServerThread::start(&store, |_| {});
    let (a, b) = (dir.path().join("seg-a"), dir.path().join("seg-b"));
    make_file(&a, 300, 1);
    make_file(&b, 300, 2);
    let mut client = Client::connect(ClientOptions::new(server.addr, server.key)).unwrap();
    let mut q = Refilled {
        first: Some((a.clone(), "a".into())),
        later: Some((b.clone(), "b".into())),
        dry: false,
        events: Vec::new(),
    };
    client.upload_queue(&mut q, 8).unwrap();
    // The refilled queue was asked again before the first file was
    // confirmed (a confirmation takes a round trip, the ask one turn),
    // and the call sent both: before, "b" waited for a later call, after
    // "a" was confirmed.
    assert_eq!(
        q.events,
        [
            "next a",
            "next none",
            "next b",
            "next none",
            "stored a",
            "stored b"
        ]
    );
    assert_identical(&a, &store.join("a"));
    assert_identical(&b, &store.join("b"));
    client.close();
}

//! Multipath over IPv6, on real UDP sockets: a client in a network
//! namespace of its own with two interfaces, veth pairs `lte`
//! (fd00:71::1) and `wifi` (fd00:72::1) to the server's namespace, each
//! shaped to 20 Mbit/s out of the client, uploads to a server on `[::]`
//! through both, and goes on over one when the other goes away. The
//! client finds the interfaces through netlink as it does on a vehicle.
//!
//! Needs root (CI runs as root): without it the tests say so and pass
//! without running. The namespaces, and the veth pairs in them, are
//! deleted on drop, even when an assertion fails; a watchdog interrupts
//! an upload that is still running after [`LIMIT`].

mod support;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convoy_net::multipath::{PathEventReport, PathReport};
use convoy_net::netlink::Selection;
use convoy_net::{Client, ClientOptions, Progress, UploadReport};
use support::netns::Netns;
use support::{assert_identical, enter, make_file, ServerThread, TempDir};

/// How long an upload may take before the test gives up on it.
const LIMIT: Duration = Duration::from_secs(60);

/// The client's interfaces: name, the client's address, the server's.
const LINKS: [(&str, &str, &str); 2] = [
    ("lte", "fd00:71::1", "fd00:71::2"),
    ("wifi", "fd00:72::1", "fd00:72::2"),
];

/// The two namespaces; dropping it deletes them with their veth pairs.
struct TwoPaths {
    client: Netns,
    server: Netns,
}

impl TwoPaths {
    /// `None` (with a line on stderr) without root, iproute2 or tc.
    fn new(test: &str, tag: &str) -> Option<TwoPaths> {
        let client = Netns::new(test, &format!("{tag}-c"))?;
        let server = Netns::new(test, &format!("{tag}-s"))?;
        let net = TwoPaths { client, server };
        for (i, (name, _, _)) in LINKS.into_iter().enumerate() {
            let peer = format!("{name}-s");
            net.client.veth(name, &net.server, &peer);
            let there = format!("{}/64", LINKS[i].2);
            net.server
                .ip(&["-6", "addr", "add", &there, "dev", &peer, "nodad"]);
            net.client_address(i);
            // 20 Mbit/s out of the client: neither path alone carries
            // the upload as fast as both.
            let tc = net
                .client
                .command("tc")
                .args(["qdisc", "add", "dev", name, "root", "tbf"])
                .args(["rate", "20mbit", "burst", "32kb", "latency", "50ms"])
                .output();
            match tc {
                Ok(o) => assert!(
                    o.status.success(),
                    "tc on {name}: {}",
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => {
                    eprintln!("{test}: skipped: no tc (iproute2): {e}");
                    return None;
                }
            }
        }
        Some(net)
    }

    /// The client's address on link `i` (without duplicate address
    /// detection, so it is bindable at once) and its source route: what
    /// leaves from the address leaves by its interface, as on a
    /// multi-homed host. Taking the link down flushes both, so bringing
    /// it back calls this again.
    fn client_address(&self, i: usize) {
        let (name, here, there) = LINKS[i];
        let addr = format!("{here}/64");
        self.client
            .ip(&["-6", "addr", "add", &addr, "dev", name, "nodad"]);
        let table = (101 + i).to_string();
        self.client
            .ip(&["-6", "rule", "add", "from", here, "table", &table]);
        self.client.ip(&[
            "-6", "route", "add", "default", "via", there, "dev", name, "table", &table,
        ]);
    }

    /// Brings link `i` back after `ip link set down`.
    fn restore(&self, i: usize) {
        let name = LINKS[i].0;
        self.client.ip(&["link", "set", name, "up"]);
        self.client.ip(&["-6", "rule", "del", "from", LINKS[i].1]);
        self.client_address(i);
    }
}

/// What one upload left: its report, the paths and their events.
struct Upload {
    report: UploadReport,
    paths: Vec<PathReport>,
    events: Vec<PathEventReport>,
}

/// Uploads `file` from the client's namespace to a server on `[::]` in
/// the server's, dialling the server's LTE address, with every usable
/// interface; `progress` sees each progress report.
fn upload_over(
    net: &TwoPaths,
    file: &Path,
    store: &Path,
    progress: impl FnMut(&Progress) + Send + 'static,
) -> Upload {
    let server = ServerThread::start_in(Some(&net.server), store, |o| {
        o.listen = "[::]:0".parse().unwrap();
    });
    let dialled = SocketAddr::new(LINKS[0].2.parse().unwrap(), server.addr.port());
    let mut opts = ClientOptions::new(dialled, server.key);
    opts.paths = Some(Selection::default());
    opts.idle_timeout = Duration::from_secs(5);
    let (ns, file) = (net.client.name.clone(), file.to_owned());
    let (tx, rx) = std::sync::mpsc::channel();
    // The client is not Send: it lives on the thread that entered the
    // namespace, and hands its interrupt flag out for the watchdog.
    let client = std::thread::spawn(move || {
        enter(&ns);
        let mut c = Client::connect(opts).expect("connect");
        tx.send(c.interrupt_flag()).unwrap();
        let mut progress = progress;
        let mut cb = |p: Progress| progress(&p);
        let report = c.upload(&file, None, Some(&mut cb)).expect("upload");
        let (paths, events) = (c.path_report(), c.path_events());
        c.close();
        Upload {
            report,
            paths,
            events,
        }
    });
    let interrupt = rx.recv_timeout(LIMIT);
    let start = Instant::now();
    while !client.is_finished() && start.elapsed() < LIMIT {
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Ok(flag) = interrupt {
        flag.store(true, Ordering::Relaxed);
    }
    let up = client.join().expect("the client thread");
    drop(server);
    for p in &up.paths {
        eprintln!(
            "path {} {:?} {:?} -> {}: {} sent, {} received, {}",
            p.id, p.interface, p.local, p.remote, p.bytes_sent, p.bytes_received, p.state
        );
    }
    for e in &up.events {
        eprintln!("{:8.1} ms path {} {}", e.t_ms, e.path, e.state);
    }
    up
}

fn path<'a>(paths: &'a [PathReport], interface: &str) -> &'a PathReport {
    paths
        .iter()
        .find(|p| p.interface.as_deref() == Some(interface))
        .unwrap_or_else(|| panic!("no {interface} path in {paths:#?}"))
}

#[test]
fn an_upload_goes_over_both_ipv6_paths() {
    let Some(net) = TwoPaths::new("an_upload_goes_over_both_ipv6_paths", "v6both") else {
        return;
    };
    let (src, store) = (TempDir::new("v6-src"), TempDir::new("v6-store"));
    let file = src.path().join("drive.log");
    make_file(&file, 12_000_000, 61);
    let up = upload_over(&net, &file, store.path(), |_| {});
    assert_eq!(up.report.bytes, 12_000_000);
    assert_identical(&file, &store.path().join("drive.log"));
    assert_eq!(up.paths.len(), 2, "{:#?}", up.paths);
    let (lte, wifi) = (path(&up.paths, "lte"), path(&up.paths, "wifi"));
    assert_eq!(lte.id, 0, "the handshake path is the kernel's route's");
    for (p, (_, here, _)) in [lte, wifi].into_iter().zip(LINKS) {
        let local = p.local.expect("a bound path socket");
        assert_eq!(local.ip(), here.parse::<IpAddr>().unwrap(), "{p:?}");
        // Both carried a good part of it (20 Mbit/s each), and the server
        // answered each (from the address dialled, over its own link).
        assert!(p.bytes_sent > 2_000_000, "{p:?} carried too little");
        assert!(p.bytes_received > 0, "{p:?} heard nothing");
        assert_eq!(p.remote.ip(), LINKS[0].2.parse::<IpAddr>().unwrap());
    }
    assert!(
        up.events
            .iter()
            .any(|e| e.interface.as_deref() == Some("wifi") && e.state == "active"),
        "{:#?}",
        up.events
    );
}

#[test]
fn an_ipv6_interface_going_away_leaves_the_upload_on_the_other() {
    let test = "an_ipv6_interface_going_away_leaves_the_upload_on_the_other";
    let Some(net) = TwoPaths::new(test, "v6down") else {
        return;
    };
    let net = Arc::new(net);
    let (src, store) = (TempDir::new("v6-src"), TempDir::new("v6-store"));
    let file = src.path().join("drive.log");
    make_file(&file, 16_000_000, 62);
    // LTE, the handshake path, goes down once the server holds 3 MB, and
    // comes back at 9 MB (its addresses and route put back: taking an
    // IPv6 link down flushes them).
    let marks = Arc::new(Mutex::new(Vec::new()));
    let flap = {
        let (net, marks) = (net.clone(), marks.clone());
        move |p: &Progress| {
            let mut m = marks.lock().unwrap();
            if m.is_empty() && p.done >= 3_000_000 {
                net.client.ip(&["link", "set", "lte", "down"]);
                m.push(p.done);
            } else if m.len() == 1 && p.done >= 9_000_000 {
                net.restore(0);
                m.push(p.done);
            }
        }
    };
    let up = upload_over(&net, &file, store.path(), flap);
    assert_eq!(up.report.bytes, 16_000_000);
    assert_identical(&file, &store.path().join("drive.log"));
    assert_eq!(
        marks.lock().unwrap().len(),
        2,
        "the upload ended before LTE came back"
    );
    let lte: Vec<&str> = up
        .events
        .iter()
        .filter(|e| e.path == 0)
        .map(|e| e.state.as_str())
        .collect();
    let down = lte
        .iter()
        .position(|s| *s == "abandoned")
        .unwrap_or_else(|| panic!("lte not abandoned when it went down: {:#?}", up.events));
    assert!(
        lte[down..].contains(&"validating"),
        "lte not probed again after coming back: {:#?}",
        up.events
    );
    // Wi-Fi carried the 6 MB between the two marks at least.
    let wifi = path(&up.paths, "wifi");
    assert!(wifi.bytes_sent > 6_000_000, "{wifi:?}");
}

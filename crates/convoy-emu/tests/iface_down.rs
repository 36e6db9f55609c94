//! `outage-policy=down` with real namespaces, a real client process, real
//! kernel sockets and a netlink listener: the interface goes down at the
//! outage's start, comes back at its end with its address, rule and routes,
//! and carries traffic again. Needs root and /dev/net/tun (CI has both);
//! without them the test says so and passes without running.
//!
//! The emulator is a value here: whatever assertion fails, dropping it
//! ends the client command and removes the namespaces.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::net::UdpSocket;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use convoy_emu::netlink::{LinkMonitor, LinkNotice};
use convoy_emu::{EmuConfig, Emulator, LinkSpec, Side, SpecError};

fn report(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

fn can_emulate(test: &str) -> bool {
    // SAFETY: plain syscall.
    let root = unsafe { libc::geteuid() } == 0;
    let tun = Path::new("/dev/net/tun").exists();
    if !(root && tun) {
        report(&format!(
            "{test}: skipped: needs root and /dev/net/tun (CI has both)"
        ));
    }
    root && tun
}

/// `sh -c SCRIPT` in the client namespace, its standard output.
fn client_sh(emu: &Emulator, script: &str) -> String {
    let out = emu
        .command(Side::Client, "sh", false)
        .args(["-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// What the emulator set up on the client for `wifi`, in a comparable form:
/// the address, every rule, every route of every table.
fn client_setup(emu: &Emulator) -> BTreeSet<String> {
    client_sh(
        emu,
        "ip -o -4 addr show dev wifi; ip -4 rule; ip -4 route show table all",
    )
    .lines()
    .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
    .collect()
}

/// One UDP datagram from the wifi address to the server's *lte* address
/// and its echo: only the wifi link's own table (`from 10.7.1.1 lookup
/// 101`, default dev wifi) sends it over wifi; without that route the main
/// table would take it over lte.
fn exchange_over_wifi(emu: &Emulator, server: &UdpSocket) -> bool {
    let client = emu
        .netns(Side::Client)
        .run(|| UdpSocket::bind("10.7.1.1:0"))
        .unwrap()
        .unwrap();
    client
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let before = emu.delivered_bytes("wifi:up").unwrap();
    client
        .send_to(b"are you there", server.local_addr().unwrap())
        .unwrap();
    let mut buf = [0u8; 64];
    let Ok((n, from)) = server.recv_from(&mut buf) else {
        return false;
    };
    server.send_to(&buf[..n], from).unwrap();
    let echoed = client
        .recv(&mut buf)
        .is_ok_and(|n| &buf[..n] == b"are you there");
    echoed && emu.delivered_bytes("wifi:up").unwrap() > before
}

/// How long the listeners watch, and the longest the test waits for the
/// emulator's two changes of wifi (at 1 s and 2 s).
const WATCH: Duration = Duration::from_secs(3);

fn since(t: Duration) -> String {
    format!("{:.4} s", t.as_secs_f64())
}

#[test]
fn interface_goes_down_for_each_outage_and_comes_back_as_it_was() {
    if !can_emulate("interface_goes_down_for_each_outage_and_comes_back_as_it_was") {
        return;
    }
    // wifi: an outage= interval. rsu: a series trace whose up column has a
    // gap from 0.4 s to 0.7 s. lte: always on.
    let dir = std::env::temp_dir().join(format!("convoy-emu-ifdown-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("rsu.csv");
    std::fs::write(
        &trace,
        "start_ms,rate_kbps,delay_ms,up\n0,20000,2,1\n400,20000,2,0\n700,20000,2,1\n",
    )
    .unwrap();
    let specs = [
        "lte:rate=20mbit,delay=2ms".to_owned(),
        "wifi:rate=20mbit,delay=2ms,outage=1s-2s,outage-policy=down".to_owned(),
        format!("rsu:rate={},outage-policy=down", trace.display()),
    ];
    let links = specs.iter().map(|s| LinkSpec::parse(s).unwrap()).collect();
    let emu = Emulator::start(EmuConfig::new(links)).unwrap();
    let epoch = emu.epoch();
    let unix_at_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() - epoch.elapsed();

    // A program watching its interfaces over netlink, as convoy or the
    // MPTCP path manager does.
    let mut monitor = emu
        .netns(Side::Client)
        .run(LinkMonitor::open)
        .unwrap()
        .unwrap();
    let watcher = std::thread::spawn(move || {
        let mut seen: Vec<(Duration, LinkNotice)> = Vec::new();
        while epoch.elapsed() < WATCH {
            for n in monitor.next(Duration::from_millis(50)).unwrap() {
                seen.push((epoch.elapsed(), n));
            }
        }
        seen
    });
    // The client command: polls operstate every 20 ms and prints each
    // change with its Unix time in nanoseconds.
    let mut poller = emu
        .command(Side::Client, "sh", false)
        .arg("-c")
        .arg(
            "prev=; end=$(( $(date +%s%N) + 3000000000 )); \
             while [ $(date +%s%N) -lt $end ]; do \
               s=$(cat /sys/class/net/wifi/operstate); \
               if [ \"$s\" != \"$prev\" ]; then echo \"$(date +%s%N) $s\"; prev=$s; fi; \
               sleep 0.02; done",
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let server = emu
        .netns(Side::Server)
        .run(|| UdpSocket::bind("10.7.0.2:0"))
        .unwrap()
        .unwrap();
    server
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();

    let before = client_setup(&emu);
    assert!(
        before.contains("default dev wifi table 101 scope link"),
        "{before:?}"
    );
    assert!(
        exchange_over_wifi(&emu, &server),
        "no exchange before the outage"
    );

    // In the outage: the kernel has flushed the interface's routes. How
    // soon after each edge is `convoy emu selftest --only ifdown`'s figure
    // (a real-time one, measured there); here the test waits for the
    // emulator's own record of each change, however loaded the machine.
    let wait_for_wifi = |changes: usize| {
        while emu
            .iface_events()
            .iter()
            .filter(|e| e.link == "wifi")
            .count()
            < changes
        {
            assert!(epoch.elapsed() < WATCH, "{:?}", emu.iface_events());
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait_for_wifi(1);
    if emu.link_failed() {
        panic!("a link thread stopped: {:?}", emu.shutdown().err());
    }
    let during = client_sh(&emu, "ip -o link show dev wifi; ip -4 route show table 101");
    assert!(!during.contains("UP"), "{during}");
    assert!(!during.contains("default dev wifi"), "{during}");

    wait_for_wifi(2);
    let after = client_setup(&emu);
    assert_eq!(before, after, "not set up as before the outage");
    assert!(
        exchange_over_wifi(&emu, &server),
        "no exchange after the outage"
    );

    // What the emulator did, and how long after each edge.
    let events = emu.iface_events();
    let of = |link: &str| -> Vec<_> { events.iter().filter(|e| e.link == link).collect() };
    let (wifi, rsu) = (of("wifi"), of("rsu"));
    assert_eq!(
        wifi.iter().map(|e| (e.up, e.edge)).collect::<Vec<_>>(),
        [
            (false, Duration::from_secs(1)),
            (true, Duration::from_secs(2))
        ]
    );
    assert_eq!(
        rsu.iter().map(|e| (e.up, e.edge)).collect::<Vec<_>>(),
        [
            (false, Duration::from_millis(400)),
            (true, Duration::from_millis(700))
        ]
    );
    assert!(of("lte").is_empty());
    // The kernel brings back its own routes for the address; the rest is
    // the emulator's, put back on the way up.
    assert_eq!(
        wifi[1].restored,
        ["route default dev wifi table 101".to_owned()]
    );
    for e in &events {
        report(&format!(
            "{} {} at {}: changed {:.3} ms after the edge, all done after {:.3} ms; restored {:?}",
            e.link,
            if e.up { "up" } else { "down" },
            since(e.edge),
            e.latency().as_secs_f64() * 1e3,
            e.done.saturating_sub(e.edge).as_secs_f64() * 1e3,
            e.restored
        ));
        assert!(e.changed >= e.edge && e.done >= e.changed, "{e:?}");
    }

    // What a netlink listener saw: RTM_NEWLINK for wifi without IFF_UP and
    // IFF_RUNNING after 1 s, with both after 2 s, each at the emulator's
    // change.
    let seen = watcher.join().unwrap();
    let wifi_seen: Vec<_> = seen.iter().filter(|(_, n)| n.name == "wifi").collect();
    for (t, n) in &wifi_seen {
        report(&format!(
            "netlink: RTM_NEWLINK wifi at {}: IFF_UP {} IFF_RUNNING {}",
            since(*t),
            n.up,
            n.running
        ));
    }
    let down = wifi_seen
        .iter()
        .find(|(_, n)| !n.up && !n.running)
        .expect("a notice of wifi down");
    let up = wifi_seen
        .iter()
        .find(|(t, n)| n.up && n.running && *t > down.0)
        .expect("a notice of wifi up again");
    report(&format!(
        "netlink listener: wifi down at {}, up at {}",
        since(down.0),
        since(up.0)
    ));
    // Each notice after its edge, the down one within the outage.
    assert!(down.0 >= wifi[0].edge && down.0 < wifi[1].edge, "{down:?}");
    assert!(up.0 >= wifi[1].edge, "{up:?}");

    // What the client command saw, polling every 20 ms.
    let out = BufReader::new(poller.stdout.take().unwrap());
    let changes: Vec<(Duration, String)> = out
        .lines()
        .map(|l| {
            let l = l.unwrap();
            let (ns, state) = l.split_once(' ').unwrap();
            let at = Duration::from_nanos(ns.parse().unwrap()).saturating_sub(unix_at_epoch);
            (at, state.to_owned())
        })
        .collect();
    poller.wait().unwrap();
    report(&format!("client polling operstate: {changes:?}"));
    let down_at = changes.iter().find(|(_, s)| s == "down").expect("down").0;
    let up_at = changes
        .iter()
        .find(|(t, s)| s != "down" && *t > down_at)
        .expect("up again")
        .0;
    let ms = Duration::from_millis;
    assert!(down_at >= ms(1000) && down_at < ms(2000), "{down_at:?}");
    assert!(up_at >= ms(2000), "{up_at:?}");
    drop(emu);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn down_policy_bad_input_is_one_clear_line() {
    type Check = fn(&SpecError) -> bool;
    let cases: [(&str, Check); 3] = [
        ("wifi:outage=1s-2s,up-outage-policy=down", |e| {
            matches!(e, SpecError::DownPolicyOneDirection(_))
        }),
        ("wifi:rate=10mbit,outage-policy=down", |e| {
            matches!(e, SpecError::DownPolicyWithoutOutages)
        }),
        ("wifi:outage=1s-2s,outage-policy=offline", |e| {
            e.to_string().contains("hold, drop or down")
        }),
    ];
    for (text, check) in cases {
        let e = LinkSpec::parse(text).unwrap_err();
        assert!(check(&e), "{text}: {e}");
        assert_eq!(e.to_string().lines().count(), 1, "{text}: {e}");
    }
    // Through the emulator too, before anything is created.
    let spec = LinkSpec::parse("wifi:outage=2s-1s,outage-policy=down").unwrap();
    let err = match Emulator::start(EmuConfig::new(vec![spec])) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("an empty outage was accepted"),
    };
    assert!(err.starts_with("--link wifi:"), "{err}");
}

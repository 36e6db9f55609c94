//! convoy over the addresses hosts really have: IPv6 (loopback ::1), a
//! dual-stack server on [::] reached over IPv4 and IPv6, and a server on
//! a wildcard address of a host with several addresses, which must answer
//! from the one the client dialled (IP_PKTINFO / IPV6_PKTINFO). That last
//! runs in two network namespaces joined by a veth pair; the client uses
//! one connected socket (`--single-path`), which drops datagrams from any
//! other address, so a transfer that completes proves the replies came
//! from the dialled address.

mod net_support;

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use net_support::netns::Netns;
use net_support::{bin, make_file, site, spawn_command, Proc, Site};

/// How long one transfer may take; a client whose replies are dropped
/// gives up on the handshake well before.
const TRANSFER_LIMIT: Duration = Duration::from_secs(90);

fn ipv6_on_loopback(test: &str) -> bool {
    let on = std::fs::read_to_string("/proc/sys/net/ipv6/conf/lo/disable_ipv6")
        .is_ok_and(|s| s.trim() == "0");
    if !on {
        eprintln!("{test}: skipped: IPv6 is disabled on lo");
    }
    on
}

/// A UDP port free on both ::1 and 127.0.0.1.
fn free_port_both() -> u16 {
    loop {
        let v6 = UdpSocket::bind("[::1]:0").unwrap();
        let port = v6.local_addr().unwrap().port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// `cmd` (a `convoy` command, possibly inside a namespace) as `convoy
/// serve --open --json --listen LISTEN`, once it says it listens.
fn serve(mut cmd: Command, listen: &str, s: &Site) -> Proc {
    let out = s.dir.path().join(format!(
        "serve-{}.json",
        listen.replace(['[', ']', ':'], "_")
    ));
    cmd.args(["serve", "--open", "--json", "--listen", listen, "--dir"])
        .arg(&s.store)
        .arg("--key")
        .arg(&s.key)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null());
    let mut p = spawn_command(&mut cmd);
    let start = Instant::now();
    loop {
        let said = std::fs::read_to_string(&out).unwrap_or_default();
        if said.contains("\"listening\"") {
            return p;
        }
        if let Some(c) = p.0.as_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                panic!("convoy serve --listen {listen} exited: {status}");
            }
        }
        // Generous: a loaded 2-core machine starts servers slowly.
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "convoy serve --listen {listen}: never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    spawn_command(&mut cmd).wait_output(TRANSFER_LIMIT)
}

/// `convoy send FILE ADDR` then `convoy get` of it back, both with one
/// connected socket; asserts both finish and the copy is identical.
fn send_and_get(convoy: impl Fn() -> Command, addr: &str, s: &Site, file: &Path, what: &str) {
    let mut send = convoy();
    send.arg("send")
        .arg(file)
        .arg(addr)
        .arg("--server-key")
        .arg(&s.pubkey)
        .args(["--single-path", "--json"]);
    let out = run(send);
    assert!(
        out.status.success(),
        "{what}: send to {addr} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("send --json");
    let remote: SocketAddr = doc["paths"][0]["remote"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        remote,
        addr.parse().unwrap(),
        "{what}: the path's remote is the dialled address"
    );
    let back = s
        .dir
        .path()
        .join(format!("back-{}", what.replace(' ', "-")));
    let mut get = convoy();
    get.arg("get")
        .arg(file.file_name().unwrap())
        .arg(addr)
        .arg("--server-key")
        .arg(&s.pubkey)
        .args(["--single-path", "-o"])
        .arg(&back);
    let out = run(get);
    assert!(
        out.status.success(),
        "{what}: get from {addr} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::read(file).unwrap() == std::fs::read(&back).unwrap(),
        "{what}: the copy differs"
    );
}

#[test]
fn ipv6_loopback_send_and_get() {
    if !ipv6_on_loopback("ipv6_loopback_send_and_get") {
        return;
    }
    let s = site("v6");
    let file = s.dir.path().join("v6.bin");
    make_file(&file, 3_000_000, 61);
    let addr = format!("[::1]:{}", free_port_both());
    let _server = serve(Command::new(bin()), &addr, &s);
    send_and_get(|| Command::new(bin()), &addr, &s, &file, "IPv6 loopback");
}

/// A server on [::] takes IPv4 clients too (IPv4-mapped), unless the host
/// made IPv6 sockets IPv6-only.
#[test]
fn dual_stack_server_takes_ipv4_and_ipv6() {
    if !ipv6_on_loopback("dual_stack_server_takes_ipv4_and_ipv6") {
        return;
    }
    let s = site("dual");
    let file = s.dir.path().join("dual.bin");
    make_file(&file, 2_000_000, 62);
    let port = free_port_both();
    let _server = serve(Command::new(bin()), &format!("[::]:{port}"), &s);
    send_and_get(
        || Command::new(bin()),
        &format!("[::1]:{port}"),
        &s,
        &file,
        "IPv6 to [::]",
    );
    let v6only = std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only").unwrap_or_default();
    if v6only.trim() == "1" {
        eprintln!(
            "dual_stack_server_takes_ipv4_and_ipv6: IPv4 part skipped: net.ipv6.bindv6only = 1"
        );
        return;
    }
    std::fs::remove_file(s.store.join("dual.bin")).unwrap();
    send_and_get(
        || Command::new(bin()),
        &format!("127.0.0.1:{port}"),
        &s,
        &file,
        "IPv4 to [::]",
    );
}

/// The server's host has two addresses on one interface, 10.77.0.2
/// (primary: the kernel's pick for anything back to the client) and
/// 10.77.0.3; IPv6 likewise fd00:77::11 (in the client's prefix, so
/// the kernel's pick by longest match) and fd00:78::3. The
/// client dials the address the kernel would not pick; without
/// IP_PKTINFO the server's replies leave from the other one, the client's
/// connected socket drops them, and its handshake times out.
#[test]
fn wildcard_server_answers_from_dialled_address() {
    let test = "wildcard_server_answers_from_dialled_address";
    let Some(client) = Netns::new(test, "pk-c") else {
        return;
    };
    let Some(server) = Netns::new(test, "pk-s") else {
        return;
    };
    client.veth("vc", &server, "vs");
    client.ip(&["addr", "add", "10.77.0.1/24", "dev", "vc"]);
    server.ip(&["addr", "add", "10.77.0.2/24", "dev", "vs"]);
    server.ip(&["addr", "add", "10.77.0.3/24", "dev", "vs"]);
    // nodad: usable at once, not tentative for a second or two.
    client.ip(&["addr", "add", "fd00:77::10/64", "dev", "vc", "nodad"]);
    server.ip(&["addr", "add", "fd00:77::11/64", "dev", "vs", "nodad"]);
    server.ip(&["addr", "add", "fd00:78::3/64", "dev", "vs", "nodad"]);
    client.ip(&["-6", "route", "add", "fd00:78::/64", "dev", "vc"]);
    let s = site("pktinfo");
    let file = s.dir.path().join("dialled.bin");
    make_file(&file, 2_000_000, 63);
    let in_client = || client.command(bin());
    let port = 4433;
    {
        let _srv = serve(server.command(bin()), &format!("0.0.0.0:{port}"), &s);
        send_and_get(
            in_client,
            &format!("10.77.0.3:{port}"),
            &s,
            &file,
            "IPv4 on 0.0.0.0",
        );
    }
    std::fs::remove_file(s.store.join("dialled.bin")).unwrap();
    let _srv = serve(server.command(bin()), &format!("[::]:{port}"), &s);
    send_and_get(
        in_client,
        &format!("[fd00:78::3]:{port}"),
        &s,
        &file,
        "IPv6 on [::]",
    );
    std::fs::remove_file(s.store.join("dialled.bin")).unwrap();
    send_and_get(
        in_client,
        &format!("10.77.0.3:{port}"),
        &s,
        &file,
        "IPv4 on [::]",
    );
}

//! `convoy serve` as a service manager runs it, with real processes:
//! SIGTERM in the middle of ten vehicles' uploads (it stops taking new
//! ones, answers the commits in flight, exits within 10 s, loses nothing
//! it acknowledged, and every upload resumes after the restart), and
//! SIGHUP (the registry and the TLS certificate are read again).

mod net_support;
mod service_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use net_support::{make_file, partial_size, server_log, server_log_with, spawn, Proc, TempDir};
use service_support::{convoy, make_certificate, ok, Fleet};

fn signal(server: &Proc, sig: i32) {
    let pid = server.0.as_ref().expect("running").id() as i32;
    // SAFETY: kill only sends a signal to our own child.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

/// `convoy send FILES…` as vehicle `who`, in the background.
fn send_all(f: &Fleet, who: &str, files: &[PathBuf]) -> Proc {
    let mut args: Vec<String> = vec!["send".into()];
    args.extend(files.iter().map(|p| p.to_str().unwrap().to_owned()));
    args.push(f.addr());
    for a in [
        "--server-key",
        f.pubkey.to_str().unwrap(),
        "--idle-timeout",
        "5",
    ] {
        args.push(a.into());
    }
    args.push("--identity".into());
    args.push(f.key_of(who).to_str().unwrap().into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    spawn(&args, &[])
}

/// The names a `convoy send` run was told are stored, and the offsets
/// it resumed from.
fn acknowledged(stdout: &str) -> (BTreeSet<String>, Vec<u64>) {
    let mut names = BTreeSet::new();
    let mut resumed = Vec::new();
    for line in stdout.lines() {
        let Some((_, rest)) = line.split_once(": stored as ") else {
            continue;
        };
        names.insert(rest.split(" (").next().unwrap().to_owned());
        if let Some((_, r)) = rest.split_once("resumed from ") {
            let n: String = r.chars().take_while(char::is_ascii_digit).collect();
            resumed.push(n.parse().unwrap());
        }
    }
    (names, resumed)
}

/// "VEHICLE/NAME" of every upload the server logged as stored (its log
/// is JSON lines, `--log-format json`; a line cut by reading while it is
/// written is skipped).
fn logged_stored(log: &str) -> BTreeSet<String> {
    log.lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            (v["message"] == "stored").then(|| {
                format!(
                    "{}/{}",
                    v["vehicle"].as_str().unwrap_or("?"),
                    v["name"].as_str().unwrap_or("?")
                )
            })
        })
        .collect()
}

#[test]
fn sigterm_during_ten_uploads_answers_what_it_began_and_loses_nothing() {
    let names: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut f = Fleet::start("sigterm", &refs, &["--log-format", "json"]);
    // Each vehicle: small files (commits every few ms) around a large one
    // (a partial file in progress at the signal).
    let mut files: Vec<Vec<PathBuf>> = Vec::new();
    for (i, v) in names.iter().enumerate() {
        let dir = f.dir.path().join(format!("src-{v}"));
        std::fs::create_dir(&dir).unwrap();
        let list: Vec<PathBuf> = (0..16)
            .map(|j| {
                let p = dir.join(format!("{v}-{j:02}.bin"));
                let size = if j == 4 { 12_000_000 } else { 128_000 };
                make_file(&p, size, (i * 100 + j + 1) as u64);
                p
            })
            .collect();
        files.push(list);
    }
    let mut clients: Vec<Proc> = names
        .iter()
        .zip(&files)
        .map(|(v, list)| send_all(&f, v, list))
        .collect();
    // Uploads are running: some stored, a large one part way.
    let start = Instant::now();
    while !(logged_stored(&server_log(&f.store)).len() >= 10 && partial_size(&f.store) >= 2_000_000)
    {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "uploads never got going:\n{}",
            server_log(&f.store)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The metrics see the uploads in progress and the commits' latency.
    let page = Command::new("curl")
        .args(["-s", "--max-time", "20"])
        .arg(format!("{}/metrics", f.base_url()))
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&page.stdout).into_owned();
    let figure = |name: &str| -> f64 {
        page.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{name}: {page}"))
    };
    assert!(figure("convoy_uploads_in_progress") >= 1.0, "{page}");
    assert!(
        figure("convoy_upload_commit_seconds_count") >= 10.0,
        "{page}"
    );
    signal(&f.server, libc::SIGTERM);
    let signalled = Instant::now();
    let child = f.server.0.as_mut().unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(10),
            "still running 10 s after SIGTERM:\n{}",
            server_log(&f.store)
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let exit = signalled.elapsed();
    let log = server_log(&f.store);
    assert!(status.success(), "exit {status}:\n{log}");
    assert!(
        log.contains("\"message\":\"stopping: no new connections"),
        "{log}"
    );
    assert!(log.contains("closing"), "{log}");
    eprintln!(
        "server exited {:.0} ms after SIGTERM",
        exit.as_secs_f64() * 1e3
    );
    for l in log
        .lines()
        .filter(|l| l.contains("stopping:") || l.contains("commit"))
    {
        eprintln!("{l}");
    }
    let cut = partial_size(&f.store);
    assert!(cut > 0, "no upload was cut part way: nothing to resume");

    // Everything acknowledged is there, byte for byte, and every commit
    // the server finished was acknowledged (none left unanswered).
    let mut acked_all = BTreeSet::new();
    for ((v, c), list) in names.iter().zip(&mut clients).zip(&files) {
        let out = c.wait_output(Duration::from_secs(60));
        let (acked, _) = acknowledged(&String::from_utf8_lossy(&out.stdout));
        for name in &acked {
            let src = list
                .iter()
                .find(|p| p.file_name().unwrap() == name.as_str());
            let stored = std::fs::read(f.store.join(v).join(name)).unwrap();
            assert!(
                stored == std::fs::read(src.unwrap()).unwrap(),
                "{v}/{name} acknowledged but not intact"
            );
            acked_all.insert(format!("{v}/{name}"));
        }
    }
    assert!(!acked_all.is_empty());
    // Every commit the server finished was answered before it closed,
    // and each client heard of every answer: a small file's "stored" is
    // not held behind the large upload the drain cut (the clients took
    // confirmations in order once, and those after the cut one were
    // never heard of, though durable).
    let stored = logged_stored(&log);
    assert!(
        log.contains("every commit answered") && !log.contains("drain limit reached"),
        "{log}"
    );
    assert_eq!(
        acked_all, stored,
        "the server stored files its clients never heard of, or the reverse"
    );
    for vn in &stored {
        let (v, name) = vn.split_once('/').unwrap();
        let i: usize = v[1..].parse().unwrap();
        let src = files[i].iter().find(|p| p.file_name().unwrap() == name);
        assert!(std::fs::read(f.store.join(vn)).unwrap() == std::fs::read(src.unwrap()).unwrap());
    }
    eprintln!(
        "committed before the exit: {}, of which the clients heard of {}",
        stored.len(),
        acked_all.len()
    );

    // After a restart every upload completes, the cut ones from their
    // partial files.
    f.restart();
    let mut resumed_bytes = 0;
    for ((v, list), c) in names.iter().zip(&files).zip(
        names
            .iter()
            .zip(&files)
            .map(|(v, list)| send_all(&f, v, list))
            .collect::<Vec<_>>(),
    ) {
        let mut c = c;
        let out = c.wait_output(Duration::from_secs(180));
        assert!(
            out.status.success(),
            "{v}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            server_log(&f.store)
        );
        let (acked, resumed) = acknowledged(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(acked.len(), list.len(), "{v}");
        resumed_bytes += resumed.iter().sum::<u64>();
        for p in list {
            let name = p.file_name().unwrap();
            assert!(
                std::fs::read(f.store.join(v).join(name)).unwrap() == std::fs::read(p).unwrap()
            );
        }
    }
    assert!(resumed_bytes > 0, "no upload resumed from its partial file");
    eprintln!(
        "acknowledged before the signal: {} uploads; resumed after the restart: {resumed_bytes} bytes",
        acked_all.len()
    );
}

/// Whether curl, trusting only `ca`, completes an HTTPS request.
fn trusts(f: &Fleet, ca: &Path) -> bool {
    Command::new("curl")
        .args(["-s", "-o", "/dev/null", "--max-time", "20", "--cacert"])
        .arg(ca)
        .arg(format!("{}/healthz", f.base_url()))
        .status()
        .unwrap()
        .success()
}

#[test]
fn sighup_reloads_the_registry_and_the_certificate() {
    let certs = TempDir::new("hup-certs");
    let (cert, key) = make_certificate(certs.path());
    let old_ca = certs.path().join("old-ca.pem");
    std::fs::copy(&cert, &old_ca).unwrap();
    let f = Fleet::start(
        "sighup",
        &["v1", "v2"],
        &["--http-tls", cert.to_str().unwrap(), key.to_str().unwrap()],
    );
    assert!(trusts(&f, &old_ca));

    // A renewed certificate: new connections get it after SIGHUP.
    let renewed = TempDir::new("hup-renewed");
    let (new_cert, new_key) = make_certificate(renewed.path());
    std::fs::copy(&new_cert, &cert).unwrap();
    std::fs::copy(&new_key, &key).unwrap();
    assert!(trusts(&f, &old_ca), "changed before SIGHUP");
    let mut args = vec!["fleet", "revoke", "v2"];
    let catalog = f.catalog_args();
    args.extend(catalog.iter().map(String::as_str));
    ok(&convoy(&args));
    signal(&f.server, libc::SIGHUP);
    let log = server_log_with(
        &f.store,
        "TLS certificate reloaded",
        Duration::from_secs(20),
    );
    assert!(
        log.contains("SIGHUP: registry reloaded registered=3 revoked=1"),
        "{log}"
    );
    assert!(log.contains("SIGHUP: TLS certificate reloaded"), "{log}");
    assert!(
        trusts(&f, &new_cert),
        "the renewed certificate is not served"
    );
    assert!(!trusts(&f, &old_ca), "the old certificate is still served");

    // A broken pair is refused and the one in use stays.
    std::fs::write(&cert, "not a certificate\n").unwrap();
    signal(&f.server, libc::SIGHUP);
    let log = server_log_with(
        &f.store,
        "not reloaded, the old one stays",
        Duration::from_secs(20),
    );
    assert!(log.contains("not reloaded, the old one stays"), "{log}");
    assert!(trusts(&f, &new_cert));

    // The reloaded registry: v1 uploads, the revoked v2 is refused.
    let file = f.dir.path().join("h.bin");
    make_file(&file, 5000, 3);
    ok(&f.send("v1", &file, None));
    let out = f.send("v2", &file, None);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("v2 is revoked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Still serving after both signals.
    assert!(trusts(&f, &new_cert));
}

/// `/healthz` of a web view over plain HTTP answers 200.
fn healthy(http: u16) -> bool {
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "20",
        ])
        .arg(format!("http://127.0.0.1:{http}/healthz"))
        .output()
        .unwrap();
    out.stdout == b"200"
}

#[test]
fn serve_takes_a_config_file_that_flags_override() {
    let dir = TempDir::new("serve-config");
    let (key, _) = net_support::keygen(dir.path());
    std::fs::create_dir(dir.path().join("store")).unwrap();
    // Relative paths in the file are relative to it.
    let (port, http) = (net_support::free_port(), convoy_testkit::free_port());
    let cfg = dir.path().join("serve.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:{port}\"\ndir = \"store\"\nkey = \"server.key\"\nfleet = true\n\
             http = \"127.0.0.1:{http}\"\nmax_upload = \"1GB\"\n"
        ),
    )
    .unwrap();
    let mut server = spawn(&["serve", "--config", cfg.to_str().unwrap()], &[]);
    service_support::wait_tcp(http);
    assert!(healthy(http));
    assert!(dir.path().join("store/.convoy-catalog.db").exists());
    signal(&server, libc::SIGTERM);
    assert!(server.wait_output(Duration::from_secs(10)).status.success());

    // The packaged example, with flags overriding its paths and addresses.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/serve.toml");
    let (port, http) = (net_support::free_port(), convoy_testkit::free_port());
    let store = dir.path().join("store");
    let server = spawn(
        &[
            "serve",
            "--config",
            example.to_str().unwrap(),
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--http",
            &format!("127.0.0.1:{http}"),
            "--dir",
            store.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
        &[],
    );
    service_support::wait_tcp(http);
    assert!(healthy(http));
    drop(server);

    // An unknown key, or a wrong kind of value: one line, no server.
    for (text, says) in [
        ("listn = \"127.0.0.1:1\"\n", "unknown key \"listn\""),
        ("fleet = \"yes\"\n", "fleet: expected true or false"),
        ("dir = \n", "serve.toml"),
    ] {
        std::fs::write(&cfg, text).unwrap();
        let out = convoy(&["serve", "--config", cfg.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains(says), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

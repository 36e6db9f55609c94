//! A fleet for the data-service tests: a server key, registered vehicles
//! and an operator, `convoy serve` in fleet mode with the web view, and
//! helpers to run `convoy send/get/agent` as one of them and to ask the
//! JSON API.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::net_support::{bin, free_port, keygen, serve, Proc, TempDir};

pub struct Fleet {
    pub dir: TempDir,
    pub store: PathBuf,
    pub key: PathBuf,
    pub pubkey: PathBuf,
    pub port: u16,
    pub http: u16,
    pub server: Proc,
    pub extra: Vec<String>,
}

pub fn convoy(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().unwrap()
}

pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Fleet {
    /// A server with vehicles `names` (keys DIR/NAME.key) and operator `ops`.
    pub fn start(tag: &str, names: &[&str], extra: &[&str]) -> Fleet {
        Fleet::start_at(tag, names, extra, None)
    }

    /// The same with its store (and catalog) in `store`, an existing
    /// directory such as a small tmpfs, instead of DIR/store.
    pub fn start_at(tag: &str, names: &[&str], extra: &[&str], store: Option<&Path>) -> Fleet {
        let dir = TempDir::new(tag);
        let (key, pubkey) = keygen(dir.path());
        let store = match store {
            Some(s) => s.to_owned(),
            None => {
                let s = dir.path().join("store");
                std::fs::create_dir(&s).unwrap();
                s
            }
        };
        let s = store.to_str().unwrap().to_owned();
        let mut catalog: Vec<String> = vec!["--dir".into(), s];
        if let Some(i) = extra.iter().position(|a| *a == "--catalog") {
            catalog = vec!["--catalog".into(), extra[i + 1].to_owned()];
        }
        for (name, op) in names.iter().map(|n| (*n, false)).chain([("ops", true)]) {
            let k = dir.path().join(format!("{name}.key"));
            ok(&convoy(&["keygen", "--out", k.to_str().unwrap()]));
            let mut args = vec!["fleet", "add", name];
            let pubk = format!("{}.pub", k.display());
            args.push(&pubk);
            if op {
                args.push("--operator");
            }
            args.extend(catalog.iter().map(String::as_str));
            ok(&convoy(&args));
        }
        let port = free_port();
        let http = convoy_testkit::free_port();
        let mut all: Vec<String> = vec![
            "--fleet".into(),
            "--http".into(),
            format!("127.0.0.1:{http}"),
        ];
        all.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = all.iter().map(String::as_str).collect();
        let server = serve(port, &store, &key, &args);
        wait_tcp(http);
        Fleet {
            dir,
            store,
            key,
            pubkey,
            port,
            http,
            server,
            extra: all,
        }
    }

    pub fn restart(&mut self) {
        self.server.kill();
        let args: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        self.server = serve(self.port, &self.store, &self.key, &args);
        wait_tcp(self.http);
    }

    /// An agent configuration for `who` spooling in `spool`, with
    /// `extra` TOML (sources, segments) appended.
    pub fn agent_config(&self, who: &str, spool: &Path, extra: &str) -> PathBuf {
        let cfg = self.dir.path().join(format!("{who}.toml"));
        std::fs::write(
            &cfg,
            format!(
                "key = {:?}\nserver = {:?}\nserver_key = {:?}\nspool = {:?}\nidle_timeout = 3\n{extra}",
                self.key_of(who),
                self.addr(),
                self.pubkey,
                spool
            ),
        )
        .unwrap();
        cfg
    }

    /// `convoy agent --until-idle [extra] --config CFG` fed `input` on its
    /// standard input (a stdin source), to its end.
    pub fn agent_until_idle(cfg: &Path, extra: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut agent = Command::new(bin())
            .args(["agent", "--until-idle"])
            .args(extra)
            .arg("--config")
            .arg(cfg)
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        agent
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        agent.wait_with_output().unwrap()
    }

    pub fn key_of(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.key"))
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `convoy send FILE` as `who`.
    pub fn send(&self, who: &str, file: &Path, prefix: Option<&str>) -> Output {
        let mut c = Command::new(bin());
        c.arg("send").arg(file).arg(self.addr());
        c.args([
            "--server-key",
            self.pubkey.to_str().unwrap(),
            "--idle-timeout",
            "5",
        ]);
        c.arg("--identity").arg(self.key_of(who));
        if let Some(p) = prefix {
            c.args(["--prefix", p]);
        }
        c.output().unwrap()
    }

    /// `convoy get NAME --out OUT` as `who`.
    pub fn get(&self, who: &str, name: &str, out: &Path) -> Output {
        Command::new(bin())
            .args([
                "get",
                name,
                &self.addr(),
                "--server-key",
                self.pubkey.to_str().unwrap(),
            ])
            .arg("--out")
            .arg(out)
            .arg("--identity")
            .arg(self.key_of(who))
            .args(["--idle-timeout", "5"])
            .output()
            .unwrap()
    }

    pub fn token(&self, who: &str) -> String {
        let mut args = vec!["fleet", "token", who, "--key", self.key.to_str().unwrap()];
        let catalog = self.catalog_args();
        args.extend(catalog.iter().map(String::as_str));
        ok(&convoy(&args)).trim().to_owned()
    }

    pub fn catalog_args(&self) -> Vec<String> {
        match self.extra.iter().position(|a| a == "--catalog") {
            Some(i) => vec!["--catalog".into(), self.extra[i + 1].clone()],
            None => vec!["--dir".into(), self.store.to_str().unwrap().into()],
        }
    }

    /// The certificate `--http-tls` was given, if the web view is HTTPS.
    pub fn tls_cert(&self) -> Option<&str> {
        let i = self.extra.iter().position(|a| a == "--http-tls")?;
        Some(&self.extra[i + 1])
    }

    /// `http://127.0.0.1:PORT` or, with `--http-tls`, `https://…`.
    pub fn base_url(&self) -> String {
        let scheme = if self.tls_cert().is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}", self.http)
    }

    /// curl, trusting the web view's certificate when it has one.
    pub fn curl(&self) -> Command {
        let mut c = Command::new("curl");
        if let Some(cert) = self.tls_cert() {
            c.args(["--cacert", cert]);
        }
        c
    }

    /// GET `path` with `who`'s token: (status, body, headers).
    pub fn http_get(&self, who: &str, path: &str, range: Option<&str>) -> (u16, Vec<u8>, String) {
        let token = self.token(who);
        let url = format!("{}{path}", self.base_url());
        let mut c = self.curl();
        c.args([
            "-s",
            "-D",
            "-",
            "-H",
            &format!("Authorization: Bearer {token}"),
        ]);
        if let Some(r) = range {
            c.args(["-H", &format!("Range: {r}")]);
        }
        let out = c.arg(url).output().expect("curl");
        let text = out.stdout;
        let split = text
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("headers");
        let head = String::from_utf8_lossy(&text[..split]).into_owned();
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, text[split + 4..].to_vec(), head)
    }

    pub fn api(&self, who: &str, path: &str) -> serde_json::Value {
        let (status, body, _) = self.http_get(who, path, None);
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    }

    /// Waits until `f` holds for the uploads the operator sees.
    pub fn wait_uploads(
        &self,
        what: &str,
        f: impl Fn(&[serde_json::Value]) -> bool,
    ) -> Vec<serde_json::Value> {
        let start = Instant::now();
        loop {
            let v = self.api("ops", "/api/uploads?limit=5000");
            let rows = v["uploads"].as_array().unwrap().clone();
            if f(&rows) {
                return rows;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "never: {what}; uploads: {rows:#?}\nserver log:\n{}",
                crate::net_support::server_log(&self.store)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

pub fn wait_tcp(port: u16) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "HTTP never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// JSON lines of `n` position fixes of one vehicle, one second apart.
pub fn drive_lines(n: usize, t0_s: i64, lat0: f64) -> String {
    let mut s = String::new();
    for i in 0..n {
        let t = (t0_s + i as i64) * 1_000_000_000;
        s += &format!(
            "{{\"t_ns\":{t},\"path\":\"Vehicle.CurrentLocation.Latitude\",\"value\":{}}}\n",
            lat0 + i as f64 * 1e-4
        );
        s += &format!(
            "{{\"t_ns\":{t},\"path\":\"Vehicle.CurrentLocation.Longitude\",\"value\":7.68}}\n"
        );
        s += &format!(
            "{{\"t_ns\":{t},\"path\":\"Vehicle.Speed\",\"value\":{}}}\n",
            30 + i % 20
        );
    }
    s
}

/// Every sample in the telemetry segments stored for `vehicle`.
pub fn stored_samples(store: &Path, vehicle: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let mut stack = vec![store.join(vehicle)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(".jsonl.zst") {
                let raw = zstd::decode_all(std::fs::File::open(&p).unwrap()).unwrap();
                for line in String::from_utf8(raw).unwrap().lines() {
                    out.push(serde_json::from_str(line).unwrap());
                }
            }
        }
    }
    out
}

/// Every sample time in the telemetry segments stored for `vehicle`.
pub fn stored_sample_times(store: &Path, vehicle: &str) -> Vec<i64> {
    let mut out: Vec<i64> = stored_samples(store, vehicle)
        .iter()
        .filter(|v| v["path"] == "Vehicle.CurrentLocation.Latitude")
        .map(|v| v["t_ns"].as_i64().unwrap())
        .collect();
    out.sort();
    out
}

/// A self-signed certificate for 127.0.0.1 and its key: (cert, key).
pub fn make_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=convoy test", "-addext"])
        .args(["subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

/// `promtool check metrics` (Debian's prometheus package) accepts `text`.
pub fn promtool_check(text: &str) {
    use std::io::Write;
    use std::process::Stdio;
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (scripts/setup.sh installs Debian's prometheus)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Now, in whole seconds since the Unix epoch (telemetry's time base).
pub fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

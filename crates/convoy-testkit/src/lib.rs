//! Real servers for tests, started per test and removed when dropped:
//!
//! * [`Postgres`]: a throwaway cluster from Debian's PostgreSQL package
//!   (`initdb` + `pg_ctl` in a temporary directory, trust auth, loopback
//!   only); as root it runs as the `postgres` user, since PostgreSQL
//!   refuses to run as root.
//! * [`S3`]: versitygw, a real S3-compatible server (Apache-2.0, from
//!   the Go module proxy; `scripts/setup.sh` installs it into
//!   `.tools/bin`), serving a temporary directory.
//! * [`chromium`]: the path of Debian's Chromium and the flags that work
//!   on a machine with no outside network.
//!
//! A missing tool fails the test with the command that installs it: these
//! tests are part of `make test` and must not pass by skipping.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A TCP port free on 127.0.0.1 right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn wait_for_port(port: u16, what: &str, timeout: Duration) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < timeout,
            "{what} did not listen on port {port} within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The repository root (this crate is crates/convoy-testkit).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("repo root")
        .to_owned()
}

fn find_tool(name: &str, extra_dirs: &[PathBuf]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra_dirs.iter().cloned())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn postgres_bin_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| rd.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs.reverse();
    dirs
}

/// A PostgreSQL cluster of its own, stopped and deleted on drop.
pub struct Postgres {
    dir: tempfile::TempDir,
    pg_ctl: PathBuf,
    pub port: u16,
}

impl Postgres {
    pub fn start() -> Postgres {
        let bins = postgres_bin_dirs();
        let (Some(initdb), Some(pg_ctl)) = (find_tool("initdb", &bins), find_tool("pg_ctl", &bins))
        else {
            panic!("PostgreSQL's initdb/pg_ctl not found: run scripts/setup.sh (apt-get install postgresql)");
        };
        let dir = tempfile::Builder::new()
            .prefix("convoy-pg-")
            .tempdir()
            .expect("temp dir");
        let data = dir.path().join("data");
        let port = free_port();
        if is_root() {
            run(Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path()));
        }
        run(as_postgres(&initdb)
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
            .arg(&data));
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=on",
            dir.path().display()
        );
        run(as_postgres(&pg_ctl)
            .args(["-w", "-t", "60", "-l"])
            .arg(dir.path().join("log"))
            .arg("-D")
            .arg(&data)
            .args(["-o", &opts, "start"]));
        wait_for_port(port, "PostgreSQL", Duration::from_secs(30));
        Postgres { dir, pg_ctl, port }
    }

    /// A connection URL for the `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the server at once, as a crash would (`-m immediate`).
    pub fn kill(&self) {
        let _ = as_postgres(&self.pg_ctl)
            .args(["-m", "immediate", "-D"])
            .arg(self.dir.path().join("data"))
            .arg("stop")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.kill();
    }
}

fn as_postgres(tool: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(tool);
        c
    } else {
        Command::new(tool)
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An S3-compatible server (versitygw on a temporary directory) with one
/// bucket, killed and deleted on drop.
pub struct S3 {
    child: Child,
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: String,
}

/// Where versitygw is: `$CONVOY_VERSITYGW`, `.tools/bin/versitygw`, PATH.
pub fn versitygw() -> PathBuf {
    if let Some(p) = std::env::var_os("CONVOY_VERSITYGW") {
        return PathBuf::from(p);
    }
    find_tool("versitygw", &[repo_root().join(".tools/bin")]).unwrap_or_else(|| {
        panic!("versitygw (an S3-compatible server) not found: run scripts/setup.sh, which installs it into .tools/bin with `go install`")
    })
}

impl S3 {
    pub fn start() -> S3 {
        let dir = tempfile::Builder::new()
            .prefix("convoy-s3-")
            .tempdir()
            .expect("temp dir");
        let bucket = "fleet".to_owned();
        std::fs::create_dir_all(dir.path().join("root").join(&bucket)).expect("bucket dir");
        std::fs::create_dir_all(dir.path().join("meta")).expect("meta dir");
        let port = free_port();
        let (access_key, secret_key) = ("convoytest".to_owned(), "convoytestsecret".to_owned());
        let child = Command::new(versitygw())
            .args(["--access", &access_key, "--secret", &secret_key])
            .args(["--port", &format!("127.0.0.1:{port}")])
            .arg("posix")
            .arg("--sidecar")
            .arg(dir.path().join("meta"))
            .arg(dir.path().join("root"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir.path().join("log")).expect("log"),
            ))
            .spawn()
            .expect("start versitygw");
        wait_for_port(port, "versitygw", Duration::from_secs(30));
        S3 {
            child,
            dir,
            port,
            bucket,
            access_key,
            secret_key,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The file an object is kept in (versitygw's posix layout).
    pub fn object_path(&self, key: &str) -> PathBuf {
        self.dir.path().join("root").join(&self.bucket).join(key)
    }

    /// Sets the variables convoy's S3 store reads for this server.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID".into(), self.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY".into(), self.secret_key.clone()),
            ("AWS_ENDPOINT".into(), self.endpoint()),
            ("AWS_REGION".into(), "us-east-1".into()),
            ("AWS_ALLOW_HTTP".into(), "true".into()),
        ]
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's Chromium, or a panic saying how to install it.
pub fn chromium() -> PathBuf {
    find_tool("chromium", &[]).unwrap_or_else(|| {
        panic!("chromium not found: run scripts/setup.sh (apt-get install chromium)")
    })
}

/// Flags for headless Chromium on a machine without outside network
/// (no background connections, no sandbox as root, a fresh profile).
pub fn chromium_flags(profile: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

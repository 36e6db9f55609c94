"""A fleet data service of real processes: `convoy serve --fleet --http`
with registered vehicles and an operator, and `convoy agent`s, for the
demo, the benchmark and the web view's browser test."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from ..runner import convoy_binary


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args: str | Path, check: bool = True, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([str(convoy_binary()), *map(str, args)], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"convoy {' '.join(map(str, args))}: {p.stderr.strip()}")
    return p


def http_json(port: int, path: str, token: str, cafile: Path | None = None) -> dict:
    """GET a JSON document of the web view's API on 127.0.0.1 (over TLS,
    trusting `cafile`, when it is given)."""
    scheme = "https" if cafile else "http"
    req = urllib.request.Request(f"{scheme}://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"})
    ctx = ssl.create_default_context(cafile=str(cafile)) if cafile else None
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        return json.loads(r.read())


def backlog_priority_key(priority: str) -> str:
    """The agent configuration's `backlog_priority` line, or nothing for
    the agent's default ("normal"), so a run at the default writes the
    configuration users write."""
    return f'backlog_priority = "{priority}"\n' if priority != "normal" else ""


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made by the
    openssl command: (cert, key)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", "/CN=convoy test",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


@dataclass
class Service:
    root: Path
    vehicles: list[str]
    extra: list[str] = field(default_factory=list)
    port: int = 0
    http: int = 0
    proc: subprocess.Popen | None = None
    agents: list[subprocess.Popen] = field(default_factory=list)
    # Serve HTTPS with a certificate made for the run (`--http-tls`).
    tls: bool = False
    cert: Path | None = None

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.store = self.root / "store"
        self.store.mkdir(exist_ok=True)
        self.key = self.root / "server.key"
        if not self.key.exists():
            run("keygen", "--out", self.key)
        for name in [*self.vehicles, "ops"]:
            k = self.key_of(name)
            if not k.exists():
                run("keygen", "--out", k)
                role = ["--operator"] if name == "ops" else []
                run("fleet", "add", name, f"{k}.pub", *role, "--dir", self.store)

    def key_of(self, name: str) -> Path:
        return self.root / f"{name}.key"

    def start(self) -> "Service":
        self.port = self.port or free_port(socket.SOCK_DGRAM)
        self.http = self.http or free_port()
        tls_args: list[str] = []
        if self.tls:
            self.cert, key = make_certificate(self.root)
            tls_args = ["--http-tls", str(self.cert), str(key)]
        log = open(self.root / "server.log", "ab")
        self.proc = subprocess.Popen(
            [str(convoy_binary()), "serve", "--fleet", "--listen", f"127.0.0.1:{self.port}",
             "--dir", str(self.store), "--key", str(self.key), "--http", f"127.0.0.1:{self.http}",
             *tls_args, *self.extra],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.http), timeout=0.2).close()
                break
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("convoy serve did not start: " + self.log())
                time.sleep(0.05)
        return self

    def log(self) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        for a in self.agents:
            if a.poll() is None:
                a.terminate()
        for a in self.agents:
            try:
                a.wait(timeout=10)
            except subprocess.TimeoutExpired:
                a.kill()
        self.agents.clear()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def __enter__(self) -> "Service":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def token(self, who: str = "ops") -> str:
        return run("fleet", "token", who, "--key", self.key, "--dir", self.store).stdout.strip()

    def page_url(self, who: str = "ops") -> str:
        # The fragment never leaves the browser; the page trades it for a cookie.
        return f"{self.base_url}/#token={self.token(who)}"

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.http}"

    def api(self, path: str, who: str = "ops", token: str | None = None) -> dict:
        return http_json(self.http, path, token or self.token(who), self.cert if self.tls else None)

    def agent_config(self, name: str, sources: str, extra: str = "", server: str | None = None,
                     idle_timeout: float = 5) -> Path:
        """Writes `name`'s agent configuration: this server on loopback, or
        `server` (an emulated link's address when the agent runs in
        `convoy emu`'s client namespace). The idle timeout is shorter than
        the agent's 15 s so that tests see a dead link within seconds."""
        cfg = self.root / f"{name}.agent.toml"
        cfg.write_text(
            f'key = "{self.key_of(name)}"\nserver = "{server or f"127.0.0.1:{self.port}"}"\n'
            f'server_key = "{self.key}.pub"\nspool = "{self.root / (name + ".spool")}"\n'
            f"idle_timeout = {idle_timeout}\n{extra}\n{sources}\n")
        return cfg

    def start_agent(self, cfg: Path, stdin=subprocess.DEVNULL) -> subprocess.Popen:
        log = open(cfg.with_suffix(".log"), "ab")
        p = subprocess.Popen([str(convoy_binary()), "agent", "--config", str(cfg)],
                             stdin=stdin, stdout=log, stderr=log)
        self.agents.append(p)
        return p

    def agent_status(self, cfg: Path) -> dict:
        return json.loads(run("agent", "status", "--json", "--config", cfg).stdout)


def drive_lines(n: int, t0_s: float, lat0: float, lon0: float = 7.68, step_s: float = 1.0) -> str:
    """JSON lines of `n` position fixes with speed, `step_s` apart."""
    out = []
    for i in range(n):
        t = int((t0_s + i * step_s) * 1e9)
        out.append(json.dumps({"t_ns": t, "path": "Vehicle.CurrentLocation.Latitude", "value": lat0 + i * 1e-4}))
        out.append(json.dumps({"t_ns": t, "path": "Vehicle.CurrentLocation.Longitude", "value": lon0}))
        out.append(json.dumps({"t_ns": t, "path": "Vehicle.Speed", "value": 30.0 + i % 20}))
    return "\n".join(out) + "\n"

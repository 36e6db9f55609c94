"""HTTPS PUT per file with whole-file retry, as openpilot's uploader does
it, and telemetry POSTed over HTTPS.

Server namespace: a small HTTPS server (Python's ThreadingHTTPServer
behind TLS, a certificate made for the run, HTTP/1.1 keep-alive). `PUT
/files/NAME` stores the body under a temporary name and renames it when
the whole body has come, then answers 200; `POST /telemetry` takes JSON
lines and stamps each sample's arrival.

Vehicle namespace, one process:
* files: one at a time, logs first (openpilot uploads its small logs
  before camera files), each one PUT of the whole file with a 10 s socket
  timeout; any failure starts the whole file again after 1 s;
* telemetry: samples wait in memory and go out in one POST as soon as the
  previous POST was answered (one request in flight, so batches grow with
  the round trip), retried until answered.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import ssl
import sys
import threading
import time
from pathlib import Path

from .workload import (CpuRecorder, incumbent_vehicle, incumbent_vehicle_command, read_acked, read_acks,
                       read_samples, serve_socket, watch_inboxes, write_ack)

NAME = "https-put"
PORT = 8443
TIMEOUT_S = 10


def unavailable() -> str | None:
    return None


def prepare(root: Path, server_ip: str) -> None:
    (root / "uploads").mkdir()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root: Path = Path()
    log_lock = threading.Lock()

    def log_message(self, *args) -> None:  # quiet: the run's own records say what came
        pass

    def _body(self):
        left = int(self.headers.get("Content-Length", "0"))
        while left > 0:
            chunk = self.rfile.read(min(left, 1 << 16))
            if not chunk:
                raise ConnectionError("body cut short")
            left -= len(chunk)
            yield chunk

    def _reply(self, code: int) -> None:
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_PUT(self) -> None:
        name = Path(self.path).name
        if not self.path.startswith("/files/") or not name.endswith(".bin"):
            return self._reply(404)
        tmp = self.root / "uploads" / f".{name}.{threading.get_ident()}.part"
        try:
            with tmp.open("wb") as f:
                for chunk in self._body():
                    f.write(chunk)
        except (ConnectionError, OSError, TimeoutError):
            tmp.unlink(missing_ok=True)
            raise
        tmp.rename(self.root / "uploads" / name)
        with self.log_lock, open(self.root / "puts.jsonl", "a") as log:
            log.write(json.dumps({"name": name, "done_ns": time.time_ns()}) + "\n")
        self._reply(200)

    def do_POST(self) -> None:
        if self.path != "/telemetry":
            return self._reply(404)
        body = b"".join(self._body())
        now = time.time_ns()
        with self.log_lock, open(self.root / "arrivals.jsonl", "a") as log:
            for line in body.splitlines():
                if b"Latitude" in line:
                    log.write(json.dumps({"t_ns": json.loads(line)["t_ns"], "seen_ns": now}) + "\n")
        self._reply(200)


def _tick_forever(cpu: CpuRecorder) -> None:
    while True:
        cpu.tick()
        time.sleep(0.1)


def server_side(root: Path, server_ip: str) -> int:
    Handler.root = root
    httpd = http.server.ThreadingHTTPServer((server_ip, PORT), Handler)
    httpd.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(root / "cert.pem", root / "key.pem")
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    (root / "server-ready").touch()
    cpu = CpuRecorder(root, [os.getpid()])
    threading.Thread(target=_tick_forever, args=(cpu,), daemon=True).start()
    httpd.serve_forever()
    return 1


# ----------------------------------------------------------------------------
# The vehicle.


def _connection(root: Path, server_ip: str) -> http.client.HTTPSConnection:
    ctx = ssl.create_default_context(cafile=str(root / "cert.pem"))
    return http.client.HTTPSConnection(server_ip, PORT, timeout=TIMEOUT_S, context=ctx)


def _request(conn, method: str, path: str, body, length: int) -> None:
    conn.request(method, path, body=body, headers={"Content-Length": str(length)})
    resp = conn.getresponse()
    resp.read()
    if resp.status != 200:
        raise RuntimeError(f"{method} {path}: HTTP {resp.status}")


def _telemetry(root: Path, server_ip: str) -> None:
    pending: list[bytes] = []
    lock = threading.Condition()

    def on_sample(t_ns: int, payload: bytes) -> None:
        with lock:
            pending.append(payload)
            lock.notify()

    conn = serve_socket(root)
    threading.Thread(target=read_samples, args=(conn, on_sample), daemon=True).start()
    http_conn = _connection(root, server_ip)
    while True:
        with lock:
            while not pending:
                lock.wait()
            batch = pending[:]
        try:
            body = b"".join(batch)
            _request(http_conn, "POST", "/telemetry", body, len(body))
        except Exception as err:  # noqa: BLE001 -- any failure: a new connection, the same batch again
            print(f"telemetry: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
            http_conn.close()
            http_conn = _connection(root, server_ip)
            time.sleep(1)
            continue
        with lock:
            del pending[:len(batch)]


def _files(root: Path, server_ip: str) -> None:
    seen: set[str] = set()
    todo: list[tuple[int, float, Path]] = []
    conn = _connection(root, server_ip)
    while True:
        todo += [(0 if kind == "inbox-logs" else 1, time.time(), p) for p, kind in watch_inboxes(root, seen)]
        if not todo:
            time.sleep(0.1)
            continue
        todo.sort()
        _, _, path = todo.pop(0)
        while True:
            try:
                with path.open("rb") as f:
                    _request(conn, "PUT", f"/files/{path.name}", f, path.stat().st_size)
                write_ack(root, path.name)
                break
            except Exception as err:  # noqa: BLE001 -- any failure: the whole file again
                print(f"{path.name}: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
                conn.close()
                conn = _connection(root, server_ip)
                time.sleep(1)


def vehicle(root: Path, server_ip: str) -> int:
    return incumbent_vehicle(_files, _telemetry, root, server_ip)


def vehicle_command(root: Path, server_ip: str) -> list[str]:
    return incumbent_vehicle_command(NAME, root, server_ip)


# File name → when the server confirmed it stored (the vehicle's log).
acks = read_acks
acked = read_acked


def received(root: Path) -> dict:
    def lines(name):
        p = root / name
        return [json.loads(x) for x in p.read_text().splitlines() if x.endswith("}")] if p.exists() else []

    arrivals = lines("arrivals.jsonl")
    puts = lines("puts.jsonl")
    return {"arrivals": [(a["seen_ns"], a["t_ns"]) for a in arrivals],
            "files": {p.name: p for p in (root / "uploads").iterdir() if p.name.endswith(".bin")
                      and not p.name.startswith(".")},
            "puts": puts}

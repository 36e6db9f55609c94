"""convoy: `convoy agent` in the vehicle's namespace → `convoy serve
--fleet` with the web view in the server's.

The agent reads the feeder's samples on its socket source (segments close
after `SEGMENT_S`, and the live lane sends them ahead of any backlog), the
logs from one inbox as class `previews` and the camera file from another
as class `bulk` (classes go most urgent first: a log does not wait behind
the camera file). A poller of the map's API stamps when the server shows
each sample; the agent's catalog says when each file was acknowledged as
durable.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path

from ..fleet.bench import stored_times
from ..fleet.service import Service, http_json
from ..runner import convoy_binary
from .workload import CAMERA_INBOX, LOG_INBOX, CpuRecorder, socket_path

NAME = "convoy"
VEHICLE = "car"
PORT = 4433
HTTP = 8080
# A telemetry segment's longest life: the price of batching into
# segments, paid by every sample's freshness (up to this, half of it on
# average).
SEGMENT_S = 0.2
POLL_S = 0.02


def prepare(root: Path, server_ip: str) -> None:
    """Keys, the registry, an operator token and the agent's config."""
    svc = Service(root, [VEHICLE])  # keys and the registry; started in the namespace
    (root / "ops.token").write_text(svc.token("ops"))
    (root / "agent.toml").write_text(
        f'key = "{svc.key_of(VEHICLE)}"\nserver = "{server_ip}:{PORT}"\n'
        f'server_key = "{svc.key}.pub"\nspool = "{root / "spool"}"\nidle_timeout = 5\n'
        f"[segments]\nmax_seconds = {SEGMENT_S}\n"
        f'[[source]]\nkind = "socket"\npath = "{socket_path(root)}"\n'
        f'[[source]]\nkind = "directory"\npath = "{root / LOG_INBOX}"\nclass = "previews"\nsettle_seconds = 0.1\n'
        f'[[source]]\nkind = "directory"\npath = "{root / CAMERA_INBOX}"\nclass = "bulk"\nsettle_seconds = 0.1\n')


def server_side(root: Path, server_ip: str) -> int:
    log = open(root / "server.log", "ab")
    serve = subprocess.Popen(
        [str(convoy_binary()), "serve", "--fleet", "--listen", f"{server_ip}:{PORT}",
         "--dir", str(root / "store"), "--key", str(root / "server.key"), "--http", f"127.0.0.1:{HTTP}"],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    token = (root / "ops.token").read_text().strip()
    seen = open(root / "seen.jsonl", "a", buffering=1)
    last = 0
    ready = False
    cpu = CpuRecorder(root, [serve.pid])
    # Runs until the emulator ends the namespace (the client side is done).
    while serve.poll() is None:
        try:
            vehicles = http_json(HTTP, "/api/vehicles", token)["vehicles"]
        except OSError:
            time.sleep(0.05)
            continue
        cpu.tick()
        if not ready:
            (root / "server-ready").touch()
            ready = True
        now = time.time_ns()
        cur = next((v["last"] for v in vehicles if v["name"] == VEHICLE and v["last"]), None)
        if cur and cur["t_ns"] > last:
            last = cur["t_ns"]
            seen.write(json.dumps({"seen_ns": now, "t_ns": last}) + "\n")
        time.sleep(POLL_S)
    return serve.returncode or 0


def vehicle_command(root: Path, server_ip: str) -> list[str]:
    return [str(convoy_binary()), "agent", "--config", str(root / "agent.toml")]


def acks(root: Path) -> dict[str, int]:
    """File name → when the server acknowledged it (the agent's catalog)."""
    try:
        c = sqlite3.connect(f"file:{root / 'spool' / 'agent.db'}?mode=ro", uri=True, timeout=5)
        try:
            rows = c.execute("SELECT name, done_ns FROM items WHERE state = 'acked'").fetchall()
        finally:
            c.close()
    except sqlite3.Error:
        return {}
    return {Path(name).name: done for name, done in rows if name.endswith(".bin")}


def acked(root: Path) -> set[str]:
    return set(acks(root))


def received(root: Path) -> dict:
    """What the server side got: `seen` (poll time, newest sample shown),
    `stored` (sample times in the store, a repeat for each copy) and
    `files` (name → path of the stored copy)."""
    seen = [(d["seen_ns"], d["t_ns"]) for d in map(json.loads, (root / "seen.jsonl").read_text().splitlines())]
    store = root / "store" / VEHICLE
    files = {p.name: p for p in store.rglob("*.bin")} if store.is_dir() else {}
    return {"seen": seen, "stored": stored_times(root / "store", VEHICLE), "files": files}

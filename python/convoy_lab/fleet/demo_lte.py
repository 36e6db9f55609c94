"""The fleet demo over emulated LTE: one `convoy emu` with a link per
vehicle (each a real drive trace of the shared set, uplink and downlink,
from its own offset), the agents in the emulator's client namespace, the
server, its map and the screenshot's browser in the server namespace.

Vehicle i reaches the server at 10.7.i.2, so its traffic crosses link i
both ways; the server listens on every address of its namespace. The two
sides hand over through files in the run's directory: the client side
writes `vehicles-done` when the drive ends, the server side screenshots
the map and writes `demo.json`, then the client side stops its agents
and exits (which ends the emulator).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from ..experiments.catalog import shared_traces_dir
from ..runner import convoy_binary
from .browser import screenshot
from .service import Service, http_json

PORT = 4433
HTTP = 8080
# The shared drives' uplinks, one per vehicle in turn: a fleet on three
# operators, each vehicle from its own point of its drive.
TRACES = ["TMobile-LTE-short", "Verizon-LTE-short", "ATT-LTE-driving-2016"]


def say(msg: str) -> None:
    print(f"fleet demo: {msg}", file=sys.stderr, flush=True)


def link_specs(count: int, traces_dir: Path, prefix: str = "car", queue: str = "200") -> list[str]:
    """`convoy emu` links PREFIX0, PREFIX1, …: each a shared drive trace
    both ways, from its own offset, 20 ms one way, and `queue` (`convoy emu`'s
    `queue=`; 200 packets of drop-tail by default)."""
    specs = []
    for i in range(count):
        t = traces_dir / TRACES[i % len(TRACES)]
        specs.append(f"{prefix}{i}:up={t}.up,down={t}.down,offset={(i * 17) % 100}s,delay=20ms,queue={queue}")
    return specs


def server_side(root: Path, overlay: Path, vehicles: int) -> int:
    log = open(root / "server.log", "ab")
    serve = subprocess.Popen(
        [str(convoy_binary()), "serve", "--fleet", "--listen", f"0.0.0.0:{PORT}", "--dir", str(root / "store"),
         "--key", str(root / "server.key"), "--http", f"127.0.0.1:{HTTP}", "--overlay", str(overlay)],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    token = (root / "ops.token").read_text().strip()
    while not (root / "vehicles-done").exists():
        if serve.poll() is not None:
            return 1
        time.sleep(0.5)
    url = f"http://127.0.0.1:{HTTP}/#token={token}"
    doc: dict = {}
    try:
        doc["page"] = screenshot(url, root.parent / "fleet-map.png", wait_markers=vehicles, timeout_s=60)
    except Exception as e:  # the figures below still say what arrived
        doc["page_error"] = str(e).splitlines()[0]
    uploads = http_json(HTTP, "/api/uploads?limit=5000", token)["uploads"]
    doc["uploads"] = len(uploads)
    doc["log_files"] = sum(1 for u in uploads if u["kind"] == "file")
    doc["samples"] = sum(u["samples"] for u in uploads)
    doc["on_map"] = sum(1 for v in http_json(HTTP, "/api/vehicles", token)["vehicles"] if v["last"])
    (root / "demo.json").write_text(json.dumps(doc))
    serve.terminate()
    serve.wait(timeout=10)
    return 0


def client_side(root: Path, names: list[str], seconds: float) -> int:
    agents = [subprocess.Popen([str(convoy_binary()), "agent", "--config", str(root / f"{n}.agent.toml")],
                               stdout=open(root / f"{n}.agent.log", "ab"), stderr=subprocess.STDOUT)
              for n in names]
    start = time.time()
    n = 0
    while time.time() - start < seconds:
        time.sleep(10)
        n += 1
        for name in names:
            inbox = root / f"{name}.inbox"
            tmp = root / f"{name}.log.tmp"
            tmp.write_bytes(os.urandom(64 * 1024))
            tmp.rename(inbox / f"drive-{n:03}.log")
        print(f"fleet demo: {int(time.time() - start)} s of {seconds:g}", file=sys.stderr, flush=True)
    (root / "vehicles-done").touch()
    deadline = time.time() + 180
    while not (root / "demo.json").exists() and time.time() < deadline:
        time.sleep(0.5)
    for a in agents:
        a.terminate()
    for a in agents:
        a.wait(timeout=20)
    return 0


def demo_lte(ids: list[str], names: list[str], fcd: Path, overlay: Path, seconds: int, out: Path,
             sources) -> int:
    root = out / "fleet"
    svc = Service(root, names)  # keys and the registry; the server starts in the emulator
    (root / "ops.token").write_text(svc.token("ops"))
    specs = link_specs(len(names), shared_traces_dir())
    for i, (vid, name) in enumerate(zip(ids, names)):
        inbox = root / f"{name}.inbox"
        inbox.mkdir(parents=True, exist_ok=True)
        svc.agent_config(name, sources(fcd, vid, inbox), server=f"10.7.{i}.2:{PORT}")
    me = [sys.executable, "-m", "convoy_lab.fleet.demo_lte"]
    cmd = [str(convoy_binary()), "emu"]
    for spec in specs:
        cmd += ["--link", spec]
    cmd += ["--server", "exec " + shlex.join([*me, "side-server", str(root), str(overlay), str(len(names))]),
            "--", *me, "side-client", str(root), str(seconds), *names]
    (out / "command.txt").write_text(shlex.join(cmd) + "\n")
    for spec in specs:
        say(f"link {spec}")
    p = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, timeout=seconds + 300)
    result = root / "demo.json"
    if p.returncode != 0 or not result.exists():
        print(f"fleet demo: the emulated run failed (exit {p.returncode}); logs in {root}", file=sys.stderr)
        return 1
    doc = json.loads(result.read_text())
    page = doc.get("page", {})
    print(f"vehicles on the map: {page.get('markers', doc['on_map'])} of {len(names)} (over emulated LTE links)")
    print(f"uploads: {doc['uploads']} ({doc['log_files']} log files), telemetry samples indexed: {doc['samples']}")
    if "page_error" in doc:
        print(f"screenshot failed: {doc['page_error']}")
        return 1
    print(f"screenshot: {out / 'fleet-map.png'}")
    return 0


def main(argv: list[str]) -> int:
    if argv[0] == "side-server":
        return server_side(Path(argv[1]), Path(argv[2]), int(argv[3]))
    if argv[0] == "side-client":
        return client_side(Path(argv[1]), argv[3:], float(argv[2]))
    print("run it as `python -m convoy_lab.fleet demo`", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

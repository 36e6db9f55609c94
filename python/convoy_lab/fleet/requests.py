"""Request latency (issue 36): `python -m convoy_lab.fleet.requests`.

Real processes, on loopback or (`--emu`) with the agent behind an
emulated LTE link (`convoy emu`, a shared trace, random loss): one `convoy serve --fleet --http` and one
`convoy agent`. Requests are issued through the JSON API (`POST
/api/requests`, an operator's token) and timed in the catalog: the
server stamps a request when it is queued and again when the vehicle's
acknowledgement arrives, on one clock.

* online: `n` status requests, one every `gap` seconds, to a connected
  vehicle; the figure is queued → acknowledged;
* offline: the agent is stopped, `m` requests are queued, the agent is
  started again; the figure is from the agent's start (process start,
  handshake, control stream) to each acknowledgement, an upper bound on
  "after reconnecting".
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from ..runner import convoy_binary
from .service import Service, http_json

SERVER_IP = "10.7.0.2"
PORT = 4433
HTTP = 8080
VEHICLE = "truck-7"


def post_request(s: Service, token: str, vehicle: str, request: dict) -> tuple[int, dict]:
    import ssl
    cafile = getattr(s, "cert", None) if getattr(s, "tls", False) else None
    ctx = ssl.create_default_context(cafile=str(cafile)) if cafile else None
    req = urllib.request.Request(
        f"{s.base_url}/api/requests", data=json.dumps({"vehicle": vehicle, "request": request}).encode(),
        method="POST", headers={"Authorization": f"Bearer {token}", "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_rows(s: Service, token: str, ids: set[int], until: str, timeout: float) -> dict[int, dict]:
    """The rows of `ids` once every one is acknowledged (`until="acked"`)
    or finished (`"finished"`)."""
    deadline = time.time() + timeout
    while True:
        rows = {r["id"]: r for r in s.api("/api/requests?limit=5000", token=token)["requests"] if r["id"] in ids}
        key = "acked_ns" if until == "acked" else "finished_ns"
        if len(rows) == len(ids) and all(r[key] for r in rows.values()):
            return rows
        if time.time() > deadline:
            raise RuntimeError(f"requests not {until} after {timeout} s: "
                               f"{[r for r in rows.values() if not r[key]][:3]}\n{s.log()[-2000:]}")
        time.sleep(0.05)


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def summary(xs: list[float]) -> dict:
    return {"n": len(xs), "p50_ms": percentile(xs, 50), "p99_ms": percentile(xs, 99), "max_ms": max(xs)}


def wait_control(s: Service, since: int, timeout: float = 20) -> None:
    deadline = time.time() + timeout
    while s.log().count("control stream open") <= since:
        if time.time() > deadline:
            raise RuntimeError("the agent opened no control stream:\n" + s.log()[-2000:])
        time.sleep(0.02)


class Remote:
    """The server side as the measurement sees it: its API and its log."""

    def __init__(self, root: Path, http: int):
        self.root, self.http, self.base_url = root, http, f"http://127.0.0.1:{http}"

    def api(self, path: str, token: str) -> dict:
        return http_json(self.http, path, token)

    def log(self) -> str:
        return (self.root / "server.log").read_text(errors="replace")


def measure(s, token: str, n: int, m: int, gap: float, stop_agent, start_agent) -> dict:
    """Online then offline figures; `stop_agent()` returns once the agent
    is gone, `start_agent()` starts it and returns its start (ns)."""
    wait_control(s, 0)
    ids = set()
    for _ in range(n):
        code, doc = post_request(s, token, VEHICLE, {"type": "status"})
        assert code == 200, doc
        ids.add(doc["request"]["id"])
        time.sleep(gap)
    rows = wait_rows(s, token, ids, "finished", 60)
    online = [(r["acked_ns"] - r["created_ns"]) / 1e6 for r in rows.values()]
    done = [(r["finished_ns"] - r["created_ns"]) / 1e6 for r in rows.values()]
    assert all(r["state"] == "done" for r in rows.values())
    stop_agent()
    opened = s.log().count("control stream open")
    ids = set()
    for _ in range(m):
        code, doc = post_request(s, token, VEHICLE, {"type": "status"})
        assert code == 200, doc
        ids.add(doc["request"]["id"])
    time.sleep(0.5)
    queued = s.api("/api/requests?limit=5000", token=token)["requests"]
    assert all(r["state"] == "queued" for r in queued if r["id"] in ids), "acknowledged while offline?"
    restart_ns = start_agent()
    wait_control(s, opened, 60)
    rows = wait_rows(s, token, ids, "acked", 60)
    offline = [(r["acked_ns"] - restart_ns) / 1e6 for r in rows.values()]
    return {"online_ack": summary(online), "online_done": summary(done),
            "offline_ack_after_agent_start": summary(offline)}


def side_server(root: Path, n: int, m: int, gap: float) -> int:
    """In the emulator's server namespace: the server, and the requests."""
    log = open(root / "server.log", "ab")
    serve = subprocess.Popen(
        [str(convoy_binary()), "serve", "--fleet", "--listen", f"{SERVER_IP}:{PORT}",
         "--dir", str(root / "store"), "--key", str(root / "server.key"), "--http", f"127.0.0.1:{HTTP}"],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    token = (root / "ops.token").read_text().strip()
    s = Remote(root, HTTP)

    def signal(name: str, wait_for: str | None = None) -> None:
        (root / name).touch()
        deadline = time.time() + 60
        while wait_for and not (root / wait_for).exists():
            if time.time() > deadline:
                raise RuntimeError(f"the client side never wrote {wait_for}")
            time.sleep(0.02)

    def start() -> int:
        signal("start-agent", "restart.json")
        return json.loads((root / "restart.json").read_text())["start_ns"]

    try:
        doc = measure(s, token, n, m, gap, lambda: signal("stop-agent", "agent-stopped"), start)
        (root / "requests.json").write_text(json.dumps(doc))
    finally:
        signal("done")
    serve.wait()
    return 0


def side_client(root: Path) -> int:
    """In the emulator's client namespace: the agent, stopped and started
    when the server side asks."""
    cmd = [str(convoy_binary()), "agent", "--config", str(root / "agent.toml")]
    out = open(root / "agent.log", "ab")
    agent = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.time() + 600
    restarted = False
    while not (root / "done").exists() and time.time() < deadline:
        if (root / "stop-agent").exists() and not (root / "agent-stopped").exists():
            agent.terminate()
            agent.wait(timeout=20)
            (root / "agent-stopped").touch()
        if (root / "start-agent").exists() and not restarted:
            restarted = True
            start_ns = time.time_ns()
            agent = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
            (root / "restart.json").write_text(json.dumps({"start_ns": start_ns}))
        time.sleep(0.01)
    agent.terminate()
    agent.wait(timeout=20)
    return 0


def emu_run_dir(root: Path, source: str, vehicle: str = VEHICLE) -> Path:
    """A fresh run directory for an emulator bench: the vehicle's and the
    operator's keys, the registry, the operator's token and the agent's
    config as `vehicle` (`source`, its [[source]] table), for the two
    sides to read.
    Returns the directory, resolved."""
    root = root.resolve()
    subprocess.run(["rm", "-rf", str(root)], check=False)
    svc = Service(root, [vehicle])  # keys and the registry; not started here
    (root / "ops.token").write_text(svc.token("ops"))
    (root / "agent.toml").write_text(
        f'key = "{svc.key_of(vehicle)}"\nserver = "{SERVER_IP}:{PORT}"\n'
        f'server_key = "{svc.key}.pub"\nspool = "{root / "spool"}"\nidle_timeout = 5\n'
        + source)
    return root


def bench_emu(root: Path, link: str, n: int, m: int, gap: float) -> dict:
    import shlex
    import sys
    root = emu_run_dir(root, f'[[source]]\nkind = "socket"\npath = "{root.resolve() / "agent.sock"}"\n')
    me = [sys.executable, "-m", "convoy_lab.fleet.requests"]
    cmd = [str(convoy_binary()), "emu", "--link", link,
           "--server", "exec " + shlex.join([*me, "side-server", str(root), str(n), str(m), str(gap)]),
           "--", *me, "side-client", str(root)]
    (root / "command.txt").write_text(shlex.join(cmd) + "\n")
    p = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, timeout=900)
    if not (root / "requests.json").exists():
        raise RuntimeError(f"convoy emu exited with {p.returncode} and no figures; see {root}")
    return {"transport": f"convoy emu --link {link}", **json.loads((root / "requests.json").read_text())}


def bench(root: Path, n: int = 100, m: int = 20, gap: float = 0.05) -> dict:
    subprocess.run(["rm", "-rf", str(root)], check=False)
    with Service(root, [VEHICLE]) as s:
        token = s.token()
        cfg = s.agent_config(VEHICLE, f'[[source]]\nkind = "socket"\npath = "{root / "t.sock"}"\n')
        agents = [s.start_agent(cfg)]

        def stop() -> None:
            agents[-1].terminate()
            agents[-1].wait(timeout=15)

        def start() -> int:
            t = time.time_ns()
            agents.append(s.start_agent(cfg))
            return t

        return measure(s, token, n, m, gap, stop, start)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["side-server"]:
        return side_server(Path(argv[1]), int(argv[2]), int(argv[3]), float(argv[4]))
    if argv[:1] == ["side-client"]:
        return side_client(Path(argv[1]))
    ap = argparse.ArgumentParser(prog="python -m convoy_lab.fleet.requests", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results/fleet-requests"))
    ap.add_argument("-n", type=int, default=100, help="requests to the connected vehicle")
    ap.add_argument("-m", type=int, default=20, help="requests queued while it is away")
    ap.add_argument("--gap", type=float, default=0.05, help="seconds between online requests")
    ap.add_argument("--emu", metavar="LINK", help="run the agent behind `convoy emu --link LINK` (needs root), "
                    "e.g. lte:up=TRACE.up,down=TRACE.down,delay=20ms,loss=2%%")
    a = ap.parse_args(argv)
    doc = bench_emu(a.out, a.emu, a.n, a.m, a.gap) if a.emu else {"transport": "loopback", **bench(a.out, a.n, a.m)}
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

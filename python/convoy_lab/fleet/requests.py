"""Request latency (issue 36): `python -m convoy_lab.fleet requests`.

Real processes on loopback: one `convoy serve --fleet --http` and one
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

from .service import Service


def post_request(s: Service, token: str, vehicle: str, request: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        f"{s.base_url}/api/requests", data=json.dumps({"vehicle": vehicle, "request": request}).encode(),
        method="POST", headers={"Authorization": f"Bearer {token}", "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
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


def bench(root: Path, n: int = 100, m: int = 20, gap: float = 0.05) -> dict:
    subprocess.run(["rm", "-rf", str(root)], check=False)
    with Service(root, ["truck-7"]) as s:
        token = s.token()
        cfg = s.agent_config("truck-7", f'[[source]]\nkind = "socket"\npath = "{root / "t.sock"}"\n')
        agent = s.start_agent(cfg)
        wait_control(s, 0)
        ids = set()
        for _ in range(n):
            code, doc = post_request(s, token, "truck-7", {"type": "status"})
            assert code == 200, doc
            ids.add(doc["request"]["id"])
            time.sleep(gap)
        rows = wait_rows(s, token, ids, "finished", 30)
        online = [(r["acked_ns"] - r["created_ns"]) / 1e6 for r in rows.values()]
        done = [(r["finished_ns"] - r["created_ns"]) / 1e6 for r in rows.values()]
        assert all(r["state"] == "done" for r in rows.values())

        agent.terminate()
        agent.wait(timeout=15)
        opened = s.log().count("control stream open")
        ids = set()
        for _ in range(m):
            code, doc = post_request(s, token, "truck-7", {"type": "status"})
            assert code == 200, doc
            ids.add(doc["request"]["id"])
        time.sleep(0.5)
        queued = s.api("/api/requests?limit=5000", token=token)["requests"]
        assert all(r["state"] == "queued" for r in queued if r["id"] in ids), "acknowledged while offline?"
        restart_ns = time.time_ns()
        s.start_agent(cfg)
        wait_control(s, opened)
        rows = wait_rows(s, token, ids, "acked", 30)
        offline = [(r["acked_ns"] - restart_ns) / 1e6 for r in rows.values()]
        return {"transport": "loopback", "online_ack": summary(online), "online_done": summary(done),
                "offline_ack_after_agent_start": summary(offline)}


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m convoy_lab.fleet requests", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results/fleet-requests"))
    ap.add_argument("-n", type=int, default=100, help="requests to the connected vehicle")
    ap.add_argument("-m", type=int, default=20, help="requests queued while it is away")
    a = ap.parse_args(argv)
    doc = bench(a.out, a.n, a.m)
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

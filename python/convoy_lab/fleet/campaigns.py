"""Triggered windows (issue 36): `python -m convoy_lab.fleet.campaigns`.

Real processes on loopback: one `convoy serve --fleet --http` and one
`convoy agent` with a stdin source. A campaign (speed and brake recorded,
`Vehicle.Speed > 30 && rising(Vehicle.Private.Brake)`, 0.5 s before and
0.3 s after) is deployed through the JSON API (`POST /api/campaigns`, an
operator's token) while the agent is away; once the agent has
acknowledged and runs it, 100 Hz of speed and brake with one press a
second is written to the agent's stdin, the agent drains its spool and
exits, and every window the server stored is compared with the samples
fed in its span. The figure is samples missing (and samples outside their
window, and duplicated) across all triggers.

`--emu LINK` runs the agent behind `convoy emu --link LINK` (needs root),
the server in the emulator's server namespace, as
`convoy_lab.fleet.requests --emu` does.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from ..runner import convoy_binary
from .service import Service

VEHICLE = "truck-7"
PRE_NS, POST_NS = 500_000_000, 300_000_000
CAMPAIGN = """name = "brake"
pre_seconds = 0.5
post_seconds = 0.3
[[signal]]
name = "Vehicle.Speed"
[[signal]]
name = "Vehicle.Private.Brake"
[[trigger]]
name = "press"
when = "Vehicle.Speed > 30 && rising(Vehicle.Private.Brake)"
"""


def deploy(s: Service, token: str, text: str, vehicles: list[str]) -> tuple[int, dict]:
    req = urllib.request.Request(
        f"{s.base_url}/api/campaigns", data=json.dumps({"campaign": text, "vehicles": vehicles}).encode(),
        method="POST", headers={"Authorization": f"Bearer {token}", "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def drive(triggers: int, t0_ns: int) -> tuple[str, list[tuple[int, str]], list[int]]:
    """Lines for the agent, every (t_ns, path) fed, and the trigger times:
    second 0 at 20 km/h (a press, no trigger), then `triggers` seconds at
    40 km/h with a press each, then a second without one."""
    lines, fed, fired = [], [], []
    for i in range((triggers + 2) * 100):
        t, second = t0_ns + i * 10_000_000, i // 100
        speed = 20.0 if second == 0 else 40.0
        pressed = 50 <= i % 100 < 60 and second <= triggers
        if i % 100 == 50 and 1 <= second <= triggers:
            fired.append(t)
        for path, value in (("Vehicle.Speed", speed), ("Vehicle.Private.Brake", pressed)):
            lines.append(json.dumps({"t_ns": t, "path": path, "value": value}))
            fed.append((t, path))
    return "\n".join(lines) + "\n", fed, fired


def stored_windows(store: Path) -> dict[int, list[tuple[int, str]]]:
    out = {}
    for p in (store / VEHICLE).rglob("*.jsonl.zst"):
        if "/campaign/brake/" not in str(p):
            continue
        t = int(p.name.removesuffix(".jsonl.zst").rsplit("-", 1)[1])
        raw = subprocess.run(["zstd", "-dc", str(p)], capture_output=True, check=True).stdout.decode()
        out[t] = [(v["t_ns"], v["path"]) for v in map(json.loads, raw.splitlines())]
    return out


def score(windows: dict, fed: list, fired: list) -> dict:
    missing = extra = duplicated = expected = 0
    for t in fired:
        want = {x for x in fed if t - PRE_NS <= x[0] <= t + POST_NS}
        got = windows.get(t, [])
        expected += len(want)
        duplicated += len(got) - len(set(got))
        missing += len(want - set(got))
        extra += len(set(got) - want)
    return {"triggers": len(fired), "windows_stored": len(windows), "samples_expected": expected,
            "samples_missing": missing, "samples_outside_window": extra, "samples_duplicated": duplicated}


def wait_file(path: Path, timeout: float) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        if time.time() > deadline:
            raise RuntimeError(f"{path} never appeared")
        time.sleep(0.02)


def side_server(root: Path, triggers: int) -> int:
    """In the emulator's server namespace: the server, the deployment and
    the count."""
    from .requests import HTTP, PORT, SERVER_IP, Remote
    log = open(root / "server.log", "ab")
    serve = subprocess.Popen(
        [str(convoy_binary()), "serve", "--fleet", "--listen", f"{SERVER_IP}:{PORT}",
         "--dir", str(root / "store"), "--key", str(root / "server.key"), "--http", f"127.0.0.1:{HTTP}"],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        time.sleep(1)
        ops = (root / "ops.token").read_text().strip()
        s = Remote(root, HTTP)
        code, doc = deploy(s, ops, CAMPAIGN, [VEHICLE])
        assert code == 200, doc
        request, queued = doc["campaign"]["requests"][0], time.time()
        while True:
            row = next(r for r in s.api(f"/api/requests?vehicle={VEHICLE}", token=ops)["requests"] if r["id"] == request)
            if row["state"] in ("done", "failed") or time.time() > queued + 60:
                break
            time.sleep(0.05)
        assert row["state"] == "done", row
        (root / "campaign-running").touch()
        wait_file(root / "agent-done", 600)
        feed = json.loads((root / "feed.json").read_text())
        _, fed, fired = drive(triggers, feed["t0_ns"])
        doc = {"campaign_queued_to_running_ms": (row["finished_ns"] - row["created_ns"]) / 1e6,
               **score(stored_windows(root / "store"), fed, fired), "agent_exit": feed["exit"],
               "feed_to_agent_exit_s": feed["seconds"]}
        (root / "campaigns.json").write_text(json.dumps(doc))
    finally:
        (root / "done").touch()
        serve.terminate()
        serve.wait(timeout=20)
    return 0


def side_client(root: Path, triggers: int) -> int:
    """In the emulator's client namespace: the agent, fed once the campaign runs."""
    agent = subprocess.Popen([str(convoy_binary()), "agent", "--until-idle", "--config", str(root / "agent.toml")],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=open(root / "agent.log", "ab"))
    try:
        wait_file(root / "campaign-running", 120)
        t0 = (time.time_ns() // 10**9 - 3600) * 10**9
        lines, _, _ = drive(triggers, t0)
        started = time.time()
        agent.communicate(lines.encode(), timeout=600)
        (root / "feed.json").write_text(json.dumps({"t0_ns": t0, "exit": agent.returncode,
                                                    "seconds": round(time.time() - started, 2)}))
    finally:
        (root / "agent-done").touch()
        if agent.poll() is None:
            agent.kill()
    wait_file(root / "done", 120)
    return 0


def bench_emu(root: Path, link: str, triggers: int) -> dict:
    import shlex
    import sys
    from .requests import emu_run_dir
    root = emu_run_dir(root, '[[source]]\nkind = "stdin"\n', VEHICLE)
    me = [sys.executable, "-m", "convoy_lab.fleet.campaigns"]
    cmd = [str(convoy_binary()), "emu", "--link", link,
           "--server", "exec " + shlex.join([*me, "side-server", str(root), str(triggers)]),
           "--", *me, "side-client", str(root), str(triggers)]
    (root / "command.txt").write_text(shlex.join(cmd) + "\n")
    p = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, timeout=1200)
    if not (root / "campaigns.json").exists():
        raise RuntimeError(f"convoy emu exited with {p.returncode} and no figures; see {root}")
    return {"transport": f"convoy emu --link {link}", **json.loads((root / "campaigns.json").read_text())}


def bench(root: Path, triggers: int = 100) -> dict:
    subprocess.run(["rm", "-rf", str(root)], check=False)
    with Service(root, [VEHICLE]) as s:
        ops = s.token()
        code, doc = deploy(s, ops, CAMPAIGN, [VEHICLE])
        assert code == 200, doc
        request = doc["campaign"]["requests"][0]
        cfg = s.agent_config(VEHICLE, '[[source]]\nkind = "stdin"\n')
        agent = subprocess.Popen(
            [str(convoy_binary()), "agent", "--until-idle", "--config", str(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=open(root / "agent.log", "ab"))
        deadline = time.time() + 30
        while True:
            rows = s.api(f"/api/requests?vehicle={VEHICLE}", token=ops)["requests"]
            row = next(r for r in rows if r["id"] == request)
            if row["state"] in ("done", "failed"):
                break
            if time.time() > deadline:
                raise RuntimeError(f"campaign not running after 30 s: {row}")
            time.sleep(0.05)
        assert row["state"] == "done", row
        applied_ms = (row["finished_ns"] - row["created_ns"]) / 1e6
        lines, fed, fired = drive(triggers, (time.time_ns() // 10**9 - 3600) * 10**9)
        started = time.time()
        agent.communicate(lines.encode(), timeout=300)
        drained_s = time.time() - started
        windows = stored_windows(s.store)
    return {"transport": "loopback", **score(windows, fed, fired), "campaign_queued_to_running_ms": applied_ms,
            "feed_to_agent_exit_s": round(drained_s, 2), "agent_exit": agent.returncode}


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m convoy_lab.fleet.campaigns", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results/fleet-campaigns"))
    ap.add_argument("-n", "--triggers", type=int, default=100)
    ap.add_argument("--emu", metavar="LINK", help="run the agent behind `convoy emu --link LINK` (needs root), "
                    "e.g. lte:up=TRACE.up,down=TRACE.down,delay=20ms,loss=2%%")
    import sys
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["side-server"]:
        return side_server(Path(argv[1]), int(argv[2]))
    if argv[:1] == ["side-client"]:
        return side_client(Path(argv[1]), int(argv[2]))
    a = ap.parse_args(argv)
    doc = bench_emu(a.out, a.emu, a.triggers) if a.emu else bench(a.out, a.triggers)
    print(json.dumps(doc, indent=1))
    return 0 if doc["samples_missing"] == 0 and doc["windows_stored"] == doc["triggers"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m convoy_lab.fleet scale`: many real `convoy agent`s behind a
few shared emulated cells, uploading to one `convoy serve --fleet --http`.

One `convoy emu` has a link per cell (`cell0`, `cell1`, …), each a shared
drive trace both ways (demo_lte.link_specs). Vehicle i belongs to cell
i mod CELLS and dials the server at that cell's address, 10.7.c.2, so the
vehicles of a cell compete for its trace as they would for one cell's
air. The agents and their feeder run in the client namespace; the server,
with its indexer and web view, and a poller of the map's API run in the
server namespace.

Each vehicle's feeder writes a position fix into its agent's socket at
`--hz` and drops a log file into its inbox every `--log-every` s. When the
drive ends the feeders stop, the client side waits until every agent has
segmented and uploaded all it was given (the drain), then writes
`client.json` and `clients-done`; the server side reads the server's CPU
time and peak memory from /proc, writes `server.json` and stops. The
figures come from comparing what each feeder produced (`client.json`)
with the server's store and what the poller saw on the map.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from ..experiments.catalog import shared_traces_dir
from ..runner import convoy_binary
from .bench import fix, freshness_in, pct
from .demo_lte import link_specs
from .service import Service, backlog_priority_key, http_json

PORT = 4433
HTTP = 8080
# The poller keeps the page's schedule (crates/convoy-web/assets/app.js,
# `refreshSoon`): on each change of the live feed, at once, or no sooner
# than REFRESH_GAP_S after its last refresh began nor than twice what that
# took. It fetches the page's three tables one after another where the
# page fetches them at once, so it sees a sample a little later than the
# map shows it, never sooner.
REFRESH_GAP_S = 0.1
# With no change for this long the poller fetches anyway: a live feed that
# failed must not leave samples unseen (they would drop out of the
# freshness figures rather than count as late).
FEED_SILENT_S = 1.0
# Samples taken in the first seconds are ingested while a hundred agents
# connect at once; the steady state's freshness starts after them.
WARMUP_S = 10.0
# A sample taken in the last seconds of the drive is still in its open
# segment when the feeders stop; it is counted for loss, not freshness.
TAIL_S = 2.0
# Vehicle k of a cell is 10.7.CELL.(UE_FIRST + k) (the emulator has .1
# and .2).
UE_FIRST = 10
# Each cell's queue: a buffer of 200 packets per vehicle (UE), served round
# robin, as a cell's scheduler does (docs/MODELS.md); "200" is one shared
# drop-tail FIFO for the whole cell.
QUEUE = "per-ue:200"
TELEMETRY, BULK = 1, 3


def say(msg: str) -> None:
    print(f"fleet scale: {msg}", file=sys.stderr, flush=True)


def cell_of(i: int, cells: int) -> int:
    return i % cells


# ----------------------------------------------------------------------------
# The server namespace: the server, a poller of the map, /proc figures.


def proc_figures(pid: int) -> dict:
    """The process's CPU seconds (user + system) and memory (current and
    peak resident, kB) from /proc."""
    stat = open(f"/proc/{pid}/stat").read()
    fields = stat[stat.rindex(")") + 2:].split()
    tick = os.sysconf("SC_CLK_TCK")
    status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":" in line)
    kb = lambda k: int(status[k].split()[0])  # noqa: E731
    return {"cpu_s": (int(fields[11]) + int(fields[12])) / tick, "rss_kb": kb("VmRSS"), "peak_rss_kb": kb("VmHWM")}


def thread_sched(pid: int, comm: str) -> dict | None:
    """A named thread's time on a core and waiting for one (runnable but
    not running), seconds, from /proc's schedstat."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "comm").read_text().strip() == comm:
                on_cpu, runnable = (task / "schedstat").read_text().split()[:2]
                return {"cpu_s": int(on_cpu) / 1e9, "runqueue_s": int(runnable) / 1e9}
        except OSError:
            continue
    return None


def page_refresh(token: str) -> list[dict]:
    """What the page fetches on a refresh (its three tables), in turn
    rather than at once; returns the vehicles."""
    http_json(HTTP, "/api/uploads?limit=200", token)
    http_json(HTTP, "/api/requests?limit=50", token)
    return http_json(HTTP, "/api/vehicles", token)["vehicles"]


def follow_live_feed(token: str, changed: threading.Event) -> None:
    """Sets `changed` on each `change` event of the web view's live feed
    (`/api/events`), reconnecting as the page's EventSource does."""
    while True:
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{HTTP}/api/events",
                                         headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(req, timeout=60) as feed:
                for line in feed:
                    if line.startswith(b"event: change"):
                        changed.set()
        except (OSError, http.client.HTTPException):
            pass  # reconnect, as EventSource does
        time.sleep(0.5)


def server_side(root: Path) -> int:
    log = open(root / "server.log", "ab")
    serve = subprocess.Popen(
        [str(convoy_binary()), "serve", "--fleet", "--listen", f"0.0.0.0:{PORT}", "--dir", str(root / "store"),
         "--key", str(root / "server.key"), "--http", f"127.0.0.1:{HTTP}"],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    token = (root / "ops.token").read_text().strip()
    seen = open(root / "seen.jsonl", "a", buffering=1)
    last: dict[str, int] = {}
    idle = None
    changed = threading.Event()
    threading.Thread(target=follow_live_feed, args=(token, changed), daemon=True).start()
    began, took = float("-inf"), 0.0
    try:
        while not (root / "clients-done").exists():
            if serve.poll() is not None:
                return 1
            # The first pass fetches at once: the idle figures below.
            if idle is not None:
                changed.wait(timeout=FEED_SILENT_S)
            time.sleep(max(0.0, began + max(REFRESH_GAP_S, 2 * took) - time.monotonic()))
            # Cleared after the wait: what changed during it, this fetch sees.
            changed.clear()
            began = time.monotonic()
            try:
                vehicles = page_refresh(token)
            except (OSError, ValueError, http.client.HTTPException):
                changed.set()  # the change is still to be fetched
                time.sleep(0.1)
                continue
            now = time.time_ns()
            took = time.monotonic() - began
            if idle is None:  # the server is up and no agent has connected yet
                idle = proc_figures(serve.pid)
                idle["indexer"] = thread_sched(serve.pid, "convoy-indexer")
            for v in vehicles:
                t = (v.get("last") or {}).get("t_ns")
                if t and t > last.get(v["name"], 0):
                    last[v["name"]] = t
                    seen.write(json.dumps({"v": v["name"], "seen_ns": now, "t_ns": t}) + "\n")
        doc = {"idle": idle, "end": proc_figures(serve.pid)}
        doc["end"]["indexer"] = thread_sched(serve.pid, "convoy-indexer")
        (root / "server.json").write_text(json.dumps(doc))
    finally:
        serve.terminate()
        try:
            serve.wait(timeout=10)
        except subprocess.TimeoutExpired:
            serve.kill()
    return 0


# ----------------------------------------------------------------------------
# The client namespace: the agents and their feeders.


def spool_state(db: Path) -> tuple[int, int, int, int | None]:
    """(items not yet acknowledged, bulk items, newest telemetry segment's
    creation time, last acknowledgement time) of one agent's catalog."""
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        waiting = c.execute("SELECT COUNT(*) FROM items WHERE state NOT IN ('acked', 'dropped')").fetchone()[0]
        bulk = c.execute("SELECT COUNT(*) FROM items WHERE class = ?", (BULK,)).fetchone()[0]
        newest = c.execute("SELECT COALESCE(MAX(created_ns), 0) FROM items WHERE class = ?",
                           (TELEMETRY,)).fetchone()[0]
        done = c.execute("SELECT MAX(done_ns) FROM items WHERE state = 'acked'").fetchone()[0]
        return waiting, bulk, newest, done
    finally:
        c.close()


def drained(root: Path, name: str, logs: int, last_sample: int) -> int | None:
    """When the server acknowledged the last of what `name`'s agent was
    given (every log file and a segment holding its last sample), or None
    while some of it is still on the way."""
    spool = root / f"{name}.spool"
    # A segment made after the last sample's time is not proof enough: a
    # sample stamped just before a segment was cut can reach the agent just
    # after, and wait in the open file for the next one (the server was
    # stopped under it once, and the sample counted lost). The open file
    # first: the agent records a segment before it removes the open file.
    try:
        if (spool / "open-telemetry.jsonl").stat().st_size > 0:
            return None
    except FileNotFoundError:
        pass
    try:
        waiting, bulk, newest, done = spool_state(spool / "agent.db")
    except sqlite3.Error:
        return None
    return done if waiting == 0 and bulk >= logs and newest >= last_sample else None


def client_side(root: Path, names: list[str], seconds: float, hz: float, log_every: float, log_bytes: int,
                drain_max: float, agent_nice: int) -> int:
    # The vehicles' agents share this machine's cores with the server, as
    # they never would on the road; `agent_nice` lowers their priority.
    # The vehicles' own addresses on their cells' interfaces (this side
    # runs in the emulator's client namespace).
    subprocess.run(["ip", "-batch", str(root / "addresses.ip")], check=True)
    agents = [subprocess.Popen([str(convoy_binary()), "agent", "--config", str(root / f"{n}.agent.toml")],
                               stdout=open(root / f"{n}.agent.log", "ab"), stderr=subprocess.STDOUT,
                               preexec_fn=(lambda: os.nice(agent_nice)) if agent_nice else None)
              for n in names]
    try:
        return feed_and_drain(root, names, agents, seconds, hz, log_every, log_bytes, drain_max)
    finally:
        (root / "clients-done").touch()
        for a in agents:
            if a.poll() is None:
                a.send_signal(signal.SIGTERM)
        for a in agents:
            try:
                a.wait(timeout=20)
            except subprocess.TimeoutExpired:
                a.kill()
        # The server side writes its figures, then the emulator may end.
        end = time.time() + 20
        while not (root / "server.json").exists() and time.time() < end:
            time.sleep(0.2)


def feed_and_drain(root: Path, names: list[str], agents: list, seconds: float, hz: float, log_every: float,
                   log_bytes: int, drain_max: float) -> int:
    conns = {}
    end = time.time() + 60
    for n, a in zip(names, agents):
        s = socket.socket(socket.AF_UNIX)
        while s.connect_ex(str(root / f"{n}.sock")) != 0:
            if time.time() > end or a.poll() is not None:
                print(f"{n}: the agent's socket did not open", file=sys.stderr)
                return 1
            time.sleep(0.05)
        conns[n] = s
    sent: dict[str, list[int]] = {n: [] for n in names}
    logs: dict[str, list[str]] = {n: [] for n in names}
    last_made: dict[str, int] = {n: 0 for n in names}
    start = time.time()
    # Each vehicle has its own phase, so the fleet's samples and files are
    # spread over the second and the log period, as a real fleet's are.
    k = len(names)
    next_sample = {n: start + i / k / hz for i, n in enumerate(names)}
    next_log = {n: start + 1 + i * log_every / k for i, n in enumerate(names)}
    progress = start
    while time.time() < start + seconds:
        now = time.time()
        for i, n in enumerate(names):
            if now >= next_sample[n]:
                t = time.time_ns()
                conns[n].sendall(fix(t, 45.0 + i * 1e-3 + len(sent[n]) * 1e-6))
                sent[n].append(t)
                last_made[n] = t
                next_sample[n] += 1 / hz
            if now >= next_log[n]:
                f = f"log-{len(logs[n]):04}.log"
                tmp = root / f"{n}.log.tmp"
                tmp.write_bytes(os.urandom(log_bytes))
                tmp.rename(root / f"{n}.inbox" / f)
                logs[n].append(f)
                last_made[n] = time.time_ns()
                next_log[n] += log_every
        if now - progress >= 15:
            progress = now
            print(f"fleet scale: {now - start:.0f} s of {seconds:g}", file=sys.stderr, flush=True)
        time.sleep(max(0.0, min(min(next_sample.values()), min(next_log.values())) - time.time()))
    stop_ns = time.time_ns()
    for s in conns.values():
        s.close()
    done: dict[str, int | None] = {n: None for n in names}
    end = time.time() + drain_max
    while time.time() < end and any(v is None for v in done.values()):
        time.sleep(0.5)
        for n in names:
            if done[n] is None and sent[n]:
                done[n] = drained(root, n, len(logs[n]), sent[n][-1])
    agent_cpu = []
    for a in agents:
        try:
            agent_cpu.append(proc_figures(a.pid))
        except OSError:
            pass
    (root / "client.json").write_text(json.dumps({
        "start_ns": int(start * 1e9), "stop_ns": stop_ns, "sent": sent, "logs": logs, "last_made_ns": last_made,
        "drained_ns": done, "agents_alive": sum(a.poll() is None for a in agents),
        "agent_cpu_s": sum(x["cpu_s"] for x in agent_cpu), "agent_peak_rss_kb": [x["peak_rss_kb"] for x in agent_cpu]}))
    return 0


# ----------------------------------------------------------------------------
# The run and its figures.


def stored_segments(store: Path, vehicle: str, scratch: Path) -> list[tuple[int, list[int]]]:
    """`vehicle`'s stored telemetry segments: (when the server wrote the
    file, its latitude fixes' sample times). One zstd for all of them."""
    files = sorted((store / vehicle).rglob("*.jsonl.zst"))
    if not files:
        return []
    scratch.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(0, len(files), 500):
        part = files[i:i + 500]
        # Names repeat across days: each batch is of one directory or less.
        subprocess.run(["zstd", "-dqf", "--output-dir-flat", str(scratch), *map(str, part)], check=True,
                       capture_output=True)
        for f in part:
            plain = scratch / f.name.removesuffix(".zst")
            times = [json.loads(line)["t_ns"] for line in plain.read_text().splitlines()
                     if '"Vehicle.CurrentLocation.Latitude"' in line]
            plain.unlink()
            out.append((f.stat().st_mtime_ns, times))
    return out


INDEXED = re.compile(r'indexer: indexed .*millis=([0-9.]+) lag_seconds=([0-9.]+)')


def indexer_figures(server_log: Path) -> dict:
    """The indexer's own account (its `indexed` log lines): how long each
    segment took and how long it waited after it was stored."""
    took, lag = [], []
    for line in server_log.read_text(errors="replace").splitlines():
        m = INDEXED.search(line)
        if m:
            took.append(float(m[1]))
            lag.append(float(m[2]))
    return {"segments": len(took), "busy_s": sum(took) / 1e3, "ms_p50": pct(took, 0.5), "ms_p99": pct(took, 0.99),
            "lag_p50_s": pct(lag, 0.5), "lag_p99_s": pct(lag, 0.99)}


def steady(client: dict, warmup: float) -> tuple[int, int]:
    """The span of sample times whose freshness is counted."""
    return client["start_ns"] + int(warmup * 1e9), client["stop_ns"] - int(TAIL_S * 1e9)


def vehicle_figures(root: Path, name: str, client: dict, seen: list[tuple[int, int]], log_bytes: int,
                    warmup: float) -> tuple[dict, list[float], list[float]]:
    """One vehicle's figures, and its samples' freshness on the map and in
    the store (seconds from the sample's time) for the fleet's totals."""
    sent = client["sent"][name]
    segments = stored_segments(root / "store", name, root / "scratch" / name)
    stored = sorted(t for _, times in segments for t in times)
    fresh = freshness_in(seen, sent, *steady(client, warmup))
    lo, hi = steady(client, warmup)
    # Sample to the segment file written in the store, before indexing.
    on_disk = [(m - t) / 1e9 for m, times in segments for t in times if lo <= t < hi]
    have = set(stored)
    landed = {p.name for p in (root / "store" / name).rglob("*.log")} if (root / "store" / name).is_dir() else set()
    logs = client["logs"][name]
    drained_ns = client["drained_ns"][name]
    return {
        "cell": -1, "sent": len(sent), "stored": len(stored), "lost": len(set(sent) - have),
        "duplicated": len(stored) - len(have), "unexpected": len(have - set(sent)),
        "fresh_samples": len(fresh), "fresh_p50_s": pct(fresh, 0.5), "fresh_p99_s": pct(fresh, 0.99),
        "fresh_max_s": max(fresh) if fresh else float("nan"),
        "stored_p50_s": pct(on_disk, 0.5), "stored_p99_s": pct(on_disk, 0.99),
        "logs": len(logs), "logs_stored": len(landed & set(logs)), "log_bytes": len(logs) * log_bytes,
        # From the vehicle's last sample or log file to the server's last
        # acknowledgement of what it was given.
        "drain_s": (drained_ns - client["last_made_ns"][name]) / 1e9 if drained_ns else None,
    }, fresh, on_disk


def figures(root: Path, names: list[str], cells: int, log_bytes: int, load: list[str], warmup: float) -> dict:
    client = json.loads((root / "client.json").read_text())
    server = json.loads((root / "server.json").read_text())
    seen: dict[str, list[tuple[int, int]]] = {n: [] for n in names}
    for line in (root / "seen.jsonl").read_text().splitlines():
        d = json.loads(line)
        seen.setdefault(d["v"], []).append((d["seen_ns"], d["t_ns"]))
    per = {}
    every, every_stored = [], []
    by_cell: list[tuple[list[float], list[float]]] = [([], []) for _ in range(cells)]
    for i, n in enumerate(names):
        per[n], fresh, on_disk = vehicle_figures(root, n, client, seen[n], log_bytes, warmup)
        per[n]["cell"] = c = cell_of(i, cells)
        every += fresh
        every_stored += on_disk
        by_cell[c][0].extend(fresh)
        by_cell[c][1].extend(on_disk)
    shutil.rmtree(root / "scratch", ignore_errors=True)
    idle, end = server["idle"], server["end"]
    k = len(names)
    drains = [v["drain_s"] for v in per.values() if v["drain_s"] is not None]
    total = {
        "vehicles": k, "cells": cells, "seconds": (client["stop_ns"] - client["start_ns"]) / 1e9,
        "warmup_s": warmup,
        "sent": sum(v["sent"] for v in per.values()), "stored": sum(v["stored"] for v in per.values()),
        "lost": sum(v["lost"] for v in per.values()), "duplicated": sum(v["duplicated"] for v in per.values()),
        "logs": sum(v["logs"] for v in per.values()), "logs_stored": sum(v["logs_stored"] for v in per.values()),
        "fresh_samples": len(every), "fresh_p50_s": pct(every, 0.5), "fresh_p99_s": pct(every, 0.99),
        "stored_p50_s": pct(every_stored, 0.5), "stored_p99_s": pct(every_stored, 0.99),
        "worst_vehicle_p99_s": max((v["fresh_p99_s"] for v in per.values()), default=float("nan")),
        "drained": len(drains), "drain_p50_s": pct(drains, 0.5), "drain_max_s": max(drains, default=float("nan")),
        "agents_alive_at_end": client["agents_alive"],
        "agent_cpu_s_per_vehicle": client["agent_cpu_s"] / k,
        "agent_peak_rss_mb_max": max(client["agent_peak_rss_kb"], default=0) / 1024,
        "server_cpu_s": end["cpu_s"] - idle["cpu_s"], "server_cpu_s_per_vehicle": (end["cpu_s"] - idle["cpu_s"]) / k,
        "server_peak_rss_mb": end["peak_rss_kb"] / 1024, "server_idle_rss_mb": idle["rss_kb"] / 1024,
        "server_peak_rss_mb_per_vehicle": (end["peak_rss_kb"] - idle["rss_kb"]) / 1024 / k,
        "load_average_start": " ".join(load), "load_average_end": " ".join(open("/proc/loadavg").read().split()[:3]),
    }
    total["met"] = {"fresh_p99_below_2s": total["fresh_p99_s"] < 2,
                    "none_lost": total["lost"] == 0 and total["duplicated"] == 0
                    and total["logs_stored"] == total["logs"]}
    cell_rows = [{"cell": c, "vehicles": sum(v["cell"] == c for v in per.values()), "fresh_samples": len(xs),
                  "fresh_p50_s": pct(xs, 0.5), "fresh_p99_s": pct(xs, 0.99),
                  "stored_p50_s": pct(ys, 0.5), "stored_p99_s": pct(ys, 0.99)} for c, (xs, ys) in enumerate(by_cell)]
    ix = indexer_figures(root / "server.log")
    a, b = idle.get("indexer"), end.get("indexer")
    if a and b:  # the indexer thread over the run: on a core, waiting for one
        ix["cpu_s"] = b["cpu_s"] - a["cpu_s"]
        ix["runqueue_s"] = b["runqueue_s"] - a["runqueue_s"]
    return {"total": total, "cells": cell_rows, "indexer": ix, "vehicles": per}


def run(out: Path, vehicles: int, cells: int, seconds: float, hz: float = 1.0, log_every: float = 10.0,
        log_bytes: int = 64 * 1024, drain_max: float = 60.0, warmup: float = WARMUP_S,
        segment_s: float = 1.0, queue: str = QUEUE, agent_nice: int = 0, records: bool = False,
        idle_timeout: float = 15.0, backlog_priority: str = "normal") -> dict:
    root = out.resolve() / "fleet"
    if out.exists():
        subprocess.run(["rm", "-rf", str(out.resolve())], check=True)
    load = open("/proc/loadavg").read().split()[:3]
    names = [f"car-{i}" for i in range(vehicles)]
    say(f"keys and the registry for {vehicles} vehicles")
    svc = Service(root, names)  # keys and the registry; the server starts in the emulator
    (root / "ops.token").write_text(svc.token("ops"))
    addresses = []
    for i, n in enumerate(names):
        (root / f"{n}.inbox").mkdir()
        # Each vehicle has its own address in its cell, as a UE has: the
        # cell's per-UE queues tell vehicles apart by it.
        c, k = cell_of(i, cells), i // cells
        own = f"10.7.{c}.{UE_FIRST + k}" if UE_FIRST + k < 255 else None
        if own:
            addresses.append(f"addr add {own}/24 dev cell{c}")
        svc.agent_config(n, f'[[source]]\nkind = "socket"\npath = "{root / (n + ".sock")}"\n'
                            f'[[source]]\nkind = "directory"\npath = "{root / (n + ".inbox")}"\n'
                            f'class = "bulk"\nsettle_seconds = 0.2\n',
                         (f'local_address = "{own}"\n' if own else "")
                         + backlog_priority_key(backlog_priority)
                         + f"[segments]\nmax_seconds = {segment_s}\n",
                         server=f"10.7.{c}.2:{PORT}", idle_timeout=idle_timeout)
    (root / "addresses.ip").write_text("".join(a + "\n" for a in addresses))
    specs = link_specs(cells, shared_traces_dir(), prefix="cell", queue=queue)
    me = [sys.executable, "-m", "convoy_lab.fleet.scale"]
    cmd = [str(convoy_binary()), "emu"]
    for spec in specs:
        cmd += ["--link", spec]
    if records:  # every packet's fate, and the packets themselves to tell whose it was
        (out / "links").mkdir(parents=True, exist_ok=True)
        cmd += ["--records", str(out.resolve() / "links"), "--pcap", str(out.resolve() / "links" / "cells.pcapng")]
    # A loaded machine may take more than the default 5 s to start the server.
    cmd += ["--server-wait", "30", "--server", "exec " + shlex.join([*me, "side-server", str(root)]),
            "--", *me, "side-client", str(root), str(seconds), str(hz), str(log_every), str(log_bytes),
            str(drain_max), str(agent_nice), *names]
    (out / "command.txt").write_text(shlex.join(cmd) + "\n")
    for spec in specs:
        say(f"link {spec}")
    say(f"{vehicles} agents, {vehicles // cells}+ per cell, {seconds:g} s, telemetry at {hz:g} Hz, "
        f"a {log_bytes >> 10} KiB log every {log_every:g} s")
    # Its own process group: on a timeout the emulator gets SIGTERM and
    # ends both namespaces' processes itself (docs/EMU.md).
    try:
        sink = sys.stderr.fileno()
    except (AttributeError, OSError):  # a captured stderr (pytest): the run's log instead
        sink = open(out / "emu.log", "ab")
    # Every process of the run is waited for by its parent (the emulator,
    # the two sides, the agents and the server), so the children's times
    # once the emulator is reaped are the whole run's CPU.
    cpu0, wall0 = os.times(), time.time()
    p = subprocess.Popen(cmd, stdout=sink, stderr=sink, start_new_session=True)
    try:
        rc = p.wait(timeout=seconds + drain_max + 60 + vehicles)
    except BaseException as e:  # the time limit, or Ctrl-C (the emulator is in its own session)
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        if isinstance(e, subprocess.TimeoutExpired):
            raise RuntimeError(f"the emulated run did not end in time; logs in {root}") from e
        raise
    if rc != 0 or not (root / "client.json").exists() or not (root / "server.json").exists():
        raise RuntimeError(f"the emulated run failed (exit {rc}); logs in {root}")
    cpu1, wall1 = os.times(), time.time()
    say("reading the store")
    doc = figures(root, names, cells, log_bytes, load, warmup)
    run_cpu = cpu1.children_user + cpu1.children_system - cpu0.children_user - cpu0.children_system
    doc["total"].update(run_cpu_s=run_cpu, run_wall_s=wall1 - wall0, run_cores=run_cpu / (wall1 - wall0))
    doc["links"] = specs
    doc["total"]["segment_seconds"] = segment_s
    doc["total"]["idle_timeout_s"] = idle_timeout
    doc["total"]["backlog_priority"] = backlog_priority
    doc["total"]["hz"] = hz
    doc["total"]["queue"] = queue
    doc["total"]["agent_nice"] = agent_nice
    (out / "scale.json").write_text(json.dumps(doc, indent=2))
    return doc


def fmt(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def print_table(doc: dict) -> None:
    t = doc["total"]
    print(f"{'vehicle':<8} {'cell':>4} {'sent':>5} {'stored':>6} {'lost':>4} {'dup':>3} "
          f"{'p50 s':>6} {'p99 s':>6} {'logs':>9} {'drain s':>7}")
    for n, v in doc["vehicles"].items():
        print(f"{n:<8} {v['cell']:>4} {v['sent']:>5} {v['stored']:>6} {v['lost']:>4} {v['duplicated']:>3} "
              f"{fmt(v['fresh_p50_s']):>6} {fmt(v['fresh_p99_s']):>6} {v['logs_stored']:>4}/{v['logs']:<4} "
              f"{fmt(v['drain_s']):>7}")
    print(f"{t['vehicles']} agents behind {t['cells']} cells (queue={t.get('queue', '200')}"
          f"{', agents niced +%d' % t['agent_nice'] if t.get('agent_nice') else ''}), "
          f"{t['seconds']:.0f} s, telemetry at {t['hz']:g} Hz "
          f"in segments of <= {t['segment_seconds']:g} s (freshness from {t['warmup_s']:g} s in), "
          f"load average {t['load_average_start']} at the start, {t['load_average_end']} at the end")
    rows = [
        ("live sample on the map, all vehicles, p99 < 2 s",
         f"p50 {t['fresh_p50_s']:.2f} s, p99 {t['fresh_p99_s']:.2f} s of {t['fresh_samples']} samples "
         f"(worst vehicle's p99 {t['worst_vehicle_p99_s']:.2f} s; in the store before indexing: "
         f"p50 {t['stored_p50_s']:.2f} s, p99 {t['stored_p99_s']:.2f} s)", t["met"]["fresh_p99_below_2s"]),
        ("0 samples or log files lost or duplicated",
         f"{t['lost']} lost, {t['duplicated']} duplicated of {t['sent']} samples; "
         f"{t['logs_stored']} of {t['logs']} log files stored", t["met"]["none_lost"]),
    ]
    for c in doc["cells"]:
        trace = doc["links"][c["cell"]].split("up=")[1].split(",")[0].rsplit("/", 1)[-1].removesuffix(".up")
        print(f"cell{c['cell']} ({trace}, {c['vehicles']} vehicles): on the map p50 {c['fresh_p50_s']:.2f} s, "
              f"p99 {c['fresh_p99_s']:.2f} s; in the store p50 {c['stored_p50_s']:.2f} s, "
              f"p99 {c['stored_p99_s']:.2f} s")
    w = max(len(r[0]) for r in rows)
    for name, fig, ok in rows:
        print(f"{name:<{w}}  {'met ' if ok else 'MISSED'}  {fig}")
    print(f"drain after the drive: {t['drained']} of {t['vehicles']} agents emptied their spools, "
          f"p50 {t['drain_p50_s']:.2f} s, max {t['drain_max_s']:.2f} s")
    print(f"server: {t['server_cpu_s']:.1f} CPU s ({t['server_cpu_s_per_vehicle'] * 1000:.0f} ms per vehicle), "
          f"peak RSS {t['server_peak_rss_mb']:.1f} MB ({t['server_idle_rss_mb']:.1f} MB before the agents, "
          f"{t['server_peak_rss_mb_per_vehicle'] * 1024:.0f} kB per vehicle above it)")
    print(f"agents: {t['agent_cpu_s_per_vehicle']:.2f} CPU s each over the run and its drain, "
          f"peak RSS <= {t['agent_peak_rss_mb_max']:.1f} MB")
    ix = doc["indexer"]
    print(f"indexer: {ix['segments']} segments, {ix['busy_s']:.0f} s busy (one thread), "
          f"p50 {ix['ms_p50']:.1f} ms, p99 {ix['ms_p99']:.1f} ms each; waited after being stored "
          f"p50 {ix['lag_p50_s']:.2f} s, p99 {ix['lag_p99_s']:.2f} s")
    if "cpu_s" in ix:
        print(f"indexer thread over the run (/proc schedstat): {ix['cpu_s']:.1f} s on a core, "
              f"{ix['runqueue_s']:.1f} s runnable waiting for one")
    if "run_cpu_s" in t:
        print(f"the whole run (emulator, agents, feeders, server, poller): {t['run_cpu_s']:.0f} CPU s in "
              f"{t['run_wall_s']:.0f} s, {t['run_cores']:.2f} cores on average")


def add_parser(sub) -> None:
    p = sub.add_parser("scale", help="N real agents behind a few shared emulated LTE cells into one server: "
                                     "freshness, drain and loss per vehicle, server CPU and memory (needs root)")
    p.add_argument("--vehicles", type=int, default=100, help="agents (default 100)")
    p.add_argument("--cells", type=int, default=4, help="emulated cells; vehicle i uses cell i mod CELLS (default 4)")
    p.add_argument("--seconds", type=float, default=90, help="how long the vehicles drive (default 90)")
    p.add_argument("--hz", type=float, default=1.0, help="position fixes per second per vehicle (default 1)")
    p.add_argument("--log-every", type=float, default=10.0, help="a log file per vehicle every this many s (default 10)")
    p.add_argument("--log-kb", type=int, default=64, help="log file size, KiB (default 64)")
    p.add_argument("--segment-seconds", type=float, default=1.0,
                   help="the agents' [segments] max_seconds (default 1.0, the agent's own default)")
    p.add_argument("--warmup", type=float, default=WARMUP_S,
                   help=f"samples of the first this many s (the agents connecting) are left out of freshness "
                        f"(default {WARMUP_S:g})")
    p.add_argument("--queue", default=QUEUE,
                   help=f"each cell's queue, as convoy emu's queue= (default {QUEUE}: a drop-tail buffer of 200 "
                        "packets per vehicle, served round robin, as a cell's scheduler serves its UEs; 200 is "
                        "one 200-packet drop-tail FIFO shared by the cell's vehicles; fq_codel one queue per flow)")
    p.add_argument("--agent-nice", type=int, default=0,
                   help="run the agents this much nicer than the server (they share its cores here, never "
                        "on the road; default 0)")
    p.add_argument("--records", action="store_true",
                   help="keep the emulator's per-packet records and a capture in OUT/links, for "
                        "`python -m convoy_lab.fleet.scale_links OUT` (where a sample's time goes)")
    p.add_argument("--drain-max", type=float, default=60.0, help="wait at most this long for the spools to empty")
    p.add_argument("--idle-timeout", type=float, default=15.0,
                   help="the agents' idle_timeout, s: silence before a lane reconnects (default 15, the agent's own)")
    p.add_argument("--backlog-priority", choices=["normal", "background"], default="normal",
                   help="the agents' backlog_priority: background runs their backlog lane under the scavenger "
                        "controller, which leaves the shared queue to the live lane (default normal)")
    p.add_argument("--out", type=Path, default=Path("results/fleet-scale"))
    p.add_argument("--json", action="store_true")


def from_args(a) -> int:
    if os.geteuid() != 0 or not Path("/dev/net/tun").exists():
        print("fleet scale: convoy emu needs root and /dev/net/tun", file=sys.stderr)
        return 2
    if a.vehicles < 1 or not 1 <= a.cells <= 250 or not 0 <= a.agent_nice <= 19 or a.warmup < 0 \
            or a.seconds < a.warmup + TAIL_S + 1 or a.hz <= 0 or a.log_every <= 0 or a.log_kb < 0 or a.segment_seconds <= 0 \
            or not 1 <= a.idle_timeout <= 3600:
        print(f"fleet scale: --vehicles >= 1, --cells 1..250, --agent-nice 0..19, --seconds > --warmup + "
              f"{TAIL_S:g}, --hz, --log-every and --segment-seconds > 0, --idle-timeout 1..3600",
              file=sys.stderr)
        return 2
    # SIGTERM (a CI's time limit, `kill`) ends the run as Ctrl-C does: the
    # emulator is told to stop and takes both namespaces down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    doc = run(a.out, a.vehicles, a.cells, a.seconds, a.hz, a.log_every, a.log_kb * 1024, a.drain_max, a.warmup,
              a.segment_seconds, a.queue, a.agent_nice, a.records, a.idle_timeout, a.backlog_priority)
    if a.json:
        print(json.dumps(doc))
    else:
        print_table(doc)
        print(f"figures: {a.out.resolve() / 'scale.json'}")
    return 0 if all(doc["total"]["met"].values()) else 1


def main(argv: list[str]) -> int:
    if argv and argv[0] == "side-server":
        return server_side(Path(argv[1]))
    if argv and argv[0] == "side-client":
        root, seconds, hz, log_every, log_bytes, drain_max, agent_nice = argv[1:8]
        return client_side(Path(root), argv[8:], float(seconds), float(hz), float(log_every), int(log_bytes),
                           float(drain_max), int(agent_nice))
    print("run it as `python -m convoy_lab.fleet scale`", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

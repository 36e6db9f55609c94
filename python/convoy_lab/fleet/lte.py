"""`python -m convoy_lab.fleet lte`: one vehicle's agent and the ingest
server over an emulated LTE link (`convoy emu`), through a coverage outage.

Timeline (link time, 0 = the emulator's start):

    [0, before)                live telemetry, steady state: freshness
    [before, before + outage)  the link drops everything both ways; the agent
                               keeps segmenting and spooling (telemetry at
                               10 Hz, a bulk file every 2 s)
    outage end -> drained      the backlog drains beside live telemetry:
                               drain rate against the link's capacity,
                               live freshness while it drains
    then `settle` s            steady state again, and the end

The server side (`convoy serve --fleet --http` and a poller of the map's
API) runs in the emulator's server namespace, the agent and the sample
feeder in its client namespace. Every sample's time is stamped by the
feeder; the poller stamps when the map first shows it (both namespaces
share the host's clock). Drain figures come from the agent's catalog
(`done_ns`: when the server acknowledged each segment as durable).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from ..runner import convoy_binary
from ..traces import twin, window_capacity_mbit
from .bench import fix, freshness_in, pct, stored_times
from .service import Service, backlog_priority_key, http_json

SERVER_IP = "10.7.0.2"
PORT = 4433
HTTP = 8080
VEHICLE = "lte-car"
SAMPLE_EVERY_S = 0.1
BULK_EVERY_S = 2.0


def say(msg: str) -> None:
    print(f"fleet lte: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------
# The server namespace: the ingest and a poller of what the map shows.


def server_side(root: Path) -> int:
    log = open(root / "server.log", "ab")
    serve = subprocess.Popen(
        [str(convoy_binary()), "serve", "--fleet", "--listen", f"{SERVER_IP}:{PORT}",
         "--dir", str(root / "store"), "--key", str(root / "server.key"),
         "--http", f"127.0.0.1:{HTTP}"],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    token = (root / "ops.token").read_text().strip()
    seen = open(root / "seen.jsonl", "a", buffering=1)
    last = 0
    # Runs until the emulator ends the namespace (the client side is done).
    while serve.poll() is None:
        try:
            vehicles = http_json(HTTP, "/api/vehicles", token)["vehicles"]
        except OSError:
            time.sleep(0.1)
            continue
        now = time.time_ns()
        cur = next((v["last"] for v in vehicles if v["name"] == VEHICLE and v["last"]), None)
        if cur and cur["t_ns"] > last:
            last = cur["t_ns"]
            seen.write(json.dumps({"seen_ns": now, "t_ns": last}) + "\n")
        time.sleep(0.05)
    return serve.returncode or 0


# ----------------------------------------------------------------------------
# The client namespace: the agent, the feeder and the bulk files.


def queued_before(db: Path, t_ns: int) -> int | None:
    """Segments created before `t_ns` that the server has not acknowledged."""
    try:
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return c.execute("SELECT COUNT(*) FROM items WHERE state != 'acked' AND state != 'dropped' "
                             "AND created_ns < ?", (t_ns,)).fetchone()[0]
        finally:
            c.close()
    except sqlite3.Error:
        return None


def client_side(root: Path, before: float, outage: float, settle: float, after_max: float,
                bulk_bytes: int) -> int:
    cfg = root / "agent.toml"
    sock = root / "agent.sock"
    agent = subprocess.Popen([str(convoy_binary()), "agent", "--config", str(cfg)],
                             stdout=open(root / "agent.log", "ab"), stderr=subprocess.STDOUT)
    start = time.time()
    # Link time 0: the outage's schedule is counted from it.
    link0_ns = int(os.environ["CONVOY_EMU_EPOCH_NS"])
    (root / "client-start.json").write_text(json.dumps({"start_ns": link0_ns, "client_ns": time.time_ns()}))
    s = socket.socket(socket.AF_UNIX)
    while s.connect_ex(str(sock)) != 0:
        if time.time() - start > 20 or agent.poll() is not None:
            print("the agent's socket did not open", file=sys.stderr)
            return 1
        time.sleep(0.05)
    sent = open(root / "sent.txt", "a", buffering=1)
    inbox = root / "inbox"
    start = link0_ns / 1e9
    outage_end = start + before + outage
    outage_end_ns = int(outage_end * 1e9)
    drained_at = None
    next_sample = next_bulk = time.time()
    n = 0
    progress = start
    while True:
        now = time.time()
        if now >= next_sample:
            t = time.time_ns()
            s.sendall(fix(t, 45.0 + n * 1e-6))
            sent.write(f"{t}\n")
            n += 1
            next_sample += SAMPLE_EVERY_S
        if now >= next_bulk:
            f = inbox / f"bulk-{int(now * 1000)}.bin"
            tmp = root / "bulk.tmp"
            tmp.write_bytes(os.urandom(bulk_bytes))
            tmp.rename(f)
            next_bulk += BULK_EVERY_S
        if outage == 0 and now >= outage_end:
            break  # only the steady state was asked for
        if now >= outage_end and drained_at is None and queued_before(root / "spool" / "agent.db", outage_end_ns) == 0:
            drained_at = now
            print(f"backlog drained {now - outage_end:.1f} s after the outage", file=sys.stderr, flush=True)
        if drained_at is not None and now >= drained_at + settle:
            break
        if now >= outage_end + after_max:
            print(f"the backlog did not drain within {after_max:.0f} s", file=sys.stderr, flush=True)
            break
        if now - progress >= 60:
            progress = now
            phase = "before" if now < start + before else "outage" if now < outage_end else "drain"
            print(f"{now - start:.0f} s ({phase})", file=sys.stderr, flush=True)
        time.sleep(max(0.0, min(next_sample, next_bulk) - time.time()))
    s.close()
    agent.send_signal(signal.SIGTERM)
    try:
        agent.wait(timeout=20)
    except subprocess.TimeoutExpired:
        agent.kill()
    return 0


# ----------------------------------------------------------------------------
# The run: set up keys and the registry, run both sides under convoy emu,
# read the figures back.


def link_spec(trace: Path | None, rate: str, delay_ms: float, queue: int, before: float,
              outage: float) -> str:
    keys = [f"up={trace},down={twin(trace)}" if trace else f"rate={rate}",
            f"delay={delay_ms:g}ms", f"queue={queue}"]
    if outage > 0:
        keys += [f"outage={before:g}s-{before + outage:g}s", "outage-policy=drop"]
    return "lte:" + ",".join(keys)


def summary(xs: list[float]) -> dict:
    return {"samples": len(xs), "p50_s": pct(xs, 0.5), "p99_s": pct(xs, 0.99),
            "max_s": max(xs) if xs else float("nan")}


def figures(root: Path, trace: Path | None, rate_mbit: float, before: float, outage: float) -> dict:
    start_ns = json.loads((root / "client-start.json").read_text())["start_ns"]
    end_ns = start_ns + int((before + outage) * 1e9)
    sent = [int(x) for x in (root / "sent.txt").read_text().split()]
    seen = [(d["seen_ns"], d["t_ns"]) for d in map(json.loads, (root / "seen.jsonl").read_text().splitlines())]
    db = sqlite3.connect(root / "spool" / "agent.db")
    rows = db.execute("SELECT class, bytes, created_ns, state, done_ns FROM items").fetchall()
    backlog = [r for r in rows if r[2] < end_ns]
    unacked = [r for r in backlog if r[3] != "acked"]
    drained_ns = max((r[4] for r in backlog if r[3] == "acked"), default=None) if not unacked else None
    doc: dict = {"outage_s": outage, "link": "trace " + trace.name if trace else f"{rate_mbit:g} Mbit/s"}
    doc["backlog"] = {"segments": len(backlog), "bytes": sum(r[1] for r in backlog),
                      "unacknowledged": len(unacked),
                      "dropped": sum(r[3] == "dropped" for r in rows)}
    if drained_ns is not None and outage > 0:
        span = (drained_ns - end_ns) / 1e9
        moved = sum(r[1] for r in rows if r[3] == "acked" and end_ns < r[4] <= drained_ns)
        cap = (window_capacity_mbit(trace, (end_ns - start_ns) / 1e9, span) if trace else rate_mbit)
        doc["drain"] = {"seconds": span, "bytes": moved, "goodput_mbit_s": moved * 8 / span / 1e6,
                        "capacity_mbit_s": cap, "of_capacity": moved * 8 / span / 1e6 / cap}
        doc["fresh_during_drain"] = summary(freshness_in(seen, sent, end_ns, drained_ns))
        doc["fresh_after"] = summary(freshness_in(seen, sent, drained_ns, sent[-1] + 1))
    # Steady state: from 5 s in (the first connection is up) to 2 s before
    # the outage (a sample taken later is still in its 1 s segment, or on
    # the wire, when the link goes: the outage's, not the steady state's).
    doc["fresh_before"] = summary(freshness_in(seen, sent, start_ns + int(5e9), start_ns + int((before - 2) * 1e9)))
    stored = stored_times(root / "store", VEHICLE)
    # Samples sent in the last second may still be in the open segment when
    # the run ends: count losses among those the agent has segmented.
    segmented_until = sent[-1] - int(2e9)
    considered = [t for t in sent if t < segmented_until]
    doc["telemetry"] = {"sent": len(considered), "stored": len(set(stored) & set(considered)),
                        "lost": len(set(considered) - set(stored)),
                        "duplicated": len(stored) - len(set(stored))}
    return doc


def run(out: Path, trace: Path | None, rate: str, delay_ms: float, queue: int, before: float,
        outage: float, settle: float, after_max: float, bulk_bytes: int, records: bool = False,
        backlog_priority: str = "normal") -> dict:
    root = out.resolve()
    if root.exists():
        subprocess.run(["rm", "-rf", str(root)], check=True)
    svc = Service(root, [VEHICLE])  # keys and the registry; not started here
    (root / "ops.token").write_text(svc.token("ops"))
    (root / "inbox").mkdir()
    (root / "agent.toml").write_text(
        f'key = "{svc.key_of(VEHICLE)}"\nserver = "{SERVER_IP}:{PORT}"\n'
        f'server_key = "{svc.key}.pub"\nspool = "{root / "spool"}"\nidle_timeout = 5\n'
        + backlog_priority_key(backlog_priority)
        + f'[segments]\nmax_seconds = 1.0\n'
        f'[[source]]\nkind = "socket"\npath = "{root / "agent.sock"}"\n'
        f'[[source]]\nkind = "directory"\npath = "{root / "inbox"}"\nclass = "bulk"\nsettle_seconds = 0.2\n')
    me = [sys.executable, "-m", "convoy_lab.fleet.lte"]
    spec = link_spec(trace, rate, delay_ms, queue, before, outage)
    cmd = [str(convoy_binary()), "emu", "--link", spec,
           *(["--records", str(root / "records")] if records else []),
           "--server", "exec " + shlex.join([*me, "side-server", str(root)]),
           "--", *me, "side-client", str(root), str(before), str(outage), str(settle), str(after_max),
           str(bulk_bytes)]
    (root / "command.txt").write_text(shlex.join(cmd) + "\n")
    say(f"{spec}: {before:g} s, then a {outage:g} s outage, then the drain (at most {after_max:g} s)"
        if outage else f"{spec}: {before:g} s")
    p = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr,
                       timeout=before + outage + after_max + settle + 120)
    if p.returncode != 0:
        raise RuntimeError(f"convoy emu exited with {p.returncode}; see {root}")
    rate_mbit = float(rate.removesuffix("mbit")) if not trace else float("nan")
    doc = figures(root, trace, rate_mbit, before, outage)
    doc["backlog_priority"] = backlog_priority
    (root / "lte.json").write_text(json.dumps(doc, indent=2))
    return doc


def print_table(doc: dict) -> None:
    rows = []
    fb = doc["fresh_before"]
    rows.append(("live sample on the map, p50 < 2 s, p99 < 10 s (steady)",
                 f"p50 {fb['p50_s']:.2f} s, p99 {fb['p99_s']:.2f} s, {fb['samples']} samples",
                 fb["p50_s"] < 2 and fb["p99_s"] < 10))
    t = doc["telemetry"]
    across = f" across the {doc['outage_s']:g} s outage" if doc["outage_s"] else ""
    rows.append((f"0 acked samples lost/duplicated{across}",
                 f"{t['lost']} lost, {t['duplicated']} duplicated of {t['sent']}",
                 t["lost"] == 0 and t["duplicated"] == 0))
    b = doc["backlog"]
    if doc["outage_s"] == 0:
        pass
    elif "drain" in doc:
        d, fd = doc["drain"], doc["fresh_during_drain"]
        rows.append(("backlog drains at >= 90 % of link capacity",
                     f"{d['of_capacity']:.3f} ({d['goodput_mbit_s']:.2f} of {d['capacity_mbit_s']:.2f} Mbit/s, "
                     f"{b['bytes'] / 1e6:.1f} MB in {b['segments']} segments, {d['seconds']:.1f} s)",
                     d["of_capacity"] >= 0.9))
        rows.append(("live telemetry p99 < 10 s while it drains",
                     f"p50 {fd['p50_s']:.2f} s, p99 {fd['p99_s']:.2f} s, {fd['samples']} samples",
                     fd["p99_s"] < 10))
    else:
        rows.append(("backlog drains at >= 90 % of link capacity",
                     f"not drained: {b['unacknowledged']} of {b['segments']} segments left", False))
    print(f"link: {doc['link']}, outage {doc['outage_s']:g} s" if doc["outage_s"] else f"link: {doc['link']}, no outage")
    w = max(len(r[0]) for r in rows)
    for name, fig, ok in rows:
        print(f"{name:<{w}}  {'met ' if ok else 'MISSED'}  {fig}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "side-server":
        return server_side(Path(argv[1]))
    if argv and argv[0] == "side-client":
        root, before, outage, settle, after_max, bulk = argv[1:7]
        return client_side(Path(root), float(before), float(outage), float(settle), float(after_max), int(bulk))
    print("run it as `python -m convoy_lab.fleet lte`", file=sys.stderr)
    return 2


def add_parser(sub) -> None:
    p = sub.add_parser("lte", help="one agent over an emulated LTE link through an outage: freshness, "
                                   "drain rate, nothing lost (needs root)")
    p.add_argument("--trace", type=Path, help="Mahimahi uplink trace (its .down twin carries the feedback); "
                                              "default: a constant --rate")
    p.add_argument("--rate", default="10mbit", help="constant rate when no --trace (default 10mbit)")
    p.add_argument("--delay", type=float, default=20, help="one-way delay, ms (default 20)")
    p.add_argument("--queue", type=int, default=200, help="bottleneck queue, packets (default 200)")
    p.add_argument("--before", type=float, default=60, help="seconds of steady state first (default 60)")
    p.add_argument("--outage", type=float, default=300,
                   help="outage length, s (default 300; 3600 for 1 h; 0: the steady state only)")
    p.add_argument("--settle", type=float, default=20, help="seconds after the drain (default 20)")
    p.add_argument("--after-max", type=float, default=1800, help="give up on the drain after this long")
    p.add_argument("--bulk-rate", type=float, default=100, help="bulk data made while driving, kB/s (default 100)")
    p.add_argument("--backlog-priority", choices=["normal", "background"], default="normal",
                   help="the agent's backlog_priority (default normal)")
    p.add_argument("--out", type=Path, default=Path("results/fleet-lte"))
    p.add_argument("--records", action="store_true",
                   help="keep the link's per-packet records in OUT/records (convoy emu --records)")
    p.add_argument("--json", action="store_true")


def from_args(a) -> int:
    if os.geteuid() != 0:
        print("fleet lte: convoy emu needs root", file=sys.stderr)
        return 2
    if a.trace and not a.trace.is_file():
        print(f"fleet lte: {a.trace}: no such trace", file=sys.stderr)
        return 2
    if a.before < 10 or a.outage < 0 or a.settle < 0 or a.after_max <= 0 or a.bulk_rate < 0:
        print("fleet lte: --before takes at least 10 s; --outage, --settle and --bulk-rate no negative values",
              file=sys.stderr)
        return 2
    if not a.trace and not a.rate.endswith("mbit"):
        print("fleet lte: --rate takes Mbit/s, like 10mbit", file=sys.stderr)
        return 2
    doc = run(a.out, a.trace.resolve() if a.trace else None, a.rate, a.delay, a.queue, a.before, a.outage,
              a.settle, a.after_max, int(a.bulk_rate * 1000 * BULK_EVERY_S), a.records, a.backlog_priority)
    if a.json:
        print(json.dumps(doc))
    else:
        print_table(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())

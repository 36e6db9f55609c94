"""Where a live sample's time goes in a `fleet scale --records` run.

`fleet scale --records OUT` keeps the emulator's per-packet records
(OUT/links/CELL.up.csv: when each packet entered the cell's uplink queue,
and when it left it or why it was dropped) and a capture of every delivered
packet (OUT/links/cells.pcapng). This joins them: the k-th delivery record
of a direction is the k-th packet captured on that direction's interface,
so each delivered packet gets its addresses and ports. The server's log
names the vehicle behind each source address and port (its `connected`
lines); of a vehicle's two connections the one carrying the log files
(more bytes) is the bulk lane, the other the live lane. Either may carry
a telemetry segment.

For every stored sample (from the warmup to 2 s before the end, as the
run's own freshness), with S its time and W when the server wrote the
segment file holding it, the packet taken to carry it is the vehicle's
last data packet (a full one, on either lane) delivered before W, or, when
that packet left the cell in a burst with others (one grant delivers what
waited), the burst's first packet that entered the queue after S (so a
sample that waited out a slow spell is not charged to the agent for the
next second's segment that caught up with it). It was delivered at D and
entered the cell's queue at E:

  agent  = E - S   the segment filling (up to 1 s) and the agent's wait
                   until its last packet was handed to the cell, resends of
                   packets the cell dropped included;
  cell   = D - E   queueing in the cell, sending and the 20 ms one way;
  server = W - D   from arrival to the segment file written.

It also gives each cell's floor: over the same part of the run, the wait
from an instant to the next delivery opportunity of the cell's uplink trace
(from its offset; the emulator's clock starts a moment before the
vehicles', so the alignment is approximate). No sample reaches the store
sooner than that after its segment is cut, whatever the transport does.

Usage: python -m convoy_lab.fleet.scale_links OUT [--json]
"""

from __future__ import annotations

import bisect
import csv
import json
import re
import struct
import sys
from collections import defaultdict
from pathlib import Path

from .bench import pct
from .scale import TAIL_S, cell_of, stored_segments

CONNECTED = re.compile(r'connected vehicle="([^"]+)" peer=([0-9.]+):([0-9]+)')
BULK_MIN_BYTES = 100_000  # a lane that carried this much is the bulk lane (logs are 64 KiB each)
# Data packets: a block shorter than a symbol travels unpadded, so a
# telemetry segment of about 130 bytes (compressed) leaves in a packet of
# 150-250 bytes; acknowledgements and keepalives are 80-150.
DATA_MIN_BYTES = 150


def pcap_packets(path: Path):
    """(interface, timestamp ns, IPv4 source, destination, source port,
    destination port) of each packet in a pcapng file as `convoy emu`
    writes it (little-endian, raw IP, nanosecond stamps)."""
    with open(path, "rb") as f:
        data = f.read()
    i = 0
    while i + 8 <= len(data):
        kind, size = struct.unpack_from("<II", data, i)
        if size < 12:
            raise ValueError(f"{path}: a block of {size} bytes at {i}")
        if kind == 6:  # enhanced packet block
            iface, hi, lo, caplen = struct.unpack_from("<IIII", data, i + 8)
            p = data[i + 28:i + 28 + caplen]
            ihl = (p[0] & 0x0F) * 4 if p else 0
            if len(p) >= ihl + 4 and p[0] >> 4 == 4:
                sport, dport = struct.unpack_from(">HH", p, ihl)
                yield iface, (hi << 32) | lo, ".".join(map(str, p[12:16])), ".".join(map(str, p[16:20])), \
                    sport, dport
            else:
                yield iface, (hi << 32) | lo, "", "", 0, 0
        i += size


def deliveries(path: Path) -> tuple[list[tuple[int, int, int]], dict]:
    """(delivered at, entered the queue at, bytes) per delivered packet in
    delivery order, and the direction's counts."""
    enq: dict[int, int] = {}
    out = []
    counts: dict = defaultdict(int)
    with open(path) as f:
        for row in csv.DictReader(f):
            t, pid = int(row["t_ns"]), int(row["id"])
            counts[row["event"]] += 1
            if row["event"] == "enq":
                enq[pid] = t
            elif row["event"] == "dlv":
                out.append((t, enq.pop(pid), int(row["len"])))
            else:
                counts["drop_" + row["reason"]] += 1
                enq.pop(pid, None)
    return out, dict(counts)


def uplink_waits(spec: str, start_s: float, end_s: float, step_ms: int = 10) -> list[float]:
    """Seconds from each `step_ms` instant of [start_s, end_s) to the next
    delivery opportunity of the link `spec`'s uplink trace (Mahimahi: one
    line per opportunity, in ms; the trace repeats)."""
    fields = dict(f.split("=", 1) for f in spec.split(":", 1)[1].split(","))
    stamps = [int(x) for x in Path(fields["up"]).read_text().split()]
    period = stamps[-1]  # the last opportunity is the next round's first instant
    marks = sorted({x % period for x in stamps})
    offset_ms = int(float(fields.get("offset", "0s").rstrip("s")) * 1000)
    waits = []
    for t in range(int(start_s * 1000), int(end_s * 1000), step_ms):
        at = (t + offset_ms) % period
        i = bisect.bisect_left(marks, at)
        nxt = marks[i] if i < len(marks) else period + marks[0]
        waits.append((nxt - at) / 1000)
    return waits


def carrier(data: list[tuple[int, int, int]], arrived: list[int], k: int, sample: int) -> tuple[int, int, int]:
    """The packet taken to carry a sample of time `sample` whose segment
    was written after `data[k]` (a vehicle's data packets as (delivered,
    entered, bytes), in delivery order; `arrived` their delivery times):
    `data[k]`, or the first packet of its burst (the packets delivered at
    the same instant) that entered the queue after the sample."""
    burst = data[bisect.bisect_left(arrived, arrived[k]):k + 1]
    return min((x for x in burst if x[1] >= sample), key=lambda x: x[1], default=data[k])


def analyse(out: Path) -> dict:
    root = out / "fleet"
    doc = json.loads((out / "scale.json").read_text())
    links = [s.split(":", 1)[0] for s in doc["links"]]
    client = json.loads((root / "client.json").read_text())
    names = list(doc["vehicles"])
    cells = doc["total"]["cells"]
    owner: dict[tuple[str, int], str] = {}
    for line in (root / "server.log").read_text(errors="replace").splitlines():
        m = CONNECTED.search(line)
        if m:
            owner[(m[2], int(m[3]))] = m[1]
    # Each flow's delivered packets: (delivered, entered), virtual time,
    # put on the wall clock below.
    flows: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
    per_cell: dict[int, dict] = {}
    captured: dict[int, list] = defaultdict(list)
    for iface, ts, src, _dst, sport, _dport in pcap_packets(out / "links" / "cells.pcapng"):
        if iface % 2 == 0:  # the uplinks
            captured[iface // 2].append((ts, src, sport))
    for c, name in enumerate(links):
        recs, counts = deliveries(out / "links" / f"{name}.up.csv")
        cap = captured[c]
        if len(cap) != len(recs):
            raise ValueError(f"{name}: {len(cap)} packets captured, {len(recs)} delivery records")
        offset = cap[0][0] - recs[0][0] if cap else 0  # the capture's stamps: the epoch's wall clock + virtual time
        for (ts, src, sport), (t, e, n) in zip(cap, recs):
            if ts - offset != t:
                raise ValueError(f"{name}: the capture and the records disagree at {t}")
            flows[(src, sport)].append((ts, e + offset, n))
        per_cell[c] = counts
    lanes: dict[str, dict[str, list]] = defaultdict(dict)
    for key, pkts in flows.items():
        v = owner.get(key)
        if v is not None:
            lanes[v][key] = pkts
    lo = client["start_ns"] + int(doc["total"]["warmup_s"] * 1e9)
    hi = client["stop_ns"] - int(TAIL_S * 1e9)
    parts = {c: {"agent": [], "cell": [], "server": [], "total": []} for c in range(cells)}
    queue = {c: {"live": [], "bulk": []} for c in range(cells)}
    unmatched = 0
    for i, v in enumerate(names):
        c = cell_of(i, cells)
        by_bytes = sorted(lanes[v].values(), key=lambda p: sum(n for *_, n in p))
        if not by_bytes:
            continue
        for pkts in by_bytes:
            kind = "bulk" if pkts is by_bytes[-1] and sum(n for *_, n in pkts) >= BULK_MIN_BYTES else "live"
            queue[c][kind] += [(d - e) / 1e9 for d, e, n in pkts if lo <= d < hi and n >= DATA_MIN_BYTES]
        # Either lane may carry a telemetry segment: the vehicle's data
        # packets on both, in delivery order.
        data = sorted(x for pkts in by_bytes for x in pkts if x[2] >= DATA_MIN_BYTES)
        arrived = [d for d, _, _ in data]
        for written, times in stored_segments(root / "store", v, root / "scratch" / v):
            k = bisect.bisect_right(arrived, written) - 1
            if k < 0:
                unmatched += len(times)
                continue
            for s in times:
                if lo <= s < hi:
                    d, e, _ = carrier(data, arrived, k, s)
                    parts[c]["agent"].append((e - s) / 1e9)
                    parts[c]["cell"].append((d - e) / 1e9)
                    parts[c]["server"].append((written - d) / 1e9)
                    parts[c]["total"].append((written - s) / 1e9)

    def summary(xs: list[float]) -> dict:
        return {"n": len(xs), "p50": pct(xs, 0.5), "p90": pct(xs, 0.9), "p99": pct(xs, 0.99),
                "max": max(xs) if xs else None}

    def slowest(p: dict) -> dict:
        """The parts' means over the cell's slowest 5 % of samples."""
        cut = pct(p["total"], 0.95)
        idx = [j for j, t in enumerate(p["total"]) if t >= cut] if p["total"] else []
        return {k: sum(xs[j] for j in idx) / len(idx) if idx else None for k, xs in p.items()}

    run = doc["total"]
    window = (run["warmup_s"], run["seconds"] - TAIL_S)
    floors = [uplink_waits(spec, *window) for spec in doc["links"]]
    rows = []
    for c in range(cells):
        counts = per_cell.get(c, {})
        rows.append({"cell": c, "link": links[c],
                     "offered": counts.get("enq", 0), "dropped": counts.get("drop_queue_full", 0),
                     "queue_live_s": summary(queue[c]["live"]), "queue_bulk_s": summary(queue[c]["bulk"]),
                     **{k: summary(xs) for k, xs in parts[c].items()},
                     "slowest_5pct_mean_s": slowest(parts[c]),
                     "trace_wait_s": summary(floors[c])})
    every = [w for f in floors for w in f]
    return {"cells": rows, "samples_unmatched": unmatched, "queue": doc["total"].get("queue"),
            "trace_wait_s": summary(every)}


def fmt(s: dict) -> str:
    return "-" if not s["n"] else f"{s['p50']:.2f} / {s['p99']:.2f}"


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out = Path(argv[0])
    doc = analyse(out)
    (out / "links.json").write_text(json.dumps(doc, indent=2))
    if "--json" in argv:
        print(json.dumps(doc))
        return 0
    print(f"queue={doc['queue']}: seconds, p50 / p99 over each cell's stored samples "
          f"({doc['samples_unmatched']} with no data packet delivered before them); the columns' quantiles are each their own")
    print(f"{'cell':<6} {'dropped':>13} {'live pkt queue':>15} {'bulk pkt queue':>15} "
          f"{'agent':>12} {'cell':>12} {'server':>12} {'total':>12}")
    for r in doc["cells"]:
        print(f"{r['link']:<6} {r['dropped']:>5}/{r['offered']:<7} {fmt(r['queue_live_s']):>15} "
              f"{fmt(r['queue_bulk_s']):>15} {fmt(r['agent']):>12} {fmt(r['cell']):>12} {fmt(r['server']):>12} "
              f"{fmt(r['total']):>12}")
    print("the slowest 5 % of each cell's samples, mean seconds: agent, cell, server = total")
    for r in doc["cells"]:
        m = r["slowest_5pct_mean_s"]
        if m["total"] is not None:
            print(f"{r['link']:<6} {m['agent']:.2f} + {m['cell']:.2f} + {m['server']:.2f} = {m['total']:.2f}")
    print("the floor: wait from an instant to the cell's next uplink opportunity in its trace, p50 / p99 s")
    for r in doc["cells"]:
        print(f"{r['link']:<6} {fmt(r['trace_wait_s'])}")
    print(f"{'all':<6} {fmt(doc['trace_wait_s'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

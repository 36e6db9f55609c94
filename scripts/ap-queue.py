#!/usr/bin/env python3
"""The AP's queue in a `background` or `smart-ap` run kept with
`--keep-records`: how many of the real-time flows' packets (VoIP and the
game, every packet under 300 bytes) waited over a threshold in the link's
queue, over the bulk's time and over its first seconds, and the largest
queue in those first seconds; with --bins, the queue's smallest and
largest delay per bin, to see what each late episode began with.

    scripts/ap-queue.py results/background/runs/20_250_none_phases_convoy-background
    scripts/ap-queue.py RUN_DIR --bins 0.05 --from 47.5 --to 51
    scripts/ap-queue.py results/background/runs/*convoy-background* --json

Times are link seconds (0 = the emulator's start); the bulk runs 30–150 s
in the `phases` schedule. Reads RUN_DIR/records/ap.up.csv (the direction
the bulk and the real-time flows share)."""
import argparse
import csv
import json
import sys
from pathlib import Path

SMALL = 300  # bytes: VoIP (200) and game (128) packets; the bulk's are full size


def read(path: Path) -> list[tuple[float, int, float]]:
    """(link seconds, length, queueing ms) of every delivered packet."""
    out, t0 = [], None
    with path.open() as f:
        for r in csv.DictReader(f):
            t = int(r["t_ns"])
            t0 = t if t0 is None else t0
            if r["event"] == "dlv":
                out.append(((t - t0) / 1e9, int(r["len"]), int(r["queue_delay_ns"]) / 1e6))
    return out


def summary(pkts, start: float, end: float, first: float, over_ms: float) -> dict:
    small = [(t, q) for t, n, q in pkts if n < SMALL and start <= t < end]
    late = [t for t, q in small if q > over_ms]
    head = [q for t, _, q in pkts if start <= t < start + first]
    return {
        "small_packets": len(small),
        "late": len(late),
        "late_pct": 100 * len(late) / len(small) if small else float("nan"),
        "late_first": sum(1 for t in late if t < start + first),
        "largest_first_ms": max(head, default=float("nan")),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories with records/ap.up.csv")
    ap.add_argument("--from", dest="start", type=float, default=30.0, help="link seconds (default 30, the bulk's start)")
    ap.add_argument("--to", dest="end", type=float, default=150.0, help="link seconds (default 150)")
    ap.add_argument("--first", type=float, default=3.0, help="the first seconds counted apart (default 3)")
    ap.add_argument("--over", type=float, default=10.0, help="late: queued over this many ms (default 10)")
    ap.add_argument("--bins", type=float, help="also print the queue's smallest / largest delay per bin of this many s")
    ap.add_argument("--json", action="store_true", help="one JSON object per run")
    a = ap.parse_args()
    for run in a.runs:
        path = run / "records" / "ap.up.csv"
        if not path.is_file():
            print(f"ap-queue: {path}: no link records (run the experiment with --keep-records)", file=sys.stderr)
            return 1
        pkts = read(path)
        s = summary(pkts, a.start, a.end, a.first, a.over)
        if a.json:
            print(json.dumps({"run": str(run), **s}))
        else:
            print(f"{run.name}: {s['late']} of {s['small_packets']} real-time packets over {a.over:g} ms "
                  f"({s['late_pct']:.2f} %), {s['late_first']} in the first {a.first:g} s; "
                  f"largest queue then {s['largest_first_ms']:.1f} ms")
        if a.bins:
            bins: dict[int, list[float]] = {}
            for t, _, q in pkts:
                if a.start <= t < a.end:
                    bins.setdefault(int(t / a.bins), []).append(q)
            for b in sorted(bins):
                v = bins[b]
                print(f"  {b * a.bins:8.2f} s  n {len(v):4d}  smallest {min(v):6.1f}  largest {max(v):6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

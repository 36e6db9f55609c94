#!/usr/bin/env python3
"""The random-loss sweep in virtual time: `convoy simulate --rate 20mbit
--delay 25ms --size 10MB --loss P --seed S --json` over seeds 1..N at each
loss rate, for one or more builds side by side. Prints per loss rate and
build the mean goodput over C·(1 − p) with its standard error, the worst
seed, and the mean write-to-read p95 (issue 32's "no regression" and
"reading under loss" figures).

    scripts/loss-sweep.py [--bin target/release/convoy[,OTHER]] [--loss 0,1,2,5,10,20,30] [--seeds 40] [--json]
"""
import argparse
import concurrent.futures as cf
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(binary: str, loss: float, seed: int) -> dict:
    cmd = [binary, "simulate", "--rate", "20mbit", "--delay", "25ms", "--size", "10MB",
           "--loss", f"{loss:g}%", "--seed", str(seed), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    d = json.loads(p.stdout)
    return {"ratio": d["ratio"], "latency_p95_ms": d["latency_p95_ms"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "convoy"),
                    help="comma-separated convoy binaries (default target/release/convoy)")
    ap.add_argument("--loss", default="0,1,2,5,10,20,30", help="loss rates in %% (default 0,1,2,5,10,20,30)")
    ap.add_argument("--seeds", type=int, default=40, help="seeds 1..N (default 40)")
    ap.add_argument("-j", type=int, default=2, help="simulations at once")
    ap.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    a = ap.parse_args()
    bins = a.bin.split(",")
    for b in bins:
        if not Path(b).is_file():
            print(f"error: {b}: no convoy binary (cargo build --release -p convoy)", file=sys.stderr)
            return 2
    try:
        losses = [float(x) for x in a.loss.split(",")]
    except ValueError:
        print(f"error: --loss {a.loss}: not a comma-separated list of numbers", file=sys.stderr)
        return 2
    if a.seeds < 2:
        print("error: --seeds must be at least 2 (a standard error needs two)", file=sys.stderr)
        return 2
    rows = []
    with cf.ThreadPoolExecutor(a.j) as pool:
        for loss in losses:
            for b in bins:
                try:
                    runs = list(pool.map(lambda s: run(b, loss, s), range(1, a.seeds + 1)))
                except RuntimeError as e:
                    print(f"error: {e}", file=sys.stderr)
                    return 1
                g = [r["ratio"] for r in runs]
                row = {"bin": b, "loss_percent": loss, "seeds": a.seeds,
                       "goodput_mean": statistics.mean(g),
                       "goodput_stderr": statistics.stdev(g) / len(g) ** 0.5,
                       "goodput_worst": min(g),
                       "latency_p95_ms_mean": statistics.mean(r["latency_p95_ms"] for r in runs)}
                rows.append(row)
                if not a.json:
                    print(f"{loss:5g} %  {b}: goodput over C(1-p) {row['goodput_mean']:.4f} "
                          f"± {row['goodput_stderr']:.4f}, worst {row['goodput_worst']:.4f}; "
                          f"write-to-read p95 {row['latency_p95_ms_mean']:.0f} ms", flush=True)
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

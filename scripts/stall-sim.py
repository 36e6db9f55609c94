#!/usr/bin/env python3
"""One link over many seeds in virtual time: `convoy simulate --link LINK
--duration D --seed S` for each seed, with the sender's stalls counted.
What a single run hides (a flight lost in a loss burst, a probe timeout
stretched by an outage's backlog) shows as a tail over seeds.

    scripts/stall-sim.py --link up=ATT.up,down=ATT.down,delay=20ms,queue=200,loss=ge:0.01/0.3 --seeds 55
    scripts/stall-sim.py --link rate=0.3mbit,delay=20ms,queue=30,loss=2% --seeds 10 --json

Trace names without a directory are looked up in ../shared/traces (ATT.up
stands for ATT-LTE-driving-2016.up, TMobile and Verizon for their
LTE-short files). A stall is a run of whole --bin bins in which the
receiver was delivered nothing while the data direction's trace offered
more than --min-opportunities delivery opportunities per second (on a
constant link, every bin counts as offering). Prints per seed the goodput
over C x (1 - p), p95 queueing, write-to-read p95 and the longest stall,
then their means and the worst."""
import argparse
import collections
import concurrent.futures as cf
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALIASES = {"ATT": "ATT-LTE-driving-2016", "TMobile": "TMobile-LTE-short", "Verizon": "Verizon-LTE-short"}


def resolve_link(link: str, traces: Path) -> tuple[str, Path | None]:
    """The link with trace names made paths, and the data direction's trace."""
    keys, up = [], None
    for item in link.split(","):
        key, _, value = item.partition("=")
        if key in ("up", "down") and "/" not in value:
            stem, _, direction = value.rpartition(".")
            value = str(traces / f"{ALIASES.get(stem, stem)}.{direction}")
            if not Path(value).is_file():
                raise SystemExit(f"error: {key}={item.partition('=')[2]}: no such trace in {traces}")
        if key == "up":
            up = Path(value)
        keys.append(f"{key}={value}")
    return ",".join(keys), up


def opportunities_per_bin(trace: Path | None, bin_s: float) -> collections.Counter | None:
    if trace is None:
        return None
    return collections.Counter(int(int(line) / 1000 / bin_s) for line in trace.open() if line.strip())


def longest_stall(delivered: list, offered: collections.Counter | None, need: float) -> int:
    longest = run = 0
    for i, got in enumerate(delivered):
        has_capacity = offered is None or offered.get(i, 0) >= need
        run = run + 1 if got == 0 and has_capacity else 0
        longest = max(longest, run)
    return longest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--link", required=True, help="the link in convoy emu's KEY=VALUE syntax")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 1..N (default 10)")
    ap.add_argument("--duration", default="40s", help="virtual time per run (default 40s)")
    ap.add_argument("--bin", type=float, default=1.0, help="stall bin, seconds (default 1)")
    ap.add_argument("--min-opportunities", type=float, default=20,
                    help="a bin offers capacity above this many opportunities per second (default 20)")
    ap.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    ap.add_argument("--convoy", type=Path, default=ROOT / "target" / "release" / "convoy")
    ap.add_argument("-j", type=int, default=2, help="simulations at once")
    ap.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    a = ap.parse_args()
    if not a.convoy.is_file():
        print(f"error: {a.convoy}: no convoy binary (cargo build --release -p convoy)", file=sys.stderr)
        return 2
    if a.seeds < 1 or a.bin <= 0:
        print("error: --seeds must be at least 1 and --bin positive", file=sys.stderr)
        return 2
    link, up = resolve_link(a.link, a.traces)
    offered = opportunities_per_bin(up, a.bin)
    need = a.min_opportunities * a.bin

    def run(seed: int) -> dict:
        cmd = [str(a.convoy), "simulate", "--link", link, "--duration", a.duration, "--seed", str(seed),
               "--timeline-bin", f"{int(a.bin * 1000)}ms", "--json"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            return {"seed": seed, "error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
        d = json.loads(out.stdout)
        stall = longest_stall(d["report"]["uplink_delivered"], offered, need)
        return {"seed": seed, "ratio": d["ratio"], "queue_p95_ms": d["queue_delay_p95_ms"],
                "write_to_read_p95_ms": d["latency_p95_ms"], "longest_stall_s": stall * a.bin}

    with cf.ThreadPoolExecutor(a.j) as pool:
        rows = list(pool.map(run, range(1, a.seeds + 1)))
    errors = [r for r in rows if "error" in r]
    ok = [r for r in rows if "error" not in r]
    summary = {}
    if ok:
        summary = {k: {"mean": statistics.mean(r[k] for r in ok), "worst": (min if k == "ratio" else max)(r[k] for r in ok)}
                   for k in ("ratio", "queue_p95_ms", "write_to_read_p95_ms", "longest_stall_s")}
        summary["runs_with_a_stall"] = sum(r["longest_stall_s"] > 0 for r in ok)
    if a.json:
        print(json.dumps({"link": a.link, "duration": a.duration, "runs": rows, "summary": summary}, indent=1))
    else:
        print(f"{'seed':>4s} {'ratio':>6s} {'q p95':>7s} {'w2r p95':>8s} {'stall':>6s}")
        for r in rows:
            if "error" in r:
                print(f"{r['seed']:4d} error: {r['error']}")
            else:
                print(f"{r['seed']:4d} {r['ratio']:6.3f} {r['queue_p95_ms']:5.0f}ms {r['write_to_read_p95_ms']:6.0f}ms "
                      f"{r['longest_stall_s']:5.0f}s")
        if ok:
            s = summary
            print(f"{len(ok)} runs: ratio mean {s['ratio']['mean']:.3f} (worst {s['ratio']['worst']:.3f}), "
                  f"p95 queueing mean {s['queue_p95_ms']['mean']:.0f} ms, write-to-read p95 mean "
                  f"{s['write_to_read_p95_ms']['mean']:.0f} ms (worst {s['write_to_read_p95_ms']['worst']:.0f}), "
                  f"runs with a stall {s['runs_with_a_stall']}, longest {s['longest_stall_s']['worst']:.0f} s")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

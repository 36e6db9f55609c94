#!/usr/bin/env python3
"""The multipath drives in virtual time, over many seeds: each SUMO drive
of `experiments run mp-drive` (the car's 802.11p link from `convoy trace
from-mobility`, the LTE drive trace beside it, the same `convoy emu` link
keys and seeds) run by `convoy simulate --path wifi:... --path lte:...
--duration D --seed S`. A 300 s drive takes the emulator five minutes and
the simulator a few seconds, so a multipath rule can be judged over many
seeds before the emulator confirms it.

    .venv/bin/python scripts/mp-drive-sim.py --seeds 10
    .venv/bin/python scripts/mp-drive-sim.py --drives cross --seeds 3 --duration 90 --json

Prints per run the goodput over what the links could carry, what each
link carried of its own capacity, and the reader's stalls over 1 s while
some link had capacity (the drive's target: none); then per drive the
min, median and max. The Wi-Fi traces need SUMO (`make setup` installs
it); they are cached where the experiment keeps them (OUT/mp-drive/
mobility), so both run the same drives. Exits 1 if a run failed."""
import argparse
import concurrent.futures as cf
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

from convoy_lab.experiments.catalog import ExperimentError  # noqa: E402
from convoy_lab.experiments.multipath import drive_wifi_keys, lte_trace_keys  # noqa: E402
from convoy_lab.experiments.multipath_drive import DRIVES, drive_wifi_trace  # noqa: E402


def run_one(convoy: Path, drive: str, wifi: str, lte: str, seed: int, duration: float) -> dict:
    """One drive at one seed: the emulator's seeds (Wi-Fi `seed`, LTE
    `seed + 1`) and the endpoints' from --seed."""
    cmd = [str(convoy), "simulate", "--path", f"wifi:{wifi},seed={seed}", "--path", f"lte:{lte},seed={seed + 1}",
           "--duration", f"{duration:g}s", "--seed", str(seed), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        return {"drive": drive, "seed": seed, "error": lines[-1] if lines else f"exit {out.returncode}"}
    d = json.loads(out.stdout)
    paths = {p["name"]: p for p in d["paths"]}
    longest = max(d["stalls"], key=lambda s: s["seconds"], default={"seconds": 0.0, "at_s": 0.0})
    return {
        "drive": drive, "seed": seed,
        "goodput_mbit_s": d["goodput_bps"] / 1e6,
        "capacity_mbit_s": d["capacity_bps"] / 1e6,
        "ratio": d["goodput_bps"] / d["capacity_bps"] if d["capacity_bps"] else 0.0,
        **{f"{n}_carried_mbit_s": paths[n]["carried_bps"] / 1e6 for n in ("wifi", "lte")},
        **{f"{n}_capacity_mbit_s": paths[n]["capacity_bps"] / 1e6 for n in ("wifi", "lte")},
        "stalls_over_1s_with_capacity": len(d["stalls_over_limit"]),
        "over_1s": [(round(s["at_s"], 1), round(s["seconds"], 2), round(s["with_capacity_s"], 2))
                    for s in d["stalls_over_limit"]],
        "longest_stall_s": longest["seconds"],
        "longest_stall_at_s": longest["at_s"],
        "cpu_s": d["cpu_seconds"],
    }


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--drives", default=",".join(d.name for d in DRIVES),
                    help=f"comma-separated drives (default: {','.join(d.name for d in DRIVES)})")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 1..N (default 10)")
    ap.add_argument("--duration", type=float, default=300.0, help="seconds of each drive (default 300, as mp-drive)")
    ap.add_argument("--out", type=Path, default=ROOT / "results", help="where the drives' traces are cached")
    ap.add_argument("--convoy", type=Path, default=ROOT / "target" / "release" / "convoy")
    ap.add_argument("-j", type=int, default=2, help="simulations at once (default 2)")
    ap.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    a = ap.parse_args()
    if not a.convoy.is_file():
        print(f"error: {a.convoy}: no convoy binary (cargo build --release -p convoy)", file=sys.stderr)
        return 2
    if a.seeds < 1 or a.duration <= 0 or a.j < 1:
        print("error: --seeds and -j must be at least 1, --duration positive", file=sys.stderr)
        return 2
    by_name = {d.name: d for d in DRIVES}
    wanted = [n.strip() for n in a.drives.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in by_name]
    if unknown or not wanted:
        print(f"error: --drives {a.drives}: the drives are {', '.join(by_name)}", file=sys.stderr)
        return 2
    jobs = []
    try:
        for name in wanted:
            drive = by_name[name]
            wifi = drive_wifi_trace(drive, a.out / "mp-drive" / "mobility" / name, a.duration)
            lte, _ = lte_trace_keys(drive.lte_trace)
            jobs += [(name, drive_wifi_keys(wifi), lte, seed) for seed in range(1, a.seeds + 1)]
    except ExperimentError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    with cf.ThreadPoolExecutor(a.j) as pool:
        rows = list(pool.map(lambda j: run_one(a.convoy, *j, a.duration), jobs))
    ok = [r for r in rows if "error" not in r]
    summary = {}
    for name in wanted:
        mine = [r for r in ok if r["drive"] == name]
        if mine:
            summary[name] = {
                "runs": len(mine),
                "ratio": spread([r["ratio"] for r in mine]),
                "runs_with_a_stall_over_1s": sum(r["stalls_over_1s_with_capacity"] > 0 for r in mine),
                "longest_stall_s": spread([r["longest_stall_s"] for r in mine]),
            }
    if a.json:
        print(json.dumps({"duration_s": a.duration, "runs": rows, "summary": summary}, indent=1))
        return 1 if len(ok) < len(rows) else 0
    print(f"{'drive':6s} {'seed':>4s} {'Mbit/s':>7s} {'of C':>6s} {'wifi/C':>11s} {'lte/C':>11s} "
          f"{'>1s':>4s} {'longest':>12s}")
    for r in rows:
        if "error" in r:
            print(f"{r['drive']:6s} {r['seed']:4d} error: {r['error']}")
            continue
        print(f"{r['drive']:6s} {r['seed']:4d} {r['goodput_mbit_s']:7.2f} {r['ratio']:6.3f} "
              f"{r['wifi_carried_mbit_s']:5.2f}/{r['wifi_capacity_mbit_s']:<5.2f} "
              f"{r['lte_carried_mbit_s']:5.2f}/{r['lte_capacity_mbit_s']:<5.2f} "
              f"{r['stalls_over_1s_with_capacity']:4d} {r['longest_stall_s']:5.2f}s@{r['longest_stall_at_s']:<5.1f}")
    for name, s in summary.items():
        print(f"{name}: {s['runs']} runs, goodput/C {s['ratio']}, longest stall {s['longest_stall_s']} s, "
              f"runs with a stall over 1 s beside capacity: {s['runs_with_a_stall_over_1s']}")
    return 1 if len(ok) < len(rows) else 0


if __name__ == "__main__":
    sys.exit(main())

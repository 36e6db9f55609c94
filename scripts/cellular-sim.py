#!/usr/bin/env python3
"""The cellular grid in virtual time: `convoy simulate` over every point of a
`cellular` experiment's kernel runs (same trace direction, offset, 20 ms,
200-packet queue, added loss), beside those runs' goodput share and p95
queueing delay. Seconds instead of hours, so it is the tuning loop for a
rate controller; the emulator (`experiments run cellular`) is the check.

    scripts/cellular-sim.py --kernel results/cellular/runs.csv [--loss 0] [--mode tide]

The kernel CSV comes from `experiments run cellular --schemes tcp-cubic,tcp-bbr`.
Prints per point: convoy's share of the capacity, Cubic's and BBR's, the
ratios, p95 queueing delay against the 0.5x-Cubic budget; then the worst
ratios and where unused capacity went (what limited the sender)."""
import argparse
import concurrent.futures as cf
import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", type=Path, required=True, help="runs.csv of a cellular run with tcp-cubic and tcp-bbr")
    ap.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    ap.add_argument("--loss", type=float, default=0.0, help="added loss in %% (a loss setting of the kernel runs)")
    ap.add_argument("--mode", default="tide")
    ap.add_argument("--bin", type=Path, default=ROOT / "target" / "release" / "convoy")
    ap.add_argument("-j", type=int, default=2, help="simulations at once")
    a = ap.parse_args()
    if not a.kernel.is_file():
        print(f"error: {a.kernel}: no such file", file=sys.stderr)
        return 2
    if not a.bin.is_file():
        print(f"error: {a.bin}: no convoy binary (cargo build --release -p convoy)", file=sys.stderr)
        return 2
    ref: dict = {}
    for r in csv.DictReader(a.kernel.open()):
        if float(r["loss_pct"]) != a.loss or r["status"] != "ok":
            continue
        cap = float(r["capacity_mbit_s"])
        ref.setdefault((r["trace"], float(r["offset_s"])), {})[r["scheme"]] = (
            float(r["goodput_mbit_s"]) / cap if cap else float("nan"),
            float(r["qdelay_p95_ms"]),
        )
    if not ref:
        print(f"error: {a.kernel}: no successful runs at {a.loss:g} % loss", file=sys.stderr)
        return 2

    def simulate(key):
        trace, offset = key
        twin = trace[:-3] + ".down" if trace.endswith(".up") else trace[:-5] + ".up"
        link = (f"up={a.traces / trace},down={a.traces / twin},delay=20ms,queue=200,"
                f"offset={offset:g}s,up-loss={a.loss:g}%")
        cmd = [str(a.bin), "simulate", "--mode", a.mode, "--link", link, "--duration", "60s", "--json"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        try:
            return key, json.loads(p.stdout)
        except json.JSONDecodeError:
            return key, {"error": p.stderr.strip()}

    with cf.ThreadPoolExecutor(a.j) as pool:
        results = dict(pool.map(simulate, sorted(ref)))
    nan = (float("nan"), float("nan"))
    print(f"{'trace':28s} {'off':>4s} | {'ours':>6s} {'cubic':>6s} {'bbr':>6s} {'vsC':>5s} {'vsB':>5s} | "
          f"{'qp95':>5s} {'budget':>6s} {'ok':>3s}")
    worst_c = worst_b = float("inf")
    met = 0
    ratios_c: list = []
    ratios_b: list = []
    idle: dict = {}
    for key in sorted(results):
        d = results[key]
        if "error" in d:
            print(f"{key[0]:28s} {key[1]:4.0f} | error: {d['error']}")
            continue
        up = d["report"]["upload"]
        share = d["goodput_bps"] / up["capacity_bps"] if up["capacity_bps"] else 0.0
        cubic, bbr = ref[key].get("tcp-cubic", nan), ref[key].get("tcp-bbr", nan)
        q, budget = d["queue_delay_p95_ms"], 0.5 * cubic[1]
        vs_c, vs_b = share / cubic[0], share / bbr[0]
        worst_c, worst_b, met = min(worst_c, vs_c), min(worst_b, vs_b), met + (q <= budget)
        ratios_c.append(vs_c)
        ratios_b.append(vs_b)
        print(f"{key[0]:28s} {key[1]:4.0f} | {share:6.3f} {cubic[0]:6.3f} {bbr[0]:6.3f} {vs_c:5.2f} {vs_b:5.2f} | "
              f"{q:5.0f} {budget:6.0f} {'yes' if q <= budget else 'NO':>3s}")
        capacity = up["capacity_bps"] * 60 / 8
        for state, unused in d["report"]["uplink_idle_by_state"].items():
            idle.setdefault(state or "before the handshake", []).append(unused / capacity)
    n = max(len(ratios_c), 1)
    print(f"vs cubic: mean {sum(ratios_c) / n:.3f}, worst {worst_c:.3f}, at or above 1.0 at "
          f"{sum(r >= 1.0 for r in ratios_c)}/{len(ratios_c)}; vs bbr: mean {sum(ratios_b) / n:.3f}, "
          f"worst {worst_b:.3f}; delay bound met {met}/{len(results)}")
    print("unused capacity share by what limited the sender (mean over runs): "
          + ", ".join(f"{k}: {sum(v) / len(v):.3f}" for k, v in sorted(idle.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())

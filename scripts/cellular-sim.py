#!/usr/bin/env python3
"""The cellular grid in virtual time: `convoy simulate` over every point of a
`cellular` experiment's kernel runs (same trace direction, offset, 20 ms,
200-packet queue, added loss), beside those runs' goodput share and p95
queueing delay. Seconds instead of hours, so it is the tuning loop for a
rate controller; the emulator (`experiments run cellular`) is the check.

    scripts/cellular-sim.py --kernel results/cellular/runs.csv [--loss 0] [--mode tide]
    scripts/cellular-sim.py --offsets 12 [--loss 0] [--bin target/release/convoy]
    scripts/cellular-sim.py --offsets 3 --scale 0.05,0.25,0.5,1 [--controller oracle]
    scripts/cellular-sim.py --offsets 3 --scale 0.05,0.25,0.5,1 --frontier [--points]

The kernel CSV comes from `experiments run cellular --schemes tcp-cubic,tcp-bbr`.
Prints per point: convoy's share of the capacity, Cubic's and BBR's, the
ratios, p95 queueing delay against the 0.5x-Cubic budget; then the worst
ratios and where unused capacity went (what limited the sender).

Without --kernel it runs convoy alone over every shared trace direction at
--offsets points spread evenly over each trace, and prints the mean and
worst share of capacity, the mean p95 queueing delay, and the packets the
sender declared lost and the receiver got redundant: a build against
another, more points than the kernel grid has. --scale runs that grid on
twins of the traces at each capacity factor (`convoy trace scale`, both
directions scaled), a line per factor, with the share of packets dropped
at the queue, the worst point and the drops by what limited the sender.
--frontier runs the oracle sender beside it at every point and
counts the points within issue 32's distance of that frontier: goodput at
least 0.95x the oracle's, p95 queueing at most 2x the oracle's + 30 ms
(--points prints each point)."""
import argparse
import concurrent.futures as cf
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", type=Path, help="runs.csv of a cellular run with tcp-cubic and tcp-bbr")
    ap.add_argument("--offsets", type=int, default=12, help="without --kernel: offsets per trace direction")
    ap.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    ap.add_argument("--loss", type=float, default=0.0, help="added loss in %% (a loss setting of the kernel runs)")
    ap.add_argument("--mode", default="tide")
    ap.add_argument("--bin", type=Path, default=ROOT / "target" / "release" / "convoy")
    ap.add_argument("-j", type=int, default=2, help="simulations at once")
    ap.add_argument("--scale", help="without --kernel: comma-separated capacity factors (default 1)")
    ap.add_argument("--controller", help="a --controller for convoy simulate (oracle: the frontier)")
    ap.add_argument("--frontier", action="store_true",
                    help="without --kernel: also run the oracle at every point and give the distance to it")
    ap.add_argument("--points", action="store_true", help="with --frontier: a line per point")
    a = ap.parse_args()
    if a.kernel is not None and not a.kernel.is_file():
        print(f"error: {a.kernel}: no such file", file=sys.stderr)
        return 2
    if not a.bin.is_file():
        print(f"error: {a.bin}: no convoy binary (cargo build --release -p convoy)", file=sys.stderr)
        return 2
    if a.kernel is None:
        scales = [float(f) for f in (a.scale or "1").split(",")]
        if any(f <= 0 for f in scales):
            print(f"error: --scale {a.scale}: factors must be positive", file=sys.stderr)
            return 2
        worst = 0
        with tempfile.TemporaryDirectory() as tmp:
            for f in scales:
                worst = max(worst, convoy_alone(a, f, Path(tmp)))
        return worst
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

    results = simulate_all(a, sorted(ref))
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


def simulate_all(a, keys, traces: Path | None = None) -> dict:
    """`convoy simulate` at each (trace direction, offset) of `keys`, as the
    cellular experiment's link: 20 ms, 200 packets, the twin direction for
    feedback, 60 s."""
    traces = traces or a.traces

    def simulate(key):
        trace, offset = key
        twin = trace[:-3] + ".down" if trace.endswith(".up") else trace[:-5] + ".up"
        link = (f"up={traces / trace},down={traces / twin},delay=20ms,queue=200,"
                f"offset={offset:g}s,up-loss={a.loss:g}%")
        cmd = [str(a.bin), "simulate", "--mode", a.mode, "--link", link, "--duration", "60s", "--json"]
        if getattr(a, "controller", None):
            cmd += ["--controller", a.controller]
        p = subprocess.run(cmd, capture_output=True, text=True)
        try:
            return key, json.loads(p.stdout)
        except json.JSONDecodeError:
            return key, {"error": p.stderr.strip()}

    with cf.ThreadPoolExecutor(a.j) as pool:
        return dict(pool.map(simulate, keys))


def trace_span_s(path: Path) -> float:
    """The last delivery opportunity of a Mahimahi trace, in seconds."""
    last = 0
    for line in path.open():
        if line.strip():
            last = int(line)
    return last / 1000


def convoy_alone(a, factor: float = 1.0, tmp: Path | None = None) -> int:
    traces = a.traces
    if factor != 1.0:
        traces = tmp / f"x{factor:g}"
        traces.mkdir()
        for path in sorted(a.traces.glob("*.up")) + sorted(a.traces.glob("*.down")):
            subprocess.run([str(a.bin), "trace", "scale", "--factor", f"{factor:g}", str(path),
                            str(traces / path.name)], check=True, capture_output=True)
    keys = []
    for path in sorted(traces.glob("*.up")) + sorted(traces.glob("*.down")):
        span = trace_span_s(path)
        keys += [(path.name, round(k * span / a.offsets)) for k in range(a.offsets)]
    if not keys:
        print(f"error: {a.traces}: no *.up or *.down traces", file=sys.stderr)
        return 2
    results = simulate_all(a, keys, traces)
    oracle = simulate_all(argparse.Namespace(**{**vars(a), "controller": "oracle"}), keys, traces) \
        if a.frontier else {}
    errors = [k for k, d in list(results.items()) + list(oracle.items()) if "error" in d]
    for k in errors:
        print(f"{k[0]} at {k[1]} s: error: {results[k]['error']}", file=sys.stderr)
    ok = [d for d in results.values() if "error" not in d]
    if not ok:
        return 1
    shares = [d["goodput_bps"] / d["report"]["upload"]["capacity_bps"] for d in ok]
    q = [d["queue_delay_p95_ms"] for d in ok]
    lost = sum(d["packets_lost"] for d in ok)
    redundant = sum(d["redundant_received"] for d in ok)
    drops = [dropped(d) for d in ok]
    air = [d["air_per_payload"] for d in ok if d.get("air_per_payload")]
    who = a.controller or a.mode
    print(f"x{factor:g}: {len(ok)} points ({a.offsets} offsets per direction, {a.loss:g} % loss, {who}): "
          f"share of capacity mean {sum(shares) / len(shares):.4f}, worst {min(shares):.3f}; "
          f"p95 queueing mean {sum(q) / len(q):.0f} ms, worst {max(q):.0f} ms; dropped at the queue "
          f"mean {100 * sum(drops) / len(drops):.2f} %, worst {100 * max(drops):.2f} %; "
          f"packets declared lost {lost}, redundant at the receiver {redundant}; bytes on the air per "
          f"payload byte mean {sum(air) / max(len(air), 1):.4f}, worst {max(air, default=float('nan')):.4f}")
    worst = max((k for k in results if "error" not in results[k]), key=lambda k: dropped(results[k]))
    by_state = drops_by_state(ok)
    total = max(sum(by_state.values()), 1)
    print(f"x{factor:g} drops: worst at {worst[0]} from {worst[1]} s; by what limited the sender: "
          + ", ".join(f"{k} {100 * v / total:.0f} %" for k, v in sorted(by_state.items())))
    if oracle:
        frontier_distance(a, factor, results, oracle)
    return 1 if errors else 0


def drops_by_state(runs: list) -> dict:
    """Datagrams the queue dropped, summed over runs by what limited the
    sender in their timeline bin (`silent`: coasting through a silent
    return path; `track`: the rate law; `window`)."""
    out: dict = {}
    for d in runs:
        r = d["report"]
        for i, n in enumerate(r["uplink_dropped"]):
            if n:
                state = r["client_limited_by"][i] if i < len(r["client_limited_by"]) else "after the end"
                out[state] = out.get(state, 0) + n
    return out


def dropped(d: dict) -> float:
    """The share of the sender's datagrams the link's queue dropped."""
    up = d["report"]["upload"]
    return up["datagrams_dropped"] / max(up["datagrams_offered"], 1)


def share_and_q95(d: dict) -> tuple:
    return d["goodput_bps"] / d["report"]["upload"]["capacity_bps"], d["queue_delay_p95_ms"]


def frontier_distance(a, factor: float, results: dict, oracle: dict) -> None:
    """Each point against the oracle's: goodput at least 0.95x its, p95
    queueing at most 2x its + 30 ms (issue 32's "close to the limit")."""
    both = [k for k in sorted(results) if "error" not in results[k] and "error" not in oracle.get(k, {"error": 1})]
    near_g = near_q = near = 0
    for k in both:
        (s, q), (os_, oq) = share_and_q95(results[k]), share_and_q95(oracle[k])
        g_ok, q_ok = s >= 0.95 * os_, q <= 2 * oq + 30
        near_g, near_q, near = near_g + g_ok, near_q + q_ok, near + (g_ok and q_ok)
        if a.points:
            print(f"  {k[0]:28s} {k[1]:4d} s: share {s:.3f} (oracle {os_:.3f}{'' if g_ok else ', FAR'}), "
                  f"p95 queueing {q:.0f} ms (oracle {oq:.0f}{'' if q_ok else ', FAR'}), "
                  f"dropped at the queue {100 * dropped(results[k]):.1f} % (oracle {100 * dropped(oracle[k]):.1f} %)")
    shares = [share_and_q95(oracle[k])[0] for k in both]
    qs = [share_and_q95(oracle[k])[1] for k in both]
    n = max(len(both), 1)
    print(f"x{factor:g} frontier: oracle share mean {sum(shares) / n:.4f}, p95 queueing mean {sum(qs) / n:.0f} ms; "
          f"goodput >= 0.95x the oracle's at {near_g}/{len(both)}, p95 queueing <= 2x + 30 ms at "
          f"{near_q}/{len(both)}, both at {near}/{len(both)}")


if __name__ == "__main__":
    sys.exit(main())

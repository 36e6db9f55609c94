"""The multipath experiments (issue 16): convoy over Wi-Fi and LTE at once
beside kernel MPTCP (fullmesh and backup), single-path TCP BBR and
single-path convoy, over two `convoy emu` links (`wifi` and `lte`, the
client sending).

    python -m convoy_lab.experiments run mp-aggregate|mp-wifi-dies|mp-drive|mp-capprobe [--quick] [--schemes A,B]

* `mp-aggregate`: Wi-Fi 30 Mbit/s 5 ms one way + LTE 10 Mbit/s 30 ms; the
  same with 1 % loss on each; LTE replaying a shared drive trace, and the
  same trace at a quarter of its rate.
* `mp-wifi-dies`: Wi-Fi goes away mid-transfer and comes back before the
  end; (a) both paths active, (b) Wi-Fi only with LTE standby; once as a
  silent blackhole (`outage-policy=drop`: the interface stays up), once
  with the interface going down (`outage-policy=down`, skipped with the
  emulator's own message where it lacks that policy).
* `mp-drive`: five minutes of each of two SUMO drives past roadside units
  (802.11p coverage from `convoy trace from-mobility`), each beside an LTE
  drive trace of its own.
* `mp-capprobe`: the Mena thesis's bad-Wi-Fi detection (SPEC S3): Wi-Fi
  stays up but turns bad, LTE is the backup; time from the degradation to
  the Wi-Fi path's demotion, beside the thesis's 4–19 s.

One run per case, scheme and seed (`--seeds N`), one at a time; each
leaves its records, receiver and sender documents in
OUT/NAME/runs/CASE/SCHEME/ (…/seed-K/ with several seeds).
"""

from __future__ import annotations

import functools
import json
import math
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from ..analysis import multipath as mpa
from .catalog import ExperimentError, shared_traces_dir
from ..emu.multipath import LINKS, LTE, WIFI, DeliveryError, get
from ..runner import convoy_binary, run_emulator
from ..report import stamp
from ..traces import window_capacity_mbit

TITLES = {
    "mp-aggregate": "Multipath aggregate: Wi-Fi 30 Mbit/s + LTE 10 Mbit/s, clean, lossy, LTE trace, LTE trace at a quarter",
    "mp-wifi-dies": "Multipath: Wi-Fi dies mid-transfer (both active; LTE standby), blackhole and interface down",
    "mp-drive": "Multipath drives: two SUMO drives past RSUs (802.11p), each beside an LTE drive trace",
    "mp-capprobe": "Multipath: bad-Wi-Fi detection, Mena's CapProbe experiment (SPEC S3)",
}
WIFI_KEYS = "rate=30mbit,delay=5ms,queue=100"
LTE_KEYS = "rate=10mbit,delay=30ms,queue=100"
LTE_TRACE = "TMobile-LTE-short"
SINGLE = ["tcp-bbr-wifi", "tcp-bbr-lte", "convoy-wifi", "convoy-lte"]
LTE_RTT_MS = 60.0
SLOW_LTE = 0.25  # mp-aggregate's slow LTE: the drive trace at a quarter of its rate


@dataclass
class Case:
    """One emulated pair of links and the schemes that run over it."""

    name: str
    wifi: str  # --link keys after `wifi:`
    lte: str
    seconds: float
    schemes: list[str]
    loss_pct: float = 0.0
    outage: tuple[float, float] | None = None  # Wi-Fi's, link time (s)
    policy: str = ""
    bad_at: float | None = None  # mp-capprobe: when the Wi-Fi turns bad
    capacity: dict = field(default_factory=dict)  # link → (trace path or None, rate Mbit/s or None)

    def capacity_mbit(self, start_s: float, seconds: float) -> float:
        """Σ of the links' capacities over [start, start + seconds) of link time."""
        total = 0.0
        for trace, rate in self.capacity.values():
            total += window_capacity_mbit(trace, start_s, seconds) if trace is not None else rate
        return total


def lte_trace_keys(name: str = LTE_TRACE) -> tuple[str, Path]:
    """`convoy emu` link keys for the shared LTE drive trace `name` (its
    `.up` carrying the data), and that `.up` file."""
    d = shared_traces_dir()
    up, down = d / f"{name}.up", d / f"{name}.down"
    for p in (up, down):
        if not p.is_file():
            raise ExperimentError(f"needs the shared trace {p}: set CONVOY_SHARED to the shared directory")
    return f"up={up},down={down},delay=30ms,queue=100", up


def _scaled_lte_trace_keys(out: Path, factor: float) -> tuple[str, Path]:
    """The LTE drive trace at `factor` of its rate (`convoy trace scale`:
    its bursts, gaps and outages where they were), cached in `out`."""
    _, up = lte_trace_keys()
    paths = []
    for src in (up, up.with_suffix(".down")):
        dst = out / f"{src.stem}-x{factor:g}{src.suffix}"
        if not dst.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run([str(convoy_binary()), "trace", "scale", "--factor", f"{factor:g}", str(src), str(dst)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise ExperimentError(f"convoy trace scale failed: {proc.stderr.strip()[-300:]}")
        paths.append(dst)
    return f"up={paths[0]},down={paths[1]},delay=30ms,queue=100", paths[0]


def aggregate_cases(quick: bool, out: Path) -> list[Case]:
    t = 10.0 if quick else 30.0
    schemes = ["mptcp-fullmesh", *SINGLE, "convoy-mp"]
    lte_trace, up = lte_trace_keys()
    slow_trace, slow_up = _scaled_lte_trace_keys(out / "mp-aggregate" / "traces", SLOW_LTE)
    return [
        Case("clean", WIFI_KEYS, LTE_KEYS, t, schemes, capacity={WIFI: (None, 30.0), LTE: (None, 10.0)}),
        Case("loss-1pct", WIFI_KEYS + ",loss=1%", LTE_KEYS + ",loss=1%", t, schemes, loss_pct=1.0,
             capacity={WIFI: (None, 30.0), LTE: (None, 10.0)}),
        Case("lte-trace", WIFI_KEYS, lte_trace, t, schemes, capacity={WIFI: (None, 30.0), LTE: (up, None)}),
        Case(f"lte-trace-x{SLOW_LTE:g}", WIFI_KEYS, slow_trace, t, schemes,
             capacity={WIFI: (None, 30.0), LTE: (slow_up, None)}),
    ]


@functools.lru_cache(maxsize=None)
def policy_down_unsupported() -> str | None:
    """None if this convoy emu takes `outage-policy=down`, else its error."""
    cmd = [str(convoy_binary()), "emu", "--link", "probe:rate=1mbit,outage=1s-2s,outage-policy=down", "--", "true"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    return f"this convoy emu rejects outage-policy=down ({lines[-1] if lines else f'exit {proc.returncode}'})"


def wifi_dies_cases(quick: bool) -> list[Case]:
    t, outage = (14.0, (5.0, 9.0)) if quick else (30.0, (10.0, 18.0))
    spec = f"outage={outage[0]:g}s-{outage[1]:g}s"
    cases = []
    for mode, schemes in (("both", ["mptcp-fullmesh", "convoy-mp"]), ("backup", ["mptcp-backup", "convoy-mp-backup"])):
        for policy in ("drop", "down"):
            cases.append(Case(f"{mode}-{policy}", f"{WIFI_KEYS},{spec},outage-policy={policy}", LTE_KEYS, t, schemes,
                              outage=outage, policy=policy, capacity={WIFI: (None, 30.0), LTE: (None, 10.0)}))
    return cases


def drive_wifi_keys(trace: Path, policy: str = "down") -> str:
    """`convoy emu` link keys for a drive's 802.11p trace: its rows' rate,
    loss and coverage gaps behind a 100-packet queue."""
    return f"rate={trace},queue=100,outage-policy={policy}"


def drive_cases(quick: bool, out: Path) -> list[Case]:
    """One case per SUMO drive (multipath_drive.DRIVES); quick: the ring only."""
    from .multipath_drive import DRIVES, drive_wifi_trace

    seconds = 90.0 if quick else 300.0  # quick: the ring's first coverage gap starts near 60 s
    policy = "drop" if policy_down_unsupported() else "down"
    schemes = ["mptcp-fullmesh", "mptcp-backup", "tcp-bbr-lte", "convoy-lte", "convoy-mp"]
    out_cases = []
    for drive in DRIVES[:1] if quick else DRIVES:
        wifi = drive_wifi_trace(drive, out / "mp-drive" / "mobility" / drive.name, seconds)
        lte_trace, up = lte_trace_keys(drive.lte_trace)
        out_cases.append(Case(f"drive-{drive.name}", drive_wifi_keys(wifi, policy), lte_trace, seconds,
                              schemes, policy=policy, capacity={WIFI: (wifi, None), LTE: (up, None)}))
    return out_cases


def capprobe_cases(quick: bool, out: Path) -> list[Case]:
    from .multipath_drive import bad_wifi_trace

    seconds, bad_at = (30.0, 5.0) if quick else (45.0, 10.0)
    wifi = bad_wifi_trace(out / "mp-capprobe" / "bad-wifi.csv", bad_at)
    return [Case("bad-wifi", f"rate={wifi},queue=400kB", LTE_KEYS, seconds, ["mptcp-backup", "convoy-mp-backup"],
                 bad_at=bad_at, capacity={WIFI: (wifi, None), LTE: (None, 10.0)})]


def cases(name: str, quick: bool, out: Path) -> list[Case]:
    if name == "mp-aggregate":
        return aggregate_cases(quick, out)
    if name == "mp-wifi-dies":
        return wifi_dies_cases(quick)
    if name == "mp-drive":
        return drive_cases(quick, out)
    if name == "mp-capprobe":
        return capprobe_cases(quick, out)
    raise ExperimentError(f"unknown multipath experiment {name!r}; valid: {', '.join(TITLES)}")


# ---- one run -----------------------------------------------------------------


def emulate(case: Case, scheme, work: Path, seed: int = 1) -> str:
    """Runs one scheme over the case's two links; returns a status."""
    records = work / "records"
    records.mkdir(parents=True, exist_ok=True)
    for stale in ("server.json", "client.json", "server.err", "client.err"):
        (work / stale).unlink(missing_ok=True)
    scheme.prepare(work)
    command = [str(convoy_binary()), "emu", "--summary", "--records", str(records),
               "--link", f"{WIFI}:{case.wifi},seed={seed}", "--link", f"{LTE}:{case.lte},seed={seed + 1}",
               "--server", scheme.server_script(work, case.seconds),
               "--", "sh", "-c", scheme.client_script(work, case.seconds)]
    (work / "command.txt").write_text(shlex.join(command) + "\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    emu = run_emulator(command, case.seconds + 60, env=env)
    status = "timeout" if emu.timed_out else "ok"
    err = emu.stderr
    (work / "emu.stderr").write_text(err)
    if status == "ok" and emu.returncode != 0:
        lines = [ln for ln in err.splitlines() if not ln.startswith("convoy emu: ")] or err.splitlines()
        status = f"emu exit {emu.returncode}: {lines[-1] if lines else ''}"
    return status


def measure(name: str, case: Case, scheme, work: Path) -> dict:
    """The run's row from what it left in `work`."""
    row = {"experiment": name, "case": case.name, "scheme": scheme.name, "policy": case.policy,
           "loss_pct": case.loss_pct, "seconds": case.seconds}
    records = work / "records"
    rates = mpa.path_rates(records)
    anchor = mpa.first_data_s(records)
    span = rates["t"].iloc[-1] - anchor if len(rates) and not math.isnan(anchor) else case.seconds
    for link in LINKS:
        part = rates[(rates["t"] >= anchor) & (rates["t"] < anchor + case.seconds)] if len(rates) else rates
        row[f"{link}_mbit_s"] = float(part[link].mean()) if len(part) else math.nan
    capacity = case.capacity_mbit(anchor if not math.isnan(anchor) else 0.0, min(span, case.seconds) or case.seconds)
    row.update(capacity_mbit_s=capacity, ideal_mbit_s=capacity * (1 - case.loss_pct / 100))
    client = scheme.client_doc(work)
    try:
        d = scheme.delivery(work)
    except DeliveryError as err:
        d = None
        row["delivery_note"] = str(err)
    if client.get("bytes") is not None and client.get("seconds"):
        row["goodput_mbit_s"] = int(client["bytes"]) * 8 / float(client["seconds"]) / 1e6
    elif d is not None:
        row["goodput_mbit_s"] = d.goodput_mbit_s
    else:
        row["goodput_mbit_s"] = math.nan
    if d is not None:
        d = mpa.with_trailing_stall(d, anchor, mpa.first_packet_s(records) + case.seconds)
        row.update(mpa.stall_figures(d))
        row["protocol"] = d.extra.get("protocol", "convoy")
        if case.outage:
            row["gap_at_outage_ms"] = 1000 * mpa.gap_at(d, anchor, case.outage[0])
            lte = case.capacity[LTE][1]
            row["lte90_s"] = mpa.time_to_rate(d, anchor, case.outage[0], 0.9 * lte) if lte else math.nan
            row["resumed"] = mpa.resumed_after(d, anchor, case.outage[0] + 1.5)
        if name == "mp-drive":
            bad = mpa.stalls_with_capacity(d, anchor, case.capacity)
            row["stalls_over_1s_with_capacity"] = len(bad)
            row["longest_such_stall_s"] = max((n for _, n in bad), default=0.0)
    if case.outage:
        row["return_s"] = mpa.return_time(rates, case.outage)
    if case.bad_at is not None:
        row["moved_s"] = mpa.traffic_moved(rates, case.bad_at)
        if scheme.name.startswith("convoy"):
            try:
                row["detection_s"] = mpa.demotion_time(client, mpa.first_packet_s(records), case.bad_at, scheme.name)
            except ValueError as err:
                row["detection_note"] = str(err)
    return row


# ---- the experiment ------------------------------------------------------------


def selected_cases(name: str, quick: bool, out: Path, only: str | None) -> list[Case]:
    """The experiment's cases; `only`: comma-separated case names to keep."""
    every = cases(name, quick, out)
    if not only:
        return every
    wanted = [t.strip() for t in only.split(",") if t.strip()]
    unknown = [w for w in wanted if w not in {c.name for c in every}]
    if unknown:
        raise ExperimentError(f"--only: {name} has no case {', '.join(unknown)}; its cases: "
                              + ", ".join(c.name for c in every))
    return [c for c in every if c.name in wanted]


def run(name: str, quick: bool, out: Path, schemes: list[str] | None = None,
        seeds: list[int] | None = None, only: str | None = None) -> pd.DataFrame:
    """Every case × scheme × seed, one at a time; rows to OUT/NAME/runs.csv
    (with `schemes` or `only`, only the rows run are replaced there). Each
    seed is a run of its own (the links' random draws, and the processes'
    timing): the tables give the spread and each target is judged on every
    run."""
    seeds = seeds or [1]
    for s in schemes or []:
        get(s)
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    started, taken = time.time(), stamp.stamp()
    todo = [(c, s, seed) for c in selected_cases(name, quick, out, only) for s in c.schemes
            if not schemes or s in schemes for seed in seeds]
    rows = []
    for i, (case, sname, seed) in enumerate(todo, 1):
        scheme = get(sname)
        label = f"[{i}/{len(todo)}] {name} {case.name} {sname}" + (f" seed {seed}" if len(seeds) > 1 else "")
        why = scheme.unavailable() or (policy_down_unsupported() if case.policy == "down" else None)
        if why:
            print(f"{label}: not run: {why}", file=sys.stderr, flush=True)
            rows.append({"experiment": name, "case": case.name, "scheme": sname, "policy": case.policy,
                         "seed": seed, "status": "skipped", "error": why})
            continue
        print(f"{label} ({case.seconds:g} s, load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
        work = d / "runs" / case.name / sname
        if len(seeds) > 1:
            work = work / f"seed-{seed}"
        try:
            status = emulate(case, scheme, work, seed)
            row = measure(name, case, scheme, work)
        except (RuntimeError, ValueError, OSError, KeyError) as err:
            status, row = "error", {"experiment": name, "case": case.name, "scheme": sname, "error": f"{type(err).__name__}: {err}"}
        row["seed"] = seed
        row.setdefault("status", "ok" if status == "ok" else "error")
        if status != "ok":
            row["error"] = row.get("error") or status
        if sname.startswith("mptcp") and row.get("protocol") not in (None, "mptcp") and row["status"] == "ok":
            row.update(status="error", error="the receiver's sockets were plain TCP: mptcpize did not take effect")
        row["work"] = str(work)
        rows.append(row)
    df = pd.DataFrame(rows)
    if (schemes or only) and (d / "runs.csv").is_file():
        # A run of some schemes replaces their rows and keeps the others'.
        old = pd.read_csv(d / "runs.csv")
        fresh = set(zip(df["case"], df["scheme"]))
        keep = old[[(c, s) not in fresh for c, s in zip(old["case"], old["scheme"])]]
        df = pd.concat([keep, df], ignore_index=True)
    df.to_csv(d / "runs.csv", index=False)
    meta = {"experiment": name, "quick": quick, "seeds": seeds, "schemes": schemes, "convoy": str(convoy_binary()),
            "cases": {c.name: {"wifi": c.wifi, "lte": c.lte, "seconds": c.seconds, "outage": c.outage,
                               "bad_at": c.bad_at} for c in cases(name, quick, out)},
            "started": datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
            "elapsed_s": round(time.time() - started, 1), "stamp": stamp.finish(taken)}
    (d / "meta.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    return df


def remeasure(name: str, out: Path) -> pd.DataFrame:
    """Recomputes every row from the run directories (after a change to the
    figures), running nothing."""
    d = out / name
    old = pd.read_csv(d / "runs.csv")
    meta = json.loads((d / "meta.json").read_text()) if (d / "meta.json").is_file() else {}
    by_name = {c.name: c for c in cases(name, bool(meta.get("quick")), out)}
    rows = []
    for r in old.to_dict("records"):
        work, case = Path(str(r.get("work", ""))), by_name.get(r.get("case"))
        if r.get("status") != "ok" or case is None or not (work / "records").is_dir():
            rows.append(r)
            continue
        fresh = measure(name, case, get(r["scheme"]), work)
        fresh.update(status="ok", work=str(work), seed=r.get("seed", 1))
        rows.append(fresh)
    df = pd.DataFrame(rows)
    df.to_csv(d / "runs.csv", index=False)
    return df

"""convoy against the stacks fleets build today: one vehicle's workload
through convoy, MQTT + S3 multipart and HTTPS PUT per file, each started
for real over `convoy emu` on a shared drive trace (convoy_lab.stacks).

    python -m convoy_lab.experiments run incumbents [--quick] [--trace FILE]... [--loss 0,2]
                                                    [--schemes convoy,mqtt-s3,https-put] [--out results] [--json]

Every run has a 30 s outage (`--quick`: 3 s) and the added loss on the data
direction. Per stack, trace and loss it prints live-sample freshness,
the log backlog's drain rate beside the trace's capacity, the camera
file's completion time, bytes on the air per payload byte, what was lost
or duplicated and CPU, then the issue's targets; it writes
OUT/incumbents/runs.csv, meta.json and incumbents.png.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from ..report import stamp
from ..runner import convoy_binary
from ..stacks.run import STACKS, figures, run_one
from ..stacks.workload import Plan
from ..analysis.incumbents import STACK_ORDER
from ..report.incumbents import NAME, TITLE, plot  # noqa: F401 -- TITLE: for `list`
from .catalog import ExperimentError, shared_traces_dir

FULL_TRACES = ["TMobile-LTE-short.up", "Verizon-LTE-short.up"]
QUICK_TRACES = ["Verizon-LTE-short.up"]  # its first 20 s carry the most (5-8 Mbit/s)
FULL = Plan()
# A few seconds each: the camera file just over one 8 MiB part, so the
# multipart path runs.
QUICK = Plan(start_s=8, before_s=4, outage_s=3, after_s=3, drain_max_s=60, camera_bytes=9_000_000)


@dataclass
class Settings:
    traces: list[Path]
    losses: list[float] = field(default_factory=lambda: [0.0, 2.0])
    stacks: list[str] = field(default_factory=lambda: list(STACK_ORDER))
    plan: Plan = FULL
    quick: bool = False


def settings_from(traces: list[Path] | None, losses: list[float] | None, stacks: list[str] | None,
                  quick: bool) -> Settings:
    if traces is None:
        traces = [shared_traces_dir() / t for t in (QUICK_TRACES if quick else FULL_TRACES)]
    for t in traces:
        if not t.is_file():
            raise ExperimentError(f"{t}: no such trace")
    for s in stacks or []:
        if s not in STACKS:
            raise ExperimentError(f"unknown stack {s!r}; the incumbents experiment runs {', '.join(STACK_ORDER)}")
    for loss in losses or []:
        if not 0 <= loss < 100:
            raise ExperimentError(f"--loss: {loss:g} % is not in [0, 100)")
    return Settings([t.resolve() for t in traces], list(losses) if losses else [0.0, 2.0],
                    stacks or list(STACK_ORDER), QUICK if quick else FULL, quick)


def run(s: Settings, out: Path) -> tuple[pd.DataFrame, dict]:
    """Every stack on every trace and loss, one at a time (they would share
    the machine's two cores otherwise); rows in OUT/incumbents/runs.csv."""
    d = out / NAME
    d.mkdir(parents=True, exist_ok=True)
    started, taken = time.time(), stamp.stamp()
    rows = []
    for trace in s.traces:
        for loss in s.losses:
            for stack in s.stacks:
                row = run_one(stack, trace, loss, s.plan, d / "runs" / f"{trace.name}-{loss:g}-{stack}")
                rows.append(row)
                print(f"incumbents: {stack} {trace.name} {loss:g} %: {row['status']} {row['error']}",
                      file=sys.stderr, flush=True)
                pd.DataFrame(rows).to_csv(d / "runs.csv", index=False)
    df = pd.DataFrame(rows)
    meta = {"experiment": NAME, "quick": s.quick, "plan": asdict(s.plan), "traces": [t.name for t in s.traces],
            "trace_paths": [str(t) for t in s.traces],
            "losses_pct": s.losses, "stacks": s.stacks, "convoy": str(convoy_binary()),
            "started": datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
            "elapsed_s": round(time.time() - started, 1), "stamp": stamp.finish(taken)}
    (d / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    try:
        plot(df, d / f"{NAME}.png")
    except Exception as err:  # noqa: BLE001 -- a plot never costs the measured rows
        print(f"incumbents: no plot: {err}", file=sys.stderr)
    return df, meta


def remeasure(out: Path) -> tuple[pd.DataFrame, dict]:
    """The figures again from the kept run directories (after a change to
    how they are read), nothing run; runs.csv is rewritten."""
    d = out / NAME
    meta = json.loads((d / "meta.json").read_text())
    plan = Plan(**meta["plan"])
    traces = {Path(t).name: t for t in meta.get("trace_paths", [])}
    rows = []
    for old in pd.read_csv(d / "runs.csv").to_dict("records"):
        root = d / "runs" / f"{old['trace']}-{old['loss_pct']:g}-{old['stack']}"
        trace = Path(traces.get(old["trace"], shared_traces_dir() / old["trace"]))
        row = {k: old[k] for k in ("stack", "trace", "loss_pct", "outage_s", "status", "error", "wall_s")}
        row["error"] = "" if pd.isna(row["error"]) else row["error"]
        if old["status"] != "skipped":
            row.update(figures(old["stack"], root, trace, plan))
        rows.append(row)
    df = pd.DataFrame(rows)
    df.to_csv(d / "runs.csv", index=False)
    plot(df, d / f"{NAME}.png")
    return df, meta

"""A sweep: every scheme × scenario × seed, one row each, with progress.

Rows are written to the CSV as runs finish, so an interrupted sweep keeps
what it measured. Runs are ordered seed, then scenario, then scheme, so a
partial sweep still compares schemes on the same links.

With `resume`, a sweep goes on from the CSV an earlier, interrupted one
left: a run already there with status "ok" (the same scheme, scenario and
seed, named by its run directory) is kept and not run again; a failed or
missing one is run. A sweep longer than one sitting (the cellular grid,
about 3 h) is then run in parts.
"""

from __future__ import annotations

import csv
import math
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TextIO

import pandas as pd

from .run import run_once
from .scenarios import Scenario
from .schemes import Scheme, Transfer


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()


@dataclass
class SweepResult:
    rows: pd.DataFrame
    skipped: dict[str, str]  # scheme name -> why it could not run


def _fmt(value: float, unit: str, digits: int = 2) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f} {unit}"


def run_sweep(
    experiment: str,
    schemes: list[Scheme],
    scenarios: list[Scenario],
    transfer: Transfer,
    seeds: list[int],
    out_dir: Path,
    keep_records: bool = False,
    progress: TextIO | None = None,
    run: Callable[..., dict] = run_once,
    resume: bool = False,
) -> SweepResult:
    progress = progress or sys.stderr
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "runs.csv"
    skipped = {}
    runnable = []
    for scheme in schemes:
        reason = scheme.unavailable()
        if reason:
            skipped[scheme.name] = reason
            print(f"{experiment}: skipping {scheme.name}: {reason}", file=progress, flush=True)
        else:
            runnable.append(scheme)

    grid = [(seed, sc, sch) for seed in seeds for sc in scenarios for sch in runnable]
    earlier = measured_rows(csv_path) if resume else {}
    rows: list[dict] = []
    kept = 0
    started, ran = time.monotonic(), 0
    todo = sum(1 for seed, sc, sch in grid if _run_dir(sch, sc, seed) not in earlier)
    if earlier:
        print(f"{experiment}: resuming: {len(grid) - todo} of {len(grid)} runs already in {csv_path}, "
              f"{todo} to go", file=progress, flush=True)
    for i, (seed, scenario, scheme) in enumerate(grid, 1):
        run_dir = _run_dir(scheme, scenario, seed)
        if run_dir in earlier:
            rows.append(earlier[run_dir])
            kept += 1
            continue
        label = f"{scheme.name} {scenario.describe()} seed {seed}"
        workdir = out_dir / run_dir
        row = {"experiment": experiment, **run(scheme, scenario, transfer, seed, workdir, keep_records=keep_records)}
        row["run_dir"] = run_dir  # its command line and outputs
        rows.append(row)
        _write_rows(csv_path, rows)
        ran += 1
        elapsed = time.monotonic() - started
        eta = elapsed / ran * (todo - ran)
        result = (
            f"{_fmt(row['goodput_mbit_s'], 'Mbit/s')}, one-way p95 {_fmt(row['owd_p95_ms'], 'ms', 1)}"
            if row["status"] == "ok"
            else f"{row['status']}: {row['error']}"
        )
        print(
            f"[{i:>3}/{len(grid)}] {experiment}: {label}: {result} "
            f"({row['wall_s']:.1f} s; about {eta:.0f} s left)",
            file=progress,
            flush=True,
        )
    if not ran:
        _write_rows(csv_path, rows)
    frame = pd.read_csv(csv_path) if kept else pd.DataFrame(rows)  # rows read back and new ones, one typing
    return SweepResult(frame, skipped)


def _run_dir(scheme: Scheme, scenario: Scenario, seed: int) -> str:
    """A run's directory under the sweep's, relative: also its identity
    when a sweep resumes."""
    return f"runs/{scheme.name}/{slug(scenario.describe())}-s{seed}"


def measured_rows(csv_path: Path) -> dict[str, dict]:
    """The runs an earlier sweep finished with status "ok", by run
    directory; none if it left no CSV."""
    if not csv_path.is_file():
        return {}
    with csv_path.open(newline="") as f:
        return {r["run_dir"]: r for r in csv.DictReader(f) if r.get("status") == "ok" and r.get("run_dir")}


def _write_rows(csv_path: Path, rows: list[dict]) -> None:
    """The whole CSV, replaced at once (written beside it, then renamed):
    an interrupted sweep leaves every finished row and no half line. The
    header is every column any row has, in first-seen order, so rows kept
    from an earlier build's part still fit."""
    fields: dict[str, None] = {}
    for row in rows:
        fields.update(dict.fromkeys(row))
    part = csv_path.with_name(f".{csv_path.name}.part")
    with part.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields), restval="")
        writer.writeheader()
        writer.writerows(rows)
    part.replace(csv_path)

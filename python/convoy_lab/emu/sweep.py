"""A sweep: every scheme × scenario × seed, one row each, with progress.

Rows are written to the CSV as runs finish, so an interrupted sweep keeps
what it measured. Runs are ordered seed, then scenario, then scheme, so a
partial sweep still compares schemes on the same links.

With `resume`, a sweep goes on from the CSV an earlier, interrupted one
left: a run already there with status "ok" (the same scheme, scenario and
seed, named by its run directory) is kept and not run again; a failed or
missing one is run. The earlier rows this grid does not hold (another
scheme, more seeds) stay in the CSV. A sweep longer than one sitting (the
cellular grid, about 3 h) is then run in parts; the caller checks that
the earlier part ran with the same settings (`experiments.parts.Part`).
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
    ran: int = 0  # runs made by this call (the rest were kept from an earlier part)


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
    earlier = earlier_rows(csv_path) if resume else {}
    # Every row the CSV will hold, by run directory: the earlier part's
    # (kept, or replaced when that point runs again) and this grid's. The
    # whole table is written after each run, so a stop loses none of them.
    table: dict[str, dict | None] = dict(earlier)
    for seed, sc, sch in grid:
        table.setdefault(_run_dir(sch, sc, seed), None)
    todo = [(seed, sc, sch) for seed, sc, sch in grid
            if (earlier.get(_run_dir(sch, sc, seed)) or {}).get("status") != "ok"]
    if resume and len(todo) < len(grid):
        print(f"{experiment}: resuming: {len(grid) - len(todo)} of {len(grid)} runs already in {csv_path}, "
              f"{len(todo)} to go", file=progress, flush=True)
    started, ran = time.monotonic(), 0
    for seed, scenario, scheme in todo:
        run_dir = _run_dir(scheme, scenario, seed)
        i = len(grid) - len(todo) + ran + 1
        label = f"{scheme.name} {scenario.describe()} seed {seed}"
        row = {"experiment": experiment,
               **run(scheme, scenario, transfer, seed, out_dir / run_dir, keep_records=keep_records)}
        row["run_dir"] = run_dir  # its command line and outputs
        table[run_dir] = row
        _write_rows(csv_path, table)
        ran += 1
        elapsed = time.monotonic() - started
        eta = elapsed / ran * (len(todo) - ran)
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
    _write_rows(csv_path, table)
    rows = [r for r in table.values() if r is not None]
    # With rows from an earlier part (text, as read) the CSV is read back,
    # so that they and the new ones are typed alike.
    frame = pd.read_csv(csv_path) if earlier and rows else pd.DataFrame(rows)
    return SweepResult(frame, skipped, ran)


def _run_dir(scheme: Scheme, scenario: Scenario, seed: int) -> str:
    """A run's directory under the sweep's, relative: also its identity
    when a sweep resumes."""
    return f"runs/{scheme.name}/{slug(scenario.describe())}-s{seed}"


def earlier_rows(csv_path: Path) -> dict[str, dict]:
    """The rows an earlier sweep left, by run directory, in its order;
    none if it left no CSV."""
    if not csv_path.is_file():
        return {}
    with csv_path.open(newline="") as f:
        return {r["run_dir"]: r for r in csv.DictReader(f) if r.get("run_dir")}


def kept_runs(csv_path: Path) -> int:
    """How many runs an earlier sweep finished with status "ok"."""
    return sum(1 for r in earlier_rows(csv_path).values() if r.get("status") == "ok")


def _write_rows(csv_path: Path, table: dict[str, dict | None]) -> None:
    """The whole CSV, replaced at once (written beside it, then renamed):
    an interrupted sweep leaves every finished row and no half line. The
    header is every column any row has, in first-seen order, so rows kept
    from an earlier build's part still fit."""
    rows = [r for r in table.values() if r is not None]
    fields: dict[str, None] = {}
    for row in rows:
        fields.update(dict.fromkeys(row))
    part = csv_path.with_name(f".{csv_path.name}.part")
    with part.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields), restval="")
        writer.writeheader()
        writer.writerows(rows)
    part.replace(csv_path)

"""A sweep: every scheme × scenario × seed, one row each, with progress.

Rows are appended to the CSV as runs finish, so an interrupted sweep keeps
what it measured. Runs are ordered seed, then scenario, then scheme, so a
partial sweep still compares schemes on the same links.
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
    rows: list[dict] = []
    writer = None
    started = time.monotonic()
    with csv_path.open("w", newline="") as f:
        for i, (seed, scenario, scheme) in enumerate(grid, 1):
            label = f"{scheme.name} {scenario.describe()} seed {seed}"
            workdir = out_dir / "runs" / scheme.name / f"{slug(scenario.describe())}-s{seed}"
            row = {"experiment": experiment, **run(scheme, scenario, transfer, seed, workdir, keep_records=keep_records)}
            row["run_dir"] = str(workdir.relative_to(out_dir))  # its command line and outputs
            rows.append(row)
            if writer is None:
                writer = csv.DictWriter(f, fieldnames=list(row))
                writer.writeheader()
            writer.writerow(row)
            f.flush()
            elapsed = time.monotonic() - started
            eta = elapsed / i * (len(grid) - i)
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
    return SweepResult(pd.DataFrame(rows), skipped)

"""`reproduce`: every experiment at full length, one after another, each
the same `run NAME` a reader would type, then the report.

Every figure the papers table (report/seeds.py) judges comes from one of
these, so a full run leaves no row "not measured". A failed experiment is
reported and the rest still run: hours in, one broken case should not cost
the others. `--only` and `--skip` run it in parts.

A full run takes longer than one sitting (about 4.5 h per seed), and the
run directories it leaves are gigabytes of logs and captures. `--keep DIR`
copies each finished experiment's summary (`runs.csv` and `meta.json`,
all that `results` renders from) into DIR/NAME, so parts run on different
days and machines add up to one report: `make reproduce` keeps them in
the repository's `reproduced/`.

An experiment longer than a sitting (the cellular grid, about 3 h; the
background one, about 2.5 h) runs in parts of its own with `--resume`:
stopped with Ctrl-C, its finished runs are kept all the same; the next
`--resume` starts from them (OUT's copy, or KEEP's on a fresh machine) and
runs only what is missing. meta.json names every part's build. Without
`--resume` a stopped experiment is not kept: its rows would replace a
whole earlier run's.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

from . import catalog, cellular, fleet_sim, incumbents, multipath, scheduled
from .catalog import ExperimentError

# Not an experiments `run` name: VACaMobil's table comes from
# `python -m convoy_lab.mobility vacamobil-table --out OUT` (SPEC S6).
VACAMOBIL = "vacamobil"
INTERRUPTED = 130  # what `run` returns on Ctrl-C: stop, do not go on
# The experiments whose runs are rows of their own, each kept as it ends,
# so that one can stop and go on (`run --resume`): the emulator's sweeps,
# the cellular grid (about 3 h on its own) and the schedule experiments.
RESUMABLE = [*catalog.EXPERIMENTS, cellular.NAME, *scheduled.names()]


def names() -> list[str]:
    """Every experiment in the order they run: the emulator's first, the
    simulator's and the models' (no emulator) last."""
    return [*catalog.EXPERIMENTS, cellular.NAME, *scheduled.names(), *multipath.TITLES, "faults", incumbents.NAME,
            *fleet_sim.FLEET, VACAMOBIL]


def _selection(only: list[str] | None, skip: list[str] | None) -> list[str]:
    every = names()
    unknown = [n for n in (only or []) + (skip or []) if n not in every]
    if unknown:
        raise ExperimentError(f"unknown experiment {', '.join(unknown)!s}; valid: {', '.join(every)}")
    return [n for n in every if (not only or n in only) and n not in (skip or [])]


def command(name: str, out: Path, seeds: int, resume: bool = False) -> list[str]:
    """The argument list for one experiment (without the module prefix)."""
    if name == VACAMOBIL:
        return ["vacamobil-table", "--out", str(out)]
    return ["run", name, "--out", str(out), "--seeds", str(seeds), *(["--resume"] if resume else [])]


def _rewritten_since(path: Path, t: float) -> bool:
    """Whether this part wrote `path` (an older file is no part of it)."""
    try:
        return path.stat().st_mtime >= t
    except OSError:
        return False


def seed_from_kept(out: Path, name: str, keep: Path) -> bool:
    """Before a resumed part on a machine whose OUT has no runs of NAME:
    KEEP's summary is where the part starts. True if it copied one."""
    if (out / name / "runs.csv").is_file() or not (keep / name / "runs.csv").is_file():
        return False
    keep_summary(keep, name, out)
    return True


# What `results` renders an experiment from: the rest of OUT/NAME is each
# run's own directory.
SUMMARY_FILES = ("runs.csv", "meta.json")


def keep_summary(out: Path, name: str, keep: Path) -> list[Path]:
    """Copies OUT/NAME's summary files into KEEP/NAME, each replaced whole
    (written beside it, then renamed), and returns what it copied."""
    source, dest = out / name, keep / name
    copied = []
    for f in SUMMARY_FILES:
        if not (source / f).is_file():
            continue
        dest.mkdir(parents=True, exist_ok=True)
        part = dest / f".{f}.part"
        shutil.copyfile(source / f, part)
        os.replace(part, dest / f)
        copied.append(dest / f)
    return copied


def run(out: Path, seeds: int, only: list[str] | None, skip: list[str] | None,
        run_experiment: Callable[[list[str]], int], run_mobility: Callable[[list[str]], int],
        keep: Path | None = None, resume: bool = False) -> int:
    """Runs the selection; 0 if every experiment succeeded, 1 otherwise.
    With `keep`, each one that succeeded has its summary copied there.
    With `resume`, a resumable experiment goes on from its earlier part,
    and one stopped part way is kept too (its rows are finished runs, the
    earlier part's among them)."""
    selected = _selection(only, skip)
    failed: list[tuple[str, int]] = []
    started = time.monotonic()
    for i, name in enumerate(selected, 1):
        resumes = resume and name in RESUMABLE
        if resumes and keep is not None and seed_from_kept(out, name, keep):
            print(f"reproduce: {name} goes on from the part kept in {keep / name}", file=sys.stderr, flush=True)
        args = command(name, out, seeds, resumes)
        prefix = "python -m convoy_lab.mobility" if name == VACAMOBIL else "python -m convoy_lab.experiments"
        print(f"reproduce [{i}/{len(selected)}, {(time.monotonic() - started) / 60:.0f} min in]: "
              f"{prefix} {' '.join(args)}", file=sys.stderr, flush=True)
        part_started = time.time()
        try:
            rc = (run_mobility if name == VACAMOBIL else run_experiment)(args)
        except Exception:  # noqa: BLE001 - one broken experiment must not cost the others
            # Hours of runs can end in a bug of the report drawn from
            # them; the runs are in OUT, and `--resume` redraws it.
            traceback.print_exc()
            rc = 1
        if rc == INTERRUPTED:
            print(f"reproduce: interrupted in {name}; the experiments before it are complete", file=sys.stderr)
            if keep is not None and resumes and _rewritten_since(out / name / "runs.csv", part_started) \
                    and keep_summary(out, name, keep):
                print(f"reproduce: kept {name}'s finished runs in {keep / name}; `--resume` goes on from them",
                      file=sys.stderr)
            return rc
        if rc != 0:
            failed.append((name, rc))
            print(f"reproduce: {name} exited {rc}; going on with the rest", file=sys.stderr, flush=True)
        elif keep is not None:
            copied = keep_summary(out, name, keep)
            if not copied:
                print(f"reproduce: {name} left no {' or '.join(SUMMARY_FILES)} in {out / name}",
                      file=sys.stderr, flush=True)
            else:
                print(f"reproduce: kept {name}'s summary in {keep / name}", file=sys.stderr, flush=True)
    done = len(selected) - len(failed)
    print(f"reproduce: {done} of {len(selected)} experiments ran to the end in "
          f"{(time.monotonic() - started) / 60:.0f} min" + (f"; failed: {', '.join(f'{n} ({rc})' for n, rc in failed)}"
                                                           if failed else ""), file=sys.stderr)
    print(f"reproduce: `python -m convoy_lab.experiments results --out {keep or out}` writes docs/RESULTS.md "
          "from them", file=sys.stderr)
    return 1 if failed else 0

"""The cellular evaluation, Pantheon-style: every scheme over every
direction of real drive traces, from several points into each drive, with
and without added random loss (issue 15, item 5).

    python -m convoy_lab.experiments run cellular [--trace FILE]... [--delay MS] [--loss P,P]
        [--queue PKTS] [--duration S] [--offsets S,S,S] [--schemes A,B] [--quick]

A *trace direction* is one trace carrying the data (client → server, the
emulator's `up`) with another carrying the feedback: for each shared drive
X, `X.up` with `X.down` (the car's uplink) and `X.down` with `X.up` (the
downlink, replayed on the data direction). A point of the grid is one loss
setting × trace direction × offset; every scheme runs once per point and
seed, one run at a time (parallel emulator runs would share the CPUs and
distort each other).

Offsets. Each run starts both directions of the link at the same moment
of the drive. By default the offsets are 0, 1/3 and 2/3 of the data
trace's length, in whole seconds (ATT: 0, 40, 80 s; TMobile and Verizon:
0, 47, 93 s): a Mahimahi trace repeats, so a 60 s run from 80 s into the
120 s ATT drive sees its last 40 s, then its first 20 s, as Mahimahi
replays it. A time-series trace (.csv) holds its last row instead of
repeating, so its default offsets are spread over the part where a whole
run still fits (just 0 when the trace is shorter than a run).
"""

from __future__ import annotations

import math
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

import pandas as pd

from .catalog import ExperimentError, shared_traces_dir
from .parts import Part, run_fields
from ..emu.run import run_once
from ..runner import convoy_binary
from ..emu.scenarios import Scenario
from ..emu.schemes import Transfer, get_scheme
from ..emu.sweep import kept_runs, run_sweep
from ..report import stamp
from ..traces import TraceError, is_series, read_mahimahi, series_rate_steps, trace_length_s, twin

NAME = "cellular"
TITLE = "Cellular drive traces, Pantheon-style: throughput against delay, uplink and downlink"
SCHEMES_DEFAULT = ["convoy", "convoy-rcdp", "convoy-rlnc-bbr", "tcp-cubic", "tcp-bbr"]
SHARED_DRIVES = ["ATT-LTE-driving-2016", "TMobile-LTE-short", "Verizon-LTE-short"]
DELAY_MS = 20.0
QUEUE_PACKETS = 200
DURATION_S = 60.0
LOSSES_PCT = [0.0, 2.0]
OFFSET_COUNT = 3

# The short form (`--quick`, `make demo`): the car's slow uplink and a fast
# downlink, from each drive's start, no added loss, 15 s runs; about three
# minutes for the five schemes.
QUICK_DIRECTIONS = ["ATT-LTE-driving-2016.up", "TMobile-LTE-short.down"]
QUICK_DURATION_S = 15.0
QUICK_LOSSES_PCT = [0.0]
QUICK_OFFSETS_S = [0.0]

# Seconds a run costs beyond its duration (namespaces, keys, start-up, the
# sender's last answer), for the first estimate before any run has ended.
RUN_OVERHEAD_S = 5.0


@dataclass(frozen=True)
class Direction:
    """One trace direction: `data` carries the data, `feedback` the other way."""

    data: Path
    feedback: Path

    @property
    def name(self) -> str:
        return self.data.name

    @property
    def kind(self) -> str:
        """uplink / downlink from the file's suffix, else the trace's name."""
        return {".up": "uplink", ".down": "downlink"}.get(self.data.suffix, "trace")


@dataclass
class Settings:
    directions: list[Direction]
    schemes: list[str] = field(default_factory=lambda: list(SCHEMES_DEFAULT))
    delay_ms: float = DELAY_MS
    losses_pct: list[float] = field(default_factory=lambda: list(LOSSES_PCT))
    queue_packets: int = QUEUE_PACKETS
    duration_s: float = DURATION_S
    offsets_s: list[float] | None = None  # None: default_offsets per direction
    seeds: list[int] = field(default_factory=lambda: [1])
    quick: bool = False
    given: list[tuple[str, str]] = field(default_factory=list)  # the overrides, as command-line flags

    def offsets_for(self, d: Direction) -> list[float]:
        return list(self.offsets_s) if self.offsets_s is not None else default_offsets(d.data, self.duration_s)

    def scenarios(self) -> list[Scenario]:
        """The grid's points in run order: loss setting, then trace
        direction, then offset, so a cut-short run still holds whole
        loss-free comparisons first."""
        return [
            Scenario(
                trace=d.data, feedback=d.feedback, offset_s=offset, delay_ms=self.delay_ms,
                loss_pct=loss, queue_packets=self.queue_packets,
            )
            for loss in self.losses_pct
            for d in self.directions
            for offset in self.offsets_for(d)
        ]

    def runs(self) -> int:
        return len(self.scenarios()) * len(self.schemes) * len(self.seeds)

    def describe(self) -> str:
        offsets = (
            "offsets " + ", ".join(f"{o:g}" for o in self.offsets_s) + " s"
            if self.offsets_s is not None
            else f"{OFFSET_COUNT} offsets per trace (0, 1/3, 2/3 of its length)"
        )
        losses = ", ".join(f"{x:g} %" for x in self.losses_pct)
        return (
            f"{self.duration_s:g} s per run, {self.delay_ms:g} ms one-way delay each way, drop-tail "
            f"{self.queue_packets} packets, {offsets}, added Bernoulli loss on the data direction: {losses}"
        )


def default_offsets(trace: Path, duration_s: float, count: int = OFFSET_COUNT) -> list[float]:
    """`count` offsets spread over the trace, in whole seconds: k/count of a
    repeating Mahimahi trace's period, or over the part of a series trace
    where a whole run fits (it holds its last row rather than repeating)."""
    length = trace_length_s(trace)
    if is_series(trace):
        room = max(0.0, length - duration_s)
        if count <= 1 or room < 1:
            return [0.0]
        return sorted({float(round(room * k / (count - 1))) for k in range(count)})
    return sorted({float(round(length * k / count)) for k in range(count)})


def shared_directions(traces_dir: Path | None = None, only: list[str] | None = None) -> list[Direction]:
    """Both directions of every shared drive, uplinks first."""
    traces_dir = traces_dir or shared_traces_dir()
    out = []
    for suffix, other in [(".up", ".down"), (".down", ".up")]:
        for drive in SHARED_DRIVES:
            d = Direction(traces_dir / f"{drive}{suffix}", traces_dir / f"{drive}{other}")
            if only is None or d.name in only:
                out.append(d)
    for d in out:
        for path in (d.data, d.feedback):
            if not path.is_file():
                raise ExperimentError(
                    f"{NAME} needs {path}: put the shared traces beside the repository "
                    "(../shared/traces) or set CONVOY_SHARED to the shared directory, or give --trace FILE"
                )
    return out


def user_direction(path: Path) -> Direction:
    """A trace given with --trace: checked now (a malformed file fails
    before any run), its twin carrying the feedback."""
    path = Path(path)
    if not path.is_file():
        raise ExperimentError(f"--trace {path}: no such file")
    feedback = twin(path)
    for p in {path, feedback}:
        try:
            series_rate_steps(p) if is_series(p) else read_mahimahi(p)
        except (TraceError, ValueError, OSError) as err:
            raise ExperimentError(f"--trace {path}: {err}") from None
    return Direction(path.resolve(), feedback.resolve())


def settings_from(
    traces: list[Path] | None = None,
    quick: bool = False,
    schemes: list[str] | None = None,
    delay_ms: float | None = None,
    losses_pct: list[float] | None = None,
    queue_packets: int | None = None,
    duration_s: float | None = None,
    offsets_s: list[float] | None = None,
    seeds: int = 1,
    scales: list[float] | None = None,
    scaled_dir: Path | None = None,
) -> Settings:
    """The run's settings: the defaults (or the quick form's), then the
    overrides given; every value is checked here, before any run."""
    if traces:
        directions = [user_direction(t) for t in traces]
        names = [d.name for d in directions]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ExperimentError(f"--trace: two traces named {twice[0]}; results are keyed by file name, rename one")
    else:
        directions = shared_directions(only=QUICK_DIRECTIONS if quick else None)
    s = Settings(directions=directions, seeds=list(range(1, seeds + 1)), quick=quick)
    if quick:
        s.duration_s, s.losses_pct, s.offsets_s = QUICK_DURATION_S, list(QUICK_LOSSES_PCT), list(QUICK_OFFSETS_S)
    s.given += [("--trace", str(t)) for t in traces or []]
    if schemes:
        for name in schemes:
            get_scheme(name)
        s.schemes = list(schemes)
        s.given.append(("--schemes", ",".join(schemes)))
    if delay_ms is not None:
        s.delay_ms = _check(delay_ms, "--delay", lambda v: v >= 0, "at least 0 ms")
        s.given.append(("--delay", f"{s.delay_ms:g}"))
    if losses_pct is not None:
        if not losses_pct:
            raise ExperimentError("--loss: expected at least one loss setting")
        s.losses_pct = [_check(v, "--loss", lambda x: 0 <= x < 100, "in [0, 100) %") for v in losses_pct]
        s.given.append(("--loss", ",".join(f"{x:g}" for x in s.losses_pct)))
    if queue_packets is not None:
        s.queue_packets = int(_check(queue_packets, "--queue", lambda v: v >= 1, "at least 1 packet"))
        s.given.append(("--queue", str(s.queue_packets)))
    if duration_s is not None:
        s.duration_s = _check(duration_s, "--duration", lambda v: v > 0, "more than 0 s")
        s.given.append(("--duration", f"{s.duration_s:g}"))
    if offsets_s is not None:
        if not offsets_s:
            raise ExperimentError("--offsets: expected at least one offset")
        s.offsets_s = [_check(v, "--offsets", lambda x: x >= 0, "at least 0 s") for v in offsets_s]
        s.given.append(("--offsets", ",".join(f"{x:g}" for x in s.offsets_s)))
    if scales is not None:
        if not scales or any(not 0 < f <= 10 for f in scales):
            raise ExperimentError("--scale: expected factors in (0, 10]")
        s.directions = [scaled_direction(d, f, scaled_dir or Path("results") / "cellular-traces")
                        for f in scales for d in s.directions]
        s.given.append(("--scale", ",".join(f"{f:g}" for f in scales)))
    return s


def scaled_name(path: Path, factor: float) -> str:
    """A twin's file name: the drive's name with the factor, the direction's
    suffix kept (`ATT-LTE-driving-2016-x0.25.up`), so results keyed by name
    keep the scales apart and the suffix still tells uplink from downlink."""
    return f"{path.stem}-x{factor:g}{path.suffix}"


def scaled_direction(d: Direction, factor: float, into: Path) -> Direction:
    """Both traces of a direction at `factor` times their capacity, written
    by `convoy trace scale` (bursts, gaps and outages where they were).
    Factor 1 is the direction itself."""
    if factor == 1:
        return d
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for path in (d.data, d.feedback):
        target = into / scaled_name(path, factor)
        done = subprocess.run(
            [str(convoy_binary()), "trace", "scale", "--factor", f"{factor:g}", str(path), str(target)],
            capture_output=True, text=True,
        )
        if done.returncode != 0:
            raise ExperimentError(f"--scale {factor:g}: {done.stderr.strip() or 'convoy trace scale failed'}")
        out.append(target.resolve())
    return Direction(out[0], out[1])


def _check(value: float, flag: str, ok: Callable[[float], bool], expected: str) -> float:
    if value is None or math.isnan(value) or not ok(value):
        raise ExperimentError(f"{flag}: expected {expected}, got {value:g}")
    return float(value)


def command_line(s: Settings, out: Path) -> str:
    """The command that runs these settings again (for meta.json and the report)."""
    parts = [".venv/bin/python", "-m", "convoy_lab.experiments", "run", NAME]
    if s.quick:
        parts.append("--quick")
    for flag, value in s.given:
        parts += [flag, value]
    if len(s.seeds) != 1:
        parts += ["--seeds", str(len(s.seeds))]
    parts += ["--out", str(out)]
    return shlex.join(parts)


def _meta(s: Settings, out: Path, started: float, skipped: dict, done: bool, taken: dict) -> dict:
    return {
        "experiment": NAME,
        "quick": s.quick,
        "seeds": s.seeds,
        "schemes": s.schemes,
        "skipped": skipped,
        "directions": [{"data": str(d.data), "feedback": str(d.feedback)} for d in s.directions],
        "offsets_s": {d.name: s.offsets_for(d) for d in s.directions},
        "delay_ms": s.delay_ms,
        "losses_pct": s.losses_pct,
        "queue_pkts": s.queue_packets,
        "duration_s": s.duration_s,
        "transfer": f"{s.duration_s:g} s",
        "transfer_s": s.duration_s,
        "conditions": s.describe(),
        "command": command_line(s, out),
        **run_fields(out, started, taken, done),
    }


# What a part must share with the one it goes on from (`--resume`).
def resume_settings(s: Settings) -> dict:
    return {"quick": s.quick, "duration_s": s.duration_s, "delay_ms": s.delay_ms, "queue_pkts": s.queue_packets}



def run(
    s: Settings,
    out: Path,
    keep_records: bool = False,
    progress: TextIO | None = None,
    runner: Callable[..., dict] = run_once,
    resume: bool = False,
) -> tuple[pd.DataFrame, dict]:
    """Runs the grid; rows go to OUT/cellular/runs.csv as runs finish, and
    meta.json is written before the first run (so an interrupted run's
    rows can still be reported) and again at the end. With `resume`, the
    runs an earlier part left in runs.csv are kept, not run again."""
    progress = progress or sys.stderr
    directory = out / NAME
    directory.mkdir(parents=True, exist_ok=True)
    started, taken = time.time(), stamp.stamp()
    part = Part(directory, resume, resume_settings(s), kept_runs(directory / "runs.csv") if resume else 0)
    part.write(_meta(s, out, started, {}, False, taken))
    total = s.runs()
    first_guess = total * (s.duration_s + RUN_OVERHEAD_S)
    print(
        f"{NAME}: {total} runs ({len(s.schemes)} schemes × {len(s.scenarios())} points × {len(s.seeds)} seeds), "
        f"one at a time: about {_duration(first_guess)}; rows go to {directory / 'runs.csv'} as they finish",
        file=progress,
        flush=True,
    )
    result = run_sweep(
        NAME,
        [get_scheme(n) for n in s.schemes],
        s.scenarios(),
        Transfer(seconds=s.duration_s),
        s.seeds,
        directory,
        keep_records=keep_records,
        progress=progress,
        run=runner,
        resume=resume,
    )
    return result.rows, part.finish(_meta(s, out, started, result.skipped, True, taken), result.ran)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"

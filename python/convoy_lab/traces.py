"""Channel traces: Mahimahi packet-delivery traces and convoy's own
time-series traces (format in docs/TRACES.md)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

MTU_BYTES = 1500


class TraceError(ValueError):
    """A trace file that does not follow its format; the message names
    file:line and what was expected."""


def read_mahimahi(path: str | Path) -> pd.Series:
    """Delivery opportunities of a Mahimahi trace, in ms from the start: one
    entry per 1500-byte opportunity, non-decreasing."""
    path = Path(path)
    times = []
    with path.open() as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if not text:
                continue
            try:
                ms = int(text)
            except ValueError:
                raise TraceError(
                    f"{path}:{lineno}: expected a whole number of milliseconds, got {text!r}"
                ) from None
            if ms < 0 or (times and ms < times[-1]):
                raise TraceError(
                    f"{path}:{lineno}: expected a time >= {times[-1] if times else 0} ms, got {ms}"
                )
            times.append(ms)
    if not times or times[-1] == 0:
        raise TraceError(f"{path}: expected at least one opportunity after 0 ms")
    return pd.Series(times, name="t_ms", dtype="int64")


@dataclass(frozen=True)
class TraceSummary:
    duration_s: float
    opportunities: int
    mean_mbit_s: float


def summarize_mahimahi(path: str | Path) -> TraceSummary:
    """Length and mean capacity of a Mahimahi trace. The trace repeats with a
    period equal to its last timestamp, as mm-link replays it."""
    times = read_mahimahi(path)
    duration_s = float(times.iloc[-1]) / 1000.0
    mean = len(times) * MTU_BYTES * 8 / duration_s / 1e6
    return TraceSummary(duration_s, len(times), float(mean))


def capacity_series(path: str | Path, bin_ms: int = 1000) -> pd.DataFrame:
    """Capacity of a Mahimahi trace per `bin_ms` interval, in Mbit/s: the
    usual way to plot a trace."""
    times = read_mahimahi(path)
    bins = (times // bin_ms).value_counts().sort_index()
    full = bins.reindex(range(int(times.iloc[-1] // bin_ms) + 1), fill_value=0)
    return pd.DataFrame(
        {
            "start_ms": full.index * bin_ms,
            "rate_mbit_s": full.values * MTU_BYTES * 8 / (bin_ms / 1000) / 1e6,
        }
    )


def read_series(path: str | Path) -> pd.DataFrame:
    """A convoy time-series trace (docs/TRACES.md) as a DataFrame, one row
    per interval. The Rust parser is the authority on validity; this is for
    plotting and analysis, so it only checks that a `start_<unit>` column
    exists."""
    df = pd.read_csv(path, comment="#", skipinitialspace=True)
    df.columns = [c.strip() for c in df.columns]
    if not any(c.startswith("start_") for c in df.columns):
        raise TraceError(f"{path}:1: expected a start_<s|ms|us|ns> column, found {list(df.columns)}")
    return df


def read_records(path: str | Path) -> pd.DataFrame:
    """Per-packet link records (t_ns,event,id,len,queue_delay_ns,reason)."""
    return pd.read_csv(path, dtype={"event": "category", "reason": "category"})


# ---- a trace as the emulator replays it: kind, twin, length, capacity --------

SERIES_SUFFIX = ".csv"
_TIME_UNITS_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_RATE_UNITS_BPS = {"bps": 1.0, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9}
_UP_VALUES = {"1": 1, "0": 0, "true": 1, "false": 0, "1.0": 1, "0.0": 0, "nan": 1, "": 1}


def is_series(path: str | Path) -> bool:
    """convoy emu's rule: a `.csv` file is a time-series trace, anything else
    Mahimahi."""
    return Path(path).suffix.lower() == SERIES_SUFFIX


def twin(path: str | Path) -> Path:
    """The trace of the other direction: `X.up` ↔ `X.down` when that file
    exists beside it, else the trace itself (a symmetric link)."""
    path = Path(path)
    other = {".up": ".down", ".down": ".up"}.get(path.suffix)
    if other and path.with_suffix(other).is_file():
        return path.with_suffix(other)
    return path


@dataclass(frozen=True)
class RateSteps:
    """A series trace's capacity: interval starts (s) and rates (bit/s, 0
    while down); the last rate holds for ever, as the emulator replays it."""

    starts_s: tuple[float, ...]
    bps: tuple[float, ...]


def series_rate_steps(path: str | Path) -> RateSteps:
    """A series trace's capacity steps, read once per file version (the
    drive's stall figures ask for a trace's windows bin by bin)."""
    return _series_rate_steps(str(path), Path(path).stat().st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _series_rate_steps(path: str, mtime_ns: int) -> RateSteps:
    df = read_series(path)
    start = next(c for c in df.columns if c.startswith("start_"))
    rate = [c for c in df.columns if c.startswith("rate_")]
    if not rate:
        raise TraceError(f"{path}:1: expected a rate_<bps|kbps|mbps|gbps> column (the trace must carry capacity)")
    t_unit, r_unit = start.split("_", 1)[1], rate[0].split("_", 1)[1]
    if t_unit not in _TIME_UNITS_S or r_unit not in _RATE_UNITS_BPS:
        raise TraceError(f"{path}:1: expected units among s/ms/us/ns and bps/kbps/mbps/gbps, found {start}, {rate[0]}")
    up = [1] * len(df)
    if "up" in df.columns:
        up = [_UP_VALUES.get(str(v).strip().lower(), 1) for v in df["up"]]
    starts = tuple(float(v) * _TIME_UNITS_S[t_unit] for v in df[start])
    rates = tuple(float(r) * _RATE_UNITS_BPS[r_unit] * u for r, u in zip(df[rate[0]], up))
    return RateSteps(starts, rates)


@functools.lru_cache(maxsize=16)
def _mahimahi_ms(path: str, mtime_ns: int):
    """A Mahimahi trace's opportunities as an array, read once per file
    version (a grid asks for the same trace's windows many times)."""
    return read_mahimahi(path).to_numpy()


def trace_length_s(path: str | Path) -> float:
    """How long one pass of the trace lasts: a Mahimahi trace's period (its
    last timestamp), a series trace's last interval start (after which its
    last row holds)."""
    if is_series(path):
        return series_rate_steps(path).starts_s[-1]
    return float(read_mahimahi(path).iloc[-1]) / 1000.0


def window_capacity_mbit(path: str | Path, start_s: float, seconds: float) -> float:
    """What the trace's direction can carry over [start_s, start_s + seconds)
    of the trace's own time (IP bytes, Mbit/s), replayed as the emulator
    does: a Mahimahi trace repeats with its period, a series trace holds its
    last row."""
    if seconds <= 0:
        return float("nan")
    return window_capacity_bytes(path, start_s, start_s + seconds) * 8 / seconds / 1e6


def window_capacity_bytes(path: str | Path, start_s: float, end_s: float) -> float:
    """IP bytes the trace's direction can carry over [start_s, end_s), as
    `window_capacity_mbit` replays it; 0 for an empty span."""
    if end_s <= start_s:
        return 0.0
    if is_series(path):
        steps = series_rate_steps(path)
        bits = 0.0
        for i, (s, bps) in enumerate(zip(steps.starts_s, steps.bps)):
            e = steps.starts_s[i + 1] if i + 1 < len(steps.starts_s) else float("inf")
            bits += bps * max(0.0, min(e, end_s) - max(s, start_s))
        return bits / 8
    times = _mahimahi_ms(str(path), Path(path).stat().st_mtime_ns)
    period_ms = int(times[-1])

    def before(t_ms: float) -> int:
        """Opportunities strictly before t_ms from the trace's time 0."""
        periods, rest = divmod(t_ms, period_ms)
        return int(periods) * len(times) + int((times < rest).sum())

    return (before(end_s * 1000) - before(start_s * 1000)) * MTU_BYTES


def carry_time_s(path: str | Path, start_s: float, nbytes: float,
                 gap: tuple[float, float] | None = None, limit_s: float = 3600.0) -> float:
    """The least time from `start_s` (the trace's own time, replayed as in
    `window_capacity_mbit`) until the direction could have carried `nbytes`
    of IP packets, all of its capacity used and none of it inside `gap`
    (an outage, from and to): no sender, whatever its headers and rate
    control, moves that many bytes sooner. NaN if not within `limit_s`."""

    def carried(end_s: float) -> float:
        total = window_capacity_bytes(path, start_s, end_s)
        if gap is not None:
            total -= window_capacity_bytes(path, max(start_s, gap[0]), min(end_s, gap[1]))
        return total

    lo, hi = start_s, start_s + limit_s
    if carried(hi) < nbytes:
        return float("nan")
    while hi - lo > 0.001:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if carried(mid) >= nbytes else (mid, hi)
    return hi - start_s

"""Channel traces: Mahimahi packet-delivery traces and convoy's own
time-series traces (format in docs/TRACES.md)."""

from __future__ import annotations

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

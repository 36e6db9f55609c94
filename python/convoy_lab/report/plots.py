"""Plots of an experiment's rows (matplotlib, written as PNG files).

Goodput is the mean over seeds with the seeds' min–max as error bars. The
papers' figures appear only where a paper gives a number for the same
quantity, drawn hatched and labelled "paper".
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ..experiments import paper  # noqa: E402
from ..experiments.catalog import Experiment, shared_traces_dir  # noqa: E402
from ..traces import capacity_series  # noqa: E402

COLORS = {
    "convoy": "#000000",
    "convoy-rcdp": "#d62728",
    "convoy-rlnc-bbr": "#ff7f0e",
    "tcp-cubic": "#1f77b4",
    "tcp-bbr": "#2ca02c",
    "tcp-reno": "#9467bd",
}


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"]


def _stats(df: pd.DataFrame, x: str, column: str) -> pd.DataFrame:
    return _ok(df).groupby(["scheme", x])[column].agg(["mean", "min", "max"]).reset_index()


def _lines(ax, e: Experiment, df: pd.DataFrame, column: str) -> None:
    stats = _stats(df, e.x, column)
    for scheme in e.schemes:
        s = stats[stats["scheme"] == scheme].sort_values(e.x)
        if s.empty:
            continue
        err = [s["mean"] - s["min"], s["max"] - s["mean"]]
        ax.errorbar(s[e.x], s["mean"], yerr=err, marker="o", capsize=3, label=scheme, color=COLORS.get(scheme))


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def goodput_plot(e: Experiment, df: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 5.2 if e.x == "trace" else 4.2))
    if e.x == "trace":
        _trace_bars(ax, e, df, "goodput_mbit_s")
        ax.set_ylabel("goodput (Mbit/s)")
    else:
        _lines(ax, e, df, "goodput_mbit_s")
        if e.ideal_line:
            ideal = _ok(df).groupby(e.x)["ideal_mbit_s"].mean().sort_index()
            ax.plot(ideal.index, ideal.values, "k--", label="ideal: capacity × (1 − loss)")
        ax.set_xlabel(e.x_label)
        ax.set_ylabel("goodput (Mbit/s)")
        ax.set_ylim(bottom=0)
    ax.set_title(e.title, fontsize=10)
    ax.grid(alpha=0.3)
    if e.x == "trace":  # below the axes: the bars fill the plot
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    else:
        ax.legend(fontsize=8)
    return _save(fig, path)


def delay_plot(e: Experiment, df: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if e.x == "trace":
        _trace_bars(ax, e, df, "owd_p95_ms", with_paper=False)
    else:
        _lines(ax, e, df, "owd_p95_ms")
        ax.set_xlabel(e.x_label)
        ax.set_ylim(bottom=0)
    ax.set_ylabel("one-way delay p95 on the link (ms)")
    ax.set_title(f"{e.name}: one-way delay of data packets, 95th percentile", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def _trace_bars(ax, e: Experiment, df: pd.DataFrame, column: str, with_paper: bool = True) -> None:
    stats = _stats(df, "trace", column)
    traces = sorted(_ok(df)["trace"].unique())
    schemes = [s for s in e.schemes if s in set(stats["scheme"])]
    slots = len(schemes) + (1 if with_paper else 0)
    width = 0.8 / max(slots, 1)
    for j, scheme in enumerate(schemes):
        s = stats[stats["scheme"] == scheme].set_index("trace").reindex(traces)
        xs = [i + j * width for i in range(len(traces))]
        err = [s["mean"] - s["min"], s["max"] - s["mean"]]
        ax.bar(xs, s["mean"], width, yerr=err, capsize=3, label=scheme, color=COLORS.get(scheme))
    if with_paper and traces:
        # The paper's three bars, once, after ours for the first trace.
        names = list(paper.SCALANC_GOODPUT_MBIT)
        sub = width / len(names)
        base = len(schemes) * width
        for k, name in enumerate(names):
            ax.bar(
                base + k * sub, paper.SCALANC_GOODPUT_MBIT[name], sub, color=COLORS.get(name),
                hatch="//", edgecolor="black", alpha=0.6,
                label="paper (pillmann-2018 HIL drive): ScalaNC+BBR, TCP BBR, TCP Cubic" if k == 0 else None,
            )
    if column == "goodput_mbit_s":
        # Each run saw the trace for as long as it took: mark its own capacity.
        cap = _ok(df).groupby(["scheme", "trace"])["capacity_mbit_s"].mean()
        for j, scheme in enumerate(schemes):
            for i, trace in enumerate(traces):
                value = cap.get((scheme, trace), math.nan)
                if not math.isnan(value):
                    ax.hlines(value, i + j * width - width / 2, i + j * width + width / 2, colors="k",
                              linestyles="--", label="trace capacity during that run" if (i, j) == (0, 0) else None)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(traces))])
    ax.set_xticklabels(traces, fontsize=8)


def trace_plot(e: Experiment, df: pd.DataFrame, path: Path, seconds: float) -> Path | None:
    """The capacity the runs saw: each trace's first `seconds`, per second."""
    traces = sorted(_ok(df)["trace"].unique()) if e.x == "trace" else []
    if not traces:
        return None
    fig, ax = plt.subplots(figsize=(7, 3))
    for name in traces:
        series = capacity_series(shared_traces_dir() / name, bin_ms=500)
        series = series[series["start_ms"] < seconds * 1000]
        ax.step(series["start_ms"] / 1000, series["rate_mbit_s"], where="post", label=name)
    ax.set_xlabel("time from the trace's start (s)")
    ax.set_ylabel("capacity (Mbit/s, 0.5 s bins)")
    ax.set_title("Uplink capacity during the runs", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)

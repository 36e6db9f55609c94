"""The cellular experiment's plots (PNG, matplotlib).

* Pantheon's throughput against delay: per trace direction, one point per
  scheme at its mean over the offsets (and seeds), with the offsets' range
  as error bars both ways. The x axis is the p95 one-way delay on the link,
  logarithmic and inverted as in Pantheon's figures, so better is up and to
  the right (marked).
* Delivered rate over time: per trace direction, each scheme's data bytes
  delivered by the link per second in one run (the first offset, seed 1),
  over the trace's capacity in the same seconds.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ..analysis.cellular import loss_label, ok_rows, points  # noqa: E402
from .plots import COLORS  # noqa: E402
from ..traces import window_capacity_mbit  # noqa: E402

MARKERS = {"convoy": "*", "convoy-rcdp": "s", "convoy-rlnc-bbr": "D", "tcp-cubic": "o", "tcp-bbr": "^", "tcp-reno": "v"}


def _grid(n: int):
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.9 * rows + 0.6), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _finish(fig, axes, title: str, path: Path) -> Path:
    """One legend for every panel, below them; the title above; saved.
    Its entries come from every panel, not the first alone: a panel can
    lack a scheme (a run resumed on another machine keeps its figures but
    not its per-second series), or draw nothing but the trace."""
    entries: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    handles, labels = list(entries.values()), list(entries)
    fig.legend(handles, labels, loc="lower center", ncol=max(1, min(6, len(labels))), fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def scatter(df: pd.DataFrame, loss: float, schemes: list[str], path: Path) -> Path | None:
    """Throughput against p95 one-way delay, one panel per trace direction."""
    p = points(df)
    p = p[p["loss_pct"] == loss]
    traces = list(dict.fromkeys(ok_rows(df)[ok_rows(df)["loss_pct"] == loss]["trace"]))
    if p.empty or not traces:
        return None
    fig, axes = _grid(len(traces))
    for ax, trace in zip(axes, traces):
        t = p[p["trace"] == trace]
        stats = t.groupby("scheme").agg(
            x=("owd_p95_ms", "mean"), x_lo=("owd_p95_ms", "min"), x_hi=("owd_p95_ms", "max"),
            y=("goodput_mbit_s", "mean"), y_lo=("goodput_mbit_s", "min"), y_hi=("goodput_mbit_s", "max"),
        )
        for scheme in [s for s in schemes if s in stats.index]:
            r = stats.loc[scheme]
            ax.errorbar(
                r["x"], r["y"], xerr=[[r["x"] - r["x_lo"]], [r["x_hi"] - r["x"]]],
                yerr=[[r["y"] - r["y_lo"]], [r["y_hi"] - r["y"]]], fmt=MARKERS.get(scheme, "o"),
                markersize=11 if scheme == "convoy" else 7, capsize=2, color=COLORS.get(scheme), label=scheme,
            )
        capacity = t["capacity_mbit_s"].mean()
        if not math.isnan(capacity):
            ax.axhline(capacity, color="k", linestyle=":", linewidth=1, label="trace capacity (runs' windows)")
        ax.set_xscale("log")
        ax.invert_xaxis()  # Pantheon: lower delay to the right
        ax.set_ylim(bottom=0, top=max(stats["y_hi"].max(), capacity if not math.isnan(capacity) else 0) * 1.15)
        ax.set_xlabel("95th percentile one-way delay (ms, log)")
        ax.set_ylabel("goodput (Mbit/s)")
        ax.set_title(trace, fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.annotate("better", xy=(0.97, 0.95), xytext=(0.78, 0.78), xycoords="axes fraction",
                    textcoords="axes fraction", ha="center", fontsize=8,
                    arrowprops={"arrowstyle": "->", "color": "0.3"})
    return _finish(fig, axes, f"Throughput against delay, {loss_label(loss)}\n(mean over offsets; bars: their range)", path)


def over_time(df: pd.DataFrame, loss: float, schemes: list[str], experiment_dir: Path, path: Path) -> Path | None:
    """Delivered Mbit/s per second of one run per scheme, over the trace's
    capacity in the same seconds, one panel per trace direction."""
    ok = ok_rows(df)
    ok = ok[(ok["loss_pct"] == loss) & (ok["seed"] == ok["seed"].min())] if not ok.empty else ok
    if ok.empty or "run_dir" not in ok.columns:
        return None
    traces = list(dict.fromkeys(ok["trace"]))
    fig, axes = _grid(len(traces))
    drawn = False
    for ax, trace in zip(axes, traces):
        t = ok[ok["trace"] == trace]
        t = t[t["offset_s"] == t["offset_s"].min()]
        seconds = int(math.ceil(t["duration_s"].max() + t["first_data_s"].max()))
        for scheme in [s for s in schemes if s in set(t["scheme"])]:
            r = t[t["scheme"] == scheme].iloc[0]
            series = experiment_dir / str(r["run_dir"]) / "delivered.csv"
            if not series.is_file():
                continue
            d = pd.read_csv(series)
            ax.step(d["second"], d["delivered_mbit_s"], where="post", color=COLORS.get(scheme), label=scheme, linewidth=1)
            drawn = True
        r = t.iloc[0]
        trace_path = _trace_path(r, experiment_dir)
        if trace_path is not None and seconds:
            cap = [window_capacity_mbit(trace_path, r["offset_s"] + k, 1.0) for k in range(seconds + 1)]
            ax.fill_between(range(len(cap)), cap, step="post", color="0.85", label="trace capacity", zorder=0)
        ax.set_xlabel(f"seconds of link time (from {r['offset_s']:g} s into the trace)")
        ax.set_ylabel("delivered on the link (Mbit/s)")
        ax.set_title(trace, fontsize=9)
        ax.grid(alpha=0.3)
    if not drawn:
        plt.close(fig)
        return None
    return _finish(fig, axes, f"Data delivered per second by the link,\none run per scheme, {loss_label(loss)}", path)


def _trace_path(row, experiment_dir: Path) -> Path | None:
    """The data trace of a run, from the command line saved beside it."""
    command = experiment_dir / str(row["run_dir"]) / "command.txt"
    if not command.is_file():
        return None
    for word in shlex.split(command.read_text()):
        if word.startswith("link:"):
            for key in word.split(":", 1)[1].split(","):
                if key.startswith("up="):
                    path = Path(key[3:])
                    return path if path.is_file() else None
    return None

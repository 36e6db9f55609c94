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
import math
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
from .catalog import ExperimentError, shared_traces_dir

NAME = "incumbents"
TITLE = "convoy against MQTT + S3 multipart and HTTPS PUT: one vehicle's workload over a drive trace"
STACK_ORDER = ["convoy", "mqtt-s3", "https-put"]
FULL_TRACES = ["TMobile-LTE-short.up", "Verizon-LTE-short.up"]
QUICK_TRACES = ["Verizon-LTE-short.up"]  # its first 20 s carry the most (5-8 Mbit/s)
FULL = Plan()
# A few seconds each: the camera file just over one 8 MiB part, so the
# multipart path runs.
QUICK = Plan(before_s=4, outage_s=3, after_s=3, drain_max_s=60, camera_bytes=9_000_000)


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


# ---- the targets of issue 35 -----------------------------------------------


def _get(df: pd.DataFrame, trace: str, loss: float, stack: str, col: str) -> float:
    r = df[(df["trace"] == trace) & (df["loss_pct"] == loss) & (df["stack"] == stack) & (df["status"] == "ok")]
    return float(r[col].iloc[0]) if len(r) and col in r and pd.notna(r[col].iloc[0]) else math.nan


def checks(df: pd.DataFrame) -> list[dict]:
    """One row per target and condition: what it asks, the measured ratio,
    met or not (None when a figure is missing)."""
    out = []

    def add(target, trace, loss, value, ok, detail):
        out.append({"target": target, "trace": trace, "loss_pct": loss, "value": value,
                    "met": None if math.isnan(value) else bool(ok(value)), "detail": detail})

    for (trace, loss), _ in df.groupby(["trace", "loss_pct"]):
        g = lambda stack, col: _get(df, trace, loss, stack, col)  # noqa: E731
        limit = 0.5 if loss >= 2 else 1.0
        c, m = g("convoy", "fresh_p99_s"), g("mqtt-s3", "fresh_p99_s")
        add(f"freshness p99: convoy <= {limit:g}x MQTT's", trace, loss, c / m, lambda v: v <= limit,
            f"{c:.2f} s vs {m:.2f} s")
        need = 1.5 if loss >= 2 else 1.0
        c, m = g("convoy", "drain_mbit_s"), g("mqtt-s3", "drain_mbit_s")
        add(f"log drain: convoy >= {need:g}x S3 multipart's", trace, loss, c / m, lambda v: v >= need,
            f"{c:.2f} vs {m:.2f} Mbit/s")
        c, h = g("convoy", "camera_s"), g("https-put", "camera_s")
        add("camera file: convoy >= 1.3x faster than HTTPS PUT", trace, loss, h / c, lambda v: v >= 1.3,
            f"{c:.1f} s vs {h:.1f} s")
        c = g("convoy", "air_per_payload")
        inc = ", ".join(f"{s} {g(s, 'air_per_payload'):.3f}" for s in ("mqtt-s3", "https-put"))
        add("bytes on the air: convoy <= 1.05x payload", trace, loss, c, lambda v: v <= 1.05,
            f"{c:.3f} (incumbents: {inc})")
        lost = sum(g("convoy", k) for k in ("samples_lost", "samples_duplicated", "files_lost"))
        add("convoy: 0 samples or files lost or duplicated", trace, loss, lost, lambda v: v == 0,
            f"{lost:g} lost or duplicated")
    return out


# ---- output ------------------------------------------------------------------


def _f(v, fmt="{:.2f}") -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


def table_rows(df: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = ["trace", "loss", "stack", "fresh p50 s", "fresh p99 s", "back s", "log drain Mbit/s (of cap.)",
               "log wait p50/p99 s", "camera s", "air/payload", "samples lost/dup", "files lost (bytes)", "CPU vehicle s (%)",
               "CPU server s"]
    rows = []
    for _, r in df.iterrows():
        if pd.isna(r.get("samples_sent", math.nan)):  # nothing measured: say why
            rows.append([r["trace"], f"{r['loss_pct']:g} %", r["stack"], r["status"], r["error"][:60],
                         *[""] * 9])
            continue
        drain = (f"{_f(r['drain_mbit_s'])} ({_f(r['drain_of_capacity'], '{:.0%}')})"
                 if pd.notna(r.get("drain_mbit_s")) else f"not drained ({r.get('log_backlog_unacked', '?'):g} left)")
        rows.append([
            r["trace"], f"{r['loss_pct']:g} %", r["stack"] + ("" if r["status"] == "ok" else f" ({r['status']})"),
            _f(r["fresh_p50_s"]), _f(r["fresh_p99_s"]), _f(r.get("recover_s", math.nan), "{:.1f}"), drain,
            f"{_f(r.get('log_wait_p50_s', math.nan), '{:.1f}')}/{_f(r.get('log_wait_p99_s', math.nan), '{:.1f}')}",
            _f(r["camera_s"], "{:.1f}"),
            _f(r["air_per_payload"], "{:.3f}"), f"{r['samples_lost']:g}/{r['samples_duplicated']:g}",
            f"{r['files_lost']:g} ({r['bytes_lost']:g})",
            f"{_f(r['vehicle_cpu_s'], '{:.1f}')} ({_f(r['vehicle_cpu_pct'], '{:.1f}')})",
            _f(r["server_cpu_s"], "{:.1f}"),
        ])
    return headers, rows


def print_result(df: pd.DataFrame, meta: dict, stream=None) -> None:
    from ..report.html import text_table

    stream = stream or sys.stdout
    p = meta["plan"]
    print(f"\n== {NAME}: {TITLE}", file=stream)
    print(f"   telemetry every {p['sample_every_s']:g} s, a {p['log_bytes'] / 1e3:g} kB log every "
          f"{p['log_every_s']:g} s, a {p['camera_bytes'] / 1e6:g} MB camera file at {p['camera_at_s']:g} s; "
          f"outage {p['before_s']:g}-{p['before_s'] + p['outage_s']:g} s; 20 ms each way, 200-packet queue",
          file=stream)
    print(text_table(*table_rows(df)), file=stream)
    print("\ntargets (issue 35):", file=stream)
    for c in checks(df):
        state = "n/a   " if c["met"] is None else "met   " if c["met"] else "MISSED"
        print(f"  {state} {c['target']}, {c['trace']} {c['loss_pct']:g} %: {_f(c['value'], '{:.2f}')} "
              f"({c['detail']})", file=stream)


def as_json(df: pd.DataFrame, meta: dict) -> dict:
    clean = lambda v: None if isinstance(v, float) and math.isnan(v) else v  # noqa: E731
    return {"name": NAME, "meta": meta, "targets": [{k: clean(v) for k, v in c.items()} for c in checks(df)],
            "rows": [{k: clean(v) for k, v in r.items()} for r in df.to_dict("records")]}


def report_section(out: Path) -> str | None:
    """The report's section: the table, the targets, the plot and the
    command behind them."""
    import html

    from ..report.html import _html_table, _img

    d = out / NAME
    if not (d / "runs.csv").is_file() or not (d / "meta.json").is_file():
        return None
    df = pd.read_csv(d / "runs.csv")
    df["error"] = df["error"].astype(str).replace("nan", "")
    meta = json.loads((d / "meta.json").read_text())
    cmd = f".venv/bin/python -m convoy_lab.experiments run {NAME}" + (" --quick" if meta.get("quick") else "")
    parts = [f'<h2 id="{NAME}">{html.escape(TITLE)}</h2>',
             f"<p>Regenerate: <code>{html.escape(cmd)}</code>; traces {html.escape(', '.join(meta['traces']))}, "
             f"losses {meta['losses_pct']} %, measured {html.escape(meta['started'])}.</p>",
             _html_table(*table_rows(df)),
             "<h3>Targets (issue 35)</h3>",
             _html_table(["target", "trace", "loss", "measured", "", "detail"],
                         [[c["target"], c["trace"], f"{c['loss_pct']:g} %", _f(c["value"]),
                           "n/a" if c["met"] is None else "met" if c["met"] else "MISSED", c["detail"]]
                          for c in checks(df)])]
    if (d / f"{NAME}.png").is_file():
        parts.append(_img(d / f"{NAME}.png"))
    return "\n".join(parts)


def plot(df: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measures = [("fresh_p99_s", "live freshness p99, s"), ("drain_mbit_s", "log drain, Mbit/s"),
                ("log_wait_p99_s", "log wait p99, s"), ("camera_s", "camera file done, s"),
                ("air_per_payload", "air bytes / payload byte")]
    ok = df[df["status"] == "ok"]
    conds = sorted({(t, l) for t, l in zip(ok["trace"], ok["loss_pct"])})
    fig, axes = plt.subplots(1, len(measures), figsize=(4 * len(measures), 3.6))
    width = 0.8 / max(1, len(STACK_ORDER))
    for ax, (col, label) in zip(axes, measures):
        for i, stack in enumerate(STACK_ORDER):
            ys = [_get(df, t, l, stack, col) for t, l in conds]
            ax.bar([x + i * width for x in range(len(conds))], ys, width, label=stack)
        ax.set_xticks([x + width for x in range(len(conds))])
        ax.set_xticklabels([f"{t.split('-')[0]}\n{l:g} %" for t, l in conds], fontsize=8)
        ax.set_title(label, fontsize=9)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""The incumbents experiment as a reader sees it: the text table and
targets, the JSON document, the plot and the HTML report's section."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd

from ..analysis.incumbents import STACK_ORDER, checks, figure

NAME = "incumbents"
TITLE = "convoy against MQTT + S3 multipart and HTTPS PUT: one vehicle's workload over a drive trace"


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
    from .html import text_table

    stream = stream or sys.stdout
    p = meta["plan"]
    print(f"\n== {NAME}: {TITLE}", file=stream)
    print(f"   telemetry every {p['sample_every_s']:g} s, a {p['log_bytes'] / 1e3:g} kB log every "
          f"{p['log_every_s']:g} s, a {p['camera_bytes'] / 1e6:g} MB camera file at {p['camera_at_s']:g} s, from "
          f"{p['start_s']:g} s of link time; outage {p['start_s'] + p['before_s']:g}-"
          f"{p['start_s'] + p['before_s'] + p['outage_s']:g} s; 20 ms each way, 200-packet queue",
          file=stream)
    print(text_table(*table_rows(df)), file=stream)
    late = df[df["late_start_s"] > 0] if "late_start_s" in df else df.iloc[:0]
    for _, r in late.iterrows():
        print(f"   {r['stack']} {r['trace']} {r['loss_pct']:g} %: its workload began {r['late_start_s']:.1f} s late "
              "(the stack was still starting)", file=stream)
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

    from .html import _html_table, _img

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
            ys = [figure(df, t, l, stack, col) for t, l in conds]
            ax.bar([x + i * width for x in range(len(conds))], ys, width, label=stack)
        ax.set_xticks([x + width for x in range(len(conds))])
        ax.set_xticklabels([f"{t.split('-')[0]}\n{l:g} %" for t, l in conds], fontsize=8)
        ax.set_title(label, fontsize=9)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""Tables (text for the terminal, HTML for the report) and the static HTML
report: one self-contained file (plots embedded), so it opens from disk.

Results layout, per experiment: OUT/NAME/runs.csv (one row per run),
OUT/NAME/meta.json (how it was run), OUT/NAME/*.png (plots).
"""

from __future__ import annotations

import base64
import html
import json
import math
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from ..analysis import cellular as cell
from . import cellular as cellular_plots, plots
from ..experiments.catalog import EXPERIMENTS, Claim, Experiment

from ..experiments.cellular import NAME as CELLULAR  # noqa: E402


def _x_text(e: Experiment, value) -> str:
    if e.x == "trace":
        return str(value).replace("-LTE", "").replace(".up", "")
    unit = {"loss_pct": " %", "delay_ms": " ms", "rate_mbit": " Mbit/s"}.get(e.x, "")
    return f"{value:g}{unit}"


def _num(value: float, digits: int = 2) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def goodput_matrix(e: Experiment, df: pd.DataFrame) -> pd.DataFrame:
    """Scheme × swept value: mean goodput (Mbit/s) over seeds; last row the
    ideal, capacity × (1 − loss)."""
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return pd.DataFrame()
    table = ok.pivot_table(index="scheme", columns=e.x, values="goodput_mbit_s", aggfunc="mean")
    order = [s for s in e.schemes if s in table.index]
    table = table.reindex(order)
    if e.x == "trace":
        # Each run saw the trace for as long as it took: its own capacity.
        cap = ok.pivot_table(index="scheme", columns="trace", values="capacity_mbit_s", aggfunc="mean").reindex(order)
        columns = {}
        for trace in table.columns:
            columns[_x_text(e, trace)] = table[trace]
            columns[f"{_x_text(e, trace)} capacity"] = cap[trace]
        return pd.DataFrame(columns)
    table.loc["ideal"] = ok.groupby(e.x)["ideal_mbit_s"].mean()
    table.columns = [_x_text(e, c) for c in table.columns]
    return table


def scheme_summary(e: Experiment, df: pd.DataFrame) -> pd.DataFrame:
    """Per scheme and swept value: goodput, one-way delay, CPU, over seeds."""
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return pd.DataFrame()
    agg = ok.groupby(["scheme", e.x]).agg(
        runs=("goodput_mbit_s", "size"),
        goodput_mbit_s=("goodput_mbit_s", "mean"),
        owd_p50_ms=("owd_p50_ms", "mean"),
        owd_p95_ms=("owd_p95_ms", "mean"),
        owd_p99_ms=("owd_p99_ms", "mean"),
        cpu_client_s=("cpu_client_s", "mean"),
        cpu_server_s=("cpu_server_s", "mean"),
        duration_s=("duration_s", "mean"),
    )
    order = {s: i for i, s in enumerate(e.schemes)}
    agg = agg.reset_index()
    agg["_o"] = agg["scheme"].map(order)
    return agg.sort_values(["_o", e.x]).drop(columns="_o")


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    out = [line(headers), "-" * (sum(widths) + 2 * (len(widths) - 1))]
    out += [line(r) for r in rows]
    return "\n".join(out)


def matrix_text(e: Experiment, df: pd.DataFrame) -> str:
    m = goodput_matrix(e, df)
    if m.empty:
        return "(no successful runs)"
    rows = [[name, *(_num(v) for v in m.loc[name])] for name in m.index]
    return text_table([f"goodput Mbit/s \\ {e.x_label}", *m.columns], rows)


def claims_text(claims: list[Claim]) -> str:
    return text_table(["figure", "paper", "ours"], [[c.metric, c.paper, c.ours] for c in claims])


def regenerate_command(name: str, meta: dict) -> str:
    seeds = meta.get("seeds", [1])
    parts = [".venv/bin/python -m convoy_lab.experiments run", name]
    if meta.get("quick"):
        parts.append("--quick")
    if len(seeds) != 1:
        parts.append(f"--seeds {len(seeds)}")
    if meta.get("schemes"):
        # A run on a subset of the schemes must say which, or the command
        # would not give the table it stands beside.
        from ..experiments.catalog import EXPERIMENTS

        every = EXPERIMENTS[name].schemes if name in EXPERIMENTS else None
        if every is None or list(meta["schemes"]) != list(every):
            parts.append(f"--schemes {','.join(meta['schemes'])}")
    parts.append(f"--out {meta.get('out', 'results')}")
    return " ".join(parts)


def _img(path: Path | None) -> str:
    if path is None or not path.is_file():
        return ""
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def _html_table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def load(out: Path, name: str) -> tuple[pd.DataFrame, dict] | None:
    d = out / name
    if not (d / "runs.csv").is_file():
        return None
    meta = json.loads((d / "meta.json").read_text()) if (d / "meta.json").is_file() else {}
    try:
        df = pd.read_csv(d / "runs.csv", keep_default_na=False, na_values=["", "nan", "NaN"])
    except pd.errors.EmptyDataError:
        df = pd.DataFrame()
    return df, meta


def draw(e: Experiment, df: pd.DataFrame, out_dir: Path, meta: dict) -> list[Path]:
    if df.empty or (df["status"] == "ok").sum() == 0:
        return []
    figures = [
        plots.goodput_plot(e, df, out_dir / "goodput.png"),
        plots.delay_plot(e, df, out_dir / "delay.png"),
    ]
    seconds = meta.get("transfer_s") or float(df["duration_s"].max())
    trace = plots.trace_plot(e, df, out_dir / "capacity.png", seconds)
    return figures + ([trace] if trace else [])


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
code, pre { background: #f4f4f4; padding: 2px 4px; }
img { max-width: 100%; display: block; margin: 0.5em 0; }
.note { color: #555; font-size: 0.9em; }
"""


def _not_run(meta: dict) -> list[str]:
    return [f'<p class="note">Not run: {html.escape(s)}: {html.escape(r)}</p>' for s, r in (meta.get("skipped") or {}).items()]


def experiment_section(e: Experiment, df: pd.DataFrame, meta: dict, out: Path) -> str:
    parts = [f'<h2 id="{e.name}">{html.escape(e.title)}</h2>']
    parts.append(f"<p><b>Conditions.</b> {html.escape(e.conditions)}. "
                 f"Transfer: {html.escape(meta.get('transfer', '?'))} per run; "
                 f"seeds: {html.escape(str(meta.get('seeds', '?')))}"
                 f"{' (short settings of the demo)' if meta.get('quick') else ''}.</p>")
    parts.append(f"<p>Regenerate: <code>{html.escape(regenerate_command(e.name, meta))}</code></p>")
    parts += _not_run(meta)
    failed = df[df["status"] != "ok"] if not df.empty else df
    if len(failed):
        rows = [[r.scheme, r.status, str(r.error)] for r in failed.itertuples()]
        parts.append("<p class='note'>Runs without a result:</p>" + _html_table(["scheme", "status", "error"], rows))
    if df.empty or (df["status"] == "ok").sum() == 0:
        parts.append("<p>No successful runs.</p>")
        return "\n".join(parts)
    claims = e.claims(df)
    parts.append(f"<h3>Paper beside ours</h3><p class='note'>Paper: {html.escape(e.source)}; "
                 "its figures are constants from SPEC.md, measured on the paper's own set-up.</p>")
    parts.append(_html_table(["figure", "paper", "ours"], [[c.metric, c.paper, c.ours] for c in claims]))
    m = goodput_matrix(e, df)
    parts.append("<h3>Goodput (Mbit/s, mean over seeds)</h3>")
    parts.append(_html_table([e.x_label, *m.columns], [[i, *(_num(v) for v in m.loc[i])] for i in m.index]))
    for png in sorted((out / e.name).glob("*.png")):
        parts.append(_img(png))
    s = scheme_summary(e, df)
    cols = ["scheme", e.x, "runs", "goodput_mbit_s", "owd_p50_ms", "owd_p95_ms", "owd_p99_ms", "cpu_client_s", "cpu_server_s", "duration_s"]
    rows = [[r["scheme"], _x_text(e, r[e.x]), int(r["runs"]), *(_num(r[c]) for c in cols[3:])] for _, r in s.iterrows()]
    parts.append("<h3>Per scheme</h3><p class='note'>One-way delay: data packets on the emulated link "
                 "(queue + serialization + propagation), from convoy emu's records. CPU: user + system seconds of "
                 "the sender (client) and receiver (server) processes.</p>")
    parts.append(_html_table(cols, rows))
    parts.append(f"<p>Every run: <a href='{html.escape(e.name)}/runs.csv'>{html.escape(e.name)}/runs.csv</a></p>")
    return "\n".join(parts)


def cellular_section(df: pd.DataFrame, meta: dict, out: Path) -> str:
    """The cellular grid: per loss setting, the Pantheon scatter, the
    per-direction tables, the targets, and the delivered rate over time."""
    title = "Cellular drive traces, Pantheon-style: throughput against delay"
    parts = [f'<h2 id="{CELLULAR}">{html.escape(title)}</h2>']
    parts.append(f"<p><b>Conditions.</b> {html.escape(meta.get('conditions', '?'))}; seeds "
                 f"{html.escape(str(meta.get('seeds', '?')))}{' (short form of the demo)' if meta.get('quick') else ''}"
                 f"{'' if meta.get('finished', True) else '. <b>Not finished</b> (interrupted, or still running): the rows measured so far'}.</p>")
    parts.append(f"<p>Regenerate: <code>{html.escape(meta.get('command', '.venv/bin/python -m convoy_lab.experiments run cellular'))}</code></p>")
    parts += _not_run(meta)
    failed = df[df["status"] != "ok"] if not df.empty else df
    if len(failed):
        rows = [[r.scheme, r.trace, f"{r.offset_s:g} s", f"{r.loss_pct:g} %", r.status, str(r.error)] for r in failed.itertuples()]
        parts.append("<p class='note'>Runs without a result:</p>"
                     + _html_table(["scheme", "trace", "offset", "loss", "status", "error"], rows))
    ok = cell.ok_rows(df)
    if ok.empty:
        parts.append("<p>No successful runs.</p>")
        return "\n".join(parts)
    parts.append("<p class='note'>Goodput: what the receiving application got. Capacity: the data trace's over each "
                 "run's own window of link time, from its offset (mean over offsets). One-way delay (owd): data packets "
                 "on the link, from convoy emu's records; queue: owd less the configured propagation delay. "
                 "Scatter: Pantheon's axes (p95 one-way delay, log, inverted: better is up and to the right).</p>")
    parts += [f"<p class='note'><b>Note.</b> {html.escape(n)}.</p>" for n in cell.overrun_notes(df)]
    schemes = meta.get("schemes") or sorted(ok["scheme"].unique())
    directory = out / CELLULAR
    for loss in sorted(ok["loss_pct"].unique()):
        label = cell.loss_label(loss)
        parts.append(f"<h3>{html.escape(label.capitalize())}</h3>")
        tag = f"{loss:g}".replace(".", "_")
        parts.append(_img(cellular_plots.scatter(df, loss, schemes, directory / f"scatter-loss{tag}.png")))
        for trace in ok[ok["loss_pct"] == loss]["trace"].unique():
            headers, rows = cell.direction_rows(df, loss, trace, schemes)
            parts.append(f"<h4>{html.escape(trace)}, {html.escape(label)}</h4>" + _html_table(headers, rows))
        target = cell.TARGETS.get(float(loss))
        goal = target.describe() if target else "no target is set for this loss"
        parts.append(f"<h4>Targets for {cell.TARGET_SCHEME}, {html.escape(label)}: {html.escape(goal)}</h4>")
        if cell.TARGET_SCHEME in set(ok["scheme"]):
            parts.append(_html_table(*cell.check_rows(df, loss)))
        else:
            parts.append(f"<p>n/a: {cell.TARGET_SCHEME} was not run.</p>")
        parts.append(_img(cellular_plots.over_time(df, loss, schemes, directory, directory / f"over-time-loss{tag}.png")))
    p = cell.points(df).sort_values(["loss_pct", "trace", "offset_s"], kind="stable")
    rows = [[f"{r.loss_pct:g} %", r.trace, f"{r.offset_s:g} s", r.scheme, _num(r.goodput_mbit_s), _num(r.capacity_mbit_s),
             _num(r.owd_p50_ms, 0), _num(r.owd_p95_ms, 0), _num(r.qdelay_p95_ms, 0)] for r in p.itertuples()]
    parts.append("<details><summary>Every point (mean over seeds)</summary>" + _html_table(
        ["loss", "trace", "offset", "scheme", "goodput Mbit/s", "capacity Mbit/s", "owd p50 ms", "owd p95 ms",
         "queue p95 ms"], rows) + "</details>")
    parts.append(f"<p>Every run: <a href='{CELLULAR}/runs.csv'>{CELLULAR}/runs.csv</a></p>")
    return "\n".join(parts)


def write_report(out: Path) -> Path:
    sections, index = [], []
    for name, e in EXPERIMENTS.items():
        loaded = load(out, name)
        if loaded is None:
            continue
        df, meta = loaded
        draw(e, df, out / name, meta)
        sections.append(experiment_section(e, df, meta, out))
        index.append(f'<li><a href="#{name}">{html.escape(e.title)}</a></li>')
    loaded = load(out, CELLULAR)
    if loaded is not None:
        sections.append(cellular_section(*loaded, out))
        index.append(f'<li><a href="#{CELLULAR}">Cellular drive traces (Pantheon-style)</a></li>')
    from ..experiments import scheduled

    for name, title in scheduled.TITLES.items():
        section = scheduled.report_section(name, out)
        if section:
            sections.append(section)
            index.append(f'<li><a href="#{name}">{html.escape(title)}</a></li>')
    from ..experiments import multipath as multipath_exp
    from . import multipath as multipath_plots

    for name, title in multipath_exp.TITLES.items():
        section = multipath_plots.report_section(name, out)
        if section:
            sections.append(section)
            index.append(f'<li><a href="#{name}">{html.escape(title)}</a></li>')
    from . import incumbents

    section = incumbents.report_section(out)
    if section:
        sections.append(section)
        index.append(f'<li><a href="#{incumbents.NAME}">{html.escape(incumbents.TITLE)}</a></li>')
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = "\n".join(sections) if sections else "<p>No results yet: run <code>make demo</code>.</p>"
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>convoy experiments</title><style>{STYLE}</style></head>
<body>
<h1>convoy beside kernel TCP</h1>
<p>Every number here was measured on this machine ({now}) by real programs over <code>convoy emu</code>:
the <code>convoy</code> binary for convoy's modes, kernel TCP (Cubic, BBR, Reno) for the baselines.
Figures marked "paper" are the source papers' own, copied from SPEC.md for comparison; their set-ups differ
from ours, so compare shapes and ratios rather than absolute values.</p>
<ul>{''.join(index)}</ul>
{body}
<p class="note">All results: <code>{html.escape(str(out))}</code>. Regenerate this page from them:
<code>.venv/bin/python -m convoy_lab.experiments report --out {html.escape(str(out))}</code></p>
</body></html>
"""
    path = out / "report.html"
    path.write_text(page)
    return path

"""Running, tabulating and plotting the schedule experiments (`smart-ap`,
`background`): one `convoy emu` run per cell, one CSV row per run, the
targets and Palazzi's figures beside ours, plots over time, and a section
of the HTML report.

    python -m convoy_lab.experiments run smart-ap [--quick] [--scale F]
    python -m convoy_lab.experiments run background [--quick] [--scale F] [--only KIND]

`--scale F` multiplies every time of the schedules (0.5: 90 s instead of
180 s); `--quick` is the short subset `make test` runs.
"""

from __future__ import annotations

import html
import json
import math
import os
import sys
import time
from pathlib import Path

import pandas as pd

from . import background as background_exp, smart_ap as smartap_exp
from ..emu import coexist
from .catalog import ExperimentError, shared_traces_dir
from ..report import stamp
from .parts import Part, run_fields

TITLES = {
    "smart-ap": "Smart access point: Palazzi's home AP on kernel TCP (SPEC S4)",
    "background": "Background upload beside real-time flows through a plain FIFO AP (SPEC S4, B.3)",
}
QUICK_SCALE = {"smart-ap": 0.12, "background": 0.15}


def names() -> list[str]:
    return list(TITLES)


def _matches(cell, token: str) -> bool:
    if token == "target":  # the background experiment's target cell (and its LTE run)
        return getattr(cell, "queue", None) == 250 and getattr(cell, "rate", None) in (10, None)
    return any(str(v) == token for v in cell.__dict__.values())


def _cells(name: str, quick: bool, only: str | None):
    """The experiment's cells; `only`: comma-separated tokens that must all
    match one of a cell's values (kind, policy, bulk, impairment), or
    `target` for the background target cell."""
    mod = smartap_exp if name == "smart-ap" else background_exp
    cells = mod.cells(quick)
    if only:
        tokens = [t for t in only.split(",") if t]
        cells = [c for c in cells if all(_matches(c, t) for t in tokens)]
        if not cells:
            raise ExperimentError(f"--only {only}: no {name} cell matches all of these tokens "
                                  "(run one --only per group of cells; their rows are merged)")
    return mod, cells


def _key(row: dict) -> tuple:
    """A cell's identity in runs.csv (numbers as written or read back)."""
    def norm(v):
        if v is None:  # missing: NaN once written and read back
            return "nan"
        if isinstance(v, (int, float)):
            return "nan" if isinstance(v, float) and math.isnan(v) else f"{float(v):g}"
        return str(v)

    return tuple(norm(row.get(k)) for k in ("kind", "policy", "bulk", "impairment", "rate_mbit", "queue_pkts"))


def _cell_columns(cell) -> dict:
    """A cell's values as its row's columns (its rate and queue are
    rate_mbit and queue_pkts there), for the rows of runs that measured
    nothing."""
    c = dict(cell.__dict__)
    if "rate" in c:
        c["rate_mbit"] = c.pop("rate")
    if "queue" in c:
        c["queue_pkts"] = c.pop("queue")
    return c


def _cell_key(cell) -> tuple:
    """The key of the row a cell's run writes."""
    return _key(_cell_columns(cell))


def _schedule(name: str, cell):
    if name == "smart-ap":
        return smartap_exp.schedule(cell)
    return background_exp.schedule(cell, shared_traces_dir())


def _unavailable(name: str, cell) -> str | None:
    if name == "background":
        for scheme in cell.bulk.split("+"):
            why = coexist.bulk_unavailable(scheme)
            if why:
                return why
    return coexist.irtt_missing() if name == "background" else None


def run(name: str, quick: bool, out: Path, scale: float | None, only: str | None, seed: int = 1,
        resume: bool = False) -> pd.DataFrame:
    """Runs the cells; runs.csv is rewritten after each one, so an
    interrupted run keeps the cells it finished. With `only`, the cells run
    replace their own rows and the others are kept. With `resume`, a cell
    runs.csv already holds with status "ok" is kept and not run again."""
    mod, cells = _cells(name, quick, only)
    scale = scale if scale is not None else (QUICK_SCALE[name] if quick else 1.0)
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    old = pd.read_csv(d / "runs.csv") if (only or resume) and (d / "runs.csv").is_file() else None
    done = {} if old is None or not resume else {
        _key(r): r for r in old.to_dict("records") if r.get("status") == "ok"}
    # The earlier rows this part keeps (`--only`: the other cells'; `--resume`:
    # the finished ones), so meta.json names the build and day they ran on.
    to_run = {_cell_key(c) for c in cells} - set(done)
    kept = 0 if old is None else sum(1 for r in old.to_dict("records") if _key(r) not in to_run)
    part = Part(d, resume or old is not None, {"quick": quick, "scale": scale, "seed": seed}, kept,
                "--resume" if resume else "--only")
    rows = []
    started, taken = time.time(), stamp.stamp()

    def meta_now(finished: bool) -> dict:
        return {"experiment": name, "quick": quick, "scale": scale, "only": only, "seed": seed,
                **run_fields(out, started, taken, finished)}

    # Written before the first cell too, so a part stopped early has its stamp.
    part.write(meta_now(False))
    ran = 0
    for i, cell in enumerate(cells, 1):
        label = " ".join(str(v) for v in cell.__dict__.values() if v is not None)
        earlier = done.get(_cell_key(cell))
        if earlier is not None:
            print(f"[{i}/{len(cells)}] {label}: kept from an earlier part", file=sys.stderr, flush=True)
            rows.append(earlier)
            continue
        why = _unavailable(name, cell)
        if why:
            print(f"[{i}/{len(cells)}] {label}: not run: {why}", file=sys.stderr)
            rows.append({**_cell_columns(cell), "status": "unavailable", "error": why})
            continue
        sched = _schedule(name, cell).scaled(scale)
        load = os.getloadavg()[0]
        print(f"[{i}/{len(cells)}] {label} ({sched.length:.0f} s, load {load:.1f})", file=sys.stderr, flush=True)
        work = d / "runs" / label.replace(" ", "_").replace("/", "-")
        res = coexist.run(sched, work, seed)
        try:
            row = _measure(mod, cell, sched, res)
            plot_run(name, cell, sched, res, d / f"{work.name}.png")
        except (ValueError, KeyError, TypeError, OSError) as err:
            # One unreadable run must not lose the others.
            row = {**_cell_columns(cell), "status": "error", "error": f"{type(err).__name__}: {err}"}
        row.update(scale=scale, load=load, work=str(work))
        rows.append(row)
        ran += 1
        _write_csv(d / "runs.csv", rows, old)
    df = _write_csv(d / "runs.csv", rows, old)
    part.finish(meta_now(True), ran)
    return df


def _write_csv(path: Path, rows: list[dict], old: pd.DataFrame | None) -> pd.DataFrame:
    """runs.csv: these rows, and the earlier file's rows for cells not among
    them; replaced whole (written beside it, then renamed)."""
    df = pd.DataFrame(rows)
    if old is not None:
        fresh = {_key(r) for r in rows}
        rest = old[[_key(r) not in fresh for r in old.to_dict("records")]]
        df = pd.concat([rest, df], ignore_index=True)
    part = path.with_name(f".{path.name}.part")
    df.to_csv(part, index=False)
    part.replace(path)
    return df


def _measure(mod, cell, sched, res: dict) -> dict:
    """The run's row. A run stopped at its time limit is measured all the
    same (its per-packet data is complete up to the schedule's end; what
    overran is a bulk sender still draining its buffer) and says so."""
    if res["status"] not in ("ok", "timeout"):
        return {**cell.__dict__, "status": res["status"]}
    row = mod.measure(cell, sched, {**res, "status": "ok"})
    row["emu_late_max_ms"] = coexist.emu_late_max_ms(Path(res["work"]))
    if res["status"] == "timeout":
        row["note"] = "stopped at the time limit: the bulk sender was still draining its buffer"
    return row


def remeasure(name: str, out: Path) -> pd.DataFrame:
    """Recomputes every row from the run directories a run kept (after a
    change to the figures), without running anything."""
    d = out / name
    old = pd.read_csv(d / "runs.csv")
    mod = smartap_exp if name == "smart-ap" else background_exp
    fields = list(mod.Cell.__dataclass_fields__)
    rows = []
    for r in old.to_dict("records"):
        work = Path(str(r.get("work", "")))
        if r.get("status") not in ("ok", "timeout") or not (work / "t0").is_file():
            rows.append(r)
            continue
        alias = {"rate": "rate_mbit", "queue": "queue_pkts"}
        values = {}
        for f in fields:
            options = [r.get(f), r.get(alias.get(f, f))]
            known = [v for v in options if v is not None and not (isinstance(v, float) and math.isnan(v))]
            values[f] = known[0] if known else None
        if values.get("queue") is not None:
            values["queue"] = int(values["queue"])
        cell = mod.Cell(**values)
        sched = _schedule(name, cell).scaled(float(r["scale"]))
        res = {"status": r.get("status"), "t0": int((work / "t0").read_text()), "work": work}
        fresh = _measure(mod, cell, sched, res)
        fresh.update(scale=r["scale"], load=r.get("load"), work=str(work))
        rows.append(fresh)
    df = pd.DataFrame(rows)
    df.to_csv(d / "runs.csv", index=False)
    return df


# ---- tables -------------------------------------------------------------


def _f(v, digits=1) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    from ..report.html import text_table

    return text_table(headers, rows)


def tables(name: str, df: pd.DataFrame) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, headers, rows) of every table the experiment prints."""
    ok = df[df["status"] == "ok"] if "status" in df else df
    out = []
    if name == "smart-ap":
        p = smartap_exp.PAPER
        pal = ok[ok["kind"] == "palazzi"]
        rows = []
        for _, r in pal.iterrows():
            paper = {"fifo-100": "100", "fifo-50": "50"}.get(r.get("policy"))
            ref = lambda key, d: _f(p[key][paper], d) if paper else "–"  # noqa: E731
            rows.append([r.get("policy"), _f(r.get("game_jitter_max_all_ms", math.nan), 2), ref("max_all", 2),
                         _f(r.get("game_jitter_mean_all_ms", math.nan), 3), ref("mean_all", 3),
                         _f(r.get("game_jitter_max_tcp_ms", math.nan), 2), ref("max_tcp", 2),
                         _f(r.get("game_jitter_mean_tcp_ms", math.nan), 3), ref("mean_tcp", 3),
                         _f(r.get("game_owd_p95_tcp_ms", math.nan)), _f(r.get("queue_p95_ms", math.nan)),
                         _f(r.get("tcp_mbit_s", math.nan), 2), _f(r.get("emu_late_max_ms", math.nan), 1)])
        out.append(("Downstream game flow's jitter (IPDV, ms) beside Palazzi's (4 MAC retries; 100 and 50-packet "
                    "queues), over the whole run and while the TCP download runs; the game's one-way delay p95, "
                    "the AP queue's p95 and the download's goodput while it runs; the emulator's own largest "
                    "lateness (a jitter maximum under it may be the host's)",
                    ["AP", "max", "paper", "mean", "paper", "max, TCP on", "paper", "mean, TCP on", "paper",
                     "game delay p95", "queue p95", "TCP Mbit/s", "emu late max"], rows))
        fair = ok[ok["kind"] == "rtt-fair"]
        rows = [[r.get("policy", math.nan), _f(r.get("tcp0_mbit_s", math.nan), 2), _f(r.get("tcp1_mbit_s", math.nan), 2), _f(r.get("tcp2_mbit_s", math.nan), 2),
                 f"{_f(100 * r.get('rtt_spread', math.nan), 0)} %", _f(r.get("game_jitter_max_tcp_ms", math.nan), 2)] for _, r in fair.iterrows()]
        if rows:
            out.append(("RTT fairness: three Cubic downloads (target for sap-law-rtt: spread ≤ 10 %)",
                        ["AP", "30 ms", "50 ms", "100 ms", "spread", "game jitter max ms"], rows))
        return out
    t = background_exp.TARGETS
    ph = ok[ok["kind"] == "phases"]
    rows = []
    for _, r in ph.iterrows():
        cell = background_exp.Cell(r.get("rate_mbit", math.nan) if not math.isnan(r.get("rate_mbit", math.nan)) else None, int(r.get("queue_pkts", math.nan)),
                                   r.get("impairment", math.nan), r.get("kind", math.nan), r.get("bulk", math.nan))
        rows.append([cell.label(), r.get("bulk", math.nan), _f(r.get("voip_added_p50_ms", math.nan)), _f(r.get("voip_added_p95_ms", math.nan)),
                     _f(r.get("voip_added_p99_ms", math.nan)), _f(r.get("voip_idle_p99_ms", math.nan)),
                     _f(r.get("voip_ipdv_mean_ms", math.nan), 2), _f(r.get("voip_ipdv_max_ms", math.nan)),
                     _f(r.get("voip_idle_ipdv_max_ms", math.nan)),
                     _f(r.get("game_over_10ms_pct", math.nan), 2), _f(r.get("bulk_mbit_s", math.nan), 2),
                     _f(r.get("bulk_link_mbit_s", math.nan), 2), _f(100 * r.get("link_share_of_ideal", math.nan), 0)])
    out.append(("VoIP (irtt) added one-way delay and jitter (ms) while the bulk upload runs, beside the same with no "
                "bulk (idle: the host's and irtt's own noise); game packets queued > 10 ms; the bulk's goodput and "
                "its IP rate on the link",
                ["AP link", "bulk", "add p50", "add p95", "add p99", "idle p99", "IPDV mean", "IPDV max", "idle IPDV max", "game >10ms %",
                 "goodput Mbit/s", "on link Mbit/s", "link % of (C−RT)(1−p)"], rows))
    other = ok[ok["kind"] != "phases"]
    rows = []
    for _, r in other.iterrows():
        fig = {"alone": f"on the link {_f(100 * r.get('link_share_of_free', math.nan), 1)} % of C, "
                        f"goodput {_f(100 * r.get('bulk_share_of_c', math.nan), 1)} % of C",
               "late-rt": f"yield {_f(r.get('yield_s'), 2)} s",
               "compete": f"share {_f(100 * r.get('share_vs_cubic', math.nan), 1)} % "
                          f"({_f(r.get('bg_mbit_s'), 2)} vs {_f(r.get('cubic_mbit_s'), 2)} Mbit/s)"}[r.get("kind", math.nan)]
        rows.append([r.get("kind", math.nan), r.get("bulk", math.nan), fig])
    if rows:
        out.append(("Alone, yielding to real-time flows that start later, against kernel Cubic",
                    ["schedule", "bulk", "figure"], rows))
    out.append(("Targets (10 Mbit/s, 250 packets)", ["target", "value"],
                [[k, str(v)] for k, v in t.items()]))
    return out


def targets_check(df: pd.DataFrame) -> list[list[str]]:
    """Each background target with convoy background's figure at the cell."""
    ok = df[(df["status"] == "ok")] if "status" in df else df
    bg = ok[ok["bulk"].astype(str).str.startswith("convoy-background")]
    t = background_exp.TARGETS
    cell = bg[(bg["kind"] == "phases") & (bg["impairment"] == "none") & (bg["rate_mbit"] == 10) & (bg["queue_pkts"] == 250)]
    loss = bg[(bg["kind"] == "phases") & (bg["impairment"] == "loss2")]
    lte = bg[(bg["kind"] == "phases") & (bg["impairment"] == "lte")]
    rows = []

    def add(what, frame, col, limit, better="le", scale=1.0):
        v = float(frame[col].iloc[0]) * scale if len(frame) and col in frame and not pd.isna(frame[col].iloc[0]) else math.nan
        ok_ = (v <= limit) if better == "le" else (v >= limit)
        rows.append([what, f"{'≤' if better == 'le' else '≥'} {limit:g}", _f(v, 2), "n/a" if math.isnan(v) else ("met" if ok_ else "missed")])

    for q in (50, 95, 99):
        add(f"VoIP added one-way delay p{q} (ms)", cell, f"voip_added_p{q}_ms", t[f"voip_added_p{q}_ms"])
    add("VoIP jitter (IPDV) mean (ms)", cell, "voip_ipdv_mean_ms", t["voip_ipdv_mean_ms"])
    add("VoIP jitter (IPDV) max (ms)", cell, "voip_ipdv_max_ms", t["voip_ipdv_max_ms"])
    add("game packets queued > 10 ms (%)", cell, "game_over_10ms_pct", t["game_over_10ms_pct"])
    add("bulk on the link / (C − real-time load) (%)", cell, "link_share_of_free", 100 * t["link_share_of_free"], "ge", 100)
    add("  its goodput / (C − real-time load) (%)", cell, "bulk_share_of_free", 100 * t["link_share_of_free"], "ge", 100)
    alone = bg[bg["kind"] == "alone"]
    add("bulk on the link alone / C (%)", alone, "link_share_of_free", 100 * t["link_share_alone"], "ge", 100)
    add("  its goodput / C (%)", alone, "bulk_share_of_c", 100 * t["link_share_alone"], "ge", 100)
    add("yield time after real-time flows start (s)", bg[bg["kind"] == "late-rt"], "yield_s", t["yield_s"])
    add("share against one kernel Cubic upload (%)", bg[bg["kind"] == "compete"], "share_vs_cubic", 100 * t["share_vs_cubic"], "le", 100)
    add("2 % loss: bulk on the link / ((C − RT)(1 − p)) (%)", loss, "link_share_of_ideal", 100 * t["link_loss_share_of_ideal"], "ge", 100)
    add("  its goodput / ((C − RT)(1 − p)) (%)", loss, "bulk_share_of_ideal", 100 * t["link_loss_share_of_ideal"], "ge", 100)
    add("2 % loss: VoIP added p95 (ms)", loss, "voip_added_p95_ms", t["voip_added_p95_ms"])
    add("LTE trace: VoIP added p95 (ms)", lte, "voip_added_p95_ms", t["lte_voip_added_p95_ms"])
    return rows


def print_result(name: str, df: pd.DataFrame, stream=None) -> None:
    # sys.stdout looked up per call, not bound at import (pytest's capsys
    # and any redirection replace it later).
    stream = stream or sys.stdout
    print(f"\n== {name}: {TITLES[name]}", file=stream)
    for _, r in df[df["status"] != "ok"].iterrows() if "status" in df else []:
        print(f"   not run / failed: {r.get('bulk', r.get('policy', ''))} {r.get('kind', '')}: {r['status']} {r.get('error', '')}", file=stream)
    for title, headers, rows in tables(name, df):
        print(f"\n{title}\n", file=stream)
        print(_table(headers, rows), file=stream)
    if name == "background":
        print("\nconvoy background against the targets (FIFO 250 packets, 10 Mbit/s)\n", file=stream)
        print(_table(["target", "limit", "ours", ""], targets_check(df)), file=stream)


# ---- plots --------------------------------------------------------------


def plot_run(name: str, cell, sched, res: dict, path: Path) -> None:
    """One run over time: real-time one-way delays and the AP queue."""
    if res["status"] != "ok":
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    work, t0 = res["work"], res["t0"]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    for f in sched.flows:
        df = coexist.voip_packets(work, f.name, t0) if f.pattern == "voip" else coexist.rt_packets(work, f.name, t0)
        if len(df):
            a1.plot(df["t"], df["owd_ms"], ".", ms=1.5, label=f.name)
    a1.set_ylabel("one-way delay (ms)")
    a1.legend(fontsize=7, markerscale=5)
    for b in sched.bulk:
        a1.axvspan(b.start, b.end, color="grey", alpha=0.08)
    direction = "down" if any(b.direction == "down" for b in sched.bulk) else "up"
    q = coexist.queue_series(work, direction, offset=coexist.link_offset(work, t0))
    a2.plot(q["t"], q["queue_ms"], lw=0.8, label=f"AP queue ({direction}), max per 100 ms")
    a2.set_ylabel("queueing delay (ms)")
    a2.set_xlabel("time (s)")
    a2.legend(fontsize=7)
    a1.set_title(f"{name}: " + ", ".join(str(v) for v in cell.__dict__.values() if v is not None), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ---- report -------------------------------------------------------------


def report_section(name: str, out: Path) -> str | None:
    d = out / name
    if not (d / "runs.csv").is_file():
        return None
    from ..report.html import _html_table, _img

    df = pd.read_csv(d / "runs.csv")
    meta = json.loads((d / "meta.json").read_text()) if (d / "meta.json").is_file() else {}
    parts = [f'<h2 id="{name}">{html.escape(TITLES[name])}</h2>']
    doc = (smartap_exp if name == "smart-ap" else background_exp).__doc__
    parts.append(f"<pre class='note'>{html.escape(doc.strip())}</pre>")
    cmd = f".venv/bin/python -m convoy_lab.experiments run {name}" + (" --quick" if meta.get("quick") else "")
    if meta.get("scale") not in (None, 1.0) and not meta.get("quick"):
        cmd += f" --scale {meta['scale']}"
    parts.append(f"<p>Regenerate: <code>{html.escape(cmd)}</code> (schedule scale {meta.get('scale')})</p>")
    for title, headers, rows in tables(name, df):
        parts.append(f"<h3>{html.escape(title)}</h3>" + _html_table(headers, rows))
    if name == "background":
        parts.append("<h3>Targets</h3>" + _html_table(["target", "limit", "ours", ""], targets_check(df)))
    for png in sorted(d.glob("*.png")):
        parts.append(_img(png))
    return "\n".join(parts)

"""The cellular experiment's rows turned into its tables and the issue's
target checks (issue 15): per trace direction, each scheme's goodput beside
the capacity its own runs had, its one-way and queueing delay; then, for
convoy's default mode, the ratios the targets set, per offset and at worst.

Rows are first averaged over seeds, giving one value per point (loss
setting × trace direction × offset) and scheme; a direction's table then
averages its offsets, and the checks compare schemes point by point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

TARGET_SCHEME = "convoy"
CUBIC, BBR = "tcp-cubic", "tcp-bbr"
POINT = ["loss_pct", "trace", "offset_s"]
MEASURES = [
    "goodput_mbit_s", "capacity_mbit_s", "owd_p50_ms", "owd_p95_ms", "qdelay_p95_ms",
    "lat_p50_ms", "lat_p95_ms", "lat_p99_ms",
]
LATENCY = ["lat_p50_ms", "lat_p95_ms", "lat_p99_ms"]


@dataclass(frozen=True)
class Target:
    """convoy's goodput at least `over_cubic` × Cubic's and `over_bbr` ×
    BBR's, with p95 queueing delay at most `delay` × Cubic's."""

    over_cubic: float
    over_bbr: float
    delay: float

    def describe(self) -> str:
        return (f"goodput ≥ {self.over_cubic:.2f}× {CUBIC} and ≥ {self.over_bbr:.2f}× {BBR}, "
                f"p95 queueing delay ≤ {self.delay:.2f}× {CUBIC}'s")


# The targets: without added loss, and with 2 % (ScalaNC's ratios).
# Other loss settings print their ratios without a verdict.
TARGETS = {0.0: Target(1.0, 1.0, 0.5), 2.0: Target(1.6, 1.25, 0.5)}


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty or "status" not in df:
        return df.iloc[0:0]
    return df[df["status"] == "ok"]


def points(df: pd.DataFrame) -> pd.DataFrame:
    """One row per point and scheme: the mean over seeds of each measure."""
    ok = ok_rows(df)
    if ok.empty:
        return pd.DataFrame(columns=[*POINT, "scheme", *MEASURES])
    present = [m for m in MEASURES if m in ok.columns]
    return ok.groupby([*POINT, "scheme"], as_index=False)[present].mean()


def has_latency(df: pd.DataFrame) -> bool:
    """Whether any run reported write-to-read latency (convoy perf's latency_ms)."""
    return all(c in df.columns for c in LATENCY) and df[LATENCY].notna().any().any()


def direction_table(df: pd.DataFrame, loss: float, trace: str, schemes: list[str]) -> pd.DataFrame:
    """Per scheme, over the direction's offsets: goodput (mean, min, max),
    the capacity of the runs' own windows, its share, delays."""
    p = points(df)
    p = p[(p["loss_pct"] == loss) & (p["trace"] == trace)]
    if p.empty:
        return pd.DataFrame()
    agg = {
        "offsets": ("offset_s", "nunique"),
        "goodput_mbit_s": ("goodput_mbit_s", "mean"),
        "goodput_min": ("goodput_mbit_s", "min"),
        "goodput_max": ("goodput_mbit_s", "max"),
        "capacity_mbit_s": ("capacity_mbit_s", "mean"),
        "owd_p50_ms": ("owd_p50_ms", "mean"),
        "owd_p95_ms": ("owd_p95_ms", "mean"),
        "qdelay_p95_ms": ("qdelay_p95_ms", "mean"),
    }
    if has_latency(df):
        agg.update({c: (c, "mean") for c in LATENCY})
    t = p.groupby("scheme").agg(**agg)
    t["share"] = t["goodput_mbit_s"] / t["capacity_mbit_s"]
    order = [s for s in schemes if s in t.index] + sorted(set(t.index) - set(schemes))
    return t.reindex(order)


def _ratio(a: float, b: float) -> float:
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return math.nan
    if b == 0:
        return math.inf if a > 0 else math.nan
    return a / b


def point_checks(df: pd.DataFrame) -> pd.DataFrame:
    """Per point: convoy's goodput over Cubic's and BBR's and its p95
    queueing delay over Cubic's, each with its verdict (True met, False
    missed, None when no target is set for that loss or a scheme is
    missing). A point where convoy's run failed (timeout, error) misses
    both goodput targets; `convoy_failed` says how it failed."""
    p = points(df)
    failed = _failed_points(df)
    rows = []
    for key, g in p.groupby(POINT):
        by = g.set_index("scheme")

        def value(scheme: str, column: str) -> float:
            return float(by.loc[scheme, column]) if scheme in by.index else math.nan

        loss = float(key[0])
        rows.append(_verdicts({
            "loss_pct": loss, "trace": key[1], "offset_s": float(key[2]),
            "over_cubic": _ratio(value(TARGET_SCHEME, "goodput_mbit_s"), value(CUBIC, "goodput_mbit_s")),
            "over_bbr": _ratio(value(TARGET_SCHEME, "goodput_mbit_s"), value(BBR, "goodput_mbit_s")),
            "delay_over_cubic": _ratio(value(TARGET_SCHEME, "qdelay_p95_ms"), value(CUBIC, "qdelay_p95_ms")),
            "convoy_failed": "" if TARGET_SCHEME in by.index else failed.get((loss, key[1], float(key[2])), ""),
        }))
    return pd.DataFrame(rows)


def _failed_points(df: pd.DataFrame) -> dict:
    """Points where convoy ran but no run of it succeeded: their statuses."""
    if df.empty or "status" not in df:
        return {}
    mine = df[df["scheme"] == TARGET_SCHEME]
    out = {}
    for key, g in mine.groupby(POINT):
        if not (g["status"] == "ok").any():
            out[(float(key[0]), key[1], float(key[2]))] = "/".join(sorted(set(g["status"])))
    return out


def _verdicts(row: dict) -> dict:
    target = TARGETS.get(row["loss_pct"])

    def judge(value: float, bound: float, at_least: bool) -> bool | None:
        if target is None or value is None or math.isnan(value):
            return None
        return value >= bound if at_least else value <= bound

    row["over_cubic_met"] = judge(row["over_cubic"], target.over_cubic if target else 0, True)
    row["over_bbr_met"] = judge(row["over_bbr"], target.over_bbr if target else 0, True)
    if row.get("convoy_failed") and target is not None:
        row["over_cubic_met"] = row["over_bbr_met"] = False
    row["delay_met"] = judge(row["delay_over_cubic"], target.delay if target else 0, False)
    verdicts = [row["over_cubic_met"], row["over_bbr_met"], row["delay_met"]]
    # One miss is a miss even where another ratio cannot be judged.
    row["met"] = False if False in verdicts else (None if None in verdicts else True)
    return row


def worst(checks: pd.DataFrame) -> dict:
    """The worst case of some point checks: lowest goodput ratios, highest
    delay ratio (each on its own point), and how many points met all three."""
    if checks.empty:
        return {}
    row = {
        "loss_pct": float(checks["loss_pct"].iloc[0]),
        "over_cubic": _nan_safe(checks["over_cubic"].min()),
        "over_bbr": _nan_safe(checks["over_bbr"].min()),
        "delay_over_cubic": _nan_safe(checks["delay_over_cubic"].max()),
    }
    failed = checks["convoy_failed"].fillna("") if "convoy_failed" in checks else pd.Series([], dtype=str)
    row["convoy_failed"] = f"{(failed != '').sum()} failed" if (failed != "").any() else ""
    row = _verdicts(row)
    judged = checks["met"].dropna()
    row["points_met"], row["points_judged"], row["points"] = int(judged.astype(bool).sum()), len(judged), len(checks)
    return row


def _nan_safe(value) -> float:
    return float(value) if value is not None and not pd.isna(value) else math.nan


def summary_checks(df: pd.DataFrame) -> list[dict]:
    """Per loss setting: each direction's worst over its offsets, then the
    worst over every direction ("all")."""
    checks = point_checks(df)
    out = []
    if checks.empty:
        return out
    for loss, by_loss in checks.groupby("loss_pct"):
        for trace, c in by_loss.groupby("trace", sort=False):
            out.append({"scope": trace, **worst(c)})
        out.append({"scope": "all", **worst(by_loss)})
    return out


# ---- text ----------------------------------------------------------------


def _num(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return f"{value:.{digits}f}"


def verdict(value: float, met: bool | None, at_least: bool = True) -> str:
    """A ratio and its verdict. Two decimals, rounded away from the bound's
    side (down for "at least", up for "at most"), so a near miss never
    prints as the bound itself."""
    if value is None or math.isnan(value):
        return "n/a"
    if math.isinf(value):
        text = "inf"
    else:
        text = f"{(math.floor if at_least else math.ceil)(round(value * 100, 6)) / 100:.2f}"
    return text if met is None else f"{text} {'met' if met else 'MISSED'}"


def loss_label(loss: float) -> str:
    return "no added loss" if loss == 0 else f"{loss:g} % added loss"


def direction_rows(df: pd.DataFrame, loss: float, trace: str, schemes: list[str]) -> tuple[list[str], list[list[str]]]:
    t = direction_table(df, loss, trace, schemes)
    headers = ["scheme", "offsets", "goodput Mbit/s", "(min–max)", "capacity Mbit/s", "share",
               "owd p50 ms", "owd p95 ms", "queue p95 ms"]
    latency = has_latency(df)
    if latency:
        headers += ["w→r p50 ms", "w→r p95 ms", "w→r p99 ms"]
    rows = []
    for scheme, r in t.iterrows():
        row = [scheme, str(int(r["offsets"])), _num(r["goodput_mbit_s"]),
               f"{_num(r['goodput_min'])}–{_num(r['goodput_max'])}", _num(r["capacity_mbit_s"]),
               f"{r['share'] * 100:.0f} %" if not math.isnan(r["share"]) else "–",
               _num(r["owd_p50_ms"], 0), _num(r["owd_p95_ms"], 0), _num(r["qdelay_p95_ms"], 0)]
        if latency:
            row += [_num(r.get(c, math.nan), 0) for c in LATENCY]
        rows.append(row)
    return headers, rows


def check_rows(df: pd.DataFrame, loss: float) -> tuple[list[str], list[list[str]]]:
    """Per direction: each offset, then its worst; last, the worst of all."""
    checks = point_checks(df)
    checks = checks[checks["loss_pct"] == loss] if not checks.empty else checks
    headers = ["trace direction", "offset", f"goodput / {CUBIC}", f"goodput / {BBR}", f"queue p95 / {CUBIC}'s", "all three"]
    rows = []

    def line(scope: str, offset: str, c: dict) -> list[str]:
        extra = f" ({c['points_met']} of {c['points_judged']} points)" if c.get("points_judged") else ""
        all_three = "n/a" if c["met"] is None else ("met" if c["met"] else "MISSED")
        cubic, bbr = verdict(c["over_cubic"], c["over_cubic_met"]), verdict(c["over_bbr"], c["over_bbr_met"])
        if c.get("convoy_failed") and "points" in c:  # worst of the others, and the failures
            cubic, bbr = (f"{verdict(c[k], False)}, {TARGET_SCHEME} {c['convoy_failed']}" for k in ("over_cubic", "over_bbr"))
        elif c.get("convoy_failed"):  # no goodput to divide: say how the run failed
            cubic = bbr = f"{TARGET_SCHEME} {c['convoy_failed']}: MISSED"
        return [scope, offset, cubic, bbr, verdict(c["delay_over_cubic"], c["delay_met"], at_least=False), all_three + extra]

    if checks.empty:
        return headers, rows
    for trace, c in checks.groupby("trace", sort=False):
        for _, r in c.sort_values("offset_s").iterrows():
            rows.append(line(trace, f"{r['offset_s']:g} s", r.to_dict()))
        rows.append(line(trace, "worst", worst(c)))
    rows.append(line("all directions", "worst", worst(checks)))
    return headers, rows


def overrun_notes(df: pd.DataFrame, slack_s: float = 2.0) -> list[str]:
    """Schemes whose runs went on well past the asked duration (`convoy
    perf --time T` delivering what it buffered after T): their goodput and
    capacity cover a longer window than the others', so ratios between
    them compare different stretches of the drive."""
    ok = ok_rows(df)
    if ok.empty or "transfer_s" not in ok or "duration_s" not in ok:
        return []
    over = (ok["duration_s"] - ok["transfer_s"]).groupby(ok["scheme"]).max()
    return [
        f"{scheme}: runs lasted up to {over[scheme]:.0f} s past their {ok['transfer_s'].max():g} s, so its goodput and "
        "capacity are over a longer window than the others' (ratios compare different stretches of the drive)"
        for scheme in over.index
        if over[scheme] > slack_s
    ]


def text_report(df: pd.DataFrame, meta: dict, table) -> str:
    """Everything the command prints on stdout; `table(headers, rows)`
    formats a table (report.text_table)."""
    schemes = meta.get("schemes") or (sorted(df["scheme"].unique()) if not df.empty else [])
    out = [f"   {meta.get('conditions', '')}; seeds {meta.get('seeds', [1])}"]
    for scheme, reason in (meta.get("skipped") or {}).items():
        out.append(f"   not run: {scheme}: {reason}")
    failed = df[df["status"] != "ok"] if not df.empty else df
    for r in failed.itertuples():
        out.append(f"   no result: {r.scheme} {r.trace} from {r.offset_s:g} s, {loss_label(r.loss_pct)}: {r.status}: {r.error}")
    ok = ok_rows(df)
    if ok.empty:
        out.append("\n(no successful runs)")
        return "\n".join(out)
    out.append("\n   goodput: what the receiving application got; capacity: the data trace's over each run's own "
               "window (mean over offsets); owd: one-way delay of data packets on the link; queue: owd less the "
               f"propagation delay; w→r: write-to-read latency, where the scheme reports it")
    for loss in sorted(ok["loss_pct"].unique()):
        for trace in ok[ok["loss_pct"] == loss]["trace"].unique():
            out.append(f"\n-- {trace}, {loss_label(loss)}")
            out.append(table(*direction_rows(df, loss, trace, schemes)))
    for note in overrun_notes(df):
        out.append(f"\n   note: {note}")
    for loss in sorted(ok["loss_pct"].unique()):
        target = TARGETS.get(float(loss))
        goal = target.describe() if target else "no target is set for this loss"
        out.append(f"\n-- targets for {TARGET_SCHEME}, {loss_label(loss)}: {goal}")
        if TARGET_SCHEME not in set(ok["scheme"]):
            out.append(f"   n/a: {TARGET_SCHEME} was not run (--schemes)")
            continue
        out.append(table(*check_rows(df, loss)))
    return "\n".join(out)

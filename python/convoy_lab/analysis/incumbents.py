"""The incumbents experiment's rows → the targets of issue 35: convoy's
figure beside the incumbent each target names (no plotting here)."""

from __future__ import annotations

import math

import pandas as pd

STACK_ORDER = ["convoy", "mqtt-s3", "https-put"]


def figure(df: pd.DataFrame, trace: str, loss: float, stack: str, col: str) -> float:
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
        g = lambda stack, col: figure(df, trace, loss, stack, col)  # noqa: E731
        limit = 0.5 if loss >= 2 else 1.0
        c, m = g("convoy", "fresh_p99_s"), g("mqtt-s3", "fresh_p99_s")
        add(f"freshness p99: convoy <= {limit:g}x MQTT's", trace, loss, c / m, lambda v: v <= limit,
            f"{c:.2f} s vs {m:.2f} s")
        need = 1.5 if loss >= 2 else 1.0
        c, m = g("convoy", "drain_mbit_s"), g("mqtt-s3", "drain_mbit_s")
        add(f"log drain: convoy >= {need:g}x S3 multipart's", trace, loss, c / m, lambda v: v >= need,
            f"{c:.2f} vs {m:.2f} Mbit/s")
        c, h = g("convoy", "camera_s"), g("https-put", "camera_s")
        bound = g("convoy", "camera_bound_s")
        add("camera file: convoy >= 1.3x faster than HTTPS PUT", trace, loss, h / c, lambda v: v >= 1.3,
            f"{c:.1f} s vs {h:.1f} s; the link's capacity alone takes {bound:.1f} s, "
            f"so at most {h / bound:.2f}x")
        c = g("convoy", "air_per_payload")
        inc = ", ".join(f"{s} {g(s, 'air_per_payload'):.3f}" for s in ("mqtt-s3", "https-put"))
        add("bytes on the air: convoy <= 1.05x payload", trace, loss, c, lambda v: v <= 1.05,
            f"{c:.3f} (incumbents: {inc})")
        lost = sum(g("convoy", k) for k in ("samples_lost", "samples_duplicated", "files_lost"))
        add("convoy: 0 samples or files lost or duplicated", trace, loss, lost, lambda v: v == 0,
            f"{lost:g} lost or duplicated")
    return out

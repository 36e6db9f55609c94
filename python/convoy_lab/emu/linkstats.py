"""What the emulated link saw during a run, from `convoy emu --records`.

One-way delay is measured here, on the link, for every scheme the same way:
a packet's `dlv` time minus its `enq` time (queueing + serialization +
propagation). It does not include time in the sender's socket buffer, which
no scheme reports uniformly. Only data-sized packets count (>= 200 bytes),
so pure ACKs and handshakes do not pull the percentiles down.

Queueing delay is a packet's one-way delay minus the link's configured
propagation delay: the time it waited in the bottleneck's queue plus its
own transmission (on a Mahimahi trace, the wait for the opportunity that
carries its last byte).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

DATA_MIN_BYTES = 200
PERCENTILES = (50, 95, 99)


def empty_stats() -> dict:
    stats = {f"owd_p{p}_ms": math.nan for p in PERCENTILES}
    stats.update({f"qdelay_p{p}_ms": math.nan for p in PERCENTILES})
    stats.update(link_data_pkts=0, link_loss_drops=0, link_queue_drops=0, link_ip_bytes=0, first_data_s=math.nan)
    return stats


def data_direction_stats(records: Path, propagation_ms: float = 0.0, per_second: Path | None = None) -> dict:
    """Delay percentiles and counts of data packets in one direction's
    records; queueing delay is one-way delay less `propagation_ms`. With
    `per_second`, also writes the data bytes delivered in each second of
    link time there (CSV: second, delivered_mbit_s)."""
    if not records.is_file():
        return empty_stats()
    df = pd.read_csv(records, usecols=["t_ns", "event", "id", "len", "reason"])
    df = df[df["len"] >= DATA_MIN_BYTES]
    if df.empty:
        return empty_stats()
    enq = df[df["event"] == "enq"].set_index("id")["t_ns"]
    dlv = df[df["event"] == "dlv"]
    drops = df[df["event"] == "drop"]
    delays_ms = (dlv["t_ns"].to_numpy() - enq.reindex(dlv["id"]).to_numpy()) / 1e6
    delays_ms = delays_ms[~pd.isna(delays_ms)]
    stats = empty_stats()
    if len(delays_ms):
        series = pd.Series(delays_ms)
        queueing = series - propagation_ms
        for p in PERCENTILES:
            stats[f"owd_p{p}_ms"] = float(series.quantile(p / 100))
            stats[f"qdelay_p{p}_ms"] = float(queueing.quantile(p / 100))
    if per_second is not None:
        delivered_per_second(dlv).to_csv(per_second, index=False)
    stats.update(
        link_data_pkts=int(len(enq)),
        link_loss_drops=int((drops["reason"] == "loss").sum()),
        link_queue_drops=int((drops["reason"] == "queue_full").sum()),
        link_ip_bytes=int(dlv["len"].sum()),
        # When data started, in link time: where a trace's window begins.
        first_data_s=float(enq.min()) / 1e9,
    )
    return stats


def delivered_per_second(dlv: pd.DataFrame) -> pd.DataFrame:
    """Data bytes the link delivered in each whole second of link time, as
    Mbit/s; seconds with nothing delivered are rows of 0."""
    if dlv.empty:
        return pd.DataFrame({"second": [], "delivered_mbit_s": []})
    seconds = (dlv["t_ns"] // 1_000_000_000).astype("int64")
    sums = dlv.groupby(seconds)["len"].sum()
    sums = sums.reindex(range(int(seconds.min()), int(seconds.max()) + 1), fill_value=0)
    return pd.DataFrame({"second": sums.index, "delivered_mbit_s": sums.to_numpy() * 8 / 1e6})

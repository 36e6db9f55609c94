"""What the emulated link saw during a run, from `convoy emu --records`.

One-way delay is measured here, on the link, for every scheme the same way:
a packet's `dlv` time minus its `enq` time (queueing + serialization +
propagation). It does not include time in the sender's socket buffer, which
no scheme reports uniformly. Only data-sized packets count (>= 200 bytes),
so pure ACKs and handshakes do not pull the percentiles down.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

DATA_MIN_BYTES = 200
PERCENTILES = (50, 95, 99)


def empty_stats() -> dict:
    stats = {f"owd_p{p}_ms": math.nan for p in PERCENTILES}
    stats.update(link_data_pkts=0, link_loss_drops=0, link_queue_drops=0, link_ip_bytes=0, first_data_s=math.nan)
    return stats


def data_direction_stats(records: Path) -> dict:
    """Delay percentiles and counts of data packets in one direction's records."""
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
        for p in PERCENTILES:
            stats[f"owd_p{p}_ms"] = float(series.quantile(p / 100))
    stats.update(
        link_data_pkts=int(len(enq)),
        link_loss_drops=int((drops["reason"] == "loss").sum()),
        link_queue_drops=int((drops["reason"] == "queue_full").sum()),
        link_ip_bytes=int(dlv["len"].sum()),
        # When data started, in link time: where a trace's window begins.
        first_data_s=float(enq.min()) / 1e9,
    )
    return stats

"""The multipath experiments' figures, from what a run left behind: the
links' per-packet records (`convoy emu --records`: per-path throughput,
whatever the scheme), the receiver's document (application delivery:
stalls and a 100 ms timeline) and the client's (convoy's path events).

Times. The link records are in link time (the emulator's time 0, where
`outage=` intervals and traces start). A receiver's times count from its
first byte; they are put on link time by the first data-sized packet
(≥ 1000 bytes) any link delivered toward it, which is that byte's packet for
TCP and within a round trip of it for convoy (its handshake comes first).
Figures that need more than that rough placement (failover, the delivery
gap at an outage) are lengths of the receiver's own stalls, not
differences of clocks.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..emu.multipath import LINKS, WIFI, Delivery
from ..traces import is_series, series_rate_steps, window_capacity_mbit

DATA_BYTES = 200  # smaller packets are acknowledgments and probes
ANCHOR_BYTES = 1000
# Out of active use. Not "suspect": convoy marks a path suspect for a PTO and
# back, tens of milliseconds, during ordinary operation.
DEMOTED = {"standby", "abandoned"}


def _records(records: Path, link: str) -> pd.DataFrame:
    path = records / f"{link}.up.csv"
    if not path.is_file():
        return pd.DataFrame(columns=["t_ns", "event", "len"])
    return pd.read_csv(path, usecols=["t_ns", "event", "len"])


def path_rates(records: Path, bin_s: float = 0.1) -> pd.DataFrame:
    """Per link, the data bytes it delivered toward the receiver per bin, as
    Mbit/s: columns t (bin start, link time s), wifi, lte."""
    frames = {}
    for link in LINKS:
        df = _records(records, link)
        d = df[(df["event"] == "dlv") & (df["len"] >= DATA_BYTES)]
        b = (d["t_ns"] / 1e9 // bin_s).astype("int64")
        frames[link] = d.groupby(b)["len"].sum() * 8 / bin_s / 1e6
    end = max((int(s.index.max()) + 1 for s in frames.values() if len(s)), default=0)
    index = range(end)
    out = pd.DataFrame({"t": [i * bin_s for i in index]})
    for link in LINKS:
        out[link] = frames[link].reindex(index, fill_value=0.0).to_numpy() if end else []
    return out


def first_data_s(records: Path) -> float:
    """Link time of the first data-sized packet delivered toward the
    receiver on any link: where the receiver's time 0 sits."""
    times = []
    for link in LINKS:
        df = _records(records, link)
        d = df[(df["event"] == "dlv") & (df["len"] >= ANCHOR_BYTES)]
        if len(d):
            times.append(float(d["t_ns"].iloc[0]) / 1e9)
    return min(times) if times else math.nan


def first_packet_s(records: Path) -> float:
    """Link time of the client's first packet (its connection's time 0)."""
    times = []
    for link in LINKS:
        df = _records(records, link)
        e = df[df["event"] == "enq"]
        if len(e):
            times.append(float(e["t_ns"].iloc[0]) / 1e9)
    return min(times) if times else math.nan


def with_trailing_stall(d: Delivery, anchor_s: float, end_s: float, least_s: float = 0.1) -> Delivery:
    """The delivery with the gap from its last read to the transfer's end
    (link time `end_s`) as one more stall, when that is at least `least_s`:
    convoy's server counts stalls between reads only, so a transfer that
    stopped delivering for good would otherwise show no stall at all. (The
    anchor is off by up to a round trip, hence the margin; mpxfer's own
    window already ends at the transfer's end, so it gains nothing here.)"""
    if math.isnan(anchor_s) or math.isnan(end_s):
        return d
    gap = end_s - (anchor_s + d.duration_s)
    if gap < least_s:
        return d
    return Delivery(d.bytes, d.duration_s, [*d.stalls, (d.duration_s, gap)], d.timeline, d.bin_s, d.extra)


def stall_figures(d: Delivery) -> dict:
    """Gaps in delivery to the application (each ≥ 20 ms): how many, their
    p99 and the longest (ms)."""
    lengths = pd.Series([n for _, n in d.stalls], dtype=float) * 1000
    return {
        "stalls": int(len(lengths)),
        "stall_p99_ms": float(lengths.quantile(0.99)) if len(lengths) else 0.0,
        "stall_max_ms": float(lengths.max()) if len(lengths) else 0.0,
    }


def gap_at(d: Delivery, anchor_s: float, at_s: float, before_s: float = 0.3, after_s: float = 1.5) -> float:
    """The longest application stall that starts within [at − before, at +
    after] of link time (an outage's start): the delivery gap that outage
    caused, in seconds; 0 when there was none of 20 ms or more."""
    if math.isnan(anchor_s):
        return math.nan
    near = [n for s, n in d.stalls if at_s - before_s <= anchor_s + s <= at_s + after_s]
    return max(near) if near else 0.0


def time_to_rate(d: Delivery, anchor_s: float, at_s: float, mbit: float, window_s: float = 0.3) -> float:
    """Seconds from link time `at_s` until the application's goodput, over
    `window_s`, reaches `mbit` again (after an outage: how long until the
    other path carries the transfer, slow start included); NaN if never."""
    if math.isnan(anchor_s) or not d.timeline:
        return math.nan
    n = max(1, round(window_s / d.bin_s))
    rate = pd.Series(d.timeline, dtype=float).rolling(n).mean() * 8 / d.bin_s / 1e6
    for i, r in rate.items():
        end = anchor_s + (i + 1) * d.bin_s
        if end - window_s >= at_s and r >= mbit:
            return end - at_s
    return math.nan


def resumed_after(d: Delivery, anchor_s: float, at_s: float) -> bool:
    """Whether the application got any byte after link time `at_s`."""
    first = int(max(0.0, at_s - anchor_s) / d.bin_s) + 1
    return any(b > 0 for b in d.timeline[first:])


def return_time(rates: pd.DataFrame, outage: tuple[float, float], share: float = 0.5, window_s: float = 0.5) -> float:
    """Seconds from the outage's end until Wi-Fi carries, over `window_s`,
    at least `share` of the rate it carried in the 2 s before the outage;
    NaN if it never does within the run."""
    start, end = outage
    if rates.empty:
        return math.nan
    before = rates[(rates["t"] >= start - 2) & (rates["t"] < start)][WIFI].mean()
    if not before or math.isnan(before):
        return math.nan
    bin_s = float(rates["t"].iloc[1] - rates["t"].iloc[0]) if len(rates) > 1 else 0.1
    rolled = rates[WIFI].rolling(max(1, round(window_s / bin_s))).mean()
    after = rates[(rates["t"] >= end) & (rolled >= share * before)]
    return float(after["t"].iloc[0] + bin_s - end) if len(after) else math.nan


def wifi_path_ids(client: dict) -> set:
    """convoy's id(s) of the Wi-Fi path, from its `paths` (by interface or
    local address)."""
    ids = set()
    for p in client.get("paths") or []:
        local, remote = str(p.get("local") or ""), str(p.get("remote") or "")
        # A path without an interface is the kernel-routed one, which takes
        # Wi-Fi (link 0) toward the server's Wi-Fi address.
        unbound = p.get("interface") is None and not local and remote.startswith("10.7.0.2:")
        if p.get("interface") == WIFI or local.startswith("10.7.0.1:") or unbound:
            ids.add(p.get("id"))
    return ids


def path_events(client: dict, who: str) -> list[dict]:
    """convoy's `path_events`, checked: each needs t_ms, path and state."""
    events = client.get("path_events")
    if events is None:
        raise ValueError(f"{who}: its JSON lacks path_events (convoy perf with multipath, branch mp-net)")
    for e in events:
        if not all(k in e for k in ("t_ms", "path", "state")):
            raise ValueError(f"{who}: a path event lacks t_ms, path or state: {e}")
    return events


def demotion_time(client: dict, client_anchor_s: float, bad_at_s: float, who: str) -> float:
    """Seconds from the Wi-Fi's degradation (link time) to convoy's first
    event taking the Wi-Fi path out of active use (standby or abandoned);
    NaN if none."""
    ids = wifi_path_ids(client)
    for e in sorted(path_events(client, who), key=lambda e: e["t_ms"]):
        t = client_anchor_s + e["t_ms"] / 1000
        wifi = e["path"] in ids or e.get("interface") == WIFI
        if wifi and str(e["state"]).lower() in DEMOTED and t >= bad_at_s:
            return t - bad_at_s
    return math.nan


def traffic_moved(rates: pd.DataFrame, at_s: float, window_s: float = 1.0) -> float:
    """Seconds from `at_s` until LTE carries more than Wi-Fi over a window
    (how a scheme without path events shows a handover); NaN if never."""
    if rates.empty:
        return math.nan
    bin_s = float(rates["t"].iloc[1] - rates["t"].iloc[0]) if len(rates) > 1 else 0.1
    n = max(1, round(window_s / bin_s))
    lte, wifi = rates["lte"].rolling(n).mean(), rates[WIFI].rolling(n).mean()
    moved = rates[(rates["t"] >= at_s) & (lte > wifi) & (lte > 0.1)]
    return float(moved["t"].iloc[0] + bin_s - at_s) if len(moved) else math.nan


def has_capacity(trace: Path | None, rate_mbit: float | None, start_s: float, seconds: float, offset_s: float = 0.0) -> bool:
    """Whether a link could carry anything in [start, start + seconds) of
    link time: a constant rate, a Mahimahi trace's opportunities, a series
    trace's rows that are up with a rate."""
    if trace is None:
        return bool(rate_mbit)
    if is_series(trace):
        steps = series_rate_steps(trace)
        end = start_s + seconds
        for i, (s, bps) in enumerate(zip(steps.starts_s, steps.bps)):
            e = steps.starts_s[i + 1] if i + 1 < len(steps.starts_s) else math.inf
            if bps > 0 and s < end and e > start_s:
                return True
        return False
    return window_capacity_mbit(trace, offset_s + start_s, seconds) > 0


CAPACITY_BIN_S = 0.1


def capacity_seconds(links: dict, start_s: float, seconds: float) -> float:
    """How much of [start, start + seconds) of link time some link could
    carry anything in, by `CAPACITY_BIN_S` bins."""
    total, end = 0.0, start_s + seconds
    for i in range(math.ceil(seconds / CAPACITY_BIN_S - 1e-9)):
        t = start_s + i * CAPACITY_BIN_S
        step = min(CAPACITY_BIN_S, end - t)
        if any(has_capacity(trace, rate, t, step - 1e-9) for trace, rate in links.values()):
            total += step
    return total


def stalls_with_capacity(d: Delivery, anchor_s: float, links: dict, longer_s: float = 1.0) -> list[tuple[float, float]]:
    """The application stalls that spent more than `longer_s` while some
    link had capacity (the drive's target: none): a stall across an outage
    of every link counts only its time on either side of it. `links`:
    name → (trace or None, constant rate or None)."""
    out = []
    for s, n in d.stalls:
        if n <= longer_s or math.isnan(anchor_s):
            continue
        start = anchor_s + s
        if capacity_seconds(links, start, n) > longer_s:
            out.append((start, n))
    return out

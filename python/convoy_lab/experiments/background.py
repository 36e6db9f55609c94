"""The `background` experiment: a vehicle's bulk upload beside real-time
flows through an access point it does not control (research notes B.3).

The AP is a plain drop-tail FIFO in `convoy emu` (PHY rate ∈ {5, 10, 20}
Mbit/s, Q ∈ {50, 100, 250} packets, 60 ms round trip) with 802.11 retries
at its transmitter (`mac=80211`, 7 retries, no loss on the air): C, which
the shares below divide by, is what that MAC leaves for full-size packets
(`convoy trace mac --rate-mbps 10`: 8.51 Mbit/s of 10). The 2 % loss cell
keeps a plain link, so its loss reaches the transport as random loss. Real-time flows run 0–180 s
(VoIP: irtt, 20 ms / 172 B; a game both ways: 100 B / 20 ms); the bulk
upload runs 30–150 s; 150–180 s is recovery. The bulk is, in turn, kernel
Cubic, kernel BBR, kernel TCP-LP (where the kernel has it), convoy's
default mode and convoy `--priority background`. The target cell (10 Mbit/s,
250 packets) runs again with 2 % random loss and with an LTE trace replay.
Two more schedules at the target cell: the bulk first and the real-time
flows from 60 s (yield time: from the VoIP flow's start until its p95 added
delay over 0.5 s windows is under 10 ms), and convoy background against a
kernel Cubic upload (share).

Every figure comes from per-packet timestamps (irtt's JSON, our game
flow's kernel receive timestamps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..emu import coexist, wifi_mac
from ..emu.coexist import Bulk, RtFlow, Schedule

BULKS = ["tcp-cubic", "tcp-bbr", "tcp-lp", "convoy", "convoy-background"]
TARGET_CELL = (10, 250)
RATES, QUEUES = [5, 10, 20], [50, 100, 250]
LTE_TRACE = "TMobile-LTE-short"
DELAY_MS = 30
RETRIES = 7
# Real-time load in the up direction, IP bytes: VoIP + game.
RT_UP_BPS = (172 + 28) * 8 / 0.020 + (100 + 28) * 8 / 0.020

TARGETS = {
    "voip_added_p50_ms": 5, "voip_added_p95_ms": 15, "voip_added_p99_ms": 25,
    "voip_ipdv_mean_ms": 2, "voip_ipdv_max_ms": 35, "game_over_10ms_pct": 1,
    "link_share_of_free": 0.90, "link_share_alone": 0.95, "yield_s": 0.5, "share_vs_cubic": 0.20,
    "link_loss_share_of_ideal": 0.85, "lte_voip_added_p95_ms": 30,
}


@dataclass(frozen=True)
class Cell:
    rate: float | None
    queue: int
    impairment: str  # "none", "loss2", "lte"
    kind: str  # "phases", "late-rt", "compete", "alone"
    bulk: str

    def label(self) -> str:
        link = f"{self.rate:g} Mbit/s" if self.rate else LTE_TRACE
        imp = {"none": "", "loss2": ", 2 % loss", "lte": ""}[self.impairment]
        return f"{link}, {self.queue} pkts{imp}"


def link_keys(cell: Cell, shared_traces: Path) -> str:
    if cell.impairment == "lte":
        up, down = shared_traces / f"{LTE_TRACE}.up", shared_traces / f"{LTE_TRACE}.down"
        keys = f"up={up},down={down}"
    else:
        keys = f"rate={cell.rate:g}mbit"
        if cell.impairment == "none":
            keys += "," + wifi_mac.keys(RETRIES)
    keys += f",delay={DELAY_MS}ms,queue={cell.queue}"
    if cell.impairment == "loss2":
        keys += ",up-loss=2%"
    return keys


def capacity_bps(cell: Cell) -> float:
    """C of a constant-rate cell: what its MAC leaves of the PHY rate
    (the 2 % loss cell has none); nan for the LTE trace."""
    if not cell.rate:
        return math.nan
    if cell.impairment == "none":
        return wifi_mac.capacity_bps(cell.rate, 0.0, RETRIES)
    return cell.rate * 1e6


def rt_flows(start: float, end: float) -> list[RtFlow]:
    return [
        RtFlow("voip", "voip", "up", start, end),
        RtFlow("game-up", "game", "up", start, end, 7001),
        RtFlow("game-down", "game", "down", start, end, 7002),
    ]


def schedule(cell: Cell, shared_traces: Path) -> Schedule:
    keys = link_keys(cell, shared_traces)
    if cell.kind == "phases":
        return Schedule(rt_flows(0, 180), [Bulk(cell.bulk, "up", 30, 150)], 180, keys)
    if cell.kind == "late-rt":
        return Schedule(rt_flows(60, 120), [Bulk(cell.bulk, "up", 0, 120)], 120, keys)
    if cell.kind == "alone":
        return Schedule([], [Bulk(cell.bulk, "up", 0, 60)], 60, keys)
    # compete: convoy background 0–120 s, kernel Cubic 30–90 s.
    return Schedule([RtFlow("voip", "voip", "up", 0, 120)],
                    [Bulk("convoy-background", "up", 0, 120), Bulk("tcp-cubic", "up", 30, 90)], 120, keys)


def cells(quick: bool) -> list[Cell]:
    if quick:
        return [Cell(10, 250, "none", "phases", b) for b in ["tcp-cubic", "convoy-background"]]
    out = [Cell(r, q, "none", "phases", b) for r in RATES for q in QUEUES for b in BULKS]
    for imp in ["loss2", "lte"]:
        out += [Cell(10 if imp != "lte" else None, 250, imp, "phases", b) for b in BULKS]
    out += [Cell(10, 250, "none", "alone", b) for b in ["convoy", "convoy-background"]]
    out += [Cell(10, 250, "none", "late-rt", b) for b in ["tcp-cubic", "convoy-background"]]
    out.append(Cell(10, 250, "none", "compete", "convoy-background+tcp-cubic"))
    return out


def measure(cell: Cell, sched: Schedule, res: dict) -> dict:
    """One row of figures from one run's per-packet data."""
    work, t0 = res["work"], res["t0"]
    row = {"rate_mbit": cell.rate if cell.rate else math.nan, "queue_pkts": cell.queue, "impairment": cell.impairment,
           "kind": cell.kind, "bulk": cell.bulk, "status": res["status"]}
    bulk = coexist.bulk_result(work)
    row["bulk_mbit_s"] = bulk["goodput_mbit_s"]
    c = capacity_bps(cell)
    loss = 0.02 if cell.impairment == "loss2" else 0.0
    row["bulk_share_of_free"] = bulk["goodput_mbit_s"] * 1e6 / (c - RT_UP_BPS) if sched.flows else math.nan
    row["bulk_share_of_c"] = bulk["goodput_mbit_s"] * 1e6 / c
    row["bulk_share_of_ideal"] = bulk["goodput_mbit_s"] * 1e6 / ((c - RT_UP_BPS) * (1 - loss))
    # The bulk flow's own packets on the link, in steady state (from 5 s
    # after its start): what the targets on the link's capacity compare.
    b0 = sched.bulk[0]
    link = coexist.bulk_link_mbit_s(work, t0, "up", b0.start + 5, b0.end)
    row["bulk_link_mbit_s"] = link
    free = c - (RT_UP_BPS if sched.flows else 0.0)
    row["link_share_of_free"] = link * 1e6 / free
    row["link_share_of_ideal"] = link * 1e6 / (free * (1 - loss))
    voip = coexist.voip_packets(work, "voip", t0)
    if sched.bulk and len(voip):
        b = sched.bulk[0]
        ok = voip.dropna(subset=["owd_ms"])
        base_phase = ok[(ok["t"] < b.start) | (ok["t"] >= b.end + 5)]
        during = ok[(ok["t"] >= b.start + 5) & (ok["t"] < b.end)] if cell.kind == "phases" else ok
        base = coexist.pct(base_phase["owd_ms"], 0.5) if len(base_phase) else float(ok["owd_ms"].min())
        row["voip_base_ms"] = base
        for q in (50, 95, 99):
            row[f"voip_added_p{q}_ms"] = coexist.pct(during["owd_ms"], q / 100) - base
        j = coexist.ipdv(during["owd_ms"])
        row["voip_ipdv_mean_ms"], row["voip_ipdv_max_ms"] = (float(j.mean()), float(j.max())) if len(j) else (math.nan, math.nan)
        row["voip_loss_pct"] = 100 * float(voip[(voip["t"] >= b.start + 5) & (voip["t"] < b.end)]["lost"].mean())
        # The same figures with no bulk transfer at all: the noise floor of
        # the host and the tools (irtt stamps in user space), for reading
        # the tails above.
        if len(base_phase) > 20:
            row["voip_idle_p99_ms"] = coexist.pct(base_phase["owd_ms"], 0.99) - base
            ji = coexist.ipdv(base_phase["owd_ms"])
            row["voip_idle_ipdv_max_ms"] = float(ji.max())
        if cell.kind == "late-rt":
            row["yield_s"] = yield_time(ok, sched.flows[0].start, float(ok["owd_ms"].min()))
    game = coexist.rt_packets(work, "game-up", t0)
    if sched.bulk and len(game):
        b = sched.bulk[0]
        base = float(game["owd_ms"].min())
        during = game[(game["t"] >= b.start + 5) & (game["t"] < b.end)] if cell.kind == "phases" else game
        row["game_over_10ms_pct"] = 100 * float(((during["owd_ms"] - base) > 10).mean()) if len(during) else math.nan
        row["game_over_15ms_pct"] = 100 * float(((during["owd_ms"] - base) > 15).mean()) if len(during) else math.nan
    if cell.kind == "compete":
        row.update(compete_share(work, sched.bulk[0].start, sched.bulk[1]))
    return row


def yield_time(voip: pd.DataFrame, start: float, floor_ms: float, window: float = 0.5) -> float:
    """Seconds from the VoIP flow's start to the first of its packets that
    is within 10 ms of the path's floor and opens a 0.5 s window whose p95
    is too (research notes B.3: "time until VoIP p95 added delay < 10 ms");
    inf if that never happens."""
    v = voip[voip["t"] >= start].sort_values("t")
    t, owd = v["t"].to_numpy(), v["owd_ms"].to_numpy()
    for i in range(len(t)):
        if owd[i] - floor_ms >= 10 or t[i] + window > t[-1]:
            continue
        w = v["owd_ms"].iloc[i:][v["t"].iloc[i:] < t[i] + window]
        if coexist.pct(w, 0.95) - floor_ms < 10:
            return float(t[i] - start)
    return math.inf


def compete_share(work: Path, bg_start: float, cubic: Bulk) -> dict:
    """Background's share of the link while kernel Cubic runs, leaving out
    the first sixth of Cubic's time (its slow start): background's rate
    from its per-second report, Cubic's from its own total."""
    import json

    try:
        perf = json.loads((work / "bulk0.json").read_text().strip().splitlines()[-1])
        tcp = json.loads((work / "bulk1.json").read_text().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return {"share_vs_cubic": math.nan}
    lo = cubic.start + (cubic.end - cubic.start) / 6 - bg_start
    hi = cubic.end - bg_start
    ivs = [i for i in perf.get("intervals", []) if lo <= i["start_s"] and i["end_s"] <= hi + 0.5]
    if not ivs:
        return {"share_vs_cubic": math.nan}
    bg = sum(i["bytes"] for i in ivs) * 8 / sum(i["end_s"] - i["start_s"] for i in ivs) / 1e6
    cu = tcp["bytes"] * 8 / tcp["seconds"] / 1e6
    return {"share_vs_cubic": bg / (bg + cu), "bg_mbit_s": bg, "cubic_mbit_s": cu}

"""The Wi-Fi links of the multipath experiments that are not constant.

* The drive (`mp-drive`): one car on SUMO driving round the ring of a
  6 × 6 Manhattan grid (400 m blocks, 50 km/h), RSUs at four junctions of
  the ring, its 802.11p link to the nearest RSU from `convoy trace
  from-mobility` (Nakagami fading, PDR → frame loss, 802.11 retries
  folded into rate and loss, coverage gaps as down rows). Cached in the experiment's directory: a second run reuses it.
* The bad Wi-Fi of `mp-capprobe` (the Mena thesis's "edge of coverage",
  as the capprobe-thesis note proposes reproducing it): good, then narrow
  and lossy behind a deep FIFO, with the interface up all along.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .catalog import ExperimentError
from ..runner import convoy_binary

GRID_N, BLOCK_M = 6, 400.0
# RSUs at ring junctions, (x, y) in metres: coverage along part of each side
# and gaps between them (the road is 8 km round, 576 s a lap at 50 km/h).
RSUS = [(0.0, 400.0), (800.0, 2000.0), (2000.0, 1600.0), (1200.0, 0.0)]
RATE_80211P_MBIT = 12  # 802.11p at 16-QAM 1/2 on a 10 MHz channel
# Below this PDR the association is taken as lost (a coverage gap, down):
# a Wi-Fi client roams or drops long before every frame is lost.
MIN_PDR = 0.3
# 802.11p unicast with the standard retry limit: a frame is lost only when
# all 8 attempts are, and the attempts' airtime is taken from the rate.
MAC = "80211p:retries=7"
CAR = "car"


def _ring_edges() -> list[str]:
    """The ring's edges as netgenerate names them (A0A1: junction A0 to A1),
    counter-clockwise from the corner A0."""
    cols = [chr(ord("A") + i) for i in range(GRID_N)]
    last = GRID_N - 1
    nodes = [f"A{i}" for i in range(GRID_N)]  # up the west side
    nodes += [f"{c}{last}" for c in cols[1:]]  # along the north
    nodes += [f"{cols[-1]}{i}" for i in range(last - 1, -1, -1)]  # down the east
    nodes += [f"{c}0" for c in reversed(cols[:-1])]  # back along the south
    return [a + b for a, b in zip(nodes, nodes[1:])]


def drive_wifi_trace(work: Path, seconds: float) -> Path:
    """The car's 802.11p trace for `seconds` of driving (cached)."""
    from ..mobility import SumoError, grid_network, sumo_binary
    from ..mobility.sumo_tools import run

    work.mkdir(parents=True, exist_ok=True)
    lap_s = 4 * (GRID_N - 1) * BLOCK_M / 13.89
    laps = int(seconds // lap_s) + 1
    trace = work / "traces" / f"{CAR}.80211p.csv"
    stamp = work / "traces" / "made-for"
    made_for = f"{seconds:g}s {RSUS} {RATE_80211P_MBIT} {MIN_PDR} {MAC}"
    if trace.is_file() and stamp.is_file() and stamp.read_text() == made_for:
        return trace
    try:
        net = grid_network(work / "ring.net.xml", GRID_N, BLOCK_M)
        routes = work / "car.rou.xml"
        edges = " ".join(_ring_edges() * laps)
        routes.write_text(f'<routes>\n  <vType id="car" maxSpeed="13.89"/>\n  <route id="ring" edges="{edges}"/>\n'
                          f'  <vehicle id="{CAR}" type="car" route="ring" depart="0" departSpeed="max"/>\n</routes>\n')
        fcd = work / "fcd.xml"
        run([sumo_binary("sumo"), "-n", net, "-r", routes, "--fcd-output", fcd, "--step-length", "0.5",
             "--end", f"{seconds + 5:g}", "--no-step-log", "--no-warnings"], "sumo (drive)")
    except SumoError as err:
        raise ExperimentError(f"mp-drive: {err}") from None
    rsus = work / "rsus.txt"
    rsus.write_text("".join(f"{x:g},{y:g}\n" for x, y in RSUS))
    proc = subprocess.run([str(convoy_binary()), "trace", "from-mobility", "--fcd", str(fcd), "--rsus", str(rsus),
                           "--no-lte", "--rate-80211p-mbps", str(RATE_80211P_MBIT), "--min-pdr", str(MIN_PDR), "--mac", MAC, "--out", str(work / "traces")],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not trace.is_file():
        raise ExperimentError(f"mp-drive: convoy trace from-mobility failed: {proc.stderr.strip()[-300:]}")
    stamp.write_text(made_for)
    return trace


# The bad Wi-Fi: (start s after bad_at, rate kbit/s, one-way delay ms, loss).
BAD_STEPS = [(0.0, 1200, 20, 0.10), (5.0, 1000, 20, 0.10), (10.0, 800, 20, 0.10)]
GOOD = (30000, 5, 0.0)


def bad_wifi_trace(path: Path, bad_at: float) -> Path:
    """Wi-Fi good (30 Mbit/s, 5 ms) until `bad_at`, then narrow and lossy
    (1.2 → 0.8 Mbit/s, 10 % loss, 20 ms): C′ near and then under 1 Mbit/s,
    and a deep FIFO (the case's `queue=`) lets SRTT climb."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["start_ms,rate_kbps,delay_ms,loss_p", f"0,{GOOD[0]},{GOOD[1]},{GOOD[2]}"]
    lines += [f"{int((bad_at + s) * 1000)},{r},{d},{p}" for s, r, d, p in BAD_STEPS]
    path.write_text("# mp-capprobe: Wi-Fi at the edge of coverage (convoy_lab.experiments.multipath_drive)\n" + "\n".join(lines) + "\n")
    return path

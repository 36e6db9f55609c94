"""The Wi-Fi links of the multipath experiments that are not constant.

* The drives (`mp-drive`): one car on SUMO in a 6 × 6 Manhattan grid
  (400 m blocks, 50 km/h), its 802.11p link to the nearest roadside unit
  from `convoy trace from-mobility` (Nakagami fading, PDR → frame loss,
  802.11 retries folded into rate and loss, coverage gaps as down rows).
  Two drives: `ring` goes round the grid's edge past RSUs at four ring
  junctions; `cross` weaves east and west through the grid's streets
  (turns and junctions slow it) past three RSUs beside them. Each is
  cached in the experiment's directory: a second run reuses it.
* The bad Wi-Fi of `mp-capprobe` (the Mena thesis's "edge of coverage",
  as the capprobe-thesis note proposes reproducing it): good, then narrow
  and lossy behind a deep FIFO, with the interface up all along.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .catalog import ExperimentError
from ..runner import convoy_binary

GRID_N, BLOCK_M = 6, 400.0
SPEED_MS = 13.89  # 50 km/h
RATE_80211P_MBIT = 12  # 802.11p at 16-QAM 1/2 on a 10 MHz channel
# Below this PDR the association is taken as lost (a coverage gap, down):
# a Wi-Fi client roams or drops long before every frame is lost.
MIN_PDR = 0.3
# 802.11p unicast with the standard retry limit: a frame is lost only when
# all 8 attempts are, and the attempts' airtime is taken from the rate.
MAC = "80211p:retries=7"
CAR = "car"


def _junction(col: int, row: int) -> str:
    """netgenerate's name of a grid junction: column letter, row number."""
    return f"{chr(ord('A') + col)}{row}"


def _edges(junctions: list[tuple[int, int]]) -> list[str]:
    """The edges joining consecutive junctions (A0A1: junction A0 to A1)."""
    names = [_junction(c, r) for c, r in junctions]
    return [a + b for a, b in zip(names, names[1:])]


def _ring() -> list[tuple[int, int]]:
    """Round the grid's edge, counter-clockwise from the corner A0: 8 km."""
    last = GRID_N - 1
    path = [(0, r) for r in range(GRID_N)]  # up the west side
    path += [(c, last) for c in range(1, GRID_N)]  # along the north
    path += [(last, r) for r in range(last - 1, -1, -1)]  # down the east
    path += [(c, 0) for c in range(last - 1, -1, -1)]  # back along the south
    return path


def _weave() -> list[tuple[int, int]]:
    """East along row 0, up a block, west along row 1, and so on to the top,
    then straight down the west side: 14 km with 20 turns."""
    path: list[tuple[int, int]] = []
    for r in range(GRID_N):
        cols = range(GRID_N) if r % 2 == 0 else range(GRID_N - 1, -1, -1)
        path += [(c, r) for c in cols]
    col = path[-1][0]
    path += [(col, r) for r in range(GRID_N - 2, -1, -1)]
    if col != 0:
        path += [(c, 0) for c in range(col - 1, -1, -1)]
    return path


@dataclass(frozen=True)
class Drive:
    """One SUMO drive: the car's closed route, the RSUs it passes, and the
    LTE drive trace replayed beside it."""

    name: str
    route: list[tuple[int, int]]
    rsus: list[tuple[float, float]]  # (x, y) in metres
    lte_trace: str

    def lap_m(self) -> float:
        return (len(self.route) - 1) * BLOCK_M


DRIVES = [
    # RSUs at ring junctions: coverage along part of each side and gaps
    # between them (a lap takes 576 s at 50 km/h).
    Drive("ring", _ring(), [(0.0, 400.0), (800.0, 2000.0), (2000.0, 1600.0), (1200.0, 0.0)], "TMobile-LTE-short"),
    # Three RSUs beside the streets the car weaves along: in its first 300 s
    # Wi-Fi is up for 33, 72 and 86 s between gaps of 35 and 67 s; a
    # different operator's LTE drive beside it.
    Drive("cross", _weave(), [(0.0, 200.0), (1400.0, 0.0), (1000.0, 600.0)], "Verizon-LTE-short"),
]


def drive_wifi_trace(drive: Drive, work: Path, seconds: float) -> Path:
    """The car's 802.11p trace for `seconds` of `drive` (cached in `work`)."""
    from ..mobility import SumoError, grid_network, sumo_binary
    from ..mobility.sumo_tools import run

    work.mkdir(parents=True, exist_ok=True)
    laps = int(seconds * SPEED_MS // drive.lap_m()) + 1
    trace = work / "traces" / f"{CAR}.80211p.csv"
    stamp = work / "traces" / "made-for"
    made_for = f"{drive.name} {seconds:g}s {drive.rsus} {RATE_80211P_MBIT} {MIN_PDR} {MAC}"
    if trace.is_file() and stamp.is_file() and stamp.read_text() == made_for:
        return trace
    try:
        net = grid_network(work / "grid.net.xml", GRID_N, BLOCK_M)
        routes = work / "car.rou.xml"
        edges = " ".join(_edges(drive.route) * laps)
        routes.write_text(f'<routes>\n  <vType id="car" maxSpeed="{SPEED_MS}" speedDev="0"/>\n'
                          f'  <route id="{drive.name}" edges="{edges}"/>\n'
                          f'  <vehicle id="{CAR}" type="car" route="{drive.name}" depart="0" departSpeed="max"/>\n</routes>\n')
        fcd = work / "fcd.xml"
        run([sumo_binary("sumo"), "-n", net, "-r", routes, "--fcd-output", fcd, "--step-length", "0.5",
             "--end", f"{seconds + 5:g}", "--no-step-log", "--no-warnings"], f"sumo (drive {drive.name})")
    except SumoError as err:
        raise ExperimentError(f"mp-drive: {err}") from None
    rsus = work / "rsus.txt"
    rsus.write_text("".join(f"{x:g},{y:g}\n" for x, y in drive.rsus))
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

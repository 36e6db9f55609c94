"""Real-time flows beside a bulk transfer over one `convoy emu` link: the
machinery of the `smart-ap` and `background` experiments (SPEC S4).

One run is one `convoy emu` with a schedule of flows. Every process is
started at once and waits for its own start time on the shared wall clock
(CLOCK_REALTIME, common to both namespaces), so one schedule holds across
the two sides. Flows:

* VoIP: the real `irtt` (client on the client side, 20 ms / 172 B), its
  per-packet one-way delays read from its own JSON;
* game, movie, chat: convoy_lab.emu.rtflows, per-packet send and kernel receive
  timestamps;
* bulk: kernel TCP (convoy_lab.emu.tcpxfer, any congestion control the kernel
  has) or `convoy perf` (with `--priority background` for the scavenger).

Every figure is computed from per-packet timestamps (pandas on the
per-packet tables), never from averages of averages.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..runner import convoy_binary, run_emulator

CLIENT_IP, SERVER_IP = "10.7.0.1", "10.7.0.2"
LINK = "ap"
IRTT_PORT = 2112
BULK_PORT = 5201
CONVOY_PORT = 4433
PY = sys.executable


@dataclass(frozen=True)
class RtFlow:
    """A real-time flow: `pattern` of convoy_lab.emu.rtflows, or "voip" (irtt)."""

    name: str
    pattern: str
    direction: str  # "up" (client → server) or "down"
    start: float
    end: float
    port: int = 0


@dataclass(frozen=True)
class Bulk:
    """A bulk transfer. `scheme`: tcp-CC, convoy (default mode), or
    convoy-background."""

    scheme: str
    direction: str
    start: float
    end: float


@dataclass
class Schedule:
    flows: list[RtFlow]
    bulk: list[Bulk]
    length: float
    link: str  # the --link keys after the name
    extra: dict = field(default_factory=dict)

    def scaled(self, f: float) -> "Schedule":
        """Every time multiplied by f (shorter runs for tests)."""
        return Schedule(
            [RtFlow(x.name, x.pattern, x.direction, x.start * f, x.end * f, x.port) for x in self.flows],
            [Bulk(b.scheme, b.direction, b.start * f, b.end * f) for b in self.bulk],
            self.length * f,
            self.link,
            dict(self.extra),
        )


def tcp_available(cc: str) -> str | None:
    """None if the kernel has congestion control `cc` (loading its module
    if need be), else why not."""
    path = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
    try:
        names = path.read_text().split()
    except OSError:
        return "no /proc/sys/net/ipv4/tcp_available_congestion_control"
    if cc in names:
        return None
    try:  # setting it on a socket would load it too; modprobe says so sooner
        subprocess.run(["modprobe", f"tcp_{cc}"], capture_output=True, check=False)
    except OSError:
        pass
    if cc in path.read_text().split():
        return None
    return f"this kernel has no tcp_{cc} (available: {' '.join(names)})"


def bulk_unavailable(scheme: str) -> str | None:
    """Why a bulk scheme cannot run here (TCP-LP where the kernel lacks
    tcp_lp), or None."""
    if scheme.startswith("tcp-"):
        return tcp_available(scheme[4:])
    return None


def irtt_missing() -> str | None:
    if shutil.which("irtt") is None:
        return "irtt is not installed (scripts/setup.sh installs Debian's package)"
    return None


def _at(t0: int, offset: float, command: list[str]) -> str:
    """A shell word list that starts `command` at t0 + offset (wall clock)."""
    wait = [PY, "-c", f"import time; t={t0 + int(offset * 1e9)}; d=(t-time.time_ns())/1e9; d>0 and time.sleep(d)"]
    return shlex.join(wait) + " && exec " + shlex.join(command)


def _bulk_commands(b: Bulk, t0: int, work: Path, i: int) -> tuple[str, str, str]:
    """(receiver side command, sender side command, receiver side): the
    receiver listens from the start; the sender starts at b.start."""
    dur = b.end - b.start
    up = b.direction == "up"
    rx_ip = SERVER_IP if up else CLIENT_IP
    if b.scheme.startswith("tcp-"):
        port = BULK_PORT + i  # bulk i of a schedule listens on 5201 + i
        rx = [PY, "-m", "convoy_lab.emu.tcpxfer", "recv", "--listen", f"{rx_ip}:{port}", "--time", f"{dur:g}"]
        tx = [PY, "-m", "convoy_lab.emu.tcpxfer", "send", "--to", f"{rx_ip}:{port}", "--cc", b.scheme[4:], "--time", f"{dur:g}"]
        out = f" > {work}/bulk{i}-rx.json 2>&1", f" > {work}/bulk{i}.json 2>&1"
        return shlex.join(rx) + out[0], _at(t0, b.start, tx) + out[1], "server" if up else "client"
    if not up:
        raise ValueError("convoy bulk transfers here are uploads (convoy perf's client sends)")
    key = work / "server.key"
    rx = [str(convoy_binary()), "perf", "--server", "--once", "--listen", f"{rx_ip}:{CONVOY_PORT}", "--key", str(key), "--json"]
    mode = ["--mode", "rlnc-bbr", "--priority", "background"] if b.scheme == "convoy-background" else []
    tx = [str(convoy_binary()), "perf", f"{rx_ip}:{CONVOY_PORT}", "--server-key", f"{key}.pub", "--time", f"{dur:g}", "--json", *mode]
    out = f" > {work}/bulk{i}-rx.json 2>&1", f" > {work}/bulk{i}.json 2>{work}/bulk{i}.err"
    return shlex.join(rx) + out[0], _at(t0, b.start, tx) + out[1], "server"


def scripts(s: Schedule, t0: int, work: Path) -> tuple[str, str]:
    """The server and client shell scripts of one run."""
    end_ns = t0 + int((s.length + 2) * 1e9)
    side = {"server": [], "client": []}
    if any(f.pattern == "voip" for f in s.flows):
        side["server"].append(f"irtt server -d 0 -i 0 -b {SERVER_IP}:{IRTT_PORT} >/dev/null 2>&1")
    for f in s.flows:
        if f.pattern == "voip":
            cmd = ["irtt", "client", "-q", "-i", "20ms", "-l", "172", "-d", f"{(f.end - f.start):.3f}s",
                   "-o", str(work / f"{f.name}.json"), f"{SERVER_IP}:{IRTT_PORT}"]
            side["client"].append(_at(t0, f.start, cmd) + " >/dev/null 2>&1")
            continue
        rx_side, tx_side = ("server", "client") if f.direction == "up" else ("client", "server")
        rx_ip = SERVER_IP if f.direction == "up" else CLIENT_IP
        recv = [PY, "-m", "convoy_lab.emu.rtflows", "recv", "--listen", f"{rx_ip}:{f.port}",
                "--out", str(work / f"{f.name}.csv"), "--until", str(end_ns)]
        send = [PY, "-m", "convoy_lab.emu.rtflows", "send", "--to", f"{rx_ip}:{f.port}", "--pattern", f.pattern,
                "--at", str(t0), "--start", f"{f.start:g}", "--duration", f"{f.end - f.start:g}"]
        side[rx_side].append(shlex.join(recv) + f" > {work}/{f.name}.rx.json 2>&1")
        side[tx_side].append(shlex.join(send) + f" > {work}/{f.name}.tx.json 2>&1")
    for i, b in enumerate(s.bulk):
        rx, tx, rx_side = _bulk_commands(b, t0, work, i)
        side[rx_side].append(rx)
        side["client" if rx_side == "server" else "server"].append(tx)
    # `convoy emu` starts the client once something listens on the server
    # side; with only downloads nothing would, so a placeholder does.
    hold = f"import socket, time; s = socket.socket(2, 2); s.bind(('{SERVER_IP}', 9)); time.sleep({s.length + 10:g})"
    side["server"].append(shlex.join([PY, "-c", hold]))
    # The client side also waits for the schedule's end, so the run lasts it.
    side["client"].append(_at(t0, s.length + 2.5, ["true"]))
    join = lambda cmds: " & ".join(f"( {c} )" for c in cmds) + " & wait"  # noqa: E731
    return join(side["server"]), join(side["client"])


def run(s: Schedule, work: Path, seed: int = 1) -> dict:
    """Runs the schedule; returns paths and status. Work files stay in `work`."""
    shutil.rmtree(work, ignore_errors=True)
    (work / "records").mkdir(parents=True)
    if any(b.scheme.startswith("convoy") for b in s.bulk):
        subprocess.run([str(convoy_binary()), "keygen", "--out", str(work / "server.key")], check=True, capture_output=True)
    t0 = time.time_ns() + 4_000_000_000
    server, client = scripts(s, t0, work)
    command = [str(convoy_binary()), "emu", "--summary", "--records", str(work / "records"),
               "--link", f"{LINK}:{s.link},seed={seed}", "--server", server, "--", "sh", "-c", client]
    (work / "command.txt").write_text(shlex.join(command) + "\n")
    (work / "t0").write_text(str(t0))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    (work / "launch").write_text(str(time.time_ns()))
    emu = run_emulator(command, s.length + 60, env=env)
    status = "timeout" if emu.timed_out else "ok"
    (work / "emu.stderr").write_text(emu.stderr)
    if status == "ok" and emu.returncode != 0:
        status = f"emu exit {emu.returncode}"
    return {"status": status, "t0": t0, "work": work}


# ---- reading what the run recorded ------------------------------------------


def voip_packets(work: Path, name: str, t0: int) -> pd.DataFrame:
    """irtt's round trips: t (s from t0, client send), owd_ms (client →
    server), lost (up)."""
    path = work / f"{name}.json"
    if not path.is_file():
        return pd.DataFrame(columns=["t", "owd_ms", "lost"])
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    rows = []
    for rt in doc.get("round_trips", []):
        send = rt["timestamps"]["client"]["send"]["wall"]
        lost = rt.get("lost", "false") in ("true", "true_up")
        owd = rt.get("delay", {}).get("send")
        rows.append(((send - t0) / 1e9, owd / 1e6 if (owd is not None and not lost) else math.nan, lost))
    return pd.DataFrame(rows, columns=["t", "owd_ms", "lost"])


def rt_packets(work: Path, name: str, t0: int) -> pd.DataFrame:
    """One of our flows: t (s from t0, send time), owd_ms, seq."""
    path = work / f"{name}.csv"
    if not path.is_file():
        return pd.DataFrame(columns=["t", "owd_ms", "seq"])
    df = pd.read_csv(path)
    return pd.DataFrame({"t": (df["send_ns"] - t0) / 1e9, "owd_ms": (df["recv_ns"] - df["send_ns"]) / 1e6, "seq": df["seq"]})


def sent_count(work: Path, name: str) -> int | None:
    try:
        return int(json.loads((work / f"{name}.tx.json").read_text())["sent"])
    except (OSError, ValueError, KeyError):
        return None


def bulk_result(work: Path, i: int = 0) -> dict:
    """bytes, seconds, goodput of bulk transfer `i`, from its own output."""
    for name in (f"bulk{i}.json", f"bulk{i}-rx.json"):
        try:
            text = (work / name).read_text().strip().splitlines()
            doc = json.loads(text[-1])
        except (OSError, ValueError, IndexError):
            continue
        if "bytes" in doc and "seconds" in doc and float(doc["seconds"]) > 0:
            return {"bytes": int(doc["bytes"]), "seconds": float(doc["seconds"]),
                    "goodput_mbit_s": int(doc["bytes"]) * 8 / float(doc["seconds"]) / 1e6}
    return {"bytes": math.nan, "seconds": math.nan, "goodput_mbit_s": math.nan}


def emu_late_max_ms(work: Path) -> float:
    """The most any packet left the emulator after its time, over both
    directions, from `convoy emu --summary` ("late p50 … max N us"): a
    stall of the emulator's process that the link's delay does not hold.
    A real-time flow's jitter maximum no larger than it may be the host's,
    not the link's. NaN when the summary is missing."""
    path = work / "emu.stderr"
    text = path.read_text() if path.is_file() else ""
    late = [int(us) for us in re.findall(r"late p50 .*? max (\d+) us", text)]
    return max(late) / 1000 if late else math.nan


def link_offset(work: Path, t0: int) -> float:
    """Seconds to add to link time (the emulator's epoch) to get schedule
    time (from t0): matched on the first game packet (128 IP bytes, the
    only flow of that size) the up link took in, else on the launch time."""
    try:
        launch = int((work / "launch").read_text())
        fallback = (launch - t0) / 1e9
    except (OSError, ValueError):
        fallback = 0.0
    game = rt_packets(work, "game-up", t0)
    path = work / "records" / f"{LINK}.up.csv"
    if game.empty or not path.is_file():
        return fallback
    rec = pd.read_csv(path, usecols=["t_ns", "event", "len"])
    first = rec[(rec["event"] == "enq") & (rec["len"] == 128)]
    if first.empty:
        return fallback
    return float(game["t"].min()) - float(first["t_ns"].iloc[0]) / 1e9


def queue_series(work: Path, direction: str, bin_s: float = 0.1, offset: float = 0.0) -> pd.DataFrame:
    """The AP queue over time: per bin, the largest queueing delay (ms) of a
    packet the link delivered, and the link's rate (Mbit/s); times shifted
    by `offset` (see link_offset)."""
    path = work / "records" / f"{LINK}.{direction}.csv"
    if not path.is_file():
        return pd.DataFrame(columns=["t", "queue_ms", "mbit_s"])
    df = pd.read_csv(path, usecols=["t_ns", "event", "len", "queue_delay_ns"])
    d = df[df["event"] == "dlv"]
    b = ((d["t_ns"] / 1e9 + offset) // bin_s) * bin_s
    g = d.assign(b=b).groupby("b")
    return pd.DataFrame({"t": g.size().index, "queue_ms": g["queue_delay_ns"].max().values / 1e6,
                         "mbit_s": g["len"].sum().values * 8 / bin_s / 1e6})


def bulk_link_mbit_s(work: Path, t0: int, direction: str, start: float, end: float) -> float:
    """IP bit rate of full-sized packets (the bulk flow's: every real-time
    packet here is under 1000 bytes) that the link delivered in [start, end)
    of schedule time."""
    path = work / "records" / f"{LINK}.{direction}.csv"
    if not path.is_file() or end <= start:
        return math.nan
    df = pd.read_csv(path, usecols=["t_ns", "event", "len"])
    t = df["t_ns"] / 1e9 + link_offset(work, t0)
    d = df[(df["event"] == "dlv") & (df["len"] >= 1000) & (t >= start) & (t < end)]
    return float(d["len"].sum()) * 8 / (end - start) / 1e6


def ipdv(owd: pd.Series) -> pd.Series:
    """|D_i − D_{i−1}| of consecutive received packets (RFC 3393, ms)."""
    return owd.dropna().diff().abs().dropna()


def pct(series: pd.Series, q: float) -> float:
    return float(series.quantile(q)) if len(series) else math.nan
